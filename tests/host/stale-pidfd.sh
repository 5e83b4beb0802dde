#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A pid reused between the scan and the action gets no action. A refresh
# finds a namespace V behind (its own bind of /usr); while the refresh is
# busy with another namespace first (W: waiting on it is how the test gets
# its moment), V's process exits and a new process gets V's pid, in a
# namespace that is behind as well (a copy of a keeper's that holds the old
# generation) and, for the heal, under V's old namespace inode too. Then:
#   - restart: W's unit's RestartUnit waits at the fake systemd; V's unit
#     must not be restarted (its process is gone);
#   - heal: W is a container whose root is a FUSE file system, and the heal
#     entering it waits on a lookup there; the newcomer at V's pid must not
#     be healed (it was never scanned).
# Every pid is chosen with /proc/sys/kernel/ns_last_pid (the test's own PID
# namespace).

. "$(dirname "$0")"/tuckd-lib.sh
. "$(dirname "$0")"/heal-layouts.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
FUSE_HANG=$TUCK_BUILD/tests/host/tuck-fuse-hang
tuckctl() {
        "$TUCKCTL" --root="$ROOT" --config="$CONF" "$@"
}
ns_ino() {
        stat -L -c %i "/proc/$1/ns/mnt"
}
STALE_SETUP="mount --bind $H $H && mount -o remount,bind,ro,nodev $H"

# at_pid PID KEEPER CGROUP: a process at PID, in a copy of KEEPER's mount
# namespace (behind, as KEEPER is), in CGROUP (or none); prints its pid.
at_pid() {
        python3 - "$1" "$2" "${3:-}" <<-'PY'
	import ctypes, os, sys
	want, keeper, cgroup = int(sys.argv[1]), sys.argv[2], sys.argv[3]
	libc = ctypes.CDLL(None, use_errno=True)
	ns = os.open("/proc/%s/ns/mnt" % keeper, os.O_RDONLY)
	with open("/proc/sys/kernel/ns_last_pid", "w") as f:
	    f.write(str(want - 1))
	pid = os.fork()
	if pid == 0:
	    if cgroup:
	        with open(cgroup + "/cgroup.procs", "w") as f:
	            f.write(str(os.getpid()))
	    CLONE_NEWNS = 0x00020000
	    if libc.setns(ns, CLONE_NEWNS) != 0 or libc.unshare(CLONE_NEWNS) != 0:
	        os._exit(1)
	    # Not our stdout: the caller reads it to its end.
	    null = os.open("/dev/null", os.O_RDWR)
	    for fd in (0, 1, 2):
	        os.dup2(null, fd)
	    os.execvp("sleep", ["sleep", "100000"])
	print(pid)
	PY
}

# fill_below INO: namespaces holding every free inode number below INO, so the
# next namespace made gets INO once it is free (proc_alloc_inum(): lowest first).
fill_below() {
        local i pid
        for ((i = 0; i < 64; i++)); do
                spawn_ns "filler$i" true
                pid=NS_PID_filler$i
                (($(ns_ino "${!pid}") > $1)) && { kill "${!pid}"; wait "${!pid}" 2>/dev/null || true; return 0; }
        done
}

CG=/sys/fs/cgroup
[[ -d /sys/fs/cgroup/unified ]] && CG=/sys/fs/cgroup/unified
TOP=$CG/tuck-test-$$.slice
UNIT_W=tuck-w-$$.service UNIT_V=tuck-v-$$.service UNIT_NEW=tuck-new-$$.service
mkdir -p "$TOP/$UNIT_W" "$TOP/$UNIT_V" "$TOP/$UNIT_NEW"
cleanup_cgroups() {
        local c p
        for c in "$TOP"/*.service; do
                for p in $(cat "$c"/cgroup.procs 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        done
        sleep 0.2
        rmdir "$TOP"/*.service "$TOP" 2>/dev/null || true
}
trap 'kill ${FUSE_SERVER:-} 2>/dev/null || true; cleanup_cgroups; tuck_cleanup' EXIT

drop 1
printf '[Daemon]\nStalePolicy=report\n' >"$CONF"
check "merge v1" tuckctl merge

# ---- restart
spawn_ns w "echo \$\$ >$TOP/$UNIT_W/cgroup.procs && $STALE_SETUP"
spawn_ns keeper "$STALE_SETUP"
spawn_ns v "echo \$\$ >$TOP/$UNIT_V/cgroup.procs && $STALE_SETUP"
start_bus
"$FAKE_SYSTEMD" "$LOGS"/restarts "$W"/go >>"$LOGS"/fake-systemd.log 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do bctl status org.freedesktop.systemd1 >/dev/null 2>&1 && break; sleep 0.05; done
: >"$LOGS"/restarts
printf '[Daemon]\nStalePolicy=restart\nRestartUnits=%s %s %s\n' "$UNIT_W" "$UNIT_V" "$UNIT_NEW" >"$CONF"
drop 2
tuckctl refresh >"$LOGS"/refresh-restart.out 2>&1 &
refresh=$!
for ((i = 0; i < 400; i++)); do grep -q "RestartUnit $UNIT_W" "$LOGS"/restarts && break; sleep 0.05; done
check "the refresh is at W's restart" grep -q "RestartUnit $UNIT_W" "$LOGS"/restarts
V=$NS_PID_v
kill "$V"
wait "$V" 2>/dev/null || true
new=$(at_pid "$V" "$NS_PID_keeper" "$TOP/$UNIT_NEW")
pids+=($new)
expect_eq "a new process has V's pid" "$new" "$V"
touch "$W"/go
wait "$refresh" || true
diag "$(cat "$LOGS"/refresh-restart.out)"
diag "$(cat "$LOGS"/restarts)"
check "W's unit restarted" grep -qx "RestartUnit $UNIT_W replace" "$LOGS"/restarts
expect_eq "nothing else restarted" "$(grep -cvx "RestartUnit $UNIT_W replace" "$LOGS"/restarts)" 0
check "V: not restarted, its process is gone" \
        grep -q "unit $UNIT_V (pid $V, sleep) did not follow .*: not restarted: its process is gone$" "$LOGS"/refresh-restart.out
kill "$new" "$NS_PID_w" "$NS_PID_keeper" 2>/dev/null || true

# ---- heal
printf '[Daemon]\nStalePolicy=heal\n[Scan]\nNamespaceBudgetSec=60s\n' >"$CONF"
tuckctl refresh >/dev/null 2>&1 || true
mkdir -p "$W"/fuse-root
: >"$LOGS"/fuse.out
unshare --mount --propagation slave "$FUSE_HANG" --hold=inside --dir=usr --bind="$H" "$W"/fuse-root \
        >>"$LOGS"/fuse.out 2>&1 &
FUSE_SERVER=$!
pids+=($FUSE_SERVER)
for ((i = 0; i < 200; i++)); do grep -q '^ready ' "$LOGS"/fuse.out && break; sleep 0.05; done
W_PID=$(awk '/^ready / { print $2 }' "$LOGS"/fuse.out)
pids+=($W_PID)
check "W, a container on FUSE with the hierarchy bound in, is up" test -n "$W_PID"
spawn_ns keeper2 "$STALE_SETUP"
spawn_ns v2 "$STALE_SETUP"
V=$NS_PID_v2
V_INO=$(ns_ino "$V")
drop 3
tuckctl refresh >"$LOGS"/refresh-heal.out 2>&1 &
refresh=$!
for ((i = 0; i < 400; i++)); do grep -q '^hung LOOKUP' "$LOGS"/fuse.out && break; sleep 0.05; done
check "the refresh is healing W (waiting on its FUSE)" grep -q '^hung LOOKUP usr$' "$LOGS"/fuse.out
fill_below "$V_INO"
kill "$V"
wait "$V" 2>/dev/null || true
new=$(at_pid "$V" "$NS_PID_keeper2")
pids+=($new)
expect_eq "a new process has V's pid" "$new" "$V"
diag "V's namespace was $V_INO, the newcomer's is $(ns_ino "$new")"
check "the newcomer is behind (v2)" test "$(ns_read "$new" "$ROOT/$PROBE_REL")" = v2
kill -USR1 "$FUSE_SERVER"
wait "$refresh" || true
diag "$(cat "$LOGS"/refresh-heal.out)"
# Through /proc/PID/root (W has no binaries to run inside): its root, its mounts.
check "W healed: $(cat /proc/"$W_PID"/root/"$PROBE_REL")" grep -qx generation=v3 /proc/"$W_PID"/root/"$PROBE_REL"
check "the keeper healed" test "$(ns_read "$NS_PID_keeper2" "$ROOT/$PROBE_REL")" = v3
check "the newcomer at V's pid was not touched: $(ns_read "$new" "$ROOT/$PROBE_REL")" \
        test "$(ns_read "$new" "$ROOT/$PROBE_REL")" = v2
check "V: not healed, its process is gone" \
        grep -q "(pid $V, sleep) did not follow .*: not healed: its process is gone$" "$LOGS"/refresh-heal.out

tap_done
