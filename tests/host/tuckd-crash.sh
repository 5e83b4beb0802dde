#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tuckd killed with SIGKILL at random points of a refresh, then restarted,
# many times: the hierarchy always shows the old or the new generation, never
# the base and never a missing file (checked after every kill, and by readers
# in the host and in a service namespace reading all the time), and tuckd
# recovers by itself: it becomes ready, shows the images present, and the
# mount stack, loop devices and staging do not grow.
#
# TUCKD_CRASH_RUNS (default 60) and TUCKD_CRASH_SEED (default: random) steer
# it; the seed is printed so a failure can be replayed.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

RUNS=${TUCKD_CRASH_RUNS:-60}
SEED=${TUCKD_CRASH_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$SEED
diag "seed $SEED, $RUNS runs (replay: TUCKD_CRASH_SEED=$SEED TUCKD_CRASH_RUNS=$RUNS)"

EXT=$ROOT/var/lib/extensions
# Alternate two image sets; downgrades allowed so A and B can take turns.
printf '[Policy]\nAllowDowngrade=yes\n[Daemon]\nWatch=no\n' >"$CONF"
for v in 1 2; do
        make_raw "$W/a$v.raw" a "$v" "gen-a$v"
        make_raw "$W/b$v.raw" b "$v" "gen-b$v"
done
cp "$W"/a1.raw "$EXT"/a.raw
cp "$W"/b1.raw "$EXT"/b.raw

start_journal
start_bus
start_tuckd
check "first generation merged at start" test "$(marker)" = gen-b1

spawn_ns service "true"
# Window probes: the host's view and a service's, all the time.
P=$ROOT/$PROBE_REL
start_probe host $$ "$P"
start_probe service "$NS_PID_service" "$P"

mounts_at_usr() {
        awk -v m="$ROOT/usr" '$5 == m' /proc/self/mountinfo | wc -l
}

loops() {
        losetup -l -n -O NAME,BACK-FILE 2>/dev/null | grep -c "$W" || true
}
mounts0=$(mounts_at_usr)
loops0=$(loops)
seen_depth=$mounts0

declare -A outcome
bad=0
unrecovered=0
set_v=1
for ((run = 1; run <= RUNS; run++)); do
        old=$(marker)
        # Next image set: swap one image (write, then rename).
        set_v=$((3 - set_v))
        # b is the top layer (what the probe file shows); a changes now and then.
        for which in b $( ((RANDOM % 3 == 0)) && echo a); do
                cp "$W/$which$set_v.raw" "$EXT/.$which.raw.tmp"
                mv "$EXT/.$which.raw.tmp" "$EXT/$which.raw"
        done

        delay_ms=$((RANDOM % 120))
        bctl call --timeout=10 org.tuck1 /org/tuck1 org.tuck1.Manager Refresh t 0 \
                >/dev/null 2>&1 &
        caller=$!
        sleep "$(awk -v d="$delay_ms" 'BEGIN { print d / 1000 }')"
        kill -KILL "$TUCKD_PID" 2>/dev/null || true
        wait "$TUCKD_PID" 2>/dev/null || true
        wait "$caller" 2>/dev/null || true

        now=$(marker)
        if [[ $now == "$old" ]]; then
                outcome[old]=$((${outcome[old]:-0} + 1))
        elif [[ $now == gen-* ]]; then
                outcome[new]=$((${outcome[new]:-0} + 1))
        else
                outcome[bad]=$((${outcome[bad]:-0} + 1))
                bad=$((bad + 1))
                diag "run $run: killed after $delay_ms ms, hierarchy shows '$now' (was '$old')"
        fi

        if ! start_tuckd; then
                not_ok "run $run: tuckd did not come back after SIGKILL at $delay_ms ms"
                break
        fi
        # The start-up refresh finishes what the killed one may not have.
        now=$(marker)
        d=$(mounts_at_usr)
        if ((d > seen_depth)); then
                diag "run $run: killed after $delay_ms ms: $d mounts at $ROOT/usr after restart"
                diag "$(awk -v m="$ROOT/usr" '$5 == m' /proc/self/mountinfo)"
                seen_depth=$d
        fi
        if [[ $now != "gen-b$set_v" ]]; then
                diag "run $run: after restart the hierarchy shows '$now', not gen-b$set_v"
                unrecovered=$((unrecovered + 1))
        fi
done

stop_probes

diag "$RUNS runs: hierarchy old ${outcome[old]:-0}, new ${outcome[new]:-0}, base or missing ${outcome[bad]:-0}"
check "after every SIGKILL: old or new, never base or missing" test "$bad" -eq 0
check "after every restart: the images on disk are active ($unrecovered not)" test "$unrecovered" -eq 0

check_probes host service

# Recovery: tuckd is ready, refreshes normally, shows what is on disk.
check "tuckd ready after the last restart" kill -0 "$TUCKD_PID"
cp "$W"/a2.raw "$EXT"/.a.raw.tmp && mv "$EXT"/.a.raw.tmp "$EXT"/a.raw
cp "$W"/b2.raw "$EXT"/.b.raw.tmp && mv "$EXT"/.b.raw.tmp "$EXT"/b.raw
call Refresh t 1 >/dev/null
check "a refresh after all that works" test "$(marker)" = gen-b2

depth=$(mounts_at_usr)
nloops=$(loops)
diag "after $RUNS kills: $depth mounts at $ROOT/usr, $nloops loop devices backed by test images"
diag "before the kills: $mounts0 mounts at $ROOT/usr, $loops0 loop devices"
if ((nloops > loops0)); then
        diag "$(losetup -l -n -O NAME,BACK-FILE | grep "$W")"
        diag "$(cat "$ROOT"/run/tuck/staging.json)"
fi
if ((depth > mounts0)); then
        diag "$(awk -v m="$ROOT/usr" '$5 == m' /proc/self/mountinfo)"
        diag "$(cat "$ROOT"/run/tuck/generations/usr.json 2>/dev/null | head -40)"
fi
check "mount stack at /usr did not grow ($mounts0 -> $depth)" test "$depth" -le "$mounts0"
check "loop devices did not leak ($loops0 -> $nloops)" test "$nloops" -le "$loops0"

tap_done
