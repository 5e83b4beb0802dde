#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A mount namespace owned by another user namespace is never entered (issue
# 8; tuckd(8), HEALING). nobody makes one (unshare -Urm) with a bind of /usr
# of its own, so a refresh leaves it behind like any service with its own
# bind. A heal there would hand it a copy of the new overlay with neither
# MNT_LOCKED nor locked flags: its owner could unmount what tuck put over
# part of the hierarchy. So it is reported, with the reason, and tuck
# mounts nothing there: it still sees the old generation through its bind,
# and what it inherited from the host is still locked (its owner can unmount
# its own bind, not that). A root service beside it is healed as usual.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

printf '[Daemon]\nStalePolicy=heal\n' >"$CONF"
unset DBUS_SYSTEM_BUS_ADDRESS
tuckctl() {
        "$TUCKCTL" --root="$ROOT" --config="$CONF" "$@"
}
# nobody has to reach the hierarchy (mktemp made $W 0700).
chmod 0755 "$W"

drop() {
        make_raw "$W/.foo.raw.tmp" foo "$1" "v$1"
        mv "$W/.foo.raw.tmp" "$ROOT"/var/lib/extensions/foo.raw
}

drop 1
check "merge v1" tuckctl merge

# nobody's own user and mount namespace, with a bind of /usr on top (unprivileged:
# allowed inside a user namespace of its own).
log=$LOGS/ns-userns.log
setpriv --reuid=nobody --regid=nogroup --clear-groups -- \
        unshare --user --map-root-user --mount --propagation slave \
        sh -c "mount --bind $ROOT/usr $ROOT/usr && echo ns-ready && exec sleep 100000" >"$log" 2>&1 &
ns_await_ready userns $! "$log"
# And a root service with its own bind beside it: healed as usual.
spawn_ns full "mount --bind $ROOT/usr $ROOT/usr && mount -o remount,bind,ro,nodev $ROOT/usr"

check "nobody's namespace is owned by another user namespace" \
        test "$(readlink /proc/"$NS_PID_userns"/ns/user)" != "$(readlink /proc/self/ns/user)"
# top_at PID PATH: the mount ID of the top of the stack at PATH there (the one
# nothing else at PATH sits on; table order is not stack order after a beneath move).
top_at() {
        awk -v t="$2" '$5 == t { id[$1] = 1; parent[$1] = $2 }
                END { for (i in id) below[parent[i]] = 1; for (i in id) if (!(i in below)) print i }' \
                /proc/"$1"/mountinfo
}
own_bind=$(top_at "$NS_PID_userns" "$ROOT/usr")

drop 2
tuckctl refresh >"$LOGS"/refresh.out 2>&1 || true
diag "$(cat "$LOGS"/refresh.out)"
check "the host sees v2" test "$(marker)" = v2
check "the root service is healed" test "$(ns_read "$NS_PID_full" "$ROOT/$PROBE_REL")" = v2
check "nobody's namespace is reported, not healed, with the reason" \
        grep -q "(pid $NS_PID_userns, sleep) did not follow (swap.*): not healed: its mount namespace belongs to user namespace [0-9]*, not ours: never entered" \
        "$LOGS"/refresh.out
expect_eq "nobody's namespace still sees v1" "$(ns_read "$NS_PID_userns" "$ROOT/$PROBE_REL")" v1
# What propagation did there is the kernel's (the new overlay tucked beneath, the old copy
# gone from under the bind); tuck added nothing: its own bind is still its top, and only
# that and the propagated copy are at /usr.
expect_eq "its own bind is still the top of /usr there (mount $own_bind)" \
        "$(top_at "$NS_PID_userns" "$ROOT/usr")" "$own_bind"
expect_eq "two mounts at /usr there: the propagated copy and its bind" \
        "$(awk -v t="$ROOT/usr" '$5 == t' /proc/"$NS_PID_userns"/mountinfo | wc -l)" 2

tuckctl --json refresh >"$LOGS"/refresh.json 2>/dev/null || true
check "JSON: the namespace, not healed, its outcome saying why" python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
usr = [h for h in r["hierarchies"] if h["hierarchy"] == "/usr"][0]
ns = [n for n in usr["namespaces"] if n["pid"] == int(sys.argv[2])]
assert len(ns) == 1, usr["namespaces"]
assert not ns[0]["healed"], ns[0]
assert "another" in ns[0]["outcome"] or "user namespace" in ns[0]["outcome"], ns[0]' \
        "$LOGS"/refresh.json "$NS_PID_userns"

# Its owner can take away what it mounted itself, never what it inherited
# from the host when it was made: that is locked (MNT_LOCKED), and tuck
# leaves it so.
uns() {
        nsenter -t "$NS_PID_userns" -U -m -- "$@"
}
check "its owner can unmount its own bind" uns umount "$ROOT/usr"
check "it still has the host's tmpfs it inherited at $W" grep -q " $W " /proc/"$NS_PID_userns"/mountinfo
# umount2(MNT_DETACH) itself (util-linux's umount says "not mounted" before asking).
expect_eq "but cannot unmount it: locked (the kernel says EINVAL)" \
        "$(uns python3 -c 'import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
r = libc.umount2(sys.argv[1].encode(), 2)
print("ok" if r == 0 else os.strerror(ctypes.get_errno()))' "$W")" "Invalid argument"

tap_done
