# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What every host test needs, sourced by lib.sh (tuckctl's tests),
# tuckd-lib.sh (tuckd's) and tuckd-units.sh: TAP output, a mount namespace of
# its own, long-running processes in namespaces built by a shell snippet (a
# service, a ProtectSystem= sandbox, a container), and reading a file the way
# such a namespace sees it. bash, set -euo pipefail.

# ---------------------------------------------------------------- TAP
TAP_N=0
TAP_FAILED=0

# A TAP line is one line: a description that quotes command output is folded.
ok() {
        local d=$*
        TAP_N=$((TAP_N + 1))
        echo "ok $TAP_N - ${d//$'\n'/ / }"
}

not_ok() {
        local d=$*
        TAP_N=$((TAP_N + 1))
        TAP_FAILED=$((TAP_FAILED + 1))
        echo "not ok $TAP_N - ${d//$'\n'/ / }"
}

# check DESCRIPTION CMD...: one TAP line for whether CMD succeeds. CMD runs in
# this shell (it may set variables or wait for our children); what it prints
# goes to stderr, which is not TAP.
check() {
        local what=$1
        shift
        if "$@" >&2; then ok "$what"; else not_ok "$what"; fi
}

# expect_eq DESCRIPTION GOT WANT
expect_eq() {
        if [[ $2 == "$3" ]]; then ok "$1"; else not_ok "$1 (got '$2', want '$3')"; fi
}

diag() {
        sed 's/^/# /' <<<"$*"
}

tap_done() {
        echo "1..$TAP_N"
        ((TAP_FAILED == 0))
}

# ---------------------------------------------------------------- sizes
# stress_size CI SOAK: how many kills, refreshes or rounds a stress test
# runs. CI's size by default; with TUCK_SOAK=1, the soak's (a long run on a
# machine of its own, README.md "Tests"). Every check holds at either size, and
# the seeds are random, so CI's runs add up. A test's own variable
# (TUCKD_CRASH_RUNS, ...) overrides both.
stress_size() {
        if [[ ${TUCK_SOAK:-0} == 1 ]]; then echo "$2"; else echo "$1"; fi
}

# ---------------------------------------------------------------- the test's namespace
# enter_test_ns private|slave "$@": re-run this script as root in a new mount
# namespace, so nothing it mounts reaches the machine. "private" also keeps
# the machine's mounts out (tests that compare mount tables byte for byte);
# "slave" lets them in. And in a new PID namespace with its own /proc: tuck
# scans every process's mount namespace to find those a refresh left behind
# (and heals them), and must see this test's processes only, never another
# test's running beside it, nor anything else on the machine. Whatever the
# test leaves running dies with it.
enter_test_ns() {
        local propagation=$1
        shift
        [[ ${TUCK_TEST_IN_NS:-} == 1 ]] && return 0
        if ((EUID != 0)); then
                echo "Bail out! host tests need root (mount namespaces, loop devices)"
                exit 1
        fi
        export TUCK_TEST_IN_NS=1
        exec unshare --mount --propagation "$propagation" --pid --fork --kill-child --mount-proc -- "$BASH" "$0" "$@"
}

# ---------------------------------------------------------------- processes in namespaces
# Everything started in the background that must die with the test.
pids=()

kill_pids() {
        local p
        for p in "${pids[@]}"; do
                kill "$p" 2>/dev/null || true
        done
        for p in "${pids[@]}"; do
                wait "$p" 2>/dev/null || true
        done
        pids=()
}

# spawn_ns NAME SETUP: a long-running process in a new mount namespace (a
# slave of ours, as systemd starts services) after running SETUP (sh) in it.
# Sets NS_PID_<NAME>; its output goes to $LOGS/ns-NAME.log.
spawn_ns() {
        local name=$1 setup=$2 log=$LOGS/ns-$1.log
        : >"$log"
        # Ready is a line on stdout: after pivot_root there is no shared file to touch.
        unshare --mount --propagation slave sh -c "$setup && echo ns-ready && exec sleep 100000" \
                >>"$log" 2>&1 &
        ns_await_ready "$name" $! "$log"
}

# ns_await_ready NAME PID LOG: PID (started in the background, its output in
# LOG) runs in the namespace NAME once it printed "ns-ready". Sets
# NS_PID_<NAME>; fails with LOG shown if it never does.
ns_await_ready() {
        local name=$1 pid=$2 log=$3 i
        pids+=("$pid")
        printf -v "NS_PID_$name" '%s' "$pid"
        for ((i = 0; i < 200; i++)); do
                grep -q '^ns-ready$' "$log" && return 0
                kill -0 "$pid" 2>/dev/null || break
                sleep 0.05
        done
        echo "namespace $name did not come up:" >&2
        cat "$log" >&2
        return 1
}

# spawn_container NAME HIERARCHY DIR: a container-like namespace: its own root
# (a tmpfs on DIR, pivot_root), HIERARCHY bound read-only at /usr, the host's
# /usr/bin, /usr/lib, /usr/lib64 at /bin, /lib, /lib64 for a shell, and
# tuck-probe at /tuck-probe; its mounts shared, as systemd-nspawn makes them
# (a service inside is a slave of them). PRE (optional 4th) runs first.
spawn_container() {
        local name=$1 h=$2 c=$3 pre=${4:-true}
        mkdir -p "$c"
        spawn_ns "$name" "$pre && mount -t tmpfs ctr $c && mount --make-private $c \
                && mkdir -p $c/usr $c/old $c/proc $c/bin $c/lib $c/lib64 && touch $c/tuck-probe \
                && mount --bind $TUCK_PROBE $c/tuck-probe \
                && for d in bin lib lib64; do mount --rbind /usr/\$d $c/\$d; done \
                && mount --rbind $h $c/usr && mount -o remount,bind,ro,nodev $c/usr \
                && cd $c && pivot_root . old && mount -t proc proc /proc && umount -l /old \
                && mount --make-rshared /"
}

# ns_read PID PATH: the label of a probe file ("generation=LABEL") as PID's
# namespace and root see it, or "missing".
ns_read() {
        { nsenter -t "$1" -m -r cat "$2" 2>/dev/null || echo missing; } | sed 's/^generation=//'
}
