#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# list and status as a user other than root, while another operation holds
# tuck's lock: they read what is recorded (generation records, the mount
# table, the search directories), never take the lock, never mount or
# probe, and answer at once. As systemd-sysext, whose list and status need
# no privileges either.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

host_setup
mkdir -p "$ROOT/etc/tuck"
a=$(mkimg foo 1.2 sysext A)
b=$(mkimg bar 3 sysext B)
install_img "$a" foo
tuck merge >/dev/null
install_img "$b" bar     # found, not merged: nothing recorded about it
ln -s "$TUCKCTL" "$ROOT/tmp/systemd-sysext"

# as_nobody CMD...: CMD as uid/gid 65534, no groups. A run that waited for the
# lock would never end while we hold it: timeout ends it (and the check fails).
as_nobody() {
        timeout 60 setpriv --reuid=65534 --regid=65534 --clear-groups "$@"
}

# The lock, held the way every operation holds it (flock, exclusive), for the whole test.
flock --no-fork "$ROOT/run/tuck/lock" sleep infinity &
holder=$!
pids+=("$holder")
while flock -n "$ROOT/run/tuck/lock" true; do
        sleep 0.01
done
check "another operation holds the lock (a root refresh with --no-block is refused)" \
        bash -c '! "$@" >/dev/null 2>&1' _ "$TUCKCTL" --root="$ROOT" refresh --no-block
before=$(host_mountinfo)

rc=0
out=$(as_nobody "$TUCKCTL" --root="$ROOT" status 2>&1) || rc=$?
diag "$out"
expect_eq "status as nobody: exit status 0 while the lock is held" "$rc" 0
check "status as nobody: /usr's generation and layers from the record" \
        bash -c 'grep -q "^/usr (sysext): generation 1 since" <<<"$1" && grep -q "^  foo 1.2" <<<"$1"' _ "$out"
check "status as nobody: says what it did not do" grep -q 'MOVE_MOUNT_BENEATH: not probed (not root)' <<<"$out"

rc=0
json=$(as_nobody "$TUCKCTL" --root="$ROOT" --json=short status 2>&1) || rc=$?
expect_eq "status --json as nobody: exit status 0" "$rc" 0
check "status --json as nobody: systemd-sysext's keys, tuck's record" python3 -c '
import json, sys
s = {h["hierarchy"]: h for h in json.loads(sys.argv[1])}
usr = s["/usr"]
assert usr["extensions"] == ["foo"] and usr["since"] > 0 and usr["generation"] == 1, usr
assert usr["namespaces"] is None and usr["move_mount_beneath"] is None, usr
assert s["/etc"]["extensions"] == "none", s["/etc"]
' "$json"

rc=0
out=$(as_nobody "$TUCKCTL" --root="$ROOT" list 2>&1) || rc=$?
diag "$out"
expect_eq "list as nobody: exit status 0 while the lock is held" "$rc" 0
check "list as nobody: foo is active, its version from the record" grep -Eq '^sysext +foo +squashfs +1\.2 +active ' <<<"$out"
check "list as nobody: bar is found, not inspected" grep -Eq '^sysext +bar +squashfs +- +not inspected ' <<<"$out"

rc=0
json=$(as_nobody "$TUCKCTL" --root="$ROOT" list --json=short 2>&1) || rc=$?
expect_eq "list --json as nobody: exit status 0" "$rc" 0
check "list --json as nobody: systemd-sysext's keys for both images" python3 -c '
import json, sys
l = {i["name"]: i for i in json.loads(sys.argv[1])}
assert set(l) == {"foo", "bar"}, l
for i in l.values():
    assert i["type"] == "raw" and i["path"].endswith(i["name"] + ".raw") and i["time"] > 0, i
    assert i["inspected"] is False and i["valid"] is None, i
assert l["foo"]["active_in"] == ["/usr", "/opt"] and l["foo"]["version"] == "1.2", l["foo"]
assert l["bar"]["active_in"] == [] and l["bar"]["version"] is None, l["bar"]
' "$json"

rc=0
out=$(as_nobody "$ROOT/tmp/systemd-sysext" --root="$ROOT" status 2>&1) || rc=$?
diag "$out"
expect_eq "systemd-sysext status as nobody: exit status 0" "$rc" 0
check "systemd-sysext status as nobody: its table" grep -Eq '^/usr +foo +[A-Z][a-z]{2} ' <<<"$out"

expect_eq "nothing was mounted or unmounted by them" "$(host_mountinfo)" "$before"
check "the lock is still the other operation's" bash -c '! flock -n "$1" true' _ "$ROOT/run/tuck/lock"
kill "$holder"
wait "$holder" 2>/dev/null || true
tuck unmerge >/dev/null
tap_done
