#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The healing primitive (daemon/src/heal.c) on the layouts a host swap meets
# (tuckd-lib.sh spawn_layouts; measured on this kernel and, for systemd 252's
# own, in the VM):
#   plain:     a slave namespace, the control: follows
#   full:      a read-only bind on top of /usr (ProtectSystem= of a service
#              started before the first merge): stays behind
#   inplace:   the propagated copy remounted read-only in place (systemd
#              252's ProtectSystem=full|strict on a merged /usr): follows
#   nosuid:    the same with nosuid (DynamicUser=yes): follows, loosened
#   strict:    the whole root bind-mounted onto itself recursively and every
#              mount made read-only, nosuid, nodev, noexec in place: follows,
#              loosened
#   container: its own root (pivot_root) with a read-only bind of /usr:
#              stays behind
#   nested:    a service inside the container (a slave of its namespace):
#              stays behind with it, and follows when the container is healed
# Generations are read-only overlays named like tuck's (tuck-sysext), each
# its own st_dev, swapped in by tuckd-heal-tool exactly as tuck swaps:
# clone, beneath, umount.
#
# First without healing: what stays behind and what is loosened. Then with
# healing: every namespace follows, flags kept, over several swaps, with no
# base or missing-file observation by readers inside each namespace.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
G=$W/gens
mkdir -p "$G"/empty
for g in 1 2 3 4 5 6 7; do
        mkdir -p "$G/l$g"/lib/tuck-probe "$G/g$g"
        echo "generation=gen$g" >"$G/l$g"/lib/tuck-probe/generation
        mount -t overlay tuck-sysext -o "lowerdir=$G/l$g:$G/empty" "$G/g$g"
done
mount --make-private "$G"/g* 2>/dev/null || true

# Generation 1 on top of the base, read-only and nodev like tuck's overlays.
mount --bind "$G"/g1 "$H"
mount -o remount,bind,ro,nodev "$H"

spawn_layouts "$H"

probe_path() {
        echo "$([[ $1 == container || $1 == nested ]] && echo /usr || echo "$H")/lib/tuck-probe/generation"
}

view_of() {
        ns_read "$1" "$(probe_path "$2")"
}

expect_view() {
        local name=$1 want=$2 want_flags=$3 pid got flags
        pid=NS_PID_$name
        got=$(view_of "${!pid}" "$name")
        flags=$(ns_flags "${!pid}" "$H")
        if [[ $got == "$want" && $flags == "$want_flags" ]]; then
                ok "$name sees $got, flags $flags"
        else
                not_ok "$name sees $got (want $want), flags $flags (want $want_flags)"
        fi
}

layouts=(plain full inplace nosuid strict container nested)
declare -A flags_of=([plain]=ro,nodev [full]=ro,nosuid,nodev,noexec [inplace]=ro,nodev [nosuid]=ro,nosuid,nodev
                     [strict]=ro,nosuid,nodev,noexec [container]=ro,nodev [nested]=ro,nodev)
diag "layouts: $(for n in "${layouts[@]}"; do p=NS_PID_$n; printf '%s=%s ' "$n" "${!p}"; done)"
for n in "${layouts[@]}"; do
        expect_view $n gen1 "${flags_of[$n]}"
done

# ---- without healing: what a refresh leaves behind
"$HEAL_TOOL" swap "$ROOT" "$H" "$G"/g2 report >"$LOGS"/swap2.out
diag "$(cat "$LOGS"/swap2.out)"
check "host on gen2" test "$(marker)" = gen2
expect_view plain gen2 ro,nodev
expect_view full gen1 ro,nosuid,nodev,noexec            # stale forever
expect_view inplace gen2 ro,nodev                        # follows, nothing to lose
expect_view nosuid gen2 ro,nodev                         # follows, loosened (#9857)
expect_view strict gen2 ro,nodev                         # follows, loosened (#9857)
expect_view container gen1 ro,nodev                      # stale forever
expect_view nested gen1 ro,nodev                         # with its container
check "report names 5 namespaces" grep -q '^snapshot 7 namespaces, stale 5$' "$LOGS"/swap2.out
check "report: full needs a swap" grep -q "pid=$NS_PID_full .*action=swap .*result=reported" "$LOGS"/swap2.out
check "report: nested needs a swap" grep -q "pid=$NS_PID_nested .*action=swap .*result=reported" "$LOGS"/swap2.out
check "report: strict lost its flags" \
        grep -q "pid=$NS_PID_strict .*flags=ro,nodev action=restore-flags want=ro,nosuid,nodev,noexec result=reported" "$LOGS"/swap2.out
check "report: nosuid lost its flags" \
        grep -q "pid=$NS_PID_nosuid .*flags=ro,nodev action=restore-flags want=ro,nosuid,nodev result=reported" "$LOGS"/swap2.out

# ---- with healing, while readers in every namespace watch the marker
# strict's and nosuid's flags were lost above (report only): fresh ones.
kill "$NS_PID_strict" "$NS_PID_nosuid"
spawn_strict
spawn_ns nosuid "mount -o remount,bind,ro,nosuid,nodev $H"
expect_view strict gen2 ro,nosuid,nodev,noexec
expect_view nosuid gen2 ro,nosuid,nodev

for n in "${layouts[@]}"; do
        pid=NS_PID_$n
        start_probe "$n" "${!pid}" "$(probe_path $n)"
done
# And samplers of the flags from outside, to catch a transient loosening.
start_flag_sampler strict "$NS_PID_strict" "$H"
start_flag_sampler nosuid "$NS_PID_nosuid" "$H"
start_flag_sampler nested "$NS_PID_nested" "$H"
sleep 0.3

for g in 3 4 5 6; do
        "$HEAL_TOOL" swap "$ROOT" "$H" "$G/g$g" heal "$G"/g* >"$LOGS/swap$g.out"
        diag "$(cat "$LOGS/swap$g.out")"
        sleep 0.2
done
sleep 0.3
stop_probes
stop_flag_samplers

check "host on gen6" test "$(marker)" = gen6
for n in "${layouts[@]}"; do
        expect_view $n gen6 "${flags_of[$n]}"
done
check "every heal succeeded" bash -c "! grep -h '^stale' $LOGS/swap[3-6].out | grep -v 'result=healed'"

check_probes "${layouts[@]}"

check_never_loosened ro,nosuid,nodev,noexec strict
check_never_loosened ro,nosuid,nodev nosuid
check_never_loosened ro,nodev nested

# The stack does not grow: healing replaces, never accumulates.
for n in full strict nosuid container nested; do
        pid=NS_PID_$n
        mp=$([[ $n == container || $n == nested ]] && echo /usr || echo "$H")
        depth=$(nsenter -t "${!pid}" -m -r cat /proc/self/mountinfo | awk -v m="$mp" '$5 == m' | wc -l)
        diag "$n: $depth mounts at $mp after 4 healed swaps"
        check "$n: at most 3 mounts stacked at $mp" test "$depth" -le 3
done

# ---- a container whose /usr is a symlink (relative, to where it binds the
# hierarchy): the heal resolves it inside the container's root, and the old
# top must go by its fd, not by the name "usr" (a symlink: umount2() refused
# it, and the new tree stayed hidden beneath the old top, one more per swap).
c=$W/ctr-symlink
mkdir -p "$c"
spawn_ns symlinked "mount -t tmpfs ctr $c && mount --make-private $c \
        && mkdir -p $c/host-usr $c/old $c/proc $c/bin $c/lib $c/lib64 && ln -s host-usr $c/usr \
        && for d in bin lib lib64; do mount --rbind /usr/\$d $c/\$d; done \
        && mount --rbind $H $c/host-usr && mount -o remount,bind,ro,nodev $c/host-usr \
        && cd $c && pivot_root . old && mount -t proc proc /proc && umount -l /old && mount --make-rshared /"
check "symlinked: on gen6 before the swap" test "$(ns_read "$NS_PID_symlinked" /usr/lib/tuck-probe/generation)" = gen6

# ---- a namespace on a mount whose st_dev we count as ours, but which is no
# overlay of tuck's: what an old overlay's number looks like once the kernel
# has handed it to someone else's tmpfs. Never touched.
mkdir -p "$W"/other
mount -t tmpfs other "$W"/other
mkdir -p "$W"/other/lib/tuck-probe
echo generation=other >"$W"/other/lib/tuck-probe/generation
spawn_ns recycled "mount --bind $W/other $H"
"$HEAL_TOOL" swap "$ROOT" "$H" "$G"/g7 heal "$G"/g* "$W"/other >"$LOGS"/swap7.out
diag "$(cat "$LOGS"/swap7.out)"
check "host on gen7" test "$(marker)" = gen7
expect_view full gen7 ro,nosuid,nodev,noexec
check "the namespace on someone else's mount was left alone" test "$(ns_read "$NS_PID_recycled" "$H/lib/tuck-probe/generation")" = other
check "and not counted as stale" bash -c "! grep -q 'pid=$NS_PID_recycled ' '$LOGS'/swap7.out"
check "symlinked: healed onto gen7" test "$(ns_read "$NS_PID_symlinked" /usr/lib/tuck-probe/generation)" = gen7
check "symlinked: its heal succeeded" grep -q "pid=$NS_PID_symlinked .*result=healed" "$LOGS"/swap7.out
depth=$(nsenter -t "$NS_PID_symlinked" -m -r cat /proc/self/mountinfo | awk '$5 == "/host-usr"' | wc -l)
check "symlinked: one mount at /host-usr, nothing hidden beneath ($depth)" test "$depth" -eq 1

tap_done
