#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The scan after a swap takes over from the scan before it (issue 14): each
# namespace found following before the swap hands its pidfd and root over,
# and only the hierarchy is walked again, so whether it follows is decided
# afresh. A namespace that follows before the swap but not after it (a
# mount of its own below /usr keeps its copy of the old top in place) must
# still be found and healed; where RLIMIT_NOFILE leaves no room to keep
# anything (1024), nothing is taken over and the result is the same.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

FOLLOWERS=5
host_setup

install_img "$(mkimg foo 1 sysext v1)" foo
check "merge v1" grep -q '^/usr: merged' <<<"$(tuck merge)"
for ((i = 0; i < FOLLOWERS; i++)); do
        service "follower$i"
done
# Its /usr is the host's top, with the host's flags, until the swap; the
# tmpfs below keeps that top from going with the host's.
spawn_ns below "mount -t tmpfs below $ROOT/usr/lib/extension-release.d"

# refresh_to VERSION [prlimit args]: a refresh to foo VERSION, -v, its output in $LOGS/refresh-VERSION.out.
refresh_to() {
        local v=$1
        shift
        install_img "$(mkimg foo "$v" sysext "v$v")" foo
        "$@" "$TUCKCTL" -v --root="$ROOT" refresh >"$LOGS/refresh-$v.out" 2>&1
}

# scans OUT: "following,known" of each scan of /usr, one line each.
scans() {
        sed -n 's|^debug: .*/usr: [0-9]* processes, [0-9]* namespaces, \([0-9]*\) following, [0-9]* kept, \([0-9]*\) known from the scan before,.*|\1,\2|p' "$1"
}

check "refresh to v2" refresh_to 2
out=$LOGS/refresh-2.out
expect_eq "before the swap $((FOLLOWERS + 1)) follow, after it $FOLLOWERS, all $((FOLLOWERS + 1)) known from before" \
        "$(scans "$out" | tr '\n' ' ')" "$((FOLLOWERS + 1)),0 $FOLLOWERS,$((FOLLOWERS + 1)) "
check "the one with a mount below /usr did not follow, and is healed" \
        grep -q "(pid $NS_PID_below, sleep) did not follow (swap, .*): healed, 1 mount of its own carried over$" "$out"
check "... with its mount carried" in_ns "$NS_PID_below" mountpoint -q "$ROOT/usr/lib/extension-release.d"
check "... and sees v2" grep -qx generation=v2 <(in_ns "$NS_PID_below" cat "$ROOT/usr/lib/tuck-probe/generation")

check "refresh to v3 with no descriptors to spare" refresh_to 3 prlimit --nofile=1024:1024
out=$LOGS/refresh-3.out
expect_eq "nothing is known from before" "$(scans "$out" | cut -d, -f2 | tr '\n' ' ')" "0 0 "
check "the one below is healed all the same" \
        grep -q "(pid $NS_PID_below, sleep) did not follow (swap, .*): healed, 1 mount of its own carried over$" "$out"
out=$(tuck status)
check "every namespace is on generation 3" \
        grep -q "^  namespaces: $((FOLLOWERS + 2)): $((FOLLOWERS + 2)) on the current generation, 0 behind" <<<"$out"
tap_done
