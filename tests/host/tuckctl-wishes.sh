#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What a namespace wants on a hierarchy (/run/tuck/namespaces/, stale.h)
# belongs to that namespace only. The kernel gives a dead namespace's inode
# number to the next namespace made, so each wish names a witness process
# (pid and start time) and applies only while that process is still in a
# namespace of that inode. Here, with the DynamicUser-like nosuid layout
# (its flags loosened under StalePolicy=report, given back under heal):
#   - a wish is recorded with its witness (only one beyond the host's own
#     flags: a swap cannot take anything else);
#   - wishes whose witness is dead, has another start time (a reused pid),
#     is in another namespace, or is missing (the older file form) are not
#     applied to the namespace now holding the inode;
#   - the right witness makes the same wish apply;
#   - the real thing: a namespace that wanted nosuid dies, a new one gets
#     its inode number, and a heal leaves the newcomer's flags alone.

. "$(dirname "$0")"/tuckd-lib.sh
. "$(dirname "$0")"/heal-layouts.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
WISHES=$ROOT/run/tuck/namespaces/usr.json
policy() {
        printf '[Daemon]\nStalePolicy=%s\n' "$1" >"$CONF"
}
unset DBUS_SYSTEM_BUS_ADDRESS
tuckctl() {
        "$TUCKCTL" --root="$ROOT" --config="$CONF" "$@"
}

ns_ino() {
        stat -L -c %i "/proc/$1/ns/mnt"
}
# start_time PID: field 22 of /proc/PID/stat (after the comm, which ends at the last ')').
start_time() {
        python3 -c 'import sys; print(open(f"/proc/{sys.argv[1]}/stat").read().rsplit(")", 1)[1].split()[19])' "$1"
}
# wish INO: "ATTR PID START_TIME" as recorded for namespace INO, or "none".
wish() {
        python3 - "$WISHES" "$1" <<-'PY'
	import json, sys
	e = json.load(open(sys.argv[1])).get(sys.argv[2])
	print("none" if e is None else e if isinstance(e, int) else f'{e["attr"]} {e["pid"]} {e["start_time"]}')
	PY
}
# forge INO JSON: the wishes file holds one entry, INO: JSON.
forge() {
        printf '{ "%s": %s }\n' "$1" "$2" >"$WISHES"
}

# MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV, and without NOSUID.
RO_NOSUID_NODEV=7
RO_NODEV=5

# ---- recorded with a witness
policy report
drop 1
check "merge v1" tuckctl merge
spawn_ns nosuid "mount -o remount,bind,ro,nosuid,nodev $H"
drop 2
tuckctl refresh >"$LOGS"/refresh-report.out 2>&1 || true
diag "$(cat "$LOGS"/refresh-report.out)"
check "nosuid follows, loosened: $(flags nosuid)" test "$(view nosuid)/$(flags nosuid)" = v2/ro,nodev
INO=$(ns_ino "$NS_PID_nosuid")
T=$(start_time "$NS_PID_nosuid")
expect_eq "recorded: what it wants, with its witness" "$(wish "$INO")" "$RO_NOSUID_NODEV $NS_PID_nosuid $T"

# ---- witnesses that cannot be confirmed: the inode's wish is not applied
policy heal
DEAD=$(sh -c 'echo $$')
declare -A unconfirmed=(
        [dead]="{ \"attr\": $RO_NOSUID_NODEV, \"pid\": $DEAD, \"start_time\": $T }"
        [reused-pid]="{ \"attr\": $RO_NOSUID_NODEV, \"pid\": $NS_PID_nosuid, \"start_time\": $((T + 1)) }"
        [elsewhere]="{ \"attr\": $RO_NOSUID_NODEV, \"pid\": $$, \"start_time\": $(start_time $$) }"
        [no-witness]="{ \"attr\": $RO_NOSUID_NODEV }"
        [older-form]="$RO_NOSUID_NODEV"
)
for c in dead reused-pid elsewhere no-witness older-form; do
        forge "$INO" "${unconfirmed[$c]}"
        tuckctl refresh >"$LOGS/refresh-$c.out" 2>&1
        check "$c witness: nosuid not given: $(flags nosuid)" test "$(flags nosuid)" = ro,nodev
        check "$c witness: the namespace is not in the output" \
                bash -c "! grep -q 'pid $NS_PID_nosuid,' '$LOGS/refresh-$c.out'"
        # Its flags are the host's now: nothing a swap could take from it, nothing to keep.
        expect_eq "$c witness: no wish kept (it has the host's flags now)" "$(wish "$INO")" none
done

# ---- the right witness: the same wish applies
forge "$INO" "{ \"attr\": $RO_NOSUID_NODEV, \"pid\": $NS_PID_nosuid, \"start_time\": $T }"
tuckctl refresh >"$LOGS"/refresh-confirmed.out 2>&1
diag "$(cat "$LOGS"/refresh-confirmed.out)"
check "confirmed witness: nosuid given back: $(flags nosuid)" test "$(flags nosuid)" = ro,nosuid,nodev
check "confirmed witness: healed" grep -q "(pid $NS_PID_nosuid, sleep) did not follow (restore-flags, wants ro,nosuid,nodev): healed" \
        "$LOGS"/refresh-confirmed.out

# ---- the real thing: a namespace dies and a new one is given its inode number
# The victim wants nosuid (recorded under report); once it is gone the next
# namespace made gets the lowest free number. Newcomers that get another
# (someone freed a lower one) are kept until one gets the victim's.
# A swap records it (the scan before the swap): a refresh with nothing to swap and
# nothing behind at its last scan does not look (stale.h, the no-op skip).
policy report
spawn_ns victim "mount -o remount,bind,ro,nosuid,nodev $H"
drop 3
tuckctl refresh >"$LOGS"/refresh-victim.out 2>&1 || true
VICTIM_INO=$(ns_ino "$NS_PID_victim")
expect_eq "the victim's wish is recorded" "$(wish "$VICTIM_INO" | cut -d' ' -f1)" "$RO_NOSUID_NODEV"
kill "$NS_PID_victim"
wait "$NS_PID_victim" 2>/dev/null || true
newcomer=
for ((i = 0; i < 20; i++)); do
        spawn_ns "new$i" "true"
        pid=NS_PID_new$i
        if [[ $(ns_ino "${!pid}") == "$VICTIM_INO" ]]; then
                newcomer=${!pid}
                break
        fi
done
diag "victim's inode $VICTIM_INO reused by pid ${newcomer:-nobody} after $((i + 1)) namespace(s)"
check "a new namespace got the victim's inode number" test -n "$newcomer"
NS_PID_newcomer=${newcomer:-0}
check "the newcomer has the host's flags: $(flags newcomer)" test "$(flags newcomer)" = ro,nodev
policy heal
tuckctl refresh >"$LOGS"/refresh-reuse.out 2>&1
diag "$(cat "$LOGS"/refresh-reuse.out)"
check "the newcomer is not given the victim's nosuid: $(flags newcomer)" test "$(flags newcomer)" = ro,nodev
check "the newcomer is not in the output" bash -c "! grep -q 'pid $newcomer,' '$LOGS/refresh-reuse.out'"
expect_eq "the newcomer has no wish (the host's flags)" "$(wish "$VICTIM_INO")" none
check "nosuid keeps its own: $(flags nosuid)" test "$(flags nosuid)" = ro,nosuid,nodev

tap_done
