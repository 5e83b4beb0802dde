#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# merge, refresh, unmerge of sysext and confext images on a host-like
# namespace with services; what each namespace sees after each step; no-op
# refresh; status and list, text and JSON (with StalePolicy=report, so the
# namespaces left behind stay there to be listed).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

host_setup
# Namespaces left behind are listed, not healed, so status can show them
# (healing by tuckctl itself: tuckctl-heal.sh).
mkdir -p "$ROOT/etc/tuck"
printf '[Daemon]\nStalePolicy=report\n' >"$ROOT/etc/tuck/tuck.conf"
service plain
plain=$SERVICE_PID
service early --protect
early=$SERVICE_PID

a=$(mkimg foo 1.0 sysext A)
b=$(mkimg foo 1.1 sysext B)
ca=$(mkimg cfg 1 confext CA)
cb=$(mkimg cfg 2 confext CB --format=erofs)
install_img "$a" foo
install_img "$ca" cfg run/confexts

out=$(tuck merge)
diag "$out"
check "merge succeeds and names generation 1" grep -q '^/usr: merged, generation 0 -> 1' <<<"$out"
expect_eq "host sees the sysext in /usr" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" A
expect_eq "host sees the sysext in /opt" "$(probe_label "$ROOT/opt/tuck-probe/generation")" A
expect_eq "host sees the confext in /etc" "$(probe_label "$ROOT/etc/tuck-probe/generation")" CA
expect_eq "base files stay visible under the overlay" "$(cat "$ROOT/usr/lib/base-file")" "base of /usr"
expect_eq "a service (slave namespace) sees the sysext" \
        "$(in_ns "$plain" sed -n 's/^generation=//p' "$ROOT/usr/lib/tuck-probe/generation")" A
expect_eq "a service sees the confext" \
        "$(in_ns "$plain" sed -n 's/^generation=//p' "$ROOT/etc/tuck-probe/generation")" CA
# A read-only bind of the base made before the first merge is a slave of the
# host's root peer group: the new overlay propagates on top of it.
diag "a ProtectSystem-like service started before the merge sees: $(in_ns "$early" cat "$ROOT/usr/lib/tuck-probe/generation")"
# One started after the merge binds the overlay itself.
service protect --protect
protect=$SERVICE_PID
# So does a container-like namespace: its own root, the overlay bound read-only at /usr.
spawn_container ctr "$ROOT/usr" "$ROOT/tmp/ctr"
ctr=$NS_PID_ctr
check "sysext overlay is read-only and nodev" \
        grep -Eq " $ROOT/usr ro,nodev[ ,].* - overlay tuck-sysext " /proc/self/mountinfo
check "confext overlay is read-only, nosuid, nodev, noexec" \
        grep -Eq " $ROOT/etc ro,nosuid,nodev,noexec[ ,].* - overlay tuck-confext " /proc/self/mountinfo
check "merge again refuses: already merged" bash -c "! '$TUCKCTL' --root='$ROOT' merge >/dev/null 2>&1"

out=$(tuck refresh)
diag "$out"
check "refresh with unchanged inputs says so and does nothing" grep -q '^/usr: unchanged' <<<"$out"
before=$(host_mountinfo)
staged_before=$(python3 -c 'import json,sys; print(sorted(i["id"] for i in json.load(open(sys.argv[1]))["images"]))' "$ROOT/run/tuck/staging.json")
check "--always-refresh refreshes anyway" grep -q '^/usr: refreshed, generation 1 -> 2' <<<"$(tuck refresh --always-refresh)"
check "a forced refresh replaced the overlay mount" test "$before" != "$(host_mountinfo)"
expect_eq "unchanged images kept their staged mounts (same staging IDs)" \
        "$(python3 -c 'import json,sys; print(sorted(i["id"] for i in json.load(open(sys.argv[1]))["images"]))' "$ROOT/run/tuck/staging.json")" \
        "$staged_before"

install_img "$b" foo
install_img "$cb" cfg run/confexts
out=$(tuck refresh)
diag "$out"
check "refresh to new images" grep -q '^/usr: refreshed, generation 2 -> 3' <<<"$out"
expect_eq "host sees the new sysext" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" B
expect_eq "host sees the new confext (erofs)" "$(probe_label "$ROOT/etc/tuck-probe/generation")" CB
expect_eq "a service sees the new sysext" \
        "$(in_ns "$plain" sed -n 's/^generation=//p' "$ROOT/usr/lib/tuck-probe/generation")" B
expect_eq "a service sees the new confext" \
        "$(in_ns "$plain" sed -n 's/^generation=//p' "$ROOT/etc/tuck-probe/generation")" CB
expect_eq "the ProtectSystem-like service stays on its bind of the old generation (StalePolicy=report)" \
        "$(in_ns "$protect" sed -n 's/^generation=//p' "$ROOT/usr/lib/tuck-probe/generation")" A
check "exactly one overlay on each hierarchy" \
        test "$(grep -c " $ROOT/usr ro,.* - overlay " /proc/self/mountinfo)" = 1

# Never loosen: the admin tightened the live overlay (nosuid); the next generation keeps it.
mount -o remount,bind,nosuid "$ROOT/usr"
install_img "$a" foo   # a new copy: the refresh has work to do
out=$(tuck refresh --allow-downgrade)
check "refresh after the live top was made nosuid" grep -q '^/usr: refreshed, generation 3 -> 4' <<<"$out"
check "the new overlay is still nosuid (flags are never loosened)" \
        grep -Eq " $ROOT/usr ro,nosuid,nodev[ ,].* - overlay tuck-sysext " /proc/self/mountinfo
install_img "$b" foo
tuck refresh >/dev/null

status=$(tuck status)
diag "$status"
check "status names generation 5 for /usr" grep -q '^/usr (sysext): generation 5 since' <<<"$status"
json=$(tuck status --json)
check "status --json is JSON with generation 5 and the layer's version" python3 -c '
import json, sys
s = json.load(sys.stdin)
usr = [h for h in s if h["hierarchy"] == "/usr"][0]
assert usr["generation"] == 5 and usr["merged"] and usr["on_top"], usr
assert usr["extensions"] == ["foo"] and usr["since"] == usr["since_usec"] > 0, usr
assert [l["version"] for l in usr["layers"]] == ["1.1"], usr["layers"]
states = {v["pid"]: v["state"] for v in usr["namespaces"]}
assert states['"$plain"'] == "current", states
assert states['"$protect"'] == "stale", states
ctr = [v for v in usr["namespaces"] if v["pid"] == '"$ctr"']
assert ctr and ctr[0]["own_root"] and ctr[0]["state"] == "stale" and ctr[0]["generation"] == 1, ctr
' <<<"$json"
check "status lists the ProtectSystem-like namespace as not current, by pid" \
        grep -q "pid $protect (sleep).*: stale (generation 1)" <<<"$status"
check "status lists the container (its own root, read through it) as not current" \
        grep -q "pid $ctr (sleep).*: stale (generation 1)" <<<"$status"

list=$(tuck list)
diag "$list"
check "list shows both images as valid" test "$(grep -c ' valid ' <<<"$list")" = 2
check "list --json marks foo active in /usr and /opt" python3 -c '
import json, sys
l = json.load(sys.stdin)
foo = [i for i in l if i["name"] == "foo"][0]
assert foo["valid"] and foo["version"] == "1.1" and foo["active_in"] == ["/usr", "/opt"], foo
' <<<"$(tuck list --json)"

out=$(tuck unmerge)
diag "$out"
check "unmerge" grep -q '^/usr: unmerged' <<<"$out"
expect_eq "host sees the base again" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" base
expect_eq "host sees the base /etc again" "$(probe_label "$ROOT/etc/tuck-probe/generation")" base
expect_eq "a service sees the base again" \
        "$(in_ns "$plain" sed -n 's/^generation=//p' "$ROOT/usr/lib/tuck-probe/generation")" base
check "no overlay left on the host" bash -c "! grep -q ' - overlay ' /proc/self/mountinfo"

out=$(tuck merge)
check "merge after unmerge starts a new generation" grep -q '^/usr: merged, generation 5 -> 6' <<<"$out"
expect_eq "and shows the extension again" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" B

# The raw primitive.
mkdir -p "$ROOT/tmp/t" "$ROOT/tmp/src"
mount -t tmpfs top "$ROOT/tmp/t"
echo top >"$ROOT/tmp/t/file"
mount -t tmpfs new "$ROOT/tmp/src"
echo new >"$ROOT/tmp/src/file"
check "tuckctl beneath SOURCE TARGET" tuck -q beneath "$ROOT/tmp/src" "$ROOT/tmp/t"
expect_eq "the top mount still shows" "$(cat "$ROOT/tmp/t/file")" top
umount -l "$ROOT/tmp/t"
expect_eq "unmounting the top reveals the clone moved beneath it" "$(cat "$ROOT/tmp/t/file")" new
check "beneath without a mount at TARGET fails" bash -c "! '$TUCKCTL' beneath '$ROOT/tmp/src' '$ROOT/usr/lib' 2>/dev/null"

tap_done
