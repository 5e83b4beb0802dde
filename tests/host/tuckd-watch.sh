#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Image directory watching: a burst of 20 image drops (write, then rename
# into place) gives exactly one refresh after the quiet period; a half-written
# image never activates, neither under a temporary name nor written in place
# under its final name while its writer holds it open; while a search
# directory is missing only its own name appearing triggers a refresh, not
# anything else created next to it; a directory created after tuckd started
# is picked up.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

EXT=$ROOT/var/lib/extensions
QUIET_MS=700
printf '[Daemon]\nQuietPeriodSec=%sms\nMaxDelaySec=20s\n' "$QUIET_MS" >"$CONF"

start_journal
start_bus
start_tuckd
gdbus monitor --address "$BUS" --dest org.tuck1 --object-path /org/tuck1 >"$LOGS"/monitor 2>&1 &
pids+=($!)
sleep 0.5

refreshes() {
        prop RefreshCount | awk '{print $2}'
}

generation() {
        prop Generations | grep -o "\"$ROOT/usr\" [0-9]*" | awk '{print $2}'
}

# wait_quiet: until tuckd has had a full quiet period and some margin.
wait_quiet() {
        sleep "$(awk -v q="$QUIET_MS" 'BEGIN { print (q * 2 + 500) / 1000 }')"
}

# ---- a burst of 20 drops, 50 ms apart (well inside the quiet period)
for i in $(seq 1 20); do
        make_raw "$W/.e$i.raw.tmp" "e$i" 1 "burst$i"
done
base_count=$(refreshes)
base_gen=$(generation)
start=$(date +%s.%N)
for i in $(seq 1 20); do
        mv "$W/.e$i.raw.tmp" "$EXT/e$i.raw"
        sleep 0.05
done
wait_quiet
count=$(refreshes)
gen=$(generation)
diag "20 drops over $(awk -v s="$start" -v e="$(date +%s.%N)" 'BEGIN { printf "%.2f", e - s }') s: refreshes $base_count -> $count, generation $base_gen -> $gen"
check "a burst of 20 drops gives one refresh" test "$((count - base_count))" -eq 1
check "one new generation" test "$((gen - base_gen))" -eq 1
check "the top image is active" test "$(marker)" = burst20    # version order: e20 sorts last
check "RefreshCount's change is announced after a refresh no one called ($count)" \
        grep -q "PropertiesChanged ('org.tuck1.Manager', {.*'RefreshCount': <uint64 $count>" "$LOGS"/monitor
layers=$(bctl --json=short call org.tuck1 /org/tuck1 org.tuck1.Manager Status |
        python3 -c 'import json,sys; print(json.dumps(json.loads(json.load(sys.stdin)["data"][0])))' |
        grep -o '"e[0-9]*"' | sort -u | wc -l)
check "all 20 images are layers ($layers)" test "$layers" -eq 20

# ---- half-written under a temporary name: never activates
count=$(refreshes)
# A valid image named zz-half (it would sort on top), to be written in halves.
make_raw "$W"/half.raw zz-half 1 half
size=$(stat -c %s "$W"/half.raw)
head -c $((size / 2)) "$W"/half.raw >"$EXT"/.half.raw.tmp
sleep 0.3
head -c $((size / 2 + 4096)) "$W"/half.raw | tail -c 4096 >>"$EXT"/.half.raw.tmp
wait_quiet
check "a dotfile being written triggers nothing" test "$(refreshes)" -eq "$count"
check "marker unchanged" test "$(marker)" = burst20
half_part=$EXT/half.raw.part
mv "$EXT"/.half.raw.tmp "$half_part"
wait_quiet
check "a non-.raw name triggers nothing" test "$(refreshes)" -eq "$count"

# ---- half-written in place under its final name, writer holding it open,
# while another image is dropped the right way: nothing activates until the
# writer closes it, then one refresh takes both.
count=$(refreshes)
exec {wfd}>"$EXT"/zz-half.raw
head -c $((size / 2)) "$W"/half.raw >&$wfd
make_raw "$W"/.aa.raw.tmp aa 1 aa
mv "$W"/.aa.raw.tmp "$EXT"/aa.raw
wait_quiet
wait_quiet
check "no refresh while an image is open for writing" test "$(refreshes)" -eq "$count"
check "marker unchanged while it is written" test "$(marker)" = burst20
check "tuckd says why it waits" grep -q "zz-half.raw' is still open for writing" "$LOGS"/tuckd.log
tail -c +$((size / 2 + 1)) "$W"/half.raw >&$wfd
exec {wfd}>&-
wait_quiet
check "closing it gives one refresh" test "$(refreshes)" -eq $((count + 1))
check "the complete image is active" test "$(marker)" = half
layers=$(bctl --json=short call org.tuck1 /org/tuck1 org.tuck1.Manager Status | grep -c '\baa\b' || true)
check "and the image dropped meanwhile" test "$layers" -ge 1
rm -f "$half_part"

# ---- while a search directory is missing, only its own name matters
# /etc/extensions is missing, as most search directories are on Debian 12:
# /etc is watched for that one name, not for whatever else appears there.
count=$(refreshes)
touch "$ROOT"/etc/x
wait_quiet
check "touch /etc/x causes no refresh" test "$(refreshes)" -eq "$count"
mkdir -p "$ROOT"/run/user/1000
wait_quiet
check "mkdir /run/user/1000 causes no refresh" test "$(refreshes)" -eq "$count"
mkdir "$ROOT"/etc/extensions
wait_quiet
check "creating /etc/extensions refreshes" test "$(refreshes)" -eq $((count + 1))
make_raw "$W"/.early.raw.tmp early 1 early-image
mv "$W"/.early.raw.tmp "$ROOT"/etc/extensions/early.raw
wait_quiet
check "and /etc/extensions is watched from then on" test "$(refreshes)" -eq $((count + 2))

# ---- a search directory created later is picked up
count=$(refreshes)
mkdir -p "$W"/late
make_raw "$W"/late/late.raw late 1 late-image
mkdir -p "$ROOT"/run
mv "$W"/late "$ROOT"/run/extensions
wait_quiet
check "a new search directory triggers a refresh" test "$(refreshes)" -gt "$count"
layers=$(bctl --json=short call org.tuck1 /org/tuck1 org.tuck1.Manager Status | grep -c 'late' || true)
check "its image is a layer" test "$layers" -ge 1

# ---- many changes for longer than MaxDelaySec are not starved
diag "journal: $(journal_count 422132a242a0458bba8d9dc325bf0e2f) refreshed entries"

tap_done
