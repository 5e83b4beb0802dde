#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tuckd boots with an extension it must hold back (issue 9): a host ran foo
# 2.0 and bar 1.0; before the next boot foo's image went back to 1.0. The
# start-up refresh merges everything it may (bar), holds foo back, and says
# so: READY=1 still comes, STATUS= starts with "degraded: foo held back
# (downgrade 2.0 → 1.0 not allowed)", the Degraded and HeldBack properties
# are set, the journal has an entry naming both versions and the override,
# and `tuckctl status` exits 3. The operator's decision (RefreshEx with
# allow-downgrade-names, or tuckctl through tuckd) is recorded with the call
# that made it, and the next boot honours it: not degraded, foo 1.0.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

EXT=$ROOT/var/lib/extensions
printf '[Daemon]\nWatch=no\n' >"$CONF"

# ext OUT NAME VERSION: an image whose usr/lib/tuck-test/NAME says VERSION.
ext() {
        local out=$1 name=$2 version=$3 t
        t=$(mktemp -d "$W"/raw.XXXXXX)
        make_ext_dir "$t" "$name" "$version" "$name-$version"
        mkdir -p "$t/usr/lib/tuck-test"
        echo "$version" >"$t/usr/lib/tuck-test/$name"
        mksquashfs "$t" "$out" -quiet -noappend -no-progress -all-root >/dev/null
        rm -rf "$t"
}
drop() {
        cp "$W/$1-$2.raw" "$EXT/.$1.raw.tmp"
        mv "$EXT/.$1.raw.tmp" "$EXT/$1.raw"
}
seen() {
        cat "$ROOT/usr/lib/tuck-test/$1" 2>/dev/null || echo missing
}
# reboot: tuckd stops, the overlays and /run/tuck go; /var/lib/tuck and the images stay.
reboot() {
        stop_tuckd
        "$TUCKCTL" --root="$ROOT" unmerge >/dev/null
        umount "$ROOT/run/tuck/staging.mnt"
        umount "$ROOT/run/tuck"
        rm -rf "$ROOT/run/tuck"
}
status_line() {
        grep '^STATUS=' "$NOTIFY" | tail -n 1
}

for v in 1.0 2.0; do ext "$W/foo-$v.raw" foo "$v"; done
for v in 0.9 1.0; do ext "$W/bar-$v.raw" bar "$v"; done
drop foo 2.0
drop bar 1.0
start_journal
start_bus
start_tuckd
check "first boot: foo 2.0 and bar 1.0 merged" test "$(seen foo)/$(seen bar)" = 2.0/1.0

# ---- the next boot: foo's image is 1.0 now
reboot
drop foo 1.0
start_tuckd
check "READY=1 comes although foo is held back" grep -qx 'READY=1' "$NOTIFY"
check "the rest is merged: bar 1.0" test "$(seen bar)" = 1.0
check "foo stays out (nothing of it is staged after a reboot)" test "$(seen foo)" = missing
status=$(status_line)
diag "$status"
check "STATUS= says degraded and why" grep -qF "STATUS=degraded: foo held back (downgrade 2.0 → 1.0 not allowed); $ROOT/usr generation 1" <<<"$status"
check "Degraded property is true" test "$(prop Degraded)" = "b true"
held=$(prop HeldBack 2>&1 || true)
diag "HeldBack: $held"
check "HeldBack names foo, its reason, both versions and the override" \
        grep -qF "\"$ROOT/usr\" \"foo\" \"downgrade\" \"\" \"1.0\" \"--allow-downgrade=foo\"" <<<"$held"
check "a journal entry for the hold, with its fields" in_journal -qx "TUCK_EXTENSION=foo"
check "the journal entry names the override" grep -qx "TUCK_OVERRIDE=--allow-downgrade=foo" "$JOURNAL"
check "the journal entry has the refused version" grep -qx "TUCK_REFUSED_VERSION=1.0" "$JOURNAL"
check "the journal entry has its MESSAGE_ID" grep -qx "MESSAGE_ID=cc103ed6317642e082c5c2967f86e900" "$JOURNAL"
rc=0
out=$("$TUCKCTL" --root="$ROOT" status 2>&1) || rc=$?
diag "$out"
check "tuckctl status exits 3 while degraded (got $rc)" test "$rc" -eq 3
check "tuckctl status says what is held back" grep -q "^State: degraded: foo held back (downgrade 2.0 → 1.0 not allowed)" <<<"$out"
json=$(bctl --json=short call org.tuck1 /org/tuck1 org.tuck1.Manager Versions 2>&1 || true)
check "Versions over D-Bus: foo's floor 2.0, not active" python3 -c '
import json, sys
v = {e["extension"]: e for e in json.loads(json.load(sys.stdin)["data"][0])["extensions"]}
assert v["foo"]["floor"] == "2.0" and v["foo"]["active"] == {}, v["foo"]
assert v["foo"]["held_back"][0]["reason"] == "downgrade", v["foo"]
assert v["bar"]["active"] == {sys.argv[1] + "/usr": "1.0"} or v["bar"]["active"] == {"/usr": "1.0"}, v["bar"]
' "$ROOT" <<<"$json"

# ---- the operator's decision, over the bus with the options dict
bctl introspect --xml-interface org.tuck1 /org/tuck1 >"$LOGS"/introspect.xml
for want in '<method name="RefreshEx">' '<arg type="a{sv}" name="options" direction="in"/>' \
        '<method name="MergeEx">' '<method name="UnmergeEx">' '<method name="Versions">' '<method name="Forget">' \
        '<property name="Degraded" type="b" access="read">' '<property name="HeldBack" type="a(sssssss)" access="read">'; do
        check "introspection has $want" grep -qF "$want" "$LOGS"/introspect.xml
done
if out=$(call RefreshEx 'a{sv}' 1 no-such-option b true 2>&1); then
        not_ok "an unknown option is accepted: $out"
else
        check "an unknown option is refused: $out" grep -q "Unknown option 'no-such-option'" <<<"$out"
fi
if out=$(call RefreshEx 'a{sv}' 1 allow-downgrade-names as 1 ../etc 2>&1); then
        not_ok "a bad name is accepted: $out"
else
        check "a bad extension name is refused: $out" grep -q "'../etc' in option 'allow-downgrade-names' is not an extension name" <<<"$out"
fi
check "RefreshEx(allow-downgrade-names=[foo]) -> changed" \
        test "$(call RefreshEx 'a{sv}' 2 allow-downgrade-names as 1 foo command s 'ops rollback' 2>&1)" = "b true"
check "foo 1.0 merged, bar stays" test "$(seen foo)/$(seen bar)" = 1.0/1.0
check "Degraded is false again" test "$(prop Degraded)" = "b false"
check "HeldBack is empty" test "$(prop HeldBack)" = "a(sssssss) 0"
check "STATUS= is no longer degraded" bash -c '! grep -q degraded <<<"$1"' _ "$(status_line)"
check "the decision is recorded with the caller's words and the bus call" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["sysext"]["foo"]["decision"]
assert d["kind"] == "downgrade-allowed" and d["version"] == "1.0" and d["previous_floor"] == "2.0", d
assert d["via"].startswith("ops rollback, through D-Bus RefreshEx (uid 0, pid "), d' "$ROOT/var/lib/tuck/versions.json"

# ---- the boot after that honours the decision
reboot
start_tuckd
check "the boot after the decision: foo 1.0 and bar 1.0 merged" test "$(seen foo)/$(seen bar)" = 1.0/1.0
check "and not degraded" bash -c '! grep -q degraded <<<"$1"' _ "$(status_line)"
check "Degraded is false" test "$(prop Degraded)" = "b false"

# ---- tuckctl through tuckd: --allow-downgrade=NAME goes as RefreshEx, recorded as tuckctl's command
drop bar 0.9
rc=0
out=$("$TUCKCTL" --root="$ROOT" refresh 2>&1) || rc=$?
check "bar 0.9 through tuckd without the flag: exit 3 (got $rc: $out)" test "$rc" -eq 3
check "bar stays 1.0" test "$(seen bar)" = 1.0
check "Degraded while bar is held back" test "$(prop Degraded)" = "b true"
out=$("$TUCKCTL" --root="$ROOT" refresh --allow-downgrade=bar 2>&1 || true)
check "tuckctl refresh --allow-downgrade=bar through tuckd: $out" grep -q "refresh (through tuckd): done" <<<"$out"
check "bar 0.9 active" test "$(seen bar)" = 0.9
check "recorded as tuckctl's command, through RefreshEx" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["sysext"]["bar"]["decision"]
assert d["via"].startswith("tuckctl refresh --allow-downgrade=bar, through D-Bus RefreshEx (uid 0, pid "), d' \
        "$ROOT/var/lib/tuck/versions.json"
check "the old Refresh(t) signature still works" test "$(call Refresh t 1)" = "b true"
call Merge t 0 >/dev/null 2>&1 || true
check "a Merge when merged (refused: use Refresh) does not make the host degraded" test "$(prop Degraded)" = "b false"

check "Versions is for everyone (read-only)" bash -c 'bctl_nobody() { setpriv --reuid=nobody --regid=nogroup --clear-groups -- busctl --address="$1" "${@:2}"; }
        bctl_nobody "$1" call org.tuck1 /org/tuck1 org.tuck1.Manager Versions >/dev/null' _ "$BUS"

# ---- SIGHUP re-reads libtuck's policy too: AllowDowngrade= decides what is held back
printf '[Daemon]\nWatch=no\n[Policy]\nAllowDowngrade=yes\n' >"$CONF"
before=$(prop RefreshCount | awk '{print $2}')
kill -HUP "$TUCKD_PID"
for ((i = 0; i < 100; i++)); do
        (($(prop RefreshCount | awk '{print $2}') > before)) && break
        sleep 0.05
done
ext "$W/foo-0.5.raw" foo 0.5
drop foo 0.5
check "after SIGHUP with AllowDowngrade=yes, a downgrade goes through" test "$(call Refresh t 0 2>&1)" = "b true"
check "foo 0.5 active" test "$(seen foo)" = 0.5
printf '[Daemon]\nWatch=no\n' >"$CONF"
before=$(prop RefreshCount | awk '{print $2}')
kill -HUP "$TUCKD_PID"
for ((i = 0; i < 100; i++)); do
        (($(prop RefreshCount | awk '{print $2}') > before)) && break
        sleep 0.05
done
ext "$W/foo-0.4.raw" foo 0.4
drop foo 0.4
if out=$(call Refresh t 0 2>&1); then
        not_ok "after SIGHUP without AllowDowngrade=, a downgrade went through: $out"
else
        check "after SIGHUP without AllowDowngrade=, a downgrade is held back again" grep -q "held back: foo: downgrade 0.5 → 0.4" <<<"$out"
fi
check "and the decision AllowDowngrade= let through names it" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["sysext"]["foo"]["decision"]
assert d["kind"] == "downgrade-allowed" and d["version"] == "0.5" and "AllowDowngrade=yes in" in d["via"], d' \
        "$ROOT/var/lib/tuck/versions.json"

# ---- Forget over the bus: root only, retires the floor
if out=$(bctl_nobody call org.tuck1 /org/tuck1 org.tuck1.Manager Forget as 1 bar 2>&1); then
        not_ok "Forget by nobody accepted: $out"
else
        ok "Forget by nobody refused: $out"
fi
out=$(call Forget as 1 bar 2>&1 || true)
check "Forget(bar): $out" grep -q "forgot sysext .*bar.*: floor 0.9" <<<"$out"
check "and says bar is still active" grep -q ".bar.. is still active" <<<"$out"
check "bar has no entry in versions.json" python3 -c '
import json, sys
assert "bar" not in json.load(open(sys.argv[1]))["sysext"]' "$ROOT/var/lib/tuck/versions.json"
if out=$(call Forget as 1 nosuch 2>&1); then
        not_ok "Forget of an unknown extension accepted: $out"
else
        check "Forget of an unknown extension fails and says so" grep -q "no floor recorded for 'nosuch'" <<<"$out"
fi

tap_done
