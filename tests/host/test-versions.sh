#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Version policy end to end (DESIGN.md "Versions: floors, holds and
# rollbacks", issue 9): foo 2.0 and bar 1.0 are merged; one drop rolls foo
# back to 1.0 and brings bar 1.1, a security fix.
#
#   - the downgrade of foo is held back alone: bar's fix goes in, in the same
#     swap, and foo 2.0 (still staged) stays;
#   - --allow-downgrade=foo records the operator's decision in
#     /var/lib/tuck: later refreshes and a simulated reboot (unmerge, a fresh
#     /run, merge) honour it without the flag, until a newer foo is activated;
#   - an image whose relaxed release file names another extension never
#     moves that extension's floor;
#   - removal protection survives the simulated reboot; --remove= and
#     `forget` retire an extension on purpose;
#   - an active extension whose new image is invalid is held back alone too.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

EXT=var/lib/extensions

# mkver NAME VERSION [RELEASE-NAME [relaxed]]: an image at $IMAGES/NAME-VERSION.raw
# whose usr/lib/tuck-test/NAME says VERSION; its release file is named for
# RELEASE-NAME (default NAME), with user.extension-release.strict=false if relaxed.
mkver() {
        local name=$1 version=$2 rel=${3:-$1} relaxed=${4:-} t
        t=$(mktemp -d "$IMAGES/tree.XXXXXX")
        mkdir -p "$t/usr/lib/tuck-test" "$t/usr/lib/extension-release.d"
        echo "$version" >"$t/usr/lib/tuck-test/$name"
        printf 'ID=_any\nSYSEXT_VERSION_ID=%s\n' "$version" >"$t/usr/lib/extension-release.d/extension-release.$rel"
        if [[ -n $relaxed ]]; then
                python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.extension-release.strict", b"false")' \
                        "$t/usr/lib/extension-release.d/extension-release.$rel"
        fi
        mksquashfs "$t" "$IMAGES/$name-$version.raw" -noappend -quiet -no-progress -all-root -xattrs >/dev/null
        rm -rf "$t"
        echo "$IMAGES/$name-$version.raw"
}

# drop NAME VERSION: install that image as NAME.raw (write, then rename).
drop() {
        install_img "$IMAGES/$1-$2.raw" "$1" "$EXT"
}

# seen NAME: the version of NAME the host sees in /usr, or "missing".
seen() {
        cat "$ROOT/usr/lib/tuck-test/$1" 2>/dev/null || echo missing
}

# run_tuck VAR ARGS...: tuckctl ARGS, its output (stdout and stderr) in OUT, its exit status in RC.
run_tuck() {
        RC=0
        OUT=$(tuck "$@" 2>&1) || RC=$?
        diag "\$ tuckctl $* (exit $RC)"$'\n'"$OUT"
}

# floor NAME: the floor versions.json records for sysext NAME (python's repr).
floor() {
        python3 -c '
import json, sys
v = json.load(open(sys.argv[1]))
e = v.get("sysext", {}).get(sys.argv[2])
print("none" if e is None else e.get("floor") if isinstance(e, dict) else e)' \
                "$ROOT/var/lib/tuck/versions.json" "$1"
}

# reboot: what a reboot does to tuck's state: the overlays and /run go, /var/lib stays.
reboot() {
        tuck unmerge >/dev/null
        umount "$ROOT/run/tuck/staging.mnt"
        umount "$ROOT/run/tuck"
        rm -rf "$ROOT/run/tuck"
}

host_setup
mkdir -p "$ROOT/$EXT"
for v in 1.0 1.5 2.0; do mkver foo $v >/dev/null; done
for v in 0.9 1.0 1.1 1.2; do mkver bar $v >/dev/null; done

# ---- foo 2.0 and bar 1.0 merged
drop foo 2.0
drop bar 1.0
run_tuck merge
expect_eq "merge: exit status" "$RC" 0
expect_eq "merged: foo 2.0" "$(seen foo)" 2.0
expect_eq "merged: bar 1.0" "$(seen bar)" 1.0

# ---- one drop: foo back to 1.0, bar's fix 1.1
drop foo 1.0
drop bar 1.1
run_tuck refresh
expect_eq "refresh with foo's downgrade: exit status 3 (refused by policy)" "$RC" 3
expect_eq "bar's fix is applied: bar 1.1" "$(seen bar)" 1.1
expect_eq "foo is held back alone: foo 2.0 stays" "$(seen foo)" 2.0
check "the report says the hierarchy was refreshed" grep -q '^/usr: refreshed, generation 1 -> 2' <<<"$OUT"
check "the report names foo, both versions, the reason and the override" \
        grep -q "held back: foo: downgrade 2.0 → 1.0 not allowed.*foo 2.0 stays.*--allow-downgrade=foo" <<<"$OUT"
json=$(tuck refresh --json 2>/dev/null || true)
check "the JSON report names the held-back extension" python3 -c '
import json, sys
r = json.load(sys.stdin)
usr = [h for h in r["hierarchies"] if h["hierarchy"] == "/usr"][0]
hb = usr["held_back"]
assert len(hb) == 1, hb
h = hb[0]
assert h["extension"] == "foo" and h["reason"] == "downgrade", h
assert h["active_version"] == "2.0" and h["refused_version"] == "1.0", h
assert h["kept"] is True and h["override"] == "--allow-downgrade=foo", h
' <<<"$json"
run_tuck refresh
expect_eq "a second refresh: still refused by policy (exit 3)" "$RC" 3
check "and changes nothing" grep -q '^/usr: unchanged' <<<"$OUT"
expect_eq "foo still 2.0 (its staged mount of 2.0 is the layer, the file on disk is 1.0)" "$(seen foo)" 2.0
run_tuck status
expect_eq "status while foo is held back: exit status 3" "$RC" 3
check "status says degraded and names foo" grep -q "degraded: foo held back (downgrade 2.0 → 1.0 not allowed)" <<<"$OUT"
check "status --json: /usr degraded, foo held back and kept" python3 -c '
import json, sys
s = json.load(sys.stdin)
hs = s if isinstance(s, list) else s["hierarchies"]
usr = [h for h in hs if h["hierarchy"] == "/usr"][0]
assert usr["state"] == "degraded", usr
hb = usr["held_back"]
assert [h["extension"] for h in hb] == ["foo"] and hb[0]["kept"] and hb[0]["reason"] == "downgrade", hb
assert "foo held back (downgrade 2.0 → 1.0 not allowed)" in hb[0]["summary"], hb
' <<<"$(tuck status --json || true)"

# ---- the rollback: a recorded decision
run_tuck refresh --allow-downgrade=foo
expect_eq "refresh --allow-downgrade=foo: exit status" "$RC" 0
expect_eq "foo rolled back to 1.0" "$(seen foo)" 1.0
expect_eq "bar stays 1.1" "$(seen bar)" 1.1
expect_eq "foo's floor moved to 1.0" "$(floor foo)" 1.0
check "versions.json records when and through which command" python3 -c '
import json, sys
e = json.load(open(sys.argv[1]))["sysext"]["foo"]
d = e["decision"]
assert d["kind"] == "downgrade-allowed" and d["version"] == "1.0" and d["previous_floor"] == "2.0", e
assert d["via"] == "tuckctl refresh --allow-downgrade=foo", d
assert d["when_usec"] > 0, d
' "$ROOT/var/lib/tuck/versions.json"
run_tuck refresh
expect_eq "a later refresh without the flag: exit status 0" "$RC" 0
run_tuck refresh --force
expect_eq "a forced refresh without the flag: exit status 0" "$RC" 0
expect_eq "foo still 1.0" "$(seen foo)" 1.0
run_tuck versions
check "versions shows foo's floor and the decision behind it" \
        grep -Eq "^sysext +foo +1\.0 +1\.0 +downgrade from 2\.0 allowed .*tuckctl refresh --allow-downgrade=foo" <<<"$OUT"
check "versions shows bar's floor and what is active" grep -Eq "^sysext +bar +1\.1 +1\.1 +activated" <<<"$OUT"
check "versions --json" python3 -c '
import json, sys
v = {e["extension"]: e for e in json.load(sys.stdin)["extensions"]}
assert v["foo"]["floor"] == "1.0" and v["foo"]["active"] == {"/usr": "1.0"}, v["foo"]
assert v["foo"]["decision"]["kind"] == "downgrade-allowed", v["foo"]
assert v["bar"]["floor"] == "1.1" and v["bar"]["protected_in"] == ["/usr"], v["bar"]
' <<<"$(tuck versions --json)"

# ---- a reboot: unmerge, a fresh /run, merge
reboot
run_tuck merge
expect_eq "after the reboot, merge: exit status 0" "$RC" 0
expect_eq "after the reboot: foo at its allowed 1.0" "$(seen foo)" 1.0
expect_eq "after the reboot: bar 1.1" "$(seen bar)" 1.1

# ---- a newer foo is activated: the decision is spent
drop foo 1.5
run_tuck refresh
expect_eq "foo 1.5: exit status 0" "$RC" 0
expect_eq "foo 1.5 active" "$(seen foo)" 1.5
expect_eq "the floor follows it: 1.5" "$(floor foo)" 1.5
drop foo 1.0
run_tuck refresh
expect_eq "foo 1.0 again: refused (the old decision no longer applies)" "$RC" 3
expect_eq "foo stays 1.5" "$(seen foo)" 1.5
drop foo 1.5

# ---- identity: a relaxed release file named for bar does not make an image bar
mkver aaa 999 bar relaxed >/dev/null
drop aaa 999
run_tuck refresh
expect_eq "the relaxed image is merged under its own name" "$(seen aaa)" 999
check "the report says its claim on bar is refused" \
        grep -q "image 'aaa'.*names 'bar'.*counts as 'aaa'" <<<"$OUT"
expect_eq "bar's floor is untouched (1.1, not 999)" "$(floor bar)" 1.1
drop bar 1.2
run_tuck refresh
expect_eq "bar's next update (1.2) is accepted" "$(seen bar)" 1.2
rm "$ROOT/$EXT/aaa.raw"
run_tuck refresh --remove=aaa
expect_eq "aaa removed on request" "$(seen aaa)" missing
# A relaxed release file the file name carries (NAME_VERSION, as sysupdate names files) is that name.
mkver foo_1.7 1.7 foo relaxed >/dev/null
mv "$IMAGES/foo_1.7-1.7.raw" "$IMAGES/foo_1.7.raw"
rm "$ROOT/$EXT/foo.raw"
install_img "$IMAGES/foo_1.7.raw" foo_1.7 "$EXT"
run_tuck refresh
expect_eq "foo_1.7.raw with a relaxed release file for foo: it is foo, an upgrade" "$RC" 0
expect_eq "foo's floor is 1.7" "$(floor foo)" 1.7
rm "$ROOT/$EXT/foo_1.7.raw"
drop foo 2.0
run_tuck refresh
expect_eq "back to foo.raw 2.0" "$(floor foo)" 2.0

# ---- an active extension's new image is invalid: held back alone
t=$(mktemp -d "$IMAGES/tree.XXXXXX")
mkdir -p "$t/usr/lib/extension-release.d" "$t/usr/lib/tuck-test"
echo 3.0 >"$t/usr/lib/tuck-test/foo"
printf 'ID=not-this-os\nSYSEXT_VERSION_ID=3.0\n' >"$t/usr/lib/extension-release.d/extension-release.foo"
mksquashfs "$t" "$IMAGES/foo-bad.raw" -noappend -quiet -no-progress -all-root >/dev/null
install_img "$IMAGES/foo-bad.raw" foo "$EXT"
install_img "$(mkver bar 1.3)" bar "$EXT"
run_tuck refresh
expect_eq "foo's new image is invalid: exit status 3" "$RC" 3
expect_eq "bar 1.3 goes in" "$(seen bar)" 1.3
expect_eq "foo 2.0 stays" "$(seen foo)" 2.0
check "the report says why foo is held back" grep -q "held back: foo: its image .* is not valid: built for OS 'not-this-os'" <<<"$OUT"
drop foo 2.0

# ---- removal protection survives a reboot
rm "$ROOT/$EXT/bar.raw"
run_tuck refresh
expect_eq "bar's image gone: exit status 3" "$RC" 3
expect_eq "bar is held back: its staged layer stays" "$(seen bar)" 1.3
reboot
run_tuck merge
expect_eq "after a reboot, merge with bar's image gone: exit status 3" "$RC" 3
expect_eq "foo is merged" "$(seen foo)" 2.0
expect_eq "bar stays out (nothing left to keep)" "$(seen bar)" missing
check "and the report says bar is held back, and how to retire it" \
        grep -q "held back: bar: its image is gone.*--remove=bar" <<<"$OUT"
run_tuck status
check "status: degraded, bar held back" grep -q "degraded: bar held back (image gone)" <<<"$OUT"
run_tuck refresh --remove=bar
expect_eq "refresh --remove=bar: exit status 0" "$RC" 0
run_tuck status
expect_eq "status is no longer degraded: exit status 0" "$RC" 0
run_tuck refresh
expect_eq "and the next refresh does not miss bar" "$RC" 0
expect_eq "bar's floor stays after its removal" "$(floor bar)" 1.3

# ---- forget: the floor goes on purpose
drop bar 0.9
run_tuck refresh
expect_eq "bar 0.9 below the floor of a removed bar: refused" "$RC" 3
rm "$ROOT/$EXT/bar.raw"
run_tuck forget bar
expect_eq "forget bar: exit status 0" "$RC" 0
expect_eq "bar has no floor any more" "$(floor bar)" none
drop bar 0.9
run_tuck refresh
expect_eq "bar 0.9 is accepted after forget" "$RC" 0
expect_eq "bar 0.9 active" "$(seen bar)" 0.9
run_tuck forget nosuchext
expect_eq "forget of an unknown extension: exit status 1" "$RC" 1
check "and says so" grep -q "no floor recorded for 'nosuchext'" <<<"$OUT"

tap_done
