#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tuckd's stale-namespace policy on a host-like layout (tuckd-lib.sh
# spawn_layouts): a plain service, a ProtectSystem= service with a read-only
# bind on top of /usr (started before the first merge), systemd 252's
# ProtectSystem= (read-only in place: follows) and DynamicUser= (nosuid in
# place: follows, loosened unless pinned), a ProtectSystem=strict like one
# (everything remounted in place), a container-like namespace (own root, a
# read-only bind of /usr) and a service inside it. With StalePolicy=report
# a refresh leaves the bind, the container and its service on the old
# generation and loosens the in-place copies with stricter flags (shown,
# reported in the journal and by signal); with heal every namespace sees the
# new generation, with no base or missing-file read by readers inside them
# and their flags never loosened; with restart tuckd asks systemd (a fake one
# on the private bus) to restart the unit owning the namespace.
#
# tuckd runs with openat2() refused (ENOSYS), as tuckd.service's
# RestrictSUIDSGID= refuses it: the namespace scan must not depend on it.

. "$(dirname "$0")"/tuckd-lib.sh
. "$(dirname "$0")"/heal-layouts.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
policy() {
        printf '[Daemon]\nWatch=no\nStalePolicy=%s\n' "$1" >"$CONF"
}

policy report
drop 1
start_journal
start_bus
TUCKD_WRAP=("${TUCKD_AS_UNIT[@]}")
start_tuckd
check "generation 1 merged at start" test "$(marker)" = v1

# A unit cgroup for one service, so tuckd can name its unit (restart policy).
unit_cgroup tuckd-test-$$

spawn_layouts "$H" "echo \$\$ >$CG/$UNIT/cgroup.procs"

full_flags=ro,nosuid,nodev,noexec
strict_flags=ro,nosuid,nodev,noexec
nosuid_flags=ro,nosuid,nodev
layouts=(plain full inplace nosuid strict container nested)

gdbus monitor --address "$BUS" --dest org.tuck1 --object-path /org/tuck1 >"$LOGS"/monitor 2>&1 &
pids+=($!)
sleep 0.3

# ---- report: a refresh without healing leaves them stale
drop 2
check "Refresh to v2" test "$(call Refresh t 0)" = "b true"
check "host sees v2" test "$(marker)" = v2
check "plain service follows (v2)" test "$(view plain)" = v2
check "ProtectSystem=full-like service is stale: $(view full)" test "$(view full)" = v1
check "container is stale: $(view container)" test "$(view container)" = v1
check "the service in the container is stale: $(view nested)" test "$(view nested)" = v1
check "in-place read-only service follows (v2)" test "$(view inplace)" = v2
check "in-place nosuid service follows (v2)" test "$(view nosuid)" = v2
check "... but lost nosuid: $(flags nosuid)" test "$(flags nosuid)" = ro,nodev
check "full keeps its flags" test "$(flags full)" = $full_flags
stale=$(journal_count 5caeb1603632417eb7da23c50dbef12a)
check "stale namespaces journalled ($stale)" test "$stale" -ge 2
check "journal names the full service's pid and unit" \
        in_journal -qx "TUCK_UNIT=$UNIT"
check "journal names the container's pid" in_journal -qx "TUCK_PID=$NS_PID_container"
sleep 0.2
check "NamespaceStale signalled with outcome 'reported'" \
        grep -q "NamespaceStale ('$H', uint32 $NS_PID_full, 'sleep', '$UNIT', '', 'swap', 'reported')" "$LOGS"/monitor
diag "$(grep -E '^MESSAGE=.*did not follow' "$JOURNAL" | sed 's/^MESSAGE=//')"

# ---- heal: everyone follows, atomically, flags kept
policy heal
kill -HUP "$TUCKD_PID"
sleep 0.5
check "StalePolicy is heal after SIGHUP" test "$(prop StalePolicy)" = 's "heal"'
# The reload heals what report left behind, without waiting for a swap.
check "reload healed the full service: $(view full)" test "$(view full)" = v2
check "reload healed the container: $(view container)" test "$(view container)" = v2
check "reload healed the service in the container: $(view nested)" test "$(view nested)" = v2
check "reload restored strict's flags: $(flags strict)" test "$(flags strict)" = $strict_flags
check "reload restored nosuid's flags: $(flags nosuid)" test "$(flags nosuid)" = $nosuid_flags
check "full kept its flags through it: $(flags full)" test "$(flags full)" = $full_flags

for n in "${layouts[@]}"; do
        pid=NS_PID_$n
        start_probe "$n" "${!pid}" "$(path_in $n)"
done
start_flag_sampler strict "$NS_PID_strict" "$H"
start_flag_sampler nosuid "$NS_PID_nosuid" "$H"
sleep 0.3

healed_before=$(prop HealCount | awk '{print $2}')
for v in 3 4 5; do
        drop "$v"
        check "Refresh to v$v" test "$(call Refresh t 0)" = "b true"
        sleep 0.2
done
sleep 0.3
stop_probes
stop_flag_samplers
healed=$(($(prop HealCount | awk '{print $2}') - healed_before))

for n in "${layouts[@]}"; do
        check "$n sees v5" test "$(view $n)" = v5
done
check "full still $full_flags: $(flags full)" test "$(flags full)" = $full_flags
check "strict still $strict_flags: $(flags strict)" test "$(flags strict)" = $strict_flags
check "nosuid still $nosuid_flags: $(flags nosuid)" test "$(flags nosuid)" = $nosuid_flags
check "container still read-only: $(flags container)" test "$(flags container)" = ro,nodev
diag "HealCount +$healed over 3 refreshes"
check "namespaces healed ($healed)" test "$healed" -ge 6
check "healed journalled" test "$(journal_count e31ca6970a1d42cdb02b12431d3ab01e)" -ge 6

check_probes "${layouts[@]}"
check_never_loosened $strict_flags strict
check_never_loosened $nosuid_flags nosuid

# ---- restart: ask systemd to restart the owning unit
"$FAKE_SYSTEMD" "$LOGS"/restarts >>"$LOGS"/fake-systemd.log 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do bctl status org.freedesktop.systemd1 >/dev/null 2>&1 && break; sleep 0.05; done
# Only the units an operator lists are ever restarted (RestartUnits=, default none).
printf '[Daemon]\nWatch=no\nStalePolicy=restart\nRestartUnits=%s\n' "$UNIT" >"$CONF"
kill -HUP "$TUCKD_PID"
sleep 0.5
drop 6
check "Refresh to v6" test "$(call Refresh t 0)" = "b true"
check "RestartUnit($UNIT, replace) called" grep -qx "RestartUnit $UNIT replace" "$LOGS"/restarts
check "journal: restart requested" in_journal -q "^TUCK_OUTCOME=restart of $UNIT requested$"
check "a namespace without a unit is reported as such" in_journal -q '^TUCK_OUTCOME=not restarted: no unit$'
check "nothing else was restarted" test "$(wc -l <"$LOGS"/restarts)" -eq 1

tap_done
