#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Corrupt state files (issue 9): versions.json, a generation record,
# staging.json and a namespace wishes file, each corrupt (garbage),
# truncated, wrongly typed and huge (10 MiB). Each case: a clear error or
# warning that names the file and what is wrong; nothing aborts (no exit by
# a signal, no json-c assertion); unmerge, status and list still work; a
# floor is never silently dropped (a downgrade past a wrongly typed
# versions.json is not accepted).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# A host with foo 2.0 merged (a service, so a wishes file is written), and foo 2.1 waiting.
setup_merged() {
        [[ -n $ROOT ]] && host_teardown
        host_setup
        mkdir -p "$ROOT/etc/tuck"
        printf '[Daemon]\nStalePolicy=report\n' >"$ROOT/etc/tuck/tuck.conf"
        install_img "$(mkimg foo 2.0 sysext A)" foo
        tuck merge >/dev/null
        service plain
        service protect --protect
        install_img "$(mkimg foo 2.1 sysext B)" foo
        tuck refresh >/dev/null       # writes the wishes of the namespaces (report policy)
        install_img "$(mkimg foo 2.2 sysext C)" foo
}

# corrupt FILE KIND: garbage, truncated (the first half), typed (JSON of the wrong shape), huge (10 MiB).
corrupt() {
        local f=$1 kind=$2 size
        case $kind in
        garbage) printf '\x7fELF{{{ not json at all' >"$f" ;;
        truncated)
                size=$(stat -c %s "$f")
                truncate -s $((size / 2)) "$f" ;;
        typed) printf '%s\n' "$TYPED" >"$f" ;;
        huge) { printf '{"x":"'; head -c $((10 * 1024 * 1024)) /dev/zero | tr '\0' a; printf '"}'; } >"$f" ;;
        esac
}

# run_tuck ARGS...: tuckctl ARGS; output in OUT, exit status in RC.
run_tuck() {
        RC=0
        OUT=$(tuck "$@" 2>&1) || RC=$?
        diag "\$ tuckctl $* (exit $RC)"$'\n'"$OUT"
}

# what_is_wrong KIND: the words each kind's error must have.
what_is_wrong() {
        case $1 in
        garbage) echo "not JSON" ;;
        truncated) echo "truncated|not JSON" ;;
        typed) echo "$TYPED_ERROR" ;;
        huge) echo "larger than 4 MiB" ;;
        esac
}

# still_works WHAT: status, list and unmerge work, and nothing aborted on the way.
still_works() {
        local what=$1
        run_tuck status
        check "$what: status works (exit $RC)" test "$RC" -eq 0 -o "$RC" -eq 3
        run_tuck list
        expect_eq "$what: list works" "$RC" 0
        run_tuck unmerge
        expect_eq "$what: unmerge works" "$RC" 0
        expect_eq "$what: the base shows after the unmerge" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" base
}

for kind in garbage truncated typed huge; do
        # ---- versions.json: merge and refresh refuse (their floors are in it), the rest works
        setup_merged
        TYPED='{"sysext":{"foo":2}}'
        TYPED_ERROR="sysext.foo: a number, expected a version string"
        f=$ROOT/var/lib/tuck/versions.json
        corrupt "$f" "$kind"
        before=$(sha256sum "$f")
        run_tuck refresh
        expect_eq "versions.json $kind: refresh refuses (exit 1)" "$RC" 1
        check "versions.json $kind: the error names the file and what is wrong" \
                grep -Eq "cannot use $ROOT/var/lib/tuck/versions.json: ($(what_is_wrong $kind))" <<<"$OUT"
        expect_eq "versions.json $kind: foo 2.1 stays" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" B
        still_works "versions.json $kind"
        expect_eq "versions.json $kind: nothing rewrote it" "$(sha256sum "$f")" "$before"

        # ---- the generation record of /usr: that hierarchy is left alone, unmerge rewrites it
        setup_merged
        TYPED='{"hierarchy":"/usr","class":"sysext","merged":true,"generation":"2","layers":{}}'
        TYPED_ERROR="generation: a string, expected a number"
        f=$ROOT/run/tuck/generations/usr.json
        corrupt "$f" "$kind"
        run_tuck refresh
        expect_eq "generation record $kind: refresh fails for /usr (exit 1)" "$RC" 1
        check "generation record $kind: the error names the file and what is wrong" \
                grep -Eq "^/usr: failed: cannot use the generation record $f: ($(what_is_wrong $kind))" <<<"$OUT"
        check "generation record $kind: /opt went ahead" grep -q "^/opt: refreshed" <<<"$OUT"
        run_tuck status
        check "generation record $kind: status says the record is unusable" \
                grep -q "^/usr (sysext): record unusable: $f:" <<<"$OUT"
        still_works "generation record $kind"
        run_tuck merge
        expect_eq "generation record $kind: merge after the unmerge works" "$RC" 0

        # ---- staging.json: started afresh, with a warning; the refresh goes ahead
        setup_merged
        TYPED='{"namespace_inode":1,"next_id":3,"images":[{"id":"one","class":"sysext"}]}'
        TYPED_ERROR="images\\[0\\]\\.id: a string, expected a number"
        f=$ROOT/run/tuck/staging.json
        corrupt "$f" "$kind"
        run_tuck refresh
        expect_eq "staging.json $kind: refresh goes ahead (exit 0)" "$RC" 0
        check "staging.json $kind: a warning names the file and what is wrong" \
                grep -Eq "warning: Ignoring $f: ($(what_is_wrong $kind)).*staged images are mounted afresh" <<<"$OUT"
        expect_eq "staging.json $kind: foo 2.2 is in" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" C
        check "staging.json $kind: rewritten whole" python3 -c 'import json, sys; json.load(open(sys.argv[1]))' "$f"
        still_works "staging.json $kind"

        # ---- a namespace wishes file: ignored with a warning, re-learned
        setup_merged
        TYPED='[1,2,3]'
        TYPED_ERROR="an array, expected an object"
        f=$ROOT/run/tuck/namespaces/usr.json
        corrupt "$f" "$kind"
        run_tuck refresh
        expect_eq "wishes $kind: refresh goes ahead (exit 0)" "$RC" 0
        check "wishes $kind: a warning names the file and what is wrong" \
                grep -Eq "warning: Ignoring $f: ($(what_is_wrong $kind))" <<<"$OUT"
        still_works "wishes $kind"
done

# ---- {"sysext":"x"}: once tripped a json-c assertion after the swap
setup_merged
printf '{"sysext":"x"}\n' >"$ROOT/var/lib/tuck/versions.json"
run_tuck refresh
expect_eq '{"sysext":"x"}: refused, not aborted (exit 1)' "$RC" 1
check '{"sysext":"x"}: says what is wrong' grep -q "versions.json: sysext: a string, expected an object" <<<"$OUT"

# ---- a wrongly typed floor never lets a downgrade through
setup_merged
printf '{"sysext":{"foo":["2.1"]}}\n' >"$ROOT/var/lib/tuck/versions.json"
install_img "$(mkimg foo 1.0 sysext OLD)" foo
run_tuck refresh
expect_eq "a wrongly typed floor: refresh refused (exit 1)" "$RC" 1
expect_eq "and the downgrade to 1.0 did not happen" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" B

host_teardown
tap_done
