#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# SIGKILL at random points of a refresh and of a rollback (issue 9):
# versions.json holds the old floors or the new ones after every kill,
# never lost, truncated or a mix, and what the host runs agrees with them
# once the next run has recovered.
#
# A point is one system call of tuckctl: a full run is traced once
# (strace), then each kill picks one of its calls at random, "the k-th
# mkdir", and strace delivers SIGKILL there (-e inject=SYSCALL:signal=KILL:
# when=k). That is exact and replayable, unlike a timer.
#
#   refresh:  foo 2.0 + bar 1.0 -> foo 2.1 + bar 1.1 (floors rise)
#   rollback: foo 2.0 + bar 1.0 -> foo 1.0, `refresh --allow-downgrade=foo`
#             (the decision moves foo's floor down to 1.0)
#
# After each kill: the floors are old or new. After every kill that left
# new floors, and every fifth otherwise (an old one means nothing was
# swapped: the next kill starts from there and its run recovers), the next
# plain refresh (no flag) recovers and leaves them as they were: a rollback
# that was recorded is honoured, one that was not stays refused (foo held
# back). Every twentieth kill also simulates a reboot (unmerge, a fresh
# /run, merge) and checks the same. TUCK_CRASH_RUNS (default 30 per phase,
# 60 kills in all; 60 per phase with TUCK_SOAK=1) and TUCK_CRASH_SEED replay.
# The order of the writes is checked in the trace too: versions.json's temp
# file fsync()ed, renamed, its directory fsync()ed, all before the swap.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

RUNS=${TUCK_CRASH_RUNS:-$(stress_size 30 60)}
SEED=${TUCK_CRASH_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$SEED
diag "seed $SEED, $RUNS kills per phase (replay: TUCK_CRASH_SEED=$SEED TUCK_CRASH_RUNS=$RUNS)"
command -v strace >/dev/null || { echo "Bail out! strace is needed (tools/deps/core.txt)"; exit 1; }

EXT=var/lib/extensions
V=var/lib/tuck/versions.json

mkver() {
        local name=$1 version=$2 t
        t=$(mktemp -d "$IMAGES/tree.XXXXXX")
        mkdir -p "$t/usr/lib/tuck-test" "$t/usr/lib/extension-release.d"
        echo "$version" >"$t/usr/lib/tuck-test/$name"
        printf 'ID=_any\nSYSEXT_VERSION_ID=%s\n' "$version" >"$t/usr/lib/extension-release.d/extension-release.$name"
        mksquashfs "$t" "$IMAGES/$name-$version.raw" -noappend -quiet -no-progress -all-root >/dev/null
        rm -rf "$t"
}
drop() {
        install_img "$IMAGES/$1-$2.raw" "$1" "$EXT"
}
seen() {
        cat "$ROOT/usr/lib/tuck-test/$1" 2>/dev/null || echo missing
}
# floors: "foo=2.0/activated bar=1.0/activated", or what is wrong with versions.json.
floors() {
        python3 -I -S - "$ROOT/$V" <<-'EOF'
	import json, sys
	try:
	    v = json.load(open(sys.argv[1]))
	    e = v["sysext"]
	    # A format-1 floor (a bare string) is a version activated.
	    f = lambda x: "%s/activated" % x if isinstance(x, str) else "%s/%s" % (x["floor"], x["decision"]["kind"])
	    print(" ".join("%s=%s" % (n, f(e[n])) for n in ("foo", "bar")))
	except Exception as x:
	    print("BROKEN: %r" % x)
	EOF
}
reboot() {
        tuck unmerge >/dev/null 2>&1 || true
        umount "$ROOT/run/tuck/staging.mnt" 2>/dev/null || true
        umount "$ROOT/run/tuck" 2>/dev/null || true
        rm -rf "$ROOT/run/tuck"
}

host_setup
mkdir -p "$ROOT/$EXT"
for v in 1.0 2.0 2.1; do mkver foo $v; done
for v in 1.0 1.1; do mkver bar $v; done
drop foo 2.0
drop bar 1.0
tuck merge >/dev/null
cp "$ROOT/$V" "$LOGS/versions-old.json"
OLD="foo=2.0/activated bar=1.0/activated"
expect_eq "the starting floors" "$(floors)" "$OLD"

# reset: back to foo 2.0 + bar 1.0 merged with the starting floors, whatever a kill left:
# the images, a refresh that may go down, the starting versions.json. From scratch if that fails.
reset() {
        drop foo 2.0
        drop bar 1.0
        if ! tuck refresh --allow-downgrade >/dev/null 2>&1; then
                reboot
                tuck merge >/dev/null
        fi
        cp "$LOGS/versions-old.json" "$ROOT/$V"
}

# calls ARGS...: the system calls of one full `tuckctl ARGS` from the starting state, one
# traced STRACE-ARGS... -- COMMAND...: strace, with the sanitizer build's leak check off for
# what it traces: LeakSanitizer cannot stop the world under ptrace and says so as a fatal
# error at exit (a leak is still caught by every other test, untraced).
traced() {
        ASAN_OPTIONS=${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0 strace "$@"
}

# "NAME ORDINAL" per line (the ordinal of that call among the process's calls of that name).
calls() {
        traced -qq -o "$LOGS/trace" "$TUCKCTL" --root="$ROOT" "$@" >/dev/null 2>&1 || true
        awk -F'(' '/^[a-z_0-9]+\(/ { n = $1; print n, ++seen[n] }' "$LOGS/trace"
}

# phase NAME WANT-NEW SETUP ARGS...: RUNS kills of `tuckctl ARGS` after SETUP, each at a random call.
phase() {
        local name=$1 new=$2 setup=$3
        shift 3
        local -a points
        local run k sc nth got after rc outcome_old=0 outcome_new=0 bad=0 unrecovered=0

        reset
        $setup
        mapfile -t points < <(calls "$@")
        diag "$name: a full run makes ${#points[@]} system calls"
        ((${#points[@]} > 100)) || { not_ok "$name: too few calls traced (${#points[@]})"; return; }
        check "$name: versions.json is written (fsync, rename, fsync of its directory) before the swap" \
                written_before_swap "$LOGS/trace"
        reset
        for ((run = 1; run <= RUNS; run++)); do
                $setup
                k=$(((RANDOM * 32768 + RANDOM) % ${#points[@]}))
                read -r sc nth <<<"${points[$k]}"
                rc=0
                # (in braces: bash's "Killed" notice goes with their stderr)
                { traced -qq -o /dev/null -e trace="$sc" -e inject="$sc:signal=KILL:when=$nth" \
                        "$TUCKCTL" --root="$ROOT" "$@" >"$LOGS/killed.out" 2>&1; } 2>/dev/null || rc=$?
                got=$(floors)
                if [[ $got == "$OLD" ]]; then
                        outcome_old=$((outcome_old + 1))
                elif [[ $got == "$new" ]]; then
                        outcome_new=$((outcome_new + 1))
                else
                        bad=$((bad + 1))
                        diag "$name run $run: killed at $sc #$nth (exit $rc): versions.json is '$got'"
                fi
                # Old floors: nothing was swapped (they are written first), so the next kill can
                # start from what this one left, and its run recovers from it. Now and then,
                # and after every new one, the next plain refresh recovers, and must leave the
                # floors as the kill left them.
                if [[ $got == "$OLD" ]] && ((run % 5 != 0 && run != RUNS)); then
                        continue
                fi
                tuck refresh >"$LOGS/recover.out" 2>&1 || true
                after=$(floors)
                if [[ $after != "$got" && $got == "$OLD" && $name == refresh ]]; then
                        got=$new        # a killed upgrade is finished by the next refresh: old -> new
                fi
                if [[ $after != "$got" ]] || ! consistent "$after"; then
                        unrecovered=$((unrecovered + 1))
                        diag "$name run $run: killed at $sc #$nth: floors '$got', after the next refresh '$after'," \
                             "foo $(seen foo) bar $(seen bar)"
                        diag "$(cat "$LOGS/recover.out")"
                fi
                if ((run % 20 == 0)); then
                        reboot
                        cp "$ROOT/$V" "$LOGS/versions-before-boot.json"
                        tuck merge >"$LOGS/boot.out" 2>&1 || true
                        if [[ $(floors) != "$after" ]] || ! consistent "$after"; then
                                unrecovered=$((unrecovered + 1))
                                diag "$name run $run: after a reboot: floors '$(floors)', foo $(seen foo) bar $(seen bar)"
                        fi
                fi
                reset
        done
        diag "$name: $RUNS kills: versions.json old $outcome_old, new $outcome_new, lost or mixed $bad"
        check "$name: after every kill versions.json holds the old floors or the new ones" test "$bad" -eq 0
        check "$name: the next run recovers, agreeing with the floors ($unrecovered not)" test "$unrecovered" -eq 0
        check "$name: kills landed on both sides of the write ($outcome_old old, $outcome_new new)" \
                test "$outcome_old" -gt 0 -a "$outcome_new" -gt 0
}

# written_before_swap TRACE: in the trace of a full run, the new versions.json is made durable
# (its temp file fsync()ed, renamed over it, the directory fsync()ed) before the first swap
# beneath (a detached tree moved beneath the top's fd: nothing else moves with those flags).
written_before_swap() {
        awk -v v="\"$ROOT/$V.tmp" '
                /^fsync\(/ { last_fsync = NR }
                index($0, "rename(" v) == 1 && !renamed { renamed = NR; data_synced = last_fsync == NR - 1 }
                renamed && !dir_synced && /^fsync\(/ && NR > renamed { dir_synced = NR }
                /^move_mount\(.*MOVE_MOUNT_F_EMPTY_PATH\|MOVE_MOUNT_T_EMPTY_PATH\|0x200/ && !swap { swap = NR }
                END {
                        printf "rename at %d (data fsync before it: %d), directory fsync at %d, swap at %d\n",
                                renamed, data_synced, dir_synced, swap
                        exit !(renamed && data_synced && dir_synced && swap && dir_synced < swap)
                }' "$1"
}

# consistent FLOORS: the host runs what the floors allow.
consistent() {
        case $1 in
        "foo=2.1/activated bar=1.1/activated") [[ $(seen foo)/$(seen bar) == 2.1/1.1 ]] ;;
        "foo=1.0/downgrade-allowed bar=1.0/activated") [[ $(seen foo)/$(seen bar) == 1.0/1.0 ]] ;;
        # The old floors: an upgrade not yet applied, or a rollback never recorded (foo held back at 2.0).
        "$OLD") [[ $(seen foo) == 2.0 || $(seen foo) == missing ]] && [[ $(seen bar) == 1.0 ]] ;;
        *) false ;;
        esac
}

refresh_setup() {
        drop foo 2.1
        drop bar 1.1
}
rollback_setup() {
        drop foo 1.0
}

phase refresh "foo=2.1/activated bar=1.1/activated" refresh_setup refresh
# TUCK_CRASH_ROLLBACK: the rollback's flag (main before issue 9 knew only --allow-downgrade).
phase rollback "foo=1.0/downgrade-allowed bar=1.0/activated" rollback_setup refresh \
        "${TUCK_CRASH_ROLLBACK:---allow-downgrade=foo}"

tap_done
