# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Sourced by tests/host/tuckd-*.sh. Each test re-executes itself in a private
# mount namespace with slave propagation (the host's mounts reach us, ours
# never reach the host), builds a host-like tree on a shared tmpfs, runs its
# own dbus-daemon with tuck's policy, and tuckd with --root= on that tree.
# Everything it mounts dies with the namespace; processes it starts are
# killed by pid on exit.
#
# Output is TAP. Environment from meson: TUCK_BUILD, TUCK_SRC.

set -euo pipefail

: "${TUCK_BUILD:?set by meson}" "${TUCK_SRC:?set by meson}"
TUCKD=$TUCK_BUILD/daemon/tuckd/tuckd
TUCKCTL=$TUCK_BUILD/daemon/tuckctl/tuckctl
TUCK_FAULT=$TUCK_BUILD/tests/lib/tuck-fault
HEAL_TOOL=$TUCK_BUILD/tests/host/tuckd-heal-tool
FAKE_SYSTEMD=$TUCK_BUILD/tests/host/tuckd-fake-systemd
DGRAM_SINK=$TUCK_SRC/tests/host/tuckd-dgram-sink.py
TUCK_PROBE=$TUCK_BUILD/tests/lib/tuck-probe
# The window probe's file (tests/lib/probe.c): "generation=LABEL", base "base".
PROBE_REL=usr/lib/tuck-probe/generation
POLICY=$TUCK_SRC/units/org.tuck1.conf

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

tuck_enter_ns() {
        enter_test_ns slave "$@"
}

# ---------------------------------------------------------------- cleanup
tuck_cleanup() {
        kill_pids
        # Mounts die with our namespace; the directory on the host's /tmp does not.
        if [[ -n ${W:-} ]]; then
                umount -R "$W" 2>/dev/null || umount -Rl "$W" 2>/dev/null || true
                rm -rf "$W"
        fi
}
trap tuck_cleanup EXIT

# ---------------------------------------------------------------- host-like tree
# $W: a shared tmpfs, the "host root" peer group services are slaves of.
# $ROOT: tuck's --root; $ROOT/usr the base /usr with an os-release.
tuck_setup_root() {
        W=$(mktemp -d /tmp/tuckd-test.XXXXXX)
        mount -t tmpfs -o mode=0755 tuck-host "$W"
        mount --make-shared "$W"
        ROOT=$W/root
        mkdir -p "$ROOT"/usr/lib/tuck-probe "$ROOT"/etc "$ROOT"/run "$ROOT"/var/lib \
                "$ROOT"/var/lib/extensions "$ROOT"/opt
        printf 'ID=debian\nVERSION_ID=12\n' >"$ROOT"/usr/lib/os-release
        echo generation=base >"$ROOT/$PROBE_REL"
        CONF=$W/tuck.conf
        : >"$CONF"
        # Our own /run: the fake journal socket goes to /run/systemd/journal.
        mount -t tmpfs -o mode=0755 tuck-run /run
        mkdir -p /run/systemd/journal
        LOGS=$W/logs
        mkdir -p "$LOGS"
}

# make_ext_dir DIR NAME VERSION LABEL: an extension tree (sysext) whose probe
# file says generation=LABEL.
make_ext_dir() {
        local d=$1 name=$2 version=$3 marker=$4
        mkdir -p "$d"/usr/lib/extension-release.d "$d"/usr/lib/tuck-probe
        printf 'ID=_any\nSYSEXT_VERSION_ID=%s\n' "$version" \
                >"$d"/usr/lib/extension-release.d/extension-release."$name"
        echo "generation=$marker" >"$d/$PROBE_REL"
}

# make_raw OUT NAME VERSION MARKER: the same as a squashfs image.
make_raw() {
        local out=$1 name=$2 version=$3 marker=$4 t
        t=$(mktemp -d "$W"/raw.XXXXXX)
        make_ext_dir "$t" "$name" "$version" "$marker"
        mksquashfs "$t" "$out" -quiet -noappend -no-progress -all-root >/dev/null
        rm -rf "$t"
}

# marker: the label the host sees now.
marker() {
        sed -n 's/^generation=//p' "$ROOT/$PROBE_REL" 2>/dev/null | grep . || echo missing
}

# ---------------------------------------------------------------- the bus
bus_starts=0
# start_bus [permissive]: our own system bus, with tuck's policy, or with a
# policy that lets every call through (to prove tuckd refuses by itself).
start_bus() {
        local mode=${1:-policy} n=$((++bus_starts)) extra=
        local conf=$W/bus-$n.conf sock=$W/bus/system_bus_socket-$n address=$W/bus/address-$n
        mkdir -p "$W"/bus
        chmod 0755 "$W" "$W"/bus
        if [[ $mode == permissive ]]; then
                extra='<policy context="default"><allow send_destination="org.tuck1"/></policy>'
        fi
        # The defaults mirror Debian's /usr/share/dbus-1/system.conf.
        cat >"$conf" <<-EOF
	<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
	 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
	<busconfig>
	  <type>system</type>
	  <listen>unix:path=$sock</listen>
	  <auth>EXTERNAL</auth>
	  <policy context="default">
	    <allow user="*"/>
	    <deny own="*"/>
	    <deny send_type="method_call"/>
	    <allow send_type="signal"/>
	    <allow send_requested_reply="true" send_type="method_return"/>
	    <allow send_requested_reply="true" send_type="error"/>
	    <allow receive_type="method_call"/>
	    <allow receive_type="method_return"/>
	    <allow receive_type="error"/>
	    <allow receive_type="signal"/>
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus"/>
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Introspectable"/>
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Properties"/>
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Peer"/>
	    <deny send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus" send_member="UpdateActivationEnvironment"/>
	  </policy>
	  <policy user="root">
	    <allow send_destination="org.freedesktop.DBus" send_interface="org.freedesktop.DBus.Monitoring"/>
	    <allow own="org.freedesktop.systemd1"/>
	    <allow send_destination="org.freedesktop.systemd1"/>
	  </policy>
	  <include>$POLICY</include>
	  $extra
	</busconfig>
	EOF
        rm -f "$sock" "$address"
        dbus-daemon --config-file="$conf" --nofork --nopidfile --print-address=1 \
                >"$address" 2>>"$LOGS"/dbus.log &
        pids+=($!)
        BUS_PID=$!
        local i
        for ((i = 0; i < 100; i++)); do
                [[ -s $address ]] && break
                sleep 0.05
        done
        BUS=$(head -n 1 "$address")
        export DBUS_SYSTEM_BUS_ADDRESS=$BUS
}

stop_bus() {
        kill "$BUS_PID" 2>/dev/null || true
        wait "$BUS_PID" 2>/dev/null || true
}

bctl() {
        busctl --address="$BUS" "$@"
}

# As nobody: an unprivileged caller on the same bus.
bctl_nobody() {
        setpriv --reuid=nobody --regid=nogroup --clear-groups -- busctl --address="$BUS" "$@"
}

call() {
        bctl call org.tuck1 /org/tuck1 org.tuck1.Manager "$@"
}

prop() {
        bctl get-property org.tuck1 /org/tuck1 org.tuck1.Manager "$@"
}

# ---------------------------------------------------------------- the journal
# A datagram sink on /run/systemd/journal/socket: every structured entry
# tuckd sends lands in $JOURNAL.
start_journal() {
        JOURNAL=$LOGS/journal
        : >"$JOURNAL"
        python3 "$DGRAM_SINK" /run/systemd/journal/socket "$JOURNAL" >"$LOGS"/journal-sink.out &
        pids+=($!)
        local i
        for ((i = 0; i < 100; i++)); do
                [[ -S /run/systemd/journal/socket ]] && return 0
                sleep 0.05
        done
        echo "journal sink did not start" >&2
        return 1
}

# in_journal GREP-OPTIONS... PATTERN: grep the journal for an entry tuckd sent
# just now, giving the sink (which writes asynchronously) up to 5 s.
in_journal() {
        local i
        for ((i = 0; i < 100; i++)); do
                grep "$@" "$JOURNAL" && return 0
                sleep 0.05
        done
        return 1
}

# journal_count MESSAGE_ID: entries with that id.
journal_count() {
        grep -c "^MESSAGE_ID=$1\$" "$JOURNAL" || true
}

# ---------------------------------------------------------------- tuckd
# start_tuckd [ARGS...]: runs tuckd with NOTIFY_SOCKET, waits for READY=1
# and for its bus name. TUCKD_WRAP (an array) goes in front of it, e.g.
# tuck-fault with the system calls tuckd.service's sandbox refuses.
TUCKD_WRAP=()
# What tuckd.service's RestrictSUIDSGID= does to tuckd: every openat2() fails
# with ENOSYS (systemd's seccomp filter cannot see its mode argument).
TUCKD_AS_UNIT=("$TUCK_FAULT" --fail=openat2:ENOSYS --)
start_tuckd() {
        NOTIFY=$LOGS/notify
        local sock=$W/notify-$RANDOM.sock i
        : >"$NOTIFY"
        # WATCHDOG_USEC set: tuckd sees it as under WatchdogSec=, and the sink keeps the time.
        python3 "$DGRAM_SINK" ${WATCHDOG_USEC:+--watchdog=$WATCHDOG_USEC} "$sock" "$NOTIFY" >/dev/null &
        pids+=($!)
        for ((i = 0; i < 100; i++)); do
                [[ -S $sock ]] && break
                sleep 0.05
        done
        NOTIFY_SOCKET=$sock "${TUCKD_WRAP[@]}" "$TUCKD" --root="$ROOT" --config="$CONF" "$@" >>"$LOGS"/tuckd.log 2>&1 &
        TUCKD_PID=$!
        pids+=($TUCKD_PID)
        for ((i = 0; i < 200; i++)); do
                if grep -q '^READY=1$' "$NOTIFY" && bctl status org.tuck1 >/dev/null 2>&1; then
                        return 0
                fi
                if ! kill -0 "$TUCKD_PID" 2>/dev/null; then
                        echo "tuckd exited before READY=1:" >&2
                        tail -n 20 "$LOGS"/tuckd.log >&2
                        return 1
                fi
                sleep 0.05
        done
        echo "tuckd did not become ready" >&2
        return 1
}

stop_tuckd() {
        kill "$TUCKD_PID" 2>/dev/null || true
        wait "$TUCKD_PID" 2>/dev/null || true
}

# ---------------------------------------------------------------- namespaces
# The layouts a host swap meets (tuckd(8) HEALING), around hierarchy $1:
#   NS_PID_plain      a plain slave service: follows by propagation;
#   NS_PID_full       a read-only bind on top (what ProtectSystem= makes when
#                     the hierarchy is not a mount point yet as the service
#                     starts: started before the first merge): stays behind;
#   NS_PID_inplace    the propagated copy remounted read-only in place (what
#                     systemd 252's ProtectSystem=full|strict makes of a
#                     hierarchy that is a mount point, as a merged /usr is:
#                     seen in the VM): follows by propagation;
#   NS_PID_nosuid     the same with nosuid added (DynamicUser=yes: systemd
#                     mounts the namespace nosuid under NoNewPrivileges=):
#                     follows, but with the host's flags: loosened unless pinned;
#   NS_PID_strict     root rbind onto itself, every mount remounted read-only,
#                     nosuid, nodev, noexec in place: likewise loosened;
#   NS_PID_container  own root via pivot_root, a read-only bind of the
#                     hierarchy at /usr (nspawn --bind-ro=/usr): stays behind,
#                     tuck-probe bound in at /tuck-probe;
#   NS_PID_nested     a service inside that container (a slave of its
#                     namespace, /usr remounted read-only in place): follows
#                     the container, so stays behind with it.
# $2: shell run first in the full service (e.g. to join a cgroup).
spawn_layouts() {
        local h=$1 full_pre=${2:-true}
        spawn_ns plain "true"
        spawn_ns full "$full_pre && mount --bind $h $h && mount -o remount,bind,ro,nosuid,nodev,noexec $h"
        spawn_ns inplace "mount -o remount,bind,ro,nodev $h"
        spawn_ns nosuid "mount -o remount,bind,ro,nosuid,nodev $h"
        spawn_strict
        spawn_container container "$h" "$W"/ctr
        spawn_nested nested container
}

spawn_strict() {
        spawn_ns strict "mount --rbind / / && for m in \$(findmnt -rn -o TARGET -R $W); do \
                mount -o remount,bind,ro,nosuid,nodev,noexec \$m; done"
}

# spawn_nested NAME CONTAINER: a slave namespace of CONTAINER's (as a
# service inside a booted container is), its /usr remounted read-only in
# place. Sets NS_PID_<NAME>.
spawn_nested() {
        local name=$1 ctr=NS_PID_$2 log=$LOGS/ns-$1.log
        : >"$log"
        nsenter -t "${!ctr}" -m -r unshare --mount --propagation slave \
                sh -c "mount -o remount,bind,ro,nodev /usr && echo ns-ready && exec sleep 100000" >>"$log" 2>&1 &
        ns_await_ready "$name" $! "$log"
}

# ---------------------------------------------------------------- window probes
# start_probe NAME PID PATH: tuck-probe reading PATH in PID's namespace (and
# root) until stop_probes; the container layouts bind it in at /tuck-probe.
probe_pids=()
start_probe() {
        local name=$1 pid=$2 path=$3 bin=$TUCK_PROBE
        nsenter -t "$pid" -m -r test -x /tuck-probe 2>/dev/null && bin=/tuck-probe
        # At nice 19, as the VM's probes read: a reader at full priority
        # takes a core from tuckd on this 2-core machine and slows every
        # swap it watches, without making a window any likelier to be seen.
        nice -n 19 nsenter -t "$pid" -m -r "$bin" -t "$name" "$path" >"$LOGS/probe-$name.json" 2>"$LOGS/probe-$name.err" &
        pids+=($!)
        probe_pids+=($!)
}

stop_probes() {
        kill -TERM "${probe_pids[@]}" 2>/dev/null || true
        wait "${probe_pids[@]}" 2>/dev/null || true
        probe_pids=()
}

# check_probes NAME...: one TAP line per probe: it read, and never saw the
# base, a missing file, an error or garbage.
check_probes() {
        local n reads exposures other
        for n in "$@"; do
                reads=$(probe_result "$n" reads)
                exposures=$(probe_result "$n" exposures)
                other=$(($(probe_result "$n" errors) + $(probe_result "$n" garbage)))
                diag "$n: $reads reads, $exposures base or missing, $other other, seen: $(probe_result "$n" labels)"
                check "$n: no base or missing file in $reads reads" \
                        test "$reads" -gt 0 -a "$exposures" -eq 0 -a "$other" -eq 0
        done
}

# start_flag_sampler NAME PID HIERARCHY: PID's view of the hierarchy sampled
# from outside until stop_flag_samplers; check_never_loosened FLAGS NAME then
# checks every sample.
sampler_pids=()
start_flag_sampler() {
        ( while :; do "$HEAL_TOOL" view "$2" "$ROOT" "$3" || true; done ) >"$LOGS/flag-samples-$1" 2>&1 &
        pids+=($!)
        sampler_pids+=($!)
}

stop_flag_samplers() {
        kill "${sampler_pids[@]}" 2>/dev/null || true
        wait "${sampler_pids[@]}" 2>/dev/null || true
        sampler_pids=()
}

check_never_loosened() {
        local samples loose f=$LOGS/flag-samples-$2
        samples=$(grep -c ' flags=' "$f" || true)
        loose=$(grep ' flags=' "$f" | grep -vc " flags=$1 " || true)
        diag "$2: $samples flag samples, $loose loosened"
        check "$2: never loosened in $samples samples" test "$samples" -gt 0 -a "$loose" -eq 0
}

# probe_result NAME FIELD: reads, exposures (base + missing), base, missing,
# or labels (the generations seen, space separated).
probe_result() {
        python3 -c '
import json, sys
d = json.loads(open(sys.argv[1]).read().strip().splitlines()[-1])
f = d["files"][0]
field = sys.argv[2]
if field == "labels":
    print(" ".join(sorted(f["labels"])))
elif field == "exposures":
    print(f["base"] + f["missing"])
else:
    print(f[field])' "$LOGS/probe-$1.json" "$2"
}

# ns_flags PID PATH: the top mount's per-mount flags at PATH in that namespace.
ns_flags() {
        "$HEAL_TOOL" view "$1" "$ROOT" "$2" | sed -n 's/.* flags=\([^ ]*\).*/\1/p'
}
