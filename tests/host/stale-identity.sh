#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Who owns a namespace comes from systemd, and StalePolicy=restart restarts
# only what the operator listed. Namespaces that stay behind a refresh (each
# with its own bind of /usr) whose processes sit in cgroups named as systemd
# names them, below a test slice of the cgroup2 tree:
#   - .../user-1000.slice/user@1000.service/app.slice/systemd-reboot.service:
#     a user's unit that happens to share a system unit's name: never
#     restarted, whatever RestartUnits= says (sd_pid_get_unit() says
#     user@1000.service, sd_pid_get_user_unit() systemd-reboot.service);
#   - tuck-optin-PID.service, listed in RestartUnits=: restarted;
#   - tuck-other-PID.service, not listed: not restarted;
#   - machine-tuckPID.scope, which systemd-machined (here its registry in
#     /run/systemd/machines) knows as the container "tuckbox": named so;
#   - a process whose comm holds a newline: one line of output, escaped.
# A fake systemd on a private system bus records every RestartUnit call.

. "$(dirname "$0")"/tuckd-lib.sh
. "$(dirname "$0")"/heal-layouts.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
tuckctl() {
        "$TUCKCTL" --root="$ROOT" --config="$CONF" "$@"
}

# ---- cgroups as systemd lays them out, below a slice of our own
CG=/sys/fs/cgroup
[[ -d /sys/fs/cgroup/unified ]] && CG=/sys/fs/cgroup/unified
TOP=$CG/tuck-test-$$.slice
USER_UNIT=$TOP/user-1000.slice/user@1000.service/app.slice/systemd-reboot.service
OPTIN=tuck-optin-$$.service
OTHER=tuck-other-$$.service
MACHINE_SCOPE=machine-tuck$$.scope
cgroups=("$USER_UNIT" "$TOP/$OPTIN" "$TOP/$OTHER" "$TOP/$MACHINE_SCOPE")
cleanup_cgroups() {
        local c p
        for c in "${cgroups[@]}"; do
                for p in $(cat "$c"/cgroup.procs 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        done
        sleep 0.2
        # Leaves first, then their parents, up to our slice.
        for c in "${cgroups[@]}"; do
                while [[ $c == "$TOP"* ]]; do
                        rmdir "$c" 2>/dev/null || true
                        c=${c%/*}
                done
        done
}
trap 'cleanup_cgroups; tuck_cleanup' EXIT
mkdir -p "${cgroups[@]}"
# systemd-machined's registry: the unit of a registered machine names it.
mkdir -p /run/systemd/machines
ln -s tuckbox "/run/systemd/machines/unit:$MACHINE_SCOPE"

# stale_in CGROUP NAME: a namespace in that cgroup with a read-only bind of its own on /usr.
stale_in() {
        spawn_ns "$2" "echo \$\$ >$1/cgroup.procs && mount --bind $H $H && mount -o remount,bind,ro,nodev $H"
}

printf '[Daemon]\nStalePolicy=restart\n' >"$CONF"
drop 1
check "merge v1" tuckctl merge
stale_in "$USER_UNIT" user
stale_in "$TOP/$OPTIN" optin
stale_in "$TOP/$OTHER" other
stale_in "$TOP/$MACHINE_SCOPE" machine
# A comm of its own, newline included (exec would reset it: python sets it and stays).
: >"$LOGS"/ns-evil.log
unshare --mount --propagation slave sh -c "mount --bind $H $H && echo ns-ready && exec python3 -c '
import ctypes, time
ctypes.CDLL(None).prctl(15, b\"evil\\nMESSAGE=x\", 0, 0, 0)
time.sleep(100000)'" >>"$LOGS"/ns-evil.log 2>&1 &
ns_await_ready evil $! "$LOGS"/ns-evil.log
for ((i = 0; i < 200; i++)); do
        grep -q MESSAGE=x /proc/"$NS_PID_evil"/comm && break
        sleep 0.05
done
check "the evil comm is set" grep -q MESSAGE=x /proc/"$NS_PID_evil"/comm

start_bus
"$FAKE_SYSTEMD" "$LOGS"/restarts >>"$LOGS"/fake-systemd.log 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do bctl status org.freedesktop.systemd1 >/dev/null 2>&1 && break; sleep 0.05; done
: >"$LOGS"/restarts

# ---- RestartUnits= empty (the default): nothing is restarted
drop 2
tuckctl refresh >"$LOGS"/refresh-none.out 2>&1 || true
diag "$(cat "$LOGS"/refresh-none.out)"
expect_eq "no RestartUnits=: no RestartUnit call" "$(wc -l <"$LOGS"/restarts)" 0
check "the listed-nowhere unit says why" \
        grep -q "unit $OPTIN (pid $NS_PID_optin, sleep) did not follow .*: not restarted: its unit is not in RestartUnits=$" \
        "$LOGS"/refresh-none.out

# ---- RestartUnits= names units, the user's name among them: only the system's own service
printf '[Daemon]\nStalePolicy=restart\nRestartUnits=%s systemd-reboot.service user@1000.service\nRestartUnits=%s\n' \
        "$OPTIN" "$MACHINE_SCOPE" >"$CONF" 2>/dev/null || true
# A scope cannot be listed (only services): the configuration says so.
if tuckctl refresh >"$LOGS"/refresh-bad.out 2>&1; then
        not_ok "RestartUnits= with a scope accepted"
else
        check "RestartUnits= takes services only" grep -q "RestartUnits= takes service unit names, got '$MACHINE_SCOPE'" \
                "$LOGS"/refresh-bad.out
fi
printf '[Daemon]\nStalePolicy=restart\nRestartUnits=%s systemd-reboot.service user@1000.service\n' "$OPTIN" >"$CONF"
tuckctl refresh >"$LOGS"/refresh-listed.out 2>&1 || true
diag "$(cat "$LOGS"/refresh-listed.out)"
check "RestartUnit($OPTIN, replace) called" grep -qx "RestartUnit $OPTIN replace" "$LOGS"/restarts
expect_eq "nothing else was restarted" "$(grep -vcx "RestartUnit $OPTIN replace" "$LOGS"/restarts)" 0
check "output: restart of $OPTIN requested" \
        grep -q "unit $OPTIN (pid $NS_PID_optin, sleep) did not follow .*: restart of $OPTIN requested$" \
        "$LOGS"/refresh-listed.out
check "the user's systemd-reboot.service is the user's" \
        grep -q "unit systemd-reboot.service of user 1000 (pid $NS_PID_user, sleep) did not follow .*: not restarted: a user's process, not a system unit's$" \
        "$LOGS"/refresh-listed.out
check "the unlisted service is not restarted" \
        grep -q "unit $OTHER (pid $NS_PID_other, sleep) did not follow .*: not restarted: its unit is not in RestartUnits=$" \
        "$LOGS"/refresh-listed.out
check "the container is named by machined: tuckbox" \
        grep -q "container tuckbox (pid $NS_PID_machine, sleep) did not follow .*: not restarted: its unit is not a service$" \
        "$LOGS"/refresh-listed.out

# ---- names are escaped: one namespace, one line
check "the comm is escaped in the output" grep -qF "process evil\\x0aMESSAGE=x (pid $NS_PID_evil, evil\\x0aMESSAGE=x)" \
        "$LOGS"/refresh-listed.out
check "no line starts with the comm's second half" bash -c "! grep -q '^MESSAGE=x' '$LOGS/refresh-listed.out'"
tuckctl --json refresh >"$LOGS"/refresh.json 2>/dev/null || true
check "JSON carries the comm as it is, JSON-escaped" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
usr = [h for h in r["hierarchies"] if h["hierarchy"] == "/usr"][0]
comms = [n["comm"] for n in usr["namespaces"]]
assert "evil\nMESSAGE=x" in comms, comms
units = {n["pid"]: (n["unit"], n["user_unit"], n["machine"]) for n in usr["namespaces"]}
assert units[int(sys.argv[2])] == ("user@1000.service", "systemd-reboot.service", None), units
assert units[int(sys.argv[3])][2] == "tuckbox", units' "$LOGS"/refresh.json "$NS_PID_user" "$NS_PID_machine"

tap_done
