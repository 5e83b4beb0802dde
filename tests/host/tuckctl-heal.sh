#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# StalePolicy= without tuckd: `tuckctl refresh` working directly does what
# tuckd does (the stale-namespace step is part of the refresh, stale.c), on
# the layouts of tuckd-heal.sh. With report the namespaces left behind are
# listed in tuckctl's output and JSON and left alone; with heal a refresh
# that changes nothing still brings them onto the current generation and
# gives back the flags report let propagation loosen (remembered in
# /run/tuck/namespaces/); then refreshes heal as they swap, with no base or
# missing-file read by readers and no flag ever loosened; with restart
# tuckctl asks systemd (a fake one on a private system bus) itself.

. "$(dirname "$0")"/tuckd-lib.sh
. "$(dirname "$0")"/heal-layouts.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
policy() {
        printf '[Daemon]\nStalePolicy=%s\n' "$1" >"$CONF"
}
# No system bus here (our own empty /run): tuckctl works directly.
unset DBUS_SYSTEM_BUS_ADDRESS
tuckctl() {
        "$TUCKCTL" --root="$ROOT" --config="$CONF" "$@"
}

policy report
drop 1
check "merge v1" tuckctl merge
spawn_layouts "$H"

layouts=(plain full inplace nosuid strict container nested)
declare -A want=([plain]=ro,nodev [full]=ro,nosuid,nodev,noexec [inplace]=ro,nodev [nosuid]=ro,nosuid,nodev
                 [strict]=ro,nosuid,nodev,noexec [container]=ro,nodev [nested]=ro,nodev)

# ---- report: listed, left alone
drop 2
tuckctl refresh >"$LOGS"/refresh-2.out 2>&1 || true
diag "$(cat "$LOGS"/refresh-2.out)"
check "host sees v2" test "$(marker)" = v2
check "full is stale" test "$(view full)" = v1
check "container is stale" test "$(view container)" = v1
check "nested is stale" test "$(view nested)" = v1
check "nosuid follows, loosened: $(flags nosuid)" test "$(view nosuid)/$(flags nosuid)" = v2/ro,nodev
check "output: the full service, reported" \
        grep -q "(pid $NS_PID_full, sleep) did not follow (swap, wants ro,nosuid,nodev,noexec): reported" "$LOGS"/refresh-2.out
check "output: the container, reported" grep -q "(pid $NS_PID_container, sleep) did not follow (swap.*: reported" "$LOGS"/refresh-2.out
check "output: nosuid's lost flag, reported" \
        grep -q "(pid $NS_PID_nosuid, sleep) did not follow (restore-flags, wants ro,nosuid,nodev): reported" "$LOGS"/refresh-2.out
tuckctl --json refresh >"$LOGS"/refresh-json.out
check "JSON: nothing changed, the 5 namespaces still listed" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
usr = [h for h in r["hierarchies"] if h["hierarchy"] == "/usr"][0]
assert usr["outcome"] == "unchanged", usr["outcome"]
ns = usr["namespaces"]
assert len(ns) == 5, ns
assert all(n["outcome"] == "reported" and not n["healed"] for n in ns), ns' "$LOGS"/refresh-json.out

# ---- heal: a refresh with nothing to swap catches up
policy heal
tuckctl refresh >"$LOGS"/refresh-heal.out 2>&1
diag "$(cat "$LOGS"/refresh-heal.out)"
check "nothing to swap: /usr unchanged" grep -q "^/usr: unchanged" "$LOGS"/refresh-heal.out
for n in full container nested; do
        check "$n healed onto v2: $(view $n)" test "$(view $n)" = v2
done
check "nosuid's flags restored: $(flags nosuid)" test "$(flags nosuid)" = ro,nosuid,nodev
check "strict's flags restored: $(flags strict)" test "$(flags strict)" = ro,nosuid,nodev,noexec
check "output says healed" test "$(grep -c ': healed$' "$LOGS"/refresh-heal.out)" -ge 4

for n in "${layouts[@]}"; do
        pid=NS_PID_$n
        start_probe "$n" "${!pid}" "$(path_in $n)"
done
start_flag_sampler strict "$NS_PID_strict" "$H"
start_flag_sampler nosuid "$NS_PID_nosuid" "$H"
sleep 0.3
for v in 3 4 5; do
        drop "$v"
        check "refresh to v$v" tuckctl -q refresh
        sleep 0.2
done
sleep 0.3
stop_probes
stop_flag_samplers
for n in "${layouts[@]}"; do
        check "$n sees v5, ${want[$n]}: $(view $n), $(flags $n)" test "$(view $n)/$(flags $n)" = "v5/${want[$n]}"
done
check_probes "${layouts[@]}"
check_never_loosened ro,nosuid,nodev,noexec strict
check_never_loosened ro,nosuid,nodev nosuid

# ---- a device number of the past, taken by someone else's mount
# An overlay nobody holds frees its device number for the next anonymous
# mount. Here a service with its own tmpfs on /usr (TemporaryFileSystem=)
# gets one that the generation record lists as an old overlay of ours: it
# must be left alone, not "healed" onto our overlay.
spawn_ns tmpfs "mount -t tmpfs -o ro,size=1m other $H"
tdev=$(nsenter -t "$NS_PID_tmpfs" -m stat -c '%Hd:%Ld' "$H")
python3 - "$ROOT/run/tuck/generations/usr.json" "$tdev" <<'PY'
import json, sys
path, dev = sys.argv[1], sys.argv[2]
g = json.load(open(path))
g["history"].insert(0, {"generation": g["generation"] - 1, "overlay_dev": dev})
json.dump(g, open(path, "w"))
PY
tuckctl refresh >"$LOGS"/refresh-recycled.out 2>&1
check "the record now lists $tdev as ours" grep -q "\"$tdev\"" "$ROOT/run/tuck/generations/usr.json"
check "the tmpfs service is not in the output" bash -c "! grep -q 'pid $NS_PID_tmpfs,' '$LOGS/refresh-recycled.out'"
check "its /usr is still its tmpfs" test "$(nsenter -t "$NS_PID_tmpfs" -m stat -f -c %T "$H")" = tmpfs
kill "$NS_PID_tmpfs"

# ---- restart: tuckctl asks systemd itself
unit_cgroup tuckctl-test-$$
spawn_ns restartme "echo \$\$ >$CG/$UNIT/cgroup.procs && mount --bind $H $H && mount -o remount,bind,ro,nodev $H"
start_bus
"$FAKE_SYSTEMD" "$LOGS"/restarts >>"$LOGS"/fake-systemd.log 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do bctl status org.freedesktop.systemd1 >/dev/null 2>&1 && break; sleep 0.05; done
# Only the units an operator lists are ever restarted (RestartUnits=, default none).
printf '[Daemon]\nStalePolicy=restart\nRestartUnits=%s\n' "$UNIT" >"$CONF"
drop 6
tuckctl refresh >"$LOGS"/refresh-restart.out 2>&1
diag "$(grep -v 'not restarted' "$LOGS"/refresh-restart.out)"
check "RestartUnit($UNIT, replace) called" grep -qx "RestartUnit $UNIT replace" "$LOGS"/restarts
check "output: restart requested" grep -q "unit $UNIT (pid $NS_PID_restartme, sleep) did not follow (swap.*: restart of $UNIT requested" "$LOGS"/refresh-restart.out
check "a namespace without a unit: not restarted" grep -q ': not restarted: no unit$' "$LOGS"/refresh-restart.out
check "nothing else was restarted" test "$(wc -l <"$LOGS"/restarts)" -eq 1

tap_done
