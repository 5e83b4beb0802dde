#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# 128 extension images on one hierarchy. On Linux 6.1, fsconfig() strings are
# capped at 256 bytes and overlayfs has no lowerdir+, so tuck assembles with
# mount(2) and short relative lowerdirs from the staging root (one page).
# Here: 127 directory images and one squashfs; every layer visible, the last
# in version order on top; a forced refresh works too.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

N=128
host_setup
for ((i = 0; i < N - 1; i++)); do
        name=$(printf 'ext%d' "$i")
        mkdir -p "$IMAGES/t$i/usr/share/many"
        echo "$name" >"$IMAGES/t$i/usr/share/many/$name"
        "$MKEXT" --format=dir --label="$name" "$name" 1 sysext "$IMAGES/t$i" "$ROOT/var/lib/extensions/$name"
done
mkdir -p "$IMAGES/traw/usr/share/many"
echo ext127 >"$IMAGES/traw/usr/share/many/ext127"
"$MKEXT" --label=ext127 ext127 1 sysext "$IMAGES/traw" "$ROOT/run/extensions/ext127.raw"

out=$(tuck merge)
check "merge of $N images" grep -q '^/usr: merged' <<<"$out"
expect_eq "all $N layers are in the generation" "$(grep -c '^  ext' <<<"$(tuck status | sed -n '/^\/usr/,/^\/opt/p')")" $N
expect_eq "every layer's file is visible" "$(ls "$ROOT/usr/share/many" | wc -l)" $N
expect_eq "the last in version order is on top (ext127 after ext99)" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" ext127
opts=$(awk -v t="$ROOT/usr" '$5 == t { print $NF }' /proc/self/mountinfo)
lowerdir=${opts#*lowerdir=}
lowerdir=${lowerdir%%,*}
diag "lowerdir= is ${#lowerdir} bytes for $((N + 2)) layers"
check "the lowerdir option exceeds 6.1's 256-byte fsconfig limit (${#lowerdir} bytes) and still mounted" \
        test "${#lowerdir}" -gt 256
expect_eq "$((N + 2)) lower layers (metadata, extensions, base)" "$(tr ':' '\n' <<<"$lowerdir" | wc -l)" $((N + 2))
check "a forced refresh of $N layers" grep -q '^/usr: refreshed' <<<"$(tuck refresh --always-refresh)"
tap_done
