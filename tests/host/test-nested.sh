#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Nested mounts below a hierarchy (something on /opt/app, and below that)
# survive merge and refresh, in the host and in a service; their flags are
# kept; after unmerge the original is there again.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

host_setup
mkdir -p "$IMAGES/tree/opt/app" "$IMAGES/tree/usr/lib/app"
A=$("$MKEXT" --label=A foo 1 sysext "$IMAGES/tree" "$IMAGES/a.raw" && echo "$IMAGES/a.raw")
B=$("$MKEXT" --label=B foo 2 sysext "$IMAGES/tree" "$IMAGES/b.raw" && echo "$IMAGES/b.raw")

# Mounted before the first merge: the overlay would hide it.
mkdir -p "$ROOT/usr/lib/app"
mount -t tmpfs -o ro,size=1m early "$ROOT/usr/lib/app" 2>/dev/null || {
        mount -t tmpfs -o size=1m early "$ROOT/usr/lib/app"
}
mount -o remount,ro "$ROOT/usr/lib/app"

install_img "$A" foo
tuck merge >/dev/null
usr_id=$(awk -v t="$ROOT/usr" '$5 == t { id = $1 } END { print id }' /proc/self/mountinfo)
top_app=$(awk -v t="$ROOT/usr/lib/app" -v p="$usr_id" '$5 == t && $2 == p { print $1 }' /proc/self/mountinfo)
check "a mount below /usr from before the first merge is re-attached on the overlay" test -n "$top_app"
expect_eq "it is the same file system" "$(findmnt -rn -o SOURCE "$ROOT/usr/lib/app" | tail -1)" early
check "and is still read-only" grep -Eq " $ROOT/usr/lib/app ro[, ]" /proc/self/mountinfo

mount -t tmpfs -o size=1m nested "$ROOT/opt/app"
echo here >"$ROOT/opt/app/file"
mkdir "$ROOT/opt/app/sub"
mount -t tmpfs -o size=1m,noexec deeper "$ROOT/opt/app/sub"
echo deeper >"$ROOT/opt/app/sub/file"
service plain
plain=$SERVICE_PID

install_img "$B" foo
out=$(tuck refresh)
diag "$out"
check "refresh" grep -q '^/opt: refreshed, generation 1 -> 2' <<<"$out"
expect_eq "the host sees the new generation" "$(probe_label "$ROOT/opt/tuck-probe/generation")" B
expect_eq "the nested mount survived the refresh" "$(cat "$ROOT/opt/app/file")" here
expect_eq "and the one below it" "$(cat "$ROOT/opt/app/sub/file")" deeper
check "its flags are kept (noexec)" grep -Eq " $ROOT/opt/app/sub rw,[^ ]*noexec" /proc/self/mountinfo
opt_id=$(awk -v t="$ROOT/opt" '$5 == t { id = $1 } END { print id }' /proc/self/mountinfo)
app_parent=$(awk -v t="$ROOT/opt/app" '$5 == t { p = $2 } END { print p }' /proc/self/mountinfo)
expect_eq "the nested mount now sits on the new overlay" "$app_parent" "$opt_id"
expect_eq "exactly one mount at /opt/app" "$(awk -v t="$ROOT/opt/app" '$5 == t' /proc/self/mountinfo | wc -l)" 1
expect_eq "the service sees the new generation" \
        "$(in_ns "$plain" sed -n 's/^generation=//p' "$ROOT/opt/tuck-probe/generation")" B
expect_eq "and the nested mount" "$(in_ns "$plain" cat "$ROOT/opt/app/file")" here
expect_eq "and the one below it" "$(in_ns "$plain" cat "$ROOT/opt/app/sub/file")" deeper
expect_eq "the /usr mount from before the first merge also survived" \
        "$(findmnt -rn -o SOURCE "$ROOT/usr/lib/app" | tail -1)" early

# A nested mount is a clone, so writes go to the same file system.
echo again >"$ROOT/opt/app/file2"
expect_eq "the survivor is the same file system, not a copy" "$(in_ns "$plain" cat "$ROOT/opt/app/file2")" again

tuck unmerge >/dev/null
expect_eq "after unmerge the base is visible" "$(probe_label "$ROOT/opt/tuck-probe/generation")" base
expect_eq "and the early mount below /usr is there (the original, never unmounted)" \
        "$(findmnt -rn -o SOURCE "$ROOT/usr/lib/app" | tail -1)" early
tap_done
