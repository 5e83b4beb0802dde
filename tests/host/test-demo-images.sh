#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The images meson builds from images/trees (the demo's and the VM's) merge
# and refresh: generation 1, then 2, for the sysext and the confext.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

host_setup
install_img "$DEMO_IMAGES/tuck-demo-1.raw" tuck-demo
install_img "$DEMO_IMAGES/tuck-demo-conf-1.raw" tuck-demo-conf run/confexts
check "list: both demo images are valid" test "$(tuck list | grep -c ' valid ')" = 2
tuck merge >/dev/null
expect_eq "/usr shows tuck-demo 1" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" demo-1
expect_eq "/opt shows tuck-demo 1" "$(probe_label "$ROOT/opt/tuck-probe/generation")" demo-1
expect_eq "/etc shows tuck-demo-conf 1" "$(probe_label "$ROOT/etc/tuck-probe/generation")" conf-1
check "the tree's files are there" test -f "$ROOT/usr/share/tuck-demo/README" -a -f "$ROOT/etc/tuck-demo/demo.conf"
install_img "$DEMO_IMAGES/tuck-demo-2.raw" tuck-demo
install_img "$DEMO_IMAGES/tuck-demo-conf-2.raw" tuck-demo-conf run/confexts
tuck refresh >/dev/null
expect_eq "/usr shows tuck-demo 2" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" demo-2
expect_eq "/etc shows tuck-demo-conf 2" "$(probe_label "$ROOT/etc/tuck-probe/generation")" conf-2
check "versions come from the release file" grep -q '"tuck-demo":{"floor":"2"' <<<"$(tr -d ' \n' <"$ROOT/var/lib/tuck/versions.json")"
tap_done
