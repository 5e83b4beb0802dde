#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Concurrent refreshes serialize on /run/tuck/lock: 4 workers x 10 forced
# refreshes, while images flip and a probe reads. All succeed, generation
# numbers count every refresh exactly once, one overlay per hierarchy, no
# exposure.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

WORKERS=4 EACH=10
host_setup
a=$(mkimg foo 1 sysext A)
b=$(mkimg foo 1 sysext B)
link_img "$a" foo
tuck merge >/dev/null

"$TUCK_PROBE" --tag=concurrent --ready="$ROOT/tmp/ready" --output="$ROOT/tmp/probe.json" \
        "$ROOT/usr/lib/tuck-probe/generation" "$ROOT/opt/tuck-probe/generation" &
probe=$!
while [[ ! -e $ROOT/tmp/ready ]]; do sleep 0.01; done

worker() {
        local w=$1 i fails=0
        for ((i = 0; i < EACH; i++)); do
                if (((w + i) % 2)); then link_img "$b" foo; else link_img "$a" foo; fi
                tuck refresh --always-refresh -q || fails=$((fails + 1))
        done
        echo "$fails" >"$ROOT/tmp/worker-$w"
}
pids=()
for ((w = 0; w < WORKERS; w++)); do
        worker "$w" &
        pids+=($!)
done
wait "${pids[@]}"
sleep 0.1
kill -TERM "$probe"
wait "$probe" || true

total=0
for ((w = 0; w < WORKERS; w++)); do total=$((total + $(cat "$ROOT/tmp/worker-$w"))); done
expect_eq "all $((WORKERS * EACH)) concurrent refreshes succeeded" "$total" 0
gen=$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generation"])' "$ROOT/run/tuck/generations/usr.json")
expect_eq "every refresh counted once: generation $((1 + WORKERS * EACH))" "$gen" $((1 + WORKERS * EACH))
expect_eq "one overlay on /usr" "$(grep -c " $ROOT/usr .* - overlay " /proc/self/mountinfo)" 1
expect_eq "one overlay on /opt" "$(grep -c " $ROOT/opt .* - overlay " /proc/self/mountinfo)" 1
check "the record matches the live overlay" python3 -c '
import json, os, sys
g = json.load(open(sys.argv[1]))
st = os.stat(sys.argv[2])
assert g["overlay_dev"] == f"{os.major(st.st_dev)}:{os.minor(st.st_dev)}", (g["overlay_dev"], st.st_dev)' \
        "$ROOT/run/tuck/generations/usr.json" "$ROOT/usr"
staged=$(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))["images"]))' "$ROOT/run/tuck/staging.json")
expect_eq "one staged image (the current one)" "$staged" 1
read -r reads exposures < <(python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["reads"], r["exposures"])' "$ROOT/tmp/probe.json")
diag "probe during the concurrent refreshes: $reads reads, $exposures exposures"
expect_eq "no exposure" "$exposures" 0
tap_done
