#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# 400 refreshes (1,000 with TUCK_SOAK=1; TUCK_LEAK_REFRESHES) in one
# process, alternating two image sets (sysext + confext), each time as fresh
# copies (new loop devices every refresh), with a service namespace
# attached: mounts, staging mounts, loop devices and open fds after the last
# equal those after the first.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

N=${TUCK_LEAK_REFRESHES:-$(stress_size 400 1000)}
host_setup
service plain
a=$(mkimg foo 1 sysext A)
b=$(mkimg foo 1 sysext B)
ca=$(mkimg cfg 1 confext CA)
cb=$(mkimg cfg 1 confext CB)
install_img "$a" foo
install_img "$ca" cfg run/confexts
tuck merge >/dev/null
before=$(nsenter --mount --target "$SERVICE_PID" cat /proc/self/mountinfo | wc -l)

"$LEAK_CHECK" "$ROOT" "$N" "$ROOT/run" \
        "$ROOT/run/extensions/foo.raw=$a" "$ROOT/run/confexts/cfg.raw=$ca" -- \
        "$ROOT/run/extensions/foo.raw=$b" "$ROOT/run/confexts/cfg.raw=$cb" | sed 's/^ok \([0-9]\)/ok \1/' >"$ROOT/tmp/leak.tap" || true
cat "$ROOT/tmp/leak.tap"
TAP_N=$(grep -c '^\(not \)\?ok' "$ROOT/tmp/leak.tap" || true)
TAP_FAILED=$(grep -c '^not ok' "$ROOT/tmp/leak.tap" || true)
((TAP_N == 5)) || not_ok "leak-check ran to the end"
after=$(nsenter --mount --target "$SERVICE_PID" cat /proc/self/mountinfo | wc -l)
expect_eq "the service namespace's mounts after $N refreshes equal those before" "$after" "$before"
expect_eq "the service sees the last generation" \
        "$(nsenter --mount --target "$SERVICE_PID" sed -n 's/^generation=//p' "$ROOT/usr/lib/tuck-probe/generation")" \
        "$( ((N % 2)) && echo B || echo A)"
expect_eq "every refresh made a new generation" \
        "$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["generation"])' "$ROOT/run/tuck/generations/usr.json")" \
        $((N + 1))
tap_done
