#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Someone else's namespaces cannot stop tuckd. Next to two namespaces a
# refresh must heal (a ProtectSystem=full-like service and a container),
# hostile ones, each with its own bind of /usr so it stays behind and must
# be looked at closely:
#   - wide1, wide2: 20,000 more bind mounts each (MaxMounts= is 10,000);
#   - fuse: a container whose root is a FUSE file system that stops
#     answering (tuck-fuse-hang): any lookup below it waits forever;
#   - stacked: 3,000 binds stacked on one directory (mountinfo of a stack
#     is quadratic to read: the k-th line's path walks k mounts).
# tuckd runs as under its unit (openat2() refused: every walk by hand, in a
# worker) with a 6 s watchdog kept by the notify sink the way systemd keeps
# it, and an unprivileged caller asks for Status in a loop all along. The
# refresh completes, heals the two, reports the hostile ones unreadable and
# why; the watchdog never expires; Status is made again at most every 5 s
# whatever the loop does; a second refresh does not walk into the FUSE
# again (one stuck worker, not one per refresh). Then tuckctl, with a 2 ms
# budget per namespace, reports the stacked one as too slow to read.

. "$(dirname "$0")"/tuckd-lib.sh
. "$(dirname "$0")"/heal-layouts.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
FUSE_HANG=$TUCK_BUILD/tests/host/tuck-fuse-hang
export WATCHDOG_USEC=6000000

# $W/mounts.py MODE DIR N: about N bind mounts in DIR (a tmpfs of its own):
# "wide", N/8 directories in DIR/a each bound onto itself, then DIR/a bound
# recursively at DIR/b1..b7 (one mount(2) per mount gets slower with every
# mount there is: 20,000 would take a minute); "stacked", DIR/d bound onto
# itself N times.
cat >"$W"/mounts.py <<'PY'
import ctypes, os, sys
mode, d, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
libc = ctypes.CDLL(None, use_errno=True)
def bind(src, dst, flags=4096):  # MS_BIND
    if libc.mount(src.encode(), dst.encode(), None, flags, None) != 0:
        sys.exit("mount %s: %s" % (dst, os.strerror(ctypes.get_errno())))
if mode == "wide":
    os.mkdir(d + "/a")
    for i in range(n // 8):
        p = "%s/a/%d" % (d, i)
        os.mkdir(p)
        bind(p, p)
    for i in range(1, 8):
        os.mkdir("%s/b%d" % (d, i))
        bind(d + "/a", "%s/b%d" % (d, i), 4096 | 16384)  # MS_BIND | MS_REC
else:
    os.mkdir(d + "/d")
    for i in range(n):
        bind(d + "/d", d + "/d")
PY

printf '[Daemon]\nWatch=no\nStalePolicy=heal\n' >"$CONF"
drop 1
start_journal
start_bus
TUCKD_WRAP=("${TUCKD_AS_UNIT[@]}")
start_tuckd --debug
check "generation 1 merged at start" test "$(marker)" = v1

# ---- the namespaces
spawn_ns full "mount --bind $H $H && mount -o remount,bind,ro,nosuid,nodev,noexec $H"
spawn_container container "$H" "$W"/ctr
for n in wide1 wide2 stacked; do
        mkdir -p "$W/$n"
        [[ $n == stacked ]] && mode=stacked count=3000 || mode=wide count=20000
        : >"$LOGS/ns-$n.log"
        unshare --mount --propagation slave sh -c "set -e
                mount --bind $H $H && mount -o remount,bind,ro,nodev $H
                mount -t tmpfs $n $W/$n && mount --make-private $W/$n
                python3 $W/mounts.py $mode $W/$n $count
                echo ns-ready && exec sleep 100000" >>"$LOGS/ns-$n.log" 2>&1 &
        pid=$!
        for ((i = 0; i < 1200; i++)); do
                grep -q '^ns-ready$' "$LOGS/ns-$n.log" && break
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.05
        done
        ns_await_ready "$n" "$pid" "$LOGS/ns-$n.log"
        pid=NS_PID_$n
        diag "$n: $(wc -l <"/proc/${!pid}/mountinfo") mounts"
done
mkdir -p "$W"/fuse-root
: >"$LOGS"/fuse.out
unshare --mount --propagation slave "$FUSE_HANG" "$W"/fuse-root >>"$LOGS"/fuse.out 2>&1 &
FUSE_SERVER=$!
pids+=($FUSE_SERVER)
for ((i = 0; i < 200; i++)); do
        grep -q '^ready ' "$LOGS"/fuse.out && break
        sleep 0.05
done
NS_PID_fuse=$(awk '/^ready / { print $2 }' "$LOGS"/fuse.out)
pids+=($NS_PID_fuse)
check "the FUSE container is up (pid $NS_PID_fuse)" test -n "$NS_PID_fuse"
# The server's death aborts the connection: the stuck walker wakes, and everything can be reaped.
trap 'kill $FUSE_SERVER 2>/dev/null || true; tuck_cleanup' EXIT

# ---- an unprivileged caller asks for Status all along
: >"$LOGS"/status-calls
( while :; do
        bctl_nobody call org.tuck1 /org/tuck1 org.tuck1.Manager Status >/dev/null 2>&1 && echo ok >>"$LOGS"/status-calls
done ) &
STATUS_LOOP=$!
pids+=($STATUS_LOOP)
sleep 1

# ---- the refresh
scans_before=$(grep -c 'Status made again' "$LOGS"/tuckd.log || true)
drop 2
start=$(date +%s.%N)
out=$(timeout 120 busctl --address="$BUS" call org.tuck1 /org/tuck1 org.tuck1.Manager Refresh t 0 2>&1) || true
elapsed=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }')
diag "Refresh took $elapsed s: $out"
check "the refresh completes: $out" test "$out" = "b true"
check "host sees v2" test "$(marker)" = v2
sleep 1
kill "$STATUS_LOOP" 2>/dev/null || true
wait "$STATUS_LOOP" 2>/dev/null || true
calls=$(wc -l <"$LOGS"/status-calls)
loop_s=$(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%d", e - s + 2 }')
scans=$(($(grep -c 'Status made again' "$LOGS"/tuckd.log || true) - scans_before))
diag "$calls unprivileged Status calls answered meanwhile, $scans of them made again"
check "Status was asked for all along ($calls calls)" test "$calls" -gt 3
check "Status made again at most once per 5 s and verb ($scans in ~$loop_s s, $calls calls)" \
        test "$scans" -le $((loop_s / 5 + 2))

check "full healed onto v2" test "$(view full)" = v2
check "container healed onto v2" test "$(view container)" = v2
in_outcome() {
        in_journal -q "^TUCK_PID=$1\$" && awk -v pid="TUCK_PID=$1" -v want="$2" '
                $0 == "--" { if (p && index(o, want)) found = 1; p = 0; o = ""; next }
                $0 == pid { p = 1 }
                /^TUCK_OUTCOME=/ { o = $0 }
                END { exit !found }' "$JOURNAL"
}
for n in wide1 wide2; do
        pid=NS_PID_$n
        check "$n reported: more than 10000 mounts" \
                in_outcome "${!pid}" "cannot read its view: its mount table has more than 10000 mounts: not read"
        check "$n still on v1, untouched" test "$(ns_read "${!pid}" "$ROOT/$PROBE_REL")" = v1
done
# (The Status loop may have been first to walk into it.)
check "fuse reported: did not answer" in_outcome "$NS_PID_fuse" "cannot read its view: did not answer"
asked=$(grep -cE '^(hung|held) LOOKUP' "$LOGS"/fuse.out || true)
check "the FUSE server was asked once ($asked)" test "$asked" -eq 1
diag "$(grep -E '^MESSAGE=.*(cannot read|healed)' "$JOURNAL" | sed 's/^MESSAGE=//')"
check "the watchdog never expired" bash -c "! grep -q '^WATCHDOG=EXPIRED$' '$NOTIFY'"
check "the watchdog was fed ($(grep -c '^WATCHDOG=1$' "$NOTIFY") pings)" grep -q '^WATCHDOG=1$' "$NOTIFY"

# ---- again: the stuck namespace is not walked into a second time
drop 3
out=$(timeout 120 busctl --address="$BUS" call org.tuck1 /org/tuck1 org.tuck1.Manager Refresh t 0 2>&1) || true
check "a second refresh completes: $out" test "$out" = "b true"
check "fuse reported: still waiting" in_outcome "$NS_PID_fuse" "did not answer: a scan of it since"
asked=$(grep -cE '^(hung|held) LOOKUP' "$LOGS"/fuse.out || true)
check "... and not asked again ($asked)" test "$asked" -eq 1
stuck=$(ps -o stat= --ppid "$TUCKD_PID" | grep -c '^D' || true)
check "one stuck worker, not one per refresh ($stuck)" test "$stuck" -eq 1
check "full and container on v3" test "$(view full)/$(view container)" = v3/v3
check "the watchdog never expired" bash -c "! grep -q '^WATCHDOG=EXPIRED$' '$NOTIFY'"

# ---- a mount table too slow to read: a budget of 2 ms per namespace
printf '[Daemon]\nStalePolicy=report\n[Scan]\nNamespaceBudgetSec=2ms\nMaxMounts=100000\n' >"$W"/tight.conf
drop 4
# tuckctl itself, not through tuckd (which has its own configuration).
env -u DBUS_SYSTEM_BUS_ADDRESS "$TUCKCTL" --root="$ROOT" --config="$W"/tight.conf refresh >"$LOGS"/tight.out 2>&1 || true
diag "$(cat "$LOGS"/tight.out)"
check "stacked: its mount table could not be read within 2 ms" \
        grep -q "(pid $NS_PID_stacked, sleep) did not follow .*: cannot read its view: its mount table could not be read within 2 ms: not read" \
        "$LOGS"/tight.out
check "full: read, reported" grep -q "(pid $NS_PID_full, sleep) did not follow (swap.*: reported$" "$LOGS"/tight.out

# ---- a worker stuck during a refresh holds nothing of the refresh's: not its lock
mkdir -p "$W"/fuse-root2
: >"$LOGS"/fuse2.out
unshare --mount --propagation slave "$FUSE_HANG" "$W"/fuse-root2 >>"$LOGS"/fuse2.out 2>&1 &
FUSE_SERVER2=$!
pids+=($FUSE_SERVER2)
for ((i = 0; i < 200; i++)); do grep -q '^ready ' "$LOGS"/fuse2.out && break; sleep 0.05; done
pids+=($(awk '/^ready / { print $2 }' "$LOGS"/fuse2.out))
trap 'kill $FUSE_SERVER $FUSE_SERVER2 2>/dev/null || true; tuck_cleanup' EXIT
printf '[Daemon]\nStalePolicy=report\n' >"$W"/plain.conf
drop 5
env -u DBUS_SYSTEM_BUS_ADDRESS "$TUCKCTL" --root="$ROOT" --config="$W"/plain.conf refresh >"$LOGS"/stuck.out 2>&1 || true
check "tuckctl's own worker got stuck in the new FUSE" grep -q '^hung LOOKUP usr$' "$LOGS"/fuse2.out
rc=0
env -u DBUS_SYSTEM_BUS_ADDRESS "$TUCKCTL" --root="$ROOT" --config="$W"/plain.conf --no-block refresh \
        >"$LOGS"/after-stuck.out 2>&1 || rc=$?
diag "$(cat "$LOGS"/after-stuck.out)"
check "the lock is free while it waits (exit status $rc)" bash -c "! grep -qi 'busy\|lock' '$LOGS/after-stuck.out'"
kill "$FUSE_SERVER2"
wait "$FUSE_SERVER2" 2>/dev/null || true

# The FUSE server goes: the connection aborts, the stuck worker wakes and is reaped.
kill "$FUSE_SERVER"
wait "$FUSE_SERVER" 2>/dev/null || true
drop 6
out=$(timeout 120 busctl --address="$BUS" call org.tuck1 /org/tuck1 org.tuck1.Manager Refresh t 0 2>&1) || true
check "a refresh after the server went completes: $out" test "$out" = "b true"
stuck=$(ps -o stat= --ppid "$TUCKD_PID" | grep -c '^[DZ]' || true)
check "no worker left behind ($stuck)" test "$stuck" -eq 0

tap_done
