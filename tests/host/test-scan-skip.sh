#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A refresh that changes nothing reads no namespace when none can be behind
# (issue 14): a namespace goes behind only at a swap, so when the last
# complete scan, at this generation with its overlay still in place, found
# every namespace current or healed, the no-op refresh skips the scan (its
# debug line says so). Right after a swap, and after a heal, the next no-op
# skips; with StalePolicy=report a namespace left behind makes every no-op
# scan again, and report it.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

host_setup
mkdir -p "$ROOT/etc/tuck"

# noop_scanned: a no-op refresh of /usr read the namespaces (0) or skipped them (1).
noop_skipped() {
        tuck -v refresh >"$LOGS/noop.out" 2>&1 || true
        grep -q '^/usr: unchanged' "$LOGS/noop.out" || { cat "$LOGS/noop.out" >&2; return 2; }
        grep -q "usr: no namespace was behind generation [0-9]* at its last scan, and it is still in place: not scanned" \
                "$LOGS/noop.out"
}

install_img "$(mkimg foo 1 sysext v1)" foo
check "merge v1" grep -q '^/usr: merged' <<<"$(tuck merge)"
service follower1
service follower2

install_img "$(mkimg foo 2 sysext v2)" foo
check "refresh to v2, two namespaces follow" grep -q '^/usr: refreshed' <<<"$(tuck refresh)"
check "a no-op right after a swap that left no one behind skips the scan" noop_skipped
check "and so does the next" noop_skipped

service protected --protect
install_img "$(mkimg foo 3 sysext v3)" foo
out=$(tuck refresh)
check "refresh to v3 heals the protected service" grep -q 'did not follow.*: healed$' <<<"$out"
check "a no-op after a heal that brought every namespace over skips the scan" noop_skipped

printf '[Daemon]\nStalePolicy=report\n' >"$ROOT/etc/tuck/tuck.conf"
install_img "$(mkimg foo 4 sysext v4)" foo
out=$(tuck refresh)
check "with StalePolicy=report the protected service stays behind v4" grep -q 'did not follow' <<<"$out"
if noop_skipped; then not_ok "then a no-op scans again"; else ok "then a no-op scans again"; fi
check "and reports the namespace behind" grep -q 'did not follow' "$LOGS/noop.out"
tap_done
