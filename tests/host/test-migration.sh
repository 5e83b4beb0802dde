#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Migration from systemd-sysext (252, as installed here): its overlay is on
# top; tuck refresh captures the base from underneath it (in a private
# namespace of its own) and replaces it the same atomic way, and heals a
# container systemd-sysext's refreshes had left on an older overlay of its
# own. A window probe runs throughout. For contrast, the same probe during systemd-sysext's own
# refreshes counts its window.
#
# systemd-sysext runs inside this test's private namespace with --root, its
# images under the namespace's own run/extensions; it needs /run to be a
# mount point, so the test mounts a tmpfs there (in its private namespace).
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SYSEXT_REFRESHES=${TUCK_SYSEXT_REFRESHES:-30}
mount -t tmpfs tuck-test-run /run
host_setup

files() {
        echo "$ROOT/usr/lib/tuck-probe/generation" "$ROOT/opt/tuck-probe/generation"
}

probe_start() {
        rm -f "$ROOT/tmp/probe.ready"
        # nice 19, as in tuckd-lib.sh's start_probe.
        nice -n 19 "$TUCK_PROBE" --tag="$1" --ready="$ROOT/tmp/probe.ready" --output="$ROOT/tmp/probe-$1.json" $(files) &
        PROBE=$!
        while [[ ! -e $ROOT/tmp/probe.ready ]]; do sleep 0.01; done
}

# In this shell, not in a $(...) or <(...): only the probe's parent can wait
# for it to write its results, and elsewhere `wait` returns at once.
probe_stop() {
        kill -TERM "$PROBE"
        wait "$PROBE" || true
}

probe_result() {
        python3 -c '
import json, sys
r = json.load(open(sys.argv[1]))
print(r["reads"], r["exposures"], " ".join(sorted(set(l for f in r["files"] for l in f["labels"]))))' "$ROOT/tmp/probe-$1.json"
}

s1=$(mkimg foo 1 sysext S1)
s2=$(mkimg foo 1 sysext S2)
t=$(mkimg foo 2 sysext TUCK)

# systemd-sysext's own refresh, for contrast.
install_img "$s1" foo  # a copy: systemd-sysext resolves symlinks inside --root
systemd-sysext --root="$ROOT" merge >/dev/null
expect_eq "systemd-sysext merged its overlay" "$(awk -v t="$ROOT/usr" '$5 == t { print $(NF-1) }' /proc/self/mountinfo)" sysext
# A container started now binds that overlay; systemd-sysext's refreshes
# leave it behind on it.
spawn_container ctr "$ROOT/usr" "$ROOT/tmp/ctr"
ctr=$NS_PID_ctr
probe_start sysext
for ((i = 1; i <= SYSEXT_REFRESHES; i++)); do
        if ((i % 2)); then install_img "$s2" foo; else install_img "$s1" foo; fi
        systemd-sysext --root="$ROOT" refresh >/dev/null
done
probe_stop
read -r reads exposures labels < <(probe_result sysext)
diag "systemd-sysext 252: $SYSEXT_REFRESHES refreshes, $reads reads, $exposures exposures (labels seen: $labels)"
expect_eq "the container stayed on systemd-sysext's first overlay" \
        "$(ns_read "$ctr" /usr/lib/tuck-probe/generation)" S1
check "the probe sees systemd-sysext's window ($exposures exposures in $reads reads)" test "$exposures" -gt 0

# The takeover.
service plain
plain=$SERVICE_PID
install_img "$t" foo
probe_start takeover
out=$(tuck refresh)
sleep 0.2   # let the reader read the new generation too
probe_stop
read -r reads exposures labels < <(probe_result takeover)
diag "$out"
diag "takeover: $reads reads, $exposures exposures (labels seen: $labels)"
check "tuck refresh takes systemd-sysext's overlay over" grep -q '^/usr: taken-over, generation 0 -> 1' <<<"$out"
expect_eq "no exposure during the takeover" "$exposures" 0
check "the reader saw systemd-sysext's generation and tuck's ($labels)" grep -Eq "^S[12] TUCK$" <<<"$labels"
expect_eq "the host sees tuck's generation" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" TUCK
expect_eq "so does a service" "$(in_ns "$plain" sed -n 's/^generation=//p' "$ROOT/usr/lib/tuck-probe/generation")" TUCK
expect_eq "the container left behind by systemd-sysext was healed onto tuck's generation" \
        "$(ns_read "$ctr" /usr/lib/tuck-probe/generation)" TUCK
check "systemd-sysext's overlay is gone from /usr and /opt" \
        bash -c "! grep -E ' $ROOT/(usr|opt) .* - overlay sysext ' /proc/self/mountinfo"
check "tuck's overlay is the only one on /usr" \
        test "$(grep -c " $ROOT/usr .* - overlay " /proc/self/mountinfo)" = 1
check "the base was captured from beneath it: no sysext layer in the new overlay" \
        bash -c "! grep -q '/run/systemd/sysext' <<<\"\$(awk -v t='$ROOT/usr' '\$5 == t' /proc/self/mountinfo)\""

out=$(tuck unmerge)
expect_eq "unmerge reveals the real base, not systemd-sysext's overlay" \
        "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" base
tap_done
