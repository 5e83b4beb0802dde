#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# org.tuck1.Manager end to end on a private bus: introspection, every method,
# the Generations property change, the GenerationChanged signal, Status/List
# JSON, bad flags, a refused downgrade, SIGHUP, READY/STATUS, the journal
# entries, and callers that are not root: refused by the bus policy, and
# refused by tuckd itself under a policy that lets the call through.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

EXT=$ROOT/var/lib/extensions
printf '[Daemon]\nWatch=no\n' >"$CONF"

make_raw "$W"/foo-1.raw foo 1 v1
mv "$W"/foo-1.raw "$EXT"/foo.raw
start_journal
start_bus
start_tuckd
check "start-up merged generation 1 (v1)" test "$(marker)" = v1

# ---- introspection documents the interface
bctl introspect --xml-interface org.tuck1 /org/tuck1 >"$LOGS"/introspect.xml
for want in '<interface name="org.tuck1.Manager">' \
        '<method name="Refresh">' '<arg type="t" name="flags" direction="in"/>' \
        '<arg type="b" name="changed" direction="out"/>' '<method name="Merge">' \
        '<method name="Unmerge">' '<arg type="s" name="status_json" direction="out"/>' \
        '<arg type="s" name="images_json" direction="out"/>' \
        '<signal name="GenerationChanged">' '<arg type="t" name="new_generation"/>' \
        '<signal name="NamespaceStale">' '<property name="Generations" type="a{st}" access="read">'; do
        check "introspection has $want" grep -qF "$want" "$LOGS"/introspect.xml
done

check "READY=1 sent" grep -qx 'READY=1' "$NOTIFY"
check "STATUS= shows the generation" grep -q "^STATUS=.*$ROOT/usr generation 1" "$NOTIFY"
check "STATUS= shows unmerged hierarchies" grep -q "^STATUS=.*$ROOT/opt not merged" "$NOTIFY"
version=$(prop Version)
check "Version property ($version)" test "${version#s \"}" != "$version"

# ---- watch signals and property changes for the rest of the test
gdbus monitor --address "$BUS" --dest org.tuck1 --object-path /org/tuck1 >"$LOGS"/monitor 2>&1 &
pids+=($!)
sleep 0.5

# ---- Merge: already merged at start-up, so refused (use Refresh), as tuckctl merge
if out=$(call Merge t 0 2>&1); then
        not_ok "Merge on a merged system went through: $out"
else
        check "Merge(0) when merged is refused: $out" grep -q 'Merge refused: .*already merged' <<<"$out"
fi
gens=$(prop Generations)
check "Generations: usr at 1 ($gens)" grep -q "\"$ROOT/usr\" 1" <<<"$gens"

# ---- Refresh to v2
make_raw "$W"/foo-2.raw foo 2 v2
mv "$W"/foo-2.raw "$EXT"/foo.raw
check "Refresh(0) -> changed" test "$(call Refresh t 0)" = "b true"
check "marker is v2 after Refresh" test "$(marker)" = v2
check "Refresh(0) again -> nothing to do" test "$(call Refresh t 0)" = "b false"
check "Refresh(force) -> changed" test "$(call Refresh t 1)" = "b true"
check "marker still v2" test "$(marker)" = v2

# ---- bad flags
if out=$(call Refresh t 1099511627776 2>&1); then
        not_ok "Refresh(1 << 40) accepted: $out"
else
        check "Refresh(1 << 40) refused as InvalidArgs" grep -q 'Unknown flags' <<<"$out"
fi

# ---- refused: a downgrade leaves v2 in place
make_raw "$W"/foo-1.raw foo 1 v1
mv "$W"/foo-1.raw "$EXT"/foo.raw
if out=$(call Refresh t 0 2>&1); then
        not_ok "downgrade accepted: $out"
else
        ok "downgrade refused: $out"
fi
check "marker still v2 after the refused downgrade" test "$(marker)" = v2
check "Refresh(allow-downgrade) -> changed" test "$(call Refresh t 2)" = "b true"
check "marker v1 after allowed downgrade" test "$(marker)" = v1
check "the decision is recorded with the bus call that made it" python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))["sysext"]["foo"]["decision"]
assert d["kind"] == "downgrade-allowed" and d["version"] == "1" and d["previous_floor"] == "2", d
assert d["via"].startswith("D-Bus Refresh (uid 0, pid "), d' "$ROOT/var/lib/tuck/versions.json"

# ---- Status and List carry tuckctl's JSON
call Status | sed 's/^s //' | python3 -c 'import json,sys; print(json.loads(json.loads(sys.stdin.read())) is not None)' \
        >"$LOGS"/status.check 2>&1 || true
check "Status returns JSON" grep -qx True "$LOGS"/status.check
bctl --json=short call org.tuck1 /org/tuck1 org.tuck1.Manager List >"$LOGS"/list.json
check "List names foo" python3 -c '
import json, sys
d = json.loads(json.load(open(sys.argv[1]))["data"][0])
sys.exit(0 if "foo" in json.dumps(d) else 1)' "$LOGS"/list.json

# ---- SIGHUP = refresh
before=$(prop RefreshCount | awk '{print $2}')
kill -HUP "$TUCKD_PID"
for ((i = 0; i < 100; i++)); do
        after=$(prop RefreshCount | awk '{print $2}')
        ((after > before)) && break
        sleep 0.05
done
check "SIGHUP ran a refresh ($before -> $after)" test "$after" -gt "$before"
# The notify sink writes its file asynchronously: give it up to 5 s, as in_journal does.
reloaded() { awk '$0 == "RELOADING=1" { r = 1 } r && $0 == "READY=1" { found = 1 } END { exit !found }' "$NOTIFY"; }
for ((i = 0; i < 100; i++)); do
        reloaded && break
        sleep 0.05
done
check "RELOADING=1 then READY=1 on SIGHUP" reloaded

# ---- Unmerge
check "Unmerge(0) -> changed" test "$(call Unmerge t 0)" = "b true"
check "marker is base after Unmerge" test "$(marker)" = base
check "Unmerge(0) again -> nothing to do" test "$(call Unmerge t 0)" = "b false"

sleep 0.3
check "GenerationChanged 2 -> 3 signalled" grep -q "GenerationChanged ('$ROOT/usr', uint64 2, uint64 3)" "$LOGS"/monitor
check "GenerationChanged 1 -> 2 signalled" grep -q "GenerationChanged ('$ROOT/usr', uint64 1, uint64 2)" "$LOGS"/monitor
check "PropertiesChanged for Generations" grep -q "PropertiesChanged ('org.tuck1.Manager', {'Generations'" "$LOGS"/monitor
check "STATUS= shows a generation" grep -q "^STATUS=.*$ROOT/usr generation [0-9]" "$NOTIFY"

# ---- not root: the bus policy refuses
if out=$(bctl_nobody call org.tuck1 /org/tuck1 org.tuck1.Manager Refresh t 0 2>&1); then
        not_ok "nobody's Refresh went through: $out"
else
        check "nobody's Refresh refused by the policy" grep -q 'Access denied' <<<"$out"
fi
check "nobody may read Generations" bctl_nobody get-property org.tuck1 /org/tuck1 org.tuck1.Manager Generations
check "nobody may call Status" bctl_nobody call org.tuck1 /org/tuck1 org.tuck1.Manager Status
refused_by_tuckd=$(grep -c '^TUCK_METHOD=Refresh$' "$JOURNAL" || true)
check "the policy stopped it before tuckd" test "$refused_by_tuckd" -eq 0

# ---- not root, policy lets it through: tuckd refuses by itself
stop_tuckd
stop_bus
# v1 is below foo's high-water mark (2) now: start-up would refuse it.
make_raw "$W"/foo-3.raw foo 3 v3
mv "$W"/foo-3.raw "$EXT"/foo.raw
start_bus permissive
start_tuckd
check "start-up merged again (v3)" test "$(marker)" = v3
count=$(prop RefreshCount | awk '{print $2}')
for method in Unmerge Refresh Merge; do
        if out=$(bctl_nobody call org.tuck1 /org/tuck1 org.tuck1.Manager $method t 0 2>&1); then
                not_ok "nobody's $method went through a permissive policy: $out"
        else
                # busctl prints the error name's text; tuckd's own refusal is in its journal entry.
                check "nobody's $method refused by tuckd itself ($out)" in_journal -qx "TUCK_METHOD=$method"
        fi
done
check "nothing ran" test "$(prop RefreshCount | awk '{print $2}')" = "$count"
check "marker still v3" test "$(marker)" = v3
check "refusal names the caller's uid" in_journal -q '^MESSAGE=Unmerge refused: caller .* has uid 65534'
check "root still may, through the same policy" test "$(call Unmerge t 0)" = "b true"

# ---- tuckctl goes through tuckd while it runs for the same root, directly otherwise
TUCKCTL=$TUCK_BUILD/daemon/tuckctl/tuckctl
count=$(prop RefreshCount | awk '{print $2}')
out=$("$TUCKCTL" --root="$ROOT" --config="$CONF" merge 2>&1) || true
check "tuckctl merge went through tuckd: $out" grep -q 'through tuckd' <<<"$out"
check "tuckd ran it" test "$(prop RefreshCount | awk '{print $2}')" -eq $((count + 1))
check "marker v3 after tuckctl merge" test "$(marker)" = v3
check "journal: triggered over D-Bus" in_journal -qx 'TUCK_TRIGGER=D-Bus Merge'
# Under systemd-sysext's name (its class only: a flag of the call), with systemd-sysext's silence on stdout.
ln -sf "$TUCKCTL" "$W/systemd-sysext"
rc=0
out=$("$W/systemd-sysext" --root="$ROOT" --config="$CONF" refresh 2>"$LOGS/compat.err") || rc=$?
check "as systemd-sysext, refresh goes through tuckd too (exit $rc), nothing on stdout ('$out')" test "$rc" = 0 -a -z "$out"
check "...what it did on stderr" grep -qx 'refresh (through tuckd): nothing to do' "$LOGS/compat.err"
stop_tuckd
out=$("$TUCKCTL" --root="$ROOT" --config="$CONF" unmerge 2>&1) || true
check "with tuckd stopped, tuckctl unmerge works directly: $out" bash -c "! grep -q 'through tuckd' <<<'$out'"
check "marker base after direct unmerge" test "$(marker)" = base
start_tuckd

# ---- SIGTERM: STOPPING=1, exit 0, extensions stay merged; the watchdog is fed
stop_tuckd_term() {
        kill -TERM "$TUCKD_PID"
        wait "$TUCKD_PID"
}
check "SIGTERM: tuckd exits 0" stop_tuckd_term
# The notify sink writes its file asynchronously: give it up to 5 s, as in_journal does.
stopping_sent() {
        local i
        for ((i = 0; i < 100; i++)); do
                grep -qx 'STOPPING=1' "$NOTIFY" && return 0
                sleep 0.05
        done
        return 1
}
check "SIGTERM: STOPPING=1 sent" stopping_sent
check "SIGTERM: extensions stay merged" test "$(marker)" = v3
export WATCHDOG_USEC=300000
start_tuckd
sleep 1
unset WATCHDOG_USEC
feeds=$(grep -cx 'WATCHDOG=1' "$NOTIFY" || true)
check "watchdog fed ($feeds times in 1 s at WatchdogSec=0.3s)" test "$feeds" -ge 2

# ---- the journal: one entry per event, with MESSAGE_IDs
merged=$(journal_count e33a64a37fdd4ed08461ec5fc4eab05a)
refreshed=$(journal_count 422132a242a0458bba8d9dc325bf0e2f)
unmerged=$(journal_count 51afd983890a42cea6d171ad651bd37a)
refused=$(journal_count a5c9fd731e88490fbc12620ea801653d)
diag "journal: merged $merged, refreshed $refreshed, unmerged $unmerged, refused $refused"
diag "$(awk '/^MESSAGE=/ { m = substr($0, 9) } /^MESSAGE_ID=a5c9fd731e88490fbc12620ea801653d$/ { print m }' "$JOURNAL")"
check "merged entries (4: two start-ups, tuckctl merge, the start-up after the direct unmerge)" test "$merged" -eq 4
check "refreshed entries (3: v2, force, downgrade)" test "$refreshed" -eq 3
check "unmerged entries (2 by tuckd; tuckctl's direct one is not tuckd's)" test "$unmerged" -eq 2
# The allowed downgrade is a recorded decision: the reload's refresh after it is not refused again.
check "refused entries (Merge when merged, downgrade, nobody's 3 calls)" test "$refused" -eq 5
check "the held-back downgrade has its own entry, naming both versions and the override" \
        grep -q "^MESSAGE=$ROOT/usr: held back: foo: downgrade 2 → 1 not allowed.*--allow-downgrade=foo" "$JOURNAL"
check "entries carry TUCK_HIERARCHY" grep -qx "TUCK_HIERARCHY=$ROOT/usr" "$JOURNAL"
check "a readable MESSAGE" grep -q "^MESSAGE=$ROOT/usr: refreshed, generation 1 -> 2 (D-Bus Refresh)." "$JOURNAL"

# ---- tuckctl exits alike through tuckd and directly: policy 3, no feature 4, failure 1
# tuckctl_same_exit WHAT WANT ERROR_NAME [FAULT ARGS...]: runs "tuckctl refresh
# --always-refresh" once through a tuckd started under FAULT and once directly under
# FAULT (tuckd stopped); both must exit WANT, tuckd's reply must carry
# ERROR_NAME, and the marker must not move.
tuckctl_same_exit() {
        local what=$1 want=$2 name=$3 before rc out
        shift 3
        before=$(marker)
        TUCKD_WRAP=("$TUCK_FAULT" "$@" --)
        start_tuckd
        rc=0
        out=$("$TUCKCTL" --root="$ROOT" --config="$CONF" refresh --always-refresh 2>&1) || rc=$?
        check "$what through tuckd: exit $rc, want $want ($out)" test "$rc" -eq "$want"
        out=$(gdbus call --address "$BUS" --dest org.tuck1 --object-path /org/tuck1 \
                --method org.tuck1.Manager.Refresh 1 2>&1) || true
        check "$what: Refresh(force) answers $name ($out)" grep -qF "GDBus.Error:$name:" <<<"$out"
        stop_tuckd
        TUCKD_WRAP=()
        rc=0
        out=$("$TUCK_FAULT" "$@" -- "$TUCKCTL" --root="$ROOT" --config="$CONF" refresh --always-refresh 2>&1) || rc=$?
        check "$what directly: exit $rc, want $want ($out)" test "$rc" -eq "$want"
        check "$what: the marker stayed $before" test "$(marker)" = "$before"
}
stop_tuckd
tuckctl_same_exit "no MOVE_MOUNT_BENEATH" 4 org.tuck1.Error.NotSupported --hide-beneath
tuckctl_same_exit "the new overlay cannot be cloned" 1 org.tuck1.Error.Failed --fail=open_tree:ENOMEM:2=0x88001
make_raw "$W"/foo-1.raw foo 1 v1
mv "$W"/foo-1.raw "$EXT"/foo.raw
tuckctl_same_exit "a downgrade" 3 org.tuck1.Error.Refused

tap_done
