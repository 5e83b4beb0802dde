#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What a refresh asks of the service manager (a fake one on a private
# system bus records every call), as the extensions that changed ask:
# EXTENSION_RELOAD_MANAGER=1 (daemon-reload), EXTENSION_RESTART_UNITS= and
# EXTENSION_RELOAD_OR_RESTART_UNITS= (restart, or reload-or-restart, after
# the reload; restart wins; a unit that is gone is stopped). Exactly the
# listed units of the extensions that entered, changed or left: none for an
# unchanged one, none for a refresh that changes nothing. --no-reload and
# ReloadManager=no turn it off, and below --root it is off unless
# ReloadManager=yes. tuckd does the same (it runs the same refresh).

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root
MKEXT=$TUCK_SRC/images/mkext
IMAGES=$W/images
mkdir -p "$IMAGES/empty"

tuckctl() {
        "$TUCKCTL" --root="$ROOT" --config="$CONF" "$@"
}
conf() {
        printf '[Policy]\nAllowDowngrade=yes\n%s\n' "$@" >"$CONF"
}
# img NAME VERSION [RELEASE-LINE...]: a sysext image NAME-VERSION.raw in $IMAGES.
img() {
        local name=$1 version=$2 extra=()
        shift 2
        for l in "$@"; do extra+=(--release-extra="$l"); done
        "$MKEXT" --label="$name-$version" "${extra[@]}" "$name" "$version" sysext "$IMAGES/empty" \
                "$IMAGES/$name-$version.raw"
}
# use NAME VERSION: that image in the search directory (atomically: a new inode).
use() {
        cp "$IMAGES/$1-$2.raw" "$ROOT/var/lib/extensions/.$1.tmp"
        mv "$ROOT/var/lib/extensions/.$1.tmp" "$ROOT/var/lib/extensions/$1.raw"
}
# calls: what the manager was asked since the last call of calls.
RECORD=$LOGS/manager
calls() {
        cat "$RECORD" 2>/dev/null | tr '\n' ';'
        : >"$RECORD"
}

start_bus
FAKE_SYSTEMD_GONE="app-a.service other.service" "$FAKE_SYSTEMD" "$RECORD" >>"$LOGS"/fake-systemd.log 2>&1 &
pids+=($!)
for ((i = 0; i < 100; i++)); do bctl status org.freedesktop.systemd1 >/dev/null 2>&1 && break; sleep 0.05; done

img app 1 EXTENSION_RELOAD_MANAGER=1
img app 2 'EXTENSION_RESTART_UNITS="app-a.service app-b.service bad/name"' \
        'EXTENSION_RELOAD_OR_RESTART_UNITS="app-b.service app-c.service"'
img other 1 EXTENSION_RESTART_UNITS=other.service EXTENSION_RELOAD_MANAGER=1
img other 2 EXTENSION_RESTART_UNITS=other.service EXTENSION_RELOAD_MANAGER=1
img plain 1
img plain 2
img bad 1 EXTENSION_RELOAD_MANAGER=maybe

conf ReloadManager=yes
use app 1
use plain 1
out=$(tuckctl merge 2>&1) || true
diag "$out"
expect_eq "merge: app asks for a daemon-reload, one is done" "$(calls)" "Reload;"
check "...and the report says so" grep -q '^manager: daemon-reload (asked by app)$' <<<"$out"

tuckctl refresh >/dev/null || true
expect_eq "a refresh that changes nothing asks nothing" "$(calls)" ""
tuckctl refresh --always-refresh >/dev/null || true
expect_eq "neither does --always-refresh of the same images (nothing entered or changed)" "$(calls)" ""
use plain 2
tuckctl refresh >/dev/null || true
expect_eq "plain changed, app did not: nothing asked (only extensions that changed count)" "$(calls)" ""

use other 1
tuckctl refresh >/dev/null || true
: >"$RECORD"
use app 2
use plain 1
out=$(tuckctl --json=short refresh 2>"$LOGS/refresh.err") || true
diag "$(cat "$LOGS/refresh.err")"
expect_eq "app 2: reload, then exactly its units: restart a and b (restart wins), reload-or-restart c" \
        "$(calls)" "Reload;RestartUnit app-a.service replace;StopUnit app-a.service replace;RestartUnit app-b.service replace;ReloadOrRestartUnit app-c.service replace;"
check "other (unchanged) is not restarted; a unit that is gone is stopped" python3 -c '
import json, sys
m = json.loads(sys.argv[1])["manager"]
assert m["asked_by"] == ["app"], m
assert m["reloaded"] and m["restarted"] == ["app-b.service"], m
assert m["stopped"] == ["app-a.service"] and m["reloaded_or_restarted"] == ["app-c.service"], m
assert m["failed"] == [] and m["skipped"] is None, m' "$out"
check "an invalid unit name is ignored, with a warning naming it" \
        grep -q "Extension 'app': invalid unit name 'bad/name' in EXTENSION_RESTART_UNITS=, ignoring." "$LOGS/refresh.err"
check "the generation record keeps what app asks (for when it leaves)" python3 -c '
import json, sys
g = json.load(open(sys.argv[1]))
app = [l for l in g["layers"] if l["name"] == "app"][0]
assert app["restart_units"] == ["app-a.service", "app-b.service"], app
assert app["reload_or_restart_units"] == ["app-b.service", "app-c.service"], app' "$ROOT/run/tuck/generations/usr.json"

use other 2
out=$(tuckctl --no-reload refresh 2>&1) || true
expect_eq "--no-reload: nothing asked" "$(calls)" ""
check "...and the report says why" grep -q '^manager: not asked (--no-reload), though other asks for it$' <<<"$out"
use other 1
conf ReloadManager=no
out=$(tuckctl refresh 2>&1) || true
expect_eq "ReloadManager=no: nothing asked" "$(calls)" ""
check "...and the report says why" grep -q '^manager: not asked (ReloadManager=no)' <<<"$out"
use other 2
conf ""
out=$(tuckctl refresh 2>&1) || true
expect_eq "below --root, ReloadManager= unset: nothing asked (systemd-sysext: --root implies --no-reload)" "$(calls)" ""
check "...and the report says why" grep -q '^manager: not asked (--root' <<<"$out"

conf ReloadManager=yes
use bad 1
out=$(tuckctl refresh 2>&1) || true
expect_eq "EXTENSION_RELOAD_MANAGER=maybe: ignored" "$(calls)" ""
check "...with a warning" grep -q "Extension 'bad': EXTENSION_RELOAD_MANAGER=maybe is not a boolean, ignoring." <<<"$out"

# Leaving: what its record says it asked. app's units are restarted (a gone one stopped).
rm "$ROOT/var/lib/extensions/app.raw"
tuckctl refresh --remove=app >/dev/null 2>&1 || true
expect_eq "app leaves: reload, then its units (gone ones stopped)" \
        "$(calls)" "Reload;RestartUnit app-a.service replace;StopUnit app-a.service replace;RestartUnit app-b.service replace;ReloadOrRestartUnit app-c.service replace;"
tuckctl unmerge >/dev/null || true
expect_eq "unmerge: other leaves, its unit is gone: stopped" "$(calls)" \
        "Reload;RestartUnit other.service replace;StopUnit other.service replace;"

# tuckd: the same refresh, the same requests.
start_tuckd
: >"$RECORD"
use app 1
call Refresh t 0 >/dev/null || true
expect_eq "tuckd's refresh: app 1 enters, a daemon-reload" "$(calls)" "Reload;"
call Refresh t 8 >/dev/null || true   # nothing changed: nothing asked either way
use app 2
call Refresh t 8 >/dev/null || true   # TUCK_BUS_FLAG_NO_RELOAD
expect_eq "tuckd with the no-reload flag: nothing asked" "$(calls)" ""
stop_tuckd
tuckctl unmerge >/dev/null || true
tap_done
