#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The scan after a swap takes over a namespace's pidfd and root from the scan
# before it (NsFollowers, nsscan.h) only while that root is still the
# process's root: a process that changes its root between the two scans
# (chroot(), pivot_root(), setns()) is read again from scratch, never
# through the root it had. tuckd-heal-tool's handover verb runs the two
# scans of /usr with a pause between them; meanwhile "mover" binds / (not
# recursively: /usr of this test is not in it) and chroots there. "plain"
# follows throughout.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

H=$ROOT/usr
G=$W/gens
mkdir -p "$G"/l1/lib/tuck-probe "$G"/empty "$G"/g1
echo generation=gen1 >"$G"/l1/lib/tuck-probe/generation
mount -t overlay tuck-sysext -o "lowerdir=$G/l1:$G/empty" "$G"/g1
mount --bind "$G"/g1 "$H"
mount -o remount,bind,ro,nodev "$H"

spawn_ns plain true
mkfifo "$W"/go "$W"/tool-in
NR=$W/newroot
mkdir -p "$NR"
unshare --mount --propagation slave sh -c \
        "echo ns-ready; read x <$W/go; mount --bind / $NR && exec chroot $NR sleep 100000" \
        >"$LOGS"/ns-mover.log 2>&1 &
ns_await_ready mover $! "$LOGS"/ns-mover.log

# scan_line N: "following,known" of the Nth scan's debug line.
scan_line() {
        sed -n 's|^debug: .*/usr: [0-9]* processes, [0-9]* namespaces, \([0-9]*\) following, [0-9]* kept, \([0-9]*\) known from the scan before,.*|\1,\2|p' \
                "$LOGS"/handover.err | sed -n "$1p"
}

"$HEAL_TOOL" handover "$ROOT" "$H" <"$W"/tool-in >"$LOGS"/handover.out 2>"$LOGS"/handover.err &
tool=$!
exec 3>"$W"/tool-in
for ((i = 0; i < 100; i++)); do
        grep -q '^first done$' "$LOGS"/handover.out && break
        sleep 0.1
done
check "the first scan is done" grep -q '^first done$' "$LOGS"/handover.out
expect_eq "it found both following" "$(scan_line 1)" "2,0"

echo go >"$W"/go
for ((i = 0; i < 100; i++)); do
        [[ $(readlink "/proc/$NS_PID_mover/root") == "$NR" ]] && break
        sleep 0.1
done
expect_eq "mover's root is another now" "$(readlink "/proc/$NS_PID_mover/root")" "$NR"

echo next >&3
exec 3>&-
rc=0
wait "$tool" || rc=$?
expect_eq "the second scan ran" "$rc" 0
expect_eq "only plain was taken over and follows; mover was read again, through its new root" \
        "$(scan_line 2)" "1,1"
tap_done
