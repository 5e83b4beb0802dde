#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A scan short of file descriptors still sees every namespace. It holds a
# pidfd for each namespace it keeps, and the soft RLIMIT_NOFILE is 1024 by
# default: past that, pidfd_open() fails with EMFILE, and a namespace whose
# pidfd could not be taken used to be taken for gone, so a refresh left it
# behind without a word and status did not count it. Now tuckctl raises the
# soft limit to the hard one at start-up, and where even that is not enough
# the namespace is reported unreadable ("Too many open files"), never
# dropped. SERVICES protected services (each stays behind at every swap) and
# a tuckctl whose limits are set by prlimit.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

SERVICES=30
host_setup

install_img "$(mkimg foo 1 sysext v1)" foo
check "merge v1" grep -q '^/usr: merged' <<<"$(tuck merge)"
for ((i = 0; i < SERVICES; i++)); do
        service "protected$i" --protect
done

# every_namespace_reported OUT: a line for each service, healed or said unreadable.
every_namespace_reported() {
        local n
        n=$(grep -c -E '^/usr: .* did not follow .*: (healed|cannot read its view: Too many open files)$' "$1" || true)
        ((n == SERVICES)) || { echo "$n of $SERVICES namespaces in the report" >&2; cat "$1" >&2; return 1; }
}

# A hard limit too low to raise: some namespaces cannot be read, and say so.
out=$LOGS/status-low.out
prlimit --nofile=32:32 "$TUCKCTL" --root="$ROOT" status >"$out" 2>&1 || true
check "status at 32 descriptors counts every namespace" \
        grep -q "^  namespaces: $((SERVICES + 1)): " "$out"
check "... and says why it could not read some" grep -q 'unreadable (Too many open files)' "$out"

install_img "$(mkimg foo 2 sysext v2)" foo
out=$LOGS/refresh-low.out
prlimit --nofile=32:32 "$TUCKCTL" --root="$ROOT" refresh >"$out" 2>&1 || true
check "a refresh at 32 descriptors swaps" grep -q '^/usr: refreshed' "$out"
check "... and reports every namespace it could not heal, none left out" every_namespace_reported "$out"
check "... some of them unreadable for want of descriptors, wanting nothing known" \
        grep -q 'did not follow (none, wants unknown): cannot read its view: Too many open files$' "$out"

# A low soft limit under a high hard one: raised, and every namespace healed.
install_img "$(mkimg foo 3 sysext v3)" foo
out=$LOGS/refresh-soft.out
prlimit --nofile=32:4096 "$TUCKCTL" --root="$ROOT" refresh >"$out" 2>&1 || true
n=$(grep -c 'did not follow .*: healed$' "$out" || true)
expect_eq "a refresh at a soft limit of 32 (hard 4096) heals all $SERVICES" "$n" "$SERVICES"
out=$(tuck status)
check "then /usr is at generation 3" grep -q '^/usr (sysext): generation 3 since' <<<"$out"
check "... and every namespace with it" \
        grep -q "^  namespaces: $((SERVICES + 1)): $((SERVICES + 1)) on the current generation, 0 behind" <<<"$out"
tap_done
