#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The healing primitive (daemon/src/heal.c) on the three layouts that do not
# follow a host swap, measured on this kernel (see tuckd(8) HEALING):
#   full:      a read-only bind on top of /usr (ProtectSystem=full)
#   strict:    the whole root bind-mounted onto itself recursively and every
#              mount made read-only in place (ProtectSystem=strict)
#   container: its own root (pivot_root) with a read-only bind of /usr
# plus a plain slave namespace as the control. Generations are separate
# tmpfs mounts (each its own st_dev, like each overlay), swapped in by
# tuckd-heal-tool exactly as tuck swaps: clone, beneath, umount.
#
# First without healing: full and container stay on generation 1 (stale),
# strict follows but loses its read-only flag. Then with healing: every
# namespace follows, flags kept, over several swaps, with no base or
# missing-file observation by readers inside each namespace.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
G=$W/gens
mkdir -p "$G"
for g in 1 2 3 4 5 6; do
        mkdir -p "$G/g$g"
        mount -t tmpfs "gen$g" "$G/g$g"
        mkdir -p "$G/g$g"/lib/tuck-probe
        echo "generation=gen$g" >"$G/g$g"/lib/tuck-probe/generation
done
mount --make-private "$G"/g* 2>/dev/null || true

# Generation 1 on top of the base, read-only and nodev like tuck's overlays.
mount --bind "$G"/g1 "$H"
mount -o remount,bind,ro,nodev "$H"

spawn_layouts "$H"

probe_path() {
        echo "$([[ $1 == container ]] && echo /usr || echo "$H")/lib/tuck-probe/generation"
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

diag "$(printf 'layouts: plain=%s full=%s strict=%s container=%s' \
        "$NS_PID_plain" "$NS_PID_full" "$NS_PID_strict" "$NS_PID_container")"
for n in plain full strict container; do
        expect_view $n gen1 "$( [[ $n == full || $n == strict ]] && echo ro,nosuid,nodev,noexec || echo ro,nodev)"
done

# ---- without healing: what a refresh leaves behind
"$HEAL_TOOL" swap "$ROOT" "$H" "$G"/g2 report >"$LOGS"/swap2.out
diag "$(cat "$LOGS"/swap2.out)"
check "host on gen2" test "$(marker)" = gen2
expect_view plain gen2 ro,nodev
expect_view full gen1 ro,nosuid,nodev,noexec            # stale forever
expect_view strict gen2 ro,nodev                         # follows, loosened (#9857)
expect_view container gen1 ro,nodev                      # stale forever
check "report names 3 namespaces" grep -q '^snapshot 4 namespaces, stale 3$' "$LOGS"/swap2.out
check "report: full needs a swap" grep -q "pid=$NS_PID_full .*action=swap .*result=reported" "$LOGS"/swap2.out
check "report: strict lost its flags" \
        grep -q "pid=$NS_PID_strict .*flags=ro,nodev action=restore-flags want=ro,nosuid,nodev,noexec result=reported" "$LOGS"/swap2.out

# ---- with healing, while readers in every namespace watch the marker
# strict's flags were lost above (report only): start a fresh strict service.
kill "$NS_PID_strict"
spawn_strict
expect_view strict gen2 ro,nosuid,nodev,noexec

for n in plain full strict container; do
        pid=NS_PID_$n
        start_probe "$n" "${!pid}" "$(probe_path $n)"
done
# And one that samples strict's flags from outside, to catch a transient loosening.
start_flag_sampler "$NS_PID_strict" "$H"
sleep 0.3

for g in 3 4 5 6; do
        "$HEAL_TOOL" swap "$ROOT" "$H" "$G/g$g" heal "$G"/g* >"$LOGS/swap$g.out"
        diag "$(cat "$LOGS/swap$g.out")"
        sleep 0.2
done
sleep 0.3
stop_probes
stop_flag_sampler

check "host on gen6" test "$(marker)" = gen6
expect_view plain gen6 ro,nodev
expect_view full gen6 ro,nosuid,nodev,noexec
expect_view strict gen6 ro,nosuid,nodev,noexec
expect_view container gen6 ro,nodev
check "every heal succeeded" bash -c "! grep -h '^stale' $LOGS/swap[3-6].out | grep -v 'result=healed'"

check_probes plain full strict container

check_never_loosened ro,nosuid,nodev,noexec strict

# The stack does not grow: healing replaces, never accumulates.
for n in full strict container; do
        pid=NS_PID_$n
        mp=$([[ $n == container ]] && echo /usr || echo "$H")
        depth=$(nsenter -t "${!pid}" -m -r cat /proc/self/mountinfo | awk -v m="$mp" '$5 == m' | wc -l)
        diag "$n: $depth mounts at $mp after 4 healed swaps"
        check "$n: at most 3 mounts stacked at $mp" test "$depth" -le 3
done

tap_done
