#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# 1,000 extension images on one hierarchy. One overlay takes what fits in a
# page of mount options (~340 of tuck's short layer names) and at most 500
# lower layers (overlayfs's OVL_MAX_STACK); past that tuck nests: groups of
# layers as overlays of their own, below the overlay that goes on top
# (stack depth 2, the kernel's limit). Merged and refreshed atomically with
# readers in the host and in a service namespace: no read of the base or of
# a missing file (b0 m0). A whiteout, which a nested group could not pass
# on, is refused with the image named. Times are printed, never judged.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

N=${TUCK_MANY_LAYERS:-1000}
REFRESHES=${TUCK_MANY_REFRESHES:-6}
host_setup
release_dir=usr/lib/extension-release.d

# dirimg DIR NAME LABEL: a directory image (what mkext --format=dir makes, without a process per image).
dirimg() {
        local d=$1 name=$2
        mkdir -p "$d/$release_dir" "$d/usr/share/many"
        printf 'ID=_any\nSYSEXT_VERSION_ID=1\n' >"$d/$release_dir/extension-release.$name"
        echo "$name" >"$d/usr/share/many/$name"
}

# The top layer sorts last (zz...) and carries the probe file, A or B. One
# mkdir for all (the rest are shell builtins): a process per image would cost more
# than the merge.
dirs=()
for ((i = 0; i < N - 1; i++)); do
        dirs+=("$ROOT/var/lib/extensions/e$i/$release_dir" "$ROOT/var/lib/extensions/e$i/usr/share/many")
done
mkdir -p "${dirs[@]}"
for ((i = 0; i < N - 1; i++)); do
        printf 'ID=_any\nSYSEXT_VERSION_ID=1\n' >"$ROOT/var/lib/extensions/e$i/$release_dir/extension-release.e$i"
        echo "e$i" >"$ROOT/var/lib/extensions/e$i/usr/share/many/e$i"
done
for label in A B; do
        dirimg "$IMAGES/top-$label" zztop
        mkdir -p "$IMAGES/top-$label/usr/lib/tuck-probe"
        echo "generation=$label" >"$IMAGES/top-$label/usr/lib/tuck-probe/generation"
done
# top LABEL: the top image is generation LABEL now (a new directory, renamed into place).
top() {
        rm -rf "$ROOT/var/lib/extensions/.zztop.new"
        cp -a "$IMAGES/top-$1" "$ROOT/var/lib/extensions/.zztop.new"
        rm -rf "$ROOT/var/lib/extensions/.zztop.old"
        [[ ! -e $ROOT/var/lib/extensions/zztop ]] || mv "$ROOT/var/lib/extensions/zztop" "$ROOT/var/lib/extensions/.zztop.old"
        mv "$ROOT/var/lib/extensions/.zztop.new" "$ROOT/var/lib/extensions/zztop"
}
top A

ms() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }

t0=$(date +%s%N)
out=$(tuck merge 2>&1) || true
merge_ms=$(ms "$t0")
check "merge of $N images" grep -q '^/usr: merged, generation 0 -> 1' <<<"$out"
expect_eq "all $N layers are in the generation" "$(tuck --json=short status | python3 -c '
import json, sys
print(len([h for h in json.load(sys.stdin) if h["hierarchy"] == "/usr"][0]["extensions"]))')" "$N"
expect_eq "every layer's file is visible" "$(ls "$ROOT/usr/share/many" | wc -l)" "$N"
expect_eq "the top layer is on top" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" A
expect_eq "the metadata layer lists all $N" "$(wc -l <"$ROOT/usr/.systemd-sysext/extensions")" "$N"
opts=$(awk -v t="$ROOT/usr" '$5 == t { print $NF }' /proc/self/mountinfo)
lowerdir=${opts#*lowerdir=}
lowerdir=${lowerdir%%,*}
groups=$(tr ':' '\n' <<<"$lowerdir" | grep -c '^o/usr+[0-9]' || true)
diag "the top overlay: lowerdir=$lowerdir ($groups nested groups)"
check "the layers are nested: the top overlay's lower layers are groups" test "$groups" -ge 2
expect_eq "one overlay on /usr" "$(awk -v t="$ROOT/usr" '$5 == t && / - overlay /' /proc/self/mountinfo | wc -l)" 1

service plain
plain=$SERVICE_PID
files="$ROOT/usr/lib/tuck-probe/generation"
start_reader() {
        local tag=$1 ns=${2:-}
        rm -f "$ROOT/tmp/probe-$tag.ready"
        if [[ -n $ns ]]; then
                nsenter --mount --target "$ns" -- "$TUCK_PROBE" --tag="$tag" --ready="$ROOT/tmp/probe-$tag.ready" \
                        --output="$ROOT/tmp/probe-$tag.json" $files &
        else
                "$TUCK_PROBE" --tag="$tag" --ready="$ROOT/tmp/probe-$tag.ready" --output="$ROOT/tmp/probe-$tag.json" $files &
        fi
        READERS+=($!)
        while [[ ! -e $ROOT/tmp/probe-$tag.ready ]]; do sleep 0.01; done
}
field() { python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r[sys.argv[2]])' "$ROOT/tmp/probe-$1.json" "$2"; }
READERS=()
start_reader host
start_reader service "$plain"

times=() failures=0
for ((i = 1; i <= REFRESHES; i++)); do
        if ((i % 2)); then top B; else top A; fi
        t0=$(date +%s%N)
        tuck -q refresh 2>"$ROOT/tmp/refresh.err" || { failures=$((failures + 1)); cat "$ROOT/tmp/refresh.err" >&2; }
        times+=("$(ms "$t0")")
done
kill -TERM "${READERS[@]}"
wait "${READERS[@]}" || true
sorted=$(printf '%s\n' "${times[@]}" | sort -n | tr '\n' ' ')
diag "$N layers: merge ${merge_ms} ms; $REFRESHES refreshes (one layer changed each, 2 readers spinning): ${sorted}ms"
for r in host service; do
        diag "$r reader: $(field "$r" reads) reads, $(field "$r" exposures) exposures"
done
expect_eq "all $REFRESHES refreshes of $N layers succeeded" "$failures" 0
expect_eq "the host read neither the base nor a missing file (b0 m0)" "$(field host exposures)" 0
expect_eq "nor did the service (b0 m0)" "$(field service exposures)" 0
check "the readers saw the refreshes ($(field host reads) reads)" test "$(field host reads)" -gt "$REFRESHES"
expect_eq "the last generation shows" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" \
        "$( ((REFRESHES % 2)) && echo B || echo A)"
t0=$(date +%s%N)
check "an --always-refresh of all $N" grep -q '^/usr: refreshed' <<<"$(tuck refresh --always-refresh 2>&1)"
diag "$N layers, no readers: --always-refresh (nothing changed, everything reassembled) $(ms "$t0") ms"
if ((REFRESHES % 2)); then top A; else top B; fi
t0=$(date +%s%N)
check "a refresh with one layer changed, no readers" grep -q '^/usr: refreshed' <<<"$(tuck refresh 2>&1)"
diag "$N layers, no readers: refresh (one layer changed) $(ms "$t0") ms"

# A whiteout in a nested layer could not hide what the layers below it have: refused, nothing changes.
before=$(host_mountinfo)
mknod "$ROOT/var/lib/extensions/e500/usr/share/many/e1" c 0 0
out=$(tuck refresh 2>&1) || true
diag "$out"
check "a whiteout in a nested layer is refused, naming the image" \
        grep -q "image '$ROOT/var/lib/extensions/e500' carries a whiteout or opaque directory (/usr/share/many/e1)" <<<"$out"
expect_eq "and nothing changed" "$(host_mountinfo)" "$before"
rm "$ROOT/var/lib/extensions/e500/usr/share/many/e1"

out=$(tuck unmerge 2>&1) || true
check "unmerge" grep -q '^/usr: unmerged' <<<"$out"
expect_eq "the base again" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" base
tap_done
