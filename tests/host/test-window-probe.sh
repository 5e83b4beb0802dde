#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The window probe. Readers in the host namespace and in service (slave)
# namespaces read the probe files of /usr, /opt and /etc as fast as they can
# while tuck refreshes N times (default 100, 200 with TUCK_SOAK=1),
# alternating two image sets whose probe files say generation=A /
# generation=B (sysext) and CA / CB (confext).
# Any read of generation=base or of a missing file is an exposure.
#
#   tuck (MOVE_MOUNT_BENEATH):        exposures must be 0 for /usr, /opt, /etc
#   tuck --allow-window (beneath
#   hidden by a seccomp filter):      exposures must be > 0: the probe can see
#                                     a window when there is one
#
# The ProtectSystem-like namespace (its own read-only bind of /usr, made after
# the first merge) does not follow by itself: each refresh heals it
# (StalePolicy=heal, the default, tuckctl and tuckd alike). Its figures are
# printed, not asserted (the heal primitive has tests of its own).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

REFRESHES=${TUCK_PROBE_REFRESHES:-$(stress_size 100 200)}

files() {
        echo "$ROOT/usr/lib/tuck-probe/generation" "$ROOT/opt/tuck-probe/generation" "$ROOT/etc/tuck-probe/generation"
}

# start_reader TAG [PID-of-namespace]
start_reader() {
        local tag=$1 ns=${2:-}
        local out="$ROOT/tmp/probe-$tag.json" ready="$ROOT/tmp/probe-$tag.ready"
        rm -f "$out" "$ready"
        # nice 19, as in tuckd-lib.sh's start_probe: the readers only need
        # the cycles the swaps leave; they still see thousands of windows
        # when the guard is off.
        if [[ -n $ns ]]; then
                nice -n 19 nsenter --mount --target "$ns" -- "$TUCK_PROBE" --tag="$tag" --ready="$ready" --output="$out" $(files) &
        else
                nice -n 19 "$TUCK_PROBE" --tag="$tag" --ready="$ready" --output="$out" $(files) &
        fi
        READERS+=($!)
        while [[ ! -e $ready ]]; do sleep 0.01; done
}

stop_readers() {
        kill -TERM "${READERS[@]}"
        wait "${READERS[@]}" || true
        READERS=()
}

# summary TAG: "reads base missing" per file and the labels seen, from the reader's JSON.
summary() {
        python3 - "$ROOT/tmp/probe-$1.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for f in r["files"]:
    h = f["path"].split("/")[-3] if "/usr/" in f["path"] else f["path"].split("/")[-3]
    name = "/" + f["path"].split("/tuck-probe/")[0].split("/")[-1]
    name = "/usr" if "/usr/lib/" in f["path"] else name
    labels = " ".join(f"{k}:{v['count']}" for k, v in sorted(f["labels"].items()))
    print(f"{name} reads={f['reads']} base={f['base']} missing={f['missing']} errors={f['errors']} "
          f"transitions={f['transitions']} labels[{labels}]")
PY
}

exposures() {
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["exposures"])' "$ROOT/tmp/probe-$1.json"
}

reads() {
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(r["reads"])' "$ROOT/tmp/probe-$1.json"
}

transitions() {
        python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print(min(f["transitions"] for f in r["files"]))' \
                "$ROOT/tmp/probe-$1.json"
}

# run_round MODE: MODE is "beneath" or "window".
run_round() {
        local mode=$1 i set tuckcmd
        host_setup
        READERS=()
        local a b ca cb
        a=$(mkimg foo 1 sysext A)
        b=$(mkimg foo 1 sysext B)
        ca=$(mkimg cfg 1 confext CA)
        cb=$(mkimg cfg 1 confext CB)
        link_img "$a" foo
        link_img "$ca" cfg run/confexts
        tuck merge >/dev/null

        service plain
        local plain=$SERVICE_PID
        service protect --protect
        local protect=$SERVICE_PID

        if [[ $mode == window ]]; then
                tuckcmd=("$TUCK_FAULT" --hide-beneath -- "$TUCKCTL" --root="$ROOT" --allow-window -q)
        else
                tuckcmd=("$TUCKCTL" --root="$ROOT" -q)
        fi

        start_reader "$mode-host"
        start_reader "$mode-service" "$plain"
        start_reader "$mode-protect" "$protect"

        local start=$SECONDS failures=0
        for ((i = 1; i <= REFRESHES; i++)); do
                if ((i % 2)); then
                        link_img "$b" foo
                        link_img "$cb" cfg run/confexts
                else
                        link_img "$a" foo
                        link_img "$ca" cfg run/confexts
                fi
                "${tuckcmd[@]}" refresh 2>"$ROOT/tmp/refresh.err" || { failures=$((failures + 1)); cat "$ROOT/tmp/refresh.err" >&2; }
        done
        local took=$((SECONDS - start))
        stop_readers

        diag "$mode: $REFRESHES refreshes in ${took}s, $failures failed"
        for r in host service protect; do
                diag "$mode $r: reads=$(reads "$mode-$r") exposures=$(exposures "$mode-$r")"
                diag "$(summary "$mode-$r" | sed 's/^/  /')"
        done
        expect_eq "$mode: all $REFRESHES refreshes succeeded" "$failures" 0
        check "$mode: the host reader saw the generations change ($(transitions "$mode-host") transitions)" \
                test "$(transitions "$mode-host")" -ge $((REFRESHES / 2))
        check "$mode: the service reader saw the generations change ($(transitions "$mode-service") transitions)" \
                test "$(transitions "$mode-service")" -ge $((REFRESHES / 2))

        EXPOSED_HOST=$(exposures "$mode-host")
        EXPOSED_SERVICE=$(exposures "$mode-service")
        tuck unmerge >/dev/null
        host_teardown
}

run_round beneath
expect_eq "tuck: 0 exposures (base or missing file) in the host namespace" "$EXPOSED_HOST" 0
expect_eq "tuck: 0 exposures in the service namespace" "$EXPOSED_SERVICE" 0

run_round window
check "--allow-window: the probe catches the window in the host namespace ($EXPOSED_HOST exposures)" \
        test "$EXPOSED_HOST" -gt 0
check "--allow-window: the probe catches the window in the service namespace ($EXPOSED_SERVICE exposures)" \
        test "$EXPOSED_SERVICE" -gt 0

tap_done
