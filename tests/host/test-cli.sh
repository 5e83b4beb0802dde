#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tuckctl speaks systemd-sysext's command line: status as the default verb,
# a help verb, --version in systemd's form, --json=pretty|short|off,
# --no-legend, --no-pager and the pager systemd's tools run ($SYSTEMD_PAGER,
# $PAGER, only on a terminal), --force meaning "ignore version
# incompatibilities", --always-refresh meaning "even if unchanged"; and
# invoked as systemd-sysext / systemd-confext it is that tool (one class, its
# table, its exit status). tuck's own exit codes stay as documented.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

host_setup
a=$(mkimg foo 1 sysext A)
other=$(mkimg bar 1 sysext B --id=otheros)
c=$(mkimg cfg 1 confext CA)
install_img "$a" foo
install_img "$c" cfg run/confexts
SYSEXT=$ROOT/tmp/bin/systemd-sysext
CONFEXT=$ROOT/tmp/bin/systemd-confext
mkdir -p "$ROOT/tmp/bin"
ln -s "$TUCKCTL" "$SYSEXT"
ln -s "$TUCKCTL" "$CONFEXT"

# rc CMD...: the exit status of CMD (its output to the log).
rc() {
        local r=0
        "$@" >>"$LOGS/cli.log" 2>&1 || r=$?
        echo "$r"
}

# --- verbs, help, version ----------------------------------------------------
out=$(tuck 2>&1) || true
check "no verb: status" grep -q '^/usr (sysext): not merged' <<<"$out"
expect_eq "no verb: exit status 0" "$(rc tuck)" 0
check "help verb" grep -q '^tuckctl \[OPTIONS...\] \[COMMAND\]' <<<"$(tuck help)"
check "help lists --always-refresh and --no-reload" bash -c 'grep -q -- "--always-refresh" <<<"$1" && grep -q -- "--no-reload" <<<"$1"' _ "$(tuck --help)"
version=$(tuck --version) || true
diag "$version"
check "--version: 'tuck VERSION (VERSION)', as systemd's first line" grep -Eq '^tuck [0-9][0-9.]* \([^)]+\)$' <<<"$(head -n 1 <<<"$version")"
check "--version: a second line of +/- features" grep -Eq '^([+-][A-Z_]+ ?)+$' <<<"$(sed -n 2p <<<"$version")"
check "--version: the features name DDI and VERITY (GPT disk images, dm-verity)" bash -c 'grep -qw -- "+DDI" <<<"$1" && grep -qw -- "+VERITY" <<<"$1"' _ "$(sed -n 2p <<<"$version")"
expect_eq "unknown verb: exit status 2" "$(rc tuck frobnicate)" 2
expect_eq "status with an argument: exit status 2" "$(rc tuck status extra)" 2
expect_eq "--image-policy= (systemd's, not implemented): exit status 2" "$(rc tuck --image-policy=signed status)" 2
check "...and says so" grep -q "image-policy= is systemd-sysext's; tuck does not implement it" <<<"$(tuck --image-policy=x 2>&1 || true)"
check "...and names tuck's own: ImagePolicy= in tuck.conf(5)" grep -q "tuck's is ImagePolicy= in tuck.conf(5)" <<<"$(tuck --image-policy=x 2>&1 || true)"

# --- JSON ----------------------------------------------------------------------
short=$(tuck --json=short status) || true
check "--json=short: one line" test "$(wc -l <<<"$short")" -eq 1
check "--json=short: an array" python3 -c 'import json,sys; assert isinstance(json.loads(sys.argv[1]), list)' "$short"
pretty=$(tuck --json=pretty status) || true
check "--json=pretty: several lines, tab-indented" bash -c '(( $(wc -l <<<"$1") > 3 )) && grep -qP "^\t" <<<"$1"' _ "$pretty"
expect_eq "--json=pretty and --json=short say the same" \
        "$(python3 -c 'import json,sys; print(json.loads(sys.argv[1]) == json.loads(sys.argv[2]))' "$short" "$pretty")" True
expect_eq "--json pretty (a space, as systemd takes it) is --json=pretty" "$(tuck --json pretty status)" "$pretty"
check "--json=off: text" grep -q '^/usr (sysext): not merged' <<<"$(tuck --json=off status)"
expect_eq "--json=bogus: exit status 2" "$(rc tuck --json=bogus status)" 2

# --- --force: ignore version incompatibilities ---------------------------------
install_img "$other" bar
out=$(tuck merge 2>&1) || true
diag "$out"
check "an image for another OS (ID=otheros) is skipped" grep -q "Skipped sysext image.*bar.raw" <<<"$out"
check "...and only foo is merged" bash -c 'grep -A2 "^/usr: merged" <<<"$1" | grep -q "  foo 1" && ! grep -q "  bar 1" <<<"$1"' _ "$out"
out=$(tuck refresh --force 2>&1) || true
diag "$out"
check "refresh --force merges it anyway" grep -q '^/usr: refreshed' <<<"$out"
check "...bar is a layer now" grep -q '^  bar 1' <<<"$out"
out=$(tuck refresh --force 2>&1) || true
check "--force no longer means 'even if unchanged'" grep -q '^/usr: unchanged' <<<"$out"
check "--always-refresh does" grep -q '^/usr: refreshed' <<<"$(tuck refresh --force --always-refresh 2>&1)"
check "--always-refresh=yes too" grep -q '^/usr: refreshed' <<<"$(tuck refresh --force --always-refresh=yes 2>&1)"
check "--always-refresh=no does not" grep -q '^/usr: unchanged' <<<"$(tuck refresh --force --always-refresh=no 2>&1)"
expect_eq "--always-refresh=maybe: exit status 2" "$(rc tuck refresh --always-refresh=maybe)" 2
check "--no-reload is taken" grep -q '^/usr: refreshed' <<<"$(tuck refresh --force --always-refresh --no-reload 2>&1)"
rm "$ROOT/run/extensions/bar.raw"
tuck refresh --remove=bar >/dev/null || true

# --- --no-legend ---------------------------------------------------------------
check "list has a header" grep -q '^CLASS ' <<<"$(tuck list)"
check "list --no-legend has none" bash -c '! grep -q "^CLASS " <<<"$1"' _ "$(tuck list --no-legend)"

# --- the pager: only on a terminal, $SYSTEMD_PAGER then $PAGER, --no-pager ------
# script(1) gives tuckctl a terminal; the "pager" writes what it gets to a file.
# SYSTEMD_PAGERSECURE=0: root outside a login session would otherwise be in
# secure mode, where systemd (and tuck) run only less, never $PAGER.
export SYSTEMD_PAGERSECURE=0
paged() {
        local out=$1
        shift
        rm -f "$out"
        script -qec "$*" /dev/null >/dev/null 2>&1 || true
        [[ -s $out ]]
}
not_paged() {
        ! paged "$@"
}
P=$LOGS/paged
cmd="'$TUCKCTL' --root='$ROOT' list"
check "on a terminal, list goes through \$SYSTEMD_PAGER" paged "$P" "SYSTEMD_PAGER='cat >$P' $cmd"
check "...which got the list" grep -q "foo" "$P"
check "\$PAGER when \$SYSTEMD_PAGER is unset" paged "$P" "env -u SYSTEMD_PAGER PAGER='cat >$P' $cmd"
check "\$SYSTEMD_PAGER wins over \$PAGER" paged "$P" "SYSTEMD_PAGER='cat >$P' PAGER='cat >/dev/null' $cmd"
check "--no-pager: no pager" not_paged "$P" "SYSTEMD_PAGER='cat >$P' $cmd --no-pager"
check "SYSTEMD_PAGER=cat: no pager" not_paged "$P" "SYSTEMD_PAGER=cat PAGER='cat >$P' $cmd"
check "status goes through the pager too" paged "$P" "SYSTEMD_PAGER='cat >$P' '$TUCKCTL' --root='$ROOT' status"
check "--json: never paged" not_paged "$P" "SYSTEMD_PAGER='cat >$P' $cmd --json=short"
rm -f "$P"
SYSTEMD_PAGER="cat >$P" tuck list >/dev/null || true
check "not a terminal: no pager" test ! -e "$P"

# --- invoked as systemd-sysext / systemd-confext -------------------------------
out=$("$SYSEXT" --root="$ROOT") || true
diag "$out"
check "systemd-sysext: status is its table" grep -q '^HIERARCHY EXTENSIONS SINCE$' <<<"$out"
check "systemd-sysext: /usr with its extensions" grep -Eq '^/usr +foo +[A-Z][a-z]{2} [0-9]{4}-' <<<"$out"
check "systemd-sysext: sysext hierarchies only" bash -c '! grep -q "^/etc" <<<"$1"' _ "$out"
check "systemd-confext: /etc only" bash -c 'grep -q "^/etc " <<<"$1" && ! grep -q "^/usr" <<<"$1"' _ "$("$CONFEXT" --root="$ROOT")"
check "systemd-sysext --no-legend: no header" bash -c '! grep -q "^HIERARCHY" <<<"$1"' _ "$("$SYSEXT" --root="$ROOT" --no-legend)"
check "systemd-sysext list: NAME TYPE PATH TIME" grep -q '^NAME TYPE *PATH *TIME$' <<<"$("$SYSEXT" --root="$ROOT" list)"
check "systemd-sysext --help: its own help" grep -q '^systemd-sysext \[OPTIONS...\] COMMAND' <<<"$("$SYSEXT" --help)"
expect_eq "systemd-sysext: unknown verb exits 1, as systemd's" "$(rc "$SYSEXT" --root="$ROOT" frobnicate)" 1
expect_eq "systemd-sysext: tuck's own verb 'beneath' is unknown there" "$(rc "$SYSEXT" --root="$ROOT" beneath / /)" 1
expect_eq "systemd-sysext: --json=bogus exits 1" "$(rc "$SYSEXT" --root="$ROOT" --json=bogus)" 1
expect_eq "systemd-sysext merge while merged: exit 1 ('already merged')" "$(rc "$SYSEXT" --root="$ROOT" merge)" 1
out=$("$SYSEXT" --root="$ROOT" refresh --always-refresh 2>"$LOGS/compat-refresh.err") || true
expect_eq "systemd-sysext refresh: nothing on stdout, as systemd's" "$out" ""
check "...what it did on stderr" grep -q '^/usr: refreshed' "$LOGS/compat-refresh.err"
check "...sysext only: /etc untouched" bash -c '! grep -q "^/etc" "$1"' _ "$LOGS/compat-refresh.err"
expect_eq "systemd-sysext refresh: exit 0" "$(rc "$SYSEXT" --root="$ROOT" refresh)" 0

# Run by systemd-sysext.service itself: its stock ExecStop=systemd-sysext unmerge and
# ExecStart=systemd-sysext merge, from a unit file systemd has not re-read since tuck's
# drop-in came. A cgroup named as that unit (below a slice of this test's) is how
# sd_pid_get_unit() tells.
# cgroup v2 (the unified hierarchy where it is hybrid), as heal-layouts.sh's unit_cgroup.
cg=/sys/fs/cgroup
[[ -d $cg/unified ]] && cg=$cg/unified
unit_cg=$cg/tuck-test-cli-$RANDOM$RANDOM.slice/systemd-sysext.service
mkdir -p "$unit_cg"
trap 'rmdir "$unit_cg" "${unit_cg%/*}" 2>/dev/null || true; host_teardown' EXIT
as_unit() {
        local r=0
        bash -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' _ "$unit_cg" "$@" >>"$LOGS/unit.log" 2>&1 || r=$?
        echo "$r"
}
expect_eq "as systemd-sysext.service: unmerge exits 0" "$(as_unit "$SYSEXT" --root="$ROOT" unmerge)" 0
check "...and unmerged nothing" grep -q "^generation=" "$ROOT/usr/lib/tuck-probe/generation"
expect_eq "...the probe file is still the extension's" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" A
check "...and says why" grep -q "not unmerging while systemd-sysext.service stops" "$LOGS/unit.log"
expect_eq "as systemd-sysext.service: merge while merged is a refresh, exit 0" "$(as_unit "$SYSEXT" --root="$ROOT" merge)" 0
rmdir "$unit_cg" "${unit_cg%/*}" 2>/dev/null || true
expect_eq "not as that unit: unmerge unmerges" "$(rc "$SYSEXT" --root="$ROOT" unmerge)" 0
expect_eq "...the base again" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" base
tuck unmerge >/dev/null || true
tap_done
