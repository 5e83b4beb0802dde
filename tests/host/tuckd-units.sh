#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# tuckd's units, bus policy, tmpfiles and man pages as `meson install` lays
# them out: systemd-analyze verify passes on the installed units (with the
# installed man pages found), dbus-daemon accepts the policy, the man pages
# format without warnings, and the service keeps its promises (no private
# mount namespace, Type=notify, hardened).

set -euo pipefail
: "${TUCK_BUILD:?}" "${TUCK_SRC:?}"

source "$(dirname "$0")"/common.sh

D=$(mktemp -d /tmp/tuckd-units.XXXXXX)
trap 'rm -rf "$D"' EXIT

DESTDIR=$D/root meson install -C "$TUCK_BUILD" --no-rebuild --quiet >"$D"/install.log 2>&1 \
        || { cat "$D"/install.log; exit 1; }

unitdir=$(find "$D"/root -name tuckd.service -printf '%h\n' | head -n 1)
check "tuckd.service installed" test -f "$unitdir"/tuckd.service
check "tuckd.path installed" test -f "$unitdir"/tuckd.path
check "bus policy installed" test -f "$D"/root/usr/share/dbus-1/system.d/org.tuck1.conf
check "tmpfiles installed" test -f "$D"/root/usr/lib/tmpfiles.d/tuck.conf
check "tuckd installed where the unit says" \
        test -x "$D/root$(sed -n 's/^ExecStart=//p' "$unitdir"/tuckd.service)"
for m in man8/tuckd.8 man5/tuck.conf.5 man5/org.tuck1.Manager.5; do
        check "man page $m installed" test -f "$D"/root/usr/share/man/"$m"
done

# verify resolves ExecReload's /bin/kill below --root: give the root one.
install -D /bin/kill "$D"/root/bin/kill
if MANPATH=$D/root/usr/share/man systemd-analyze verify --root="$D"/root \
        "$unitdir"/tuckd.service "$unitdir"/tuckd.path >"$D"/verify.log 2>&1 && ! [[ -s $D/verify.log ]]; then
        ok "systemd-analyze verify tuckd.service tuckd.path: clean, no warnings"
else
        not_ok "systemd-analyze verify tuckd.service tuckd.path"
        sed 's/^/# /' "$D"/verify.log
fi

svc=$unitdir/tuckd.service
check "Type=notify" grep -qx 'Type=notify' "$svc"
check "no private mount namespace" grep -qx 'PrivateMounts=no' "$svc"
for forbidden in ProtectSystem ProtectHome PrivateTmp PrivateDevices ProtectKernelTunables \
        ProtectKernelModules ProtectKernelLogs ProtectControlGroups ReadOnlyPaths InaccessiblePaths \
        TemporaryFileSystem BindPaths ProtectProc; do
        check "no $forbidden= (it would need a mount namespace or hide processes)" \
                bash -c "! grep -q '^$forbidden=' '$svc'"
done
for hardening in NoNewPrivileges=yes RestrictNamespaces=mnt SystemCallArchitectures=native \
        MemoryDenyWriteExecute=yes RestrictAddressFamilies=AF_UNIX DevicePolicy=closed; do
        check "hardened: $hardening" grep -qx "$hardening" "$svc"
done
check "ordered before sysinit.target" grep -q '^Before=sysinit.target' "$svc"
# As systemd-sysext.service: tmpfiles.d entries shipped in extensions are applied after the merge.
check "ordered before systemd-tmpfiles-setup.service, as systemd-sysext.service" \
        grep -Eq '^Before=.*\bsystemd-tmpfiles-setup\.service\b' "$svc"
check "ordered against shutdown and initrd-switch-root, as systemd-sysext.service" \
        bash -c 'grep -qx "Conflicts=shutdown.target initrd-switch-root.target" "$1" &&
                 grep -qx "Before=shutdown.target initrd-switch-root.target" "$1"' _ "$svc"
# Starting tuckd must not stop systemd-sysext.service: its ExecStop= would unmerge (a window).
check "no Conflicts= with systemd-sysext.service" bash -c '! grep -Eq "^Conflicts=.*systemd-sysext" "$1"' _ "$svc"

# ---- the handover: systemd-sysext.service through tuck, its stop a no-op
for u in systemd-sysext systemd-confext; do
        drop=$unitdir/$u.service.d/tuck.conf
        check "$u.service drop-in installed" test -f "$drop"
        k=${u#systemd-}
        check "$u.service: start and reload are tuck's refresh of the $k class" bash -c '
                grep -qx "ExecStart=" "$1" && grep -qx "ExecStart=/usr/bin/tuckctl --class=$2 refresh" "$1" &&
                grep -qx "ExecReload=" "$1" && grep -qx "ExecReload=/usr/bin/tuckctl --class=$2 refresh" "$1"' _ "$drop" "$k"
        check "$u.service: stop unmerges nothing (ExecStop= reset, nothing after it)" \
                bash -c 'grep -qx "ExecStop=" "$1" && ! grep -Eq "^ExecStop=." "$1"' _ "$drop"
        check "tuckctl as $u installed for the package to put in place of systemd's" \
                test "$(readlink "$D/root/usr/libexec/tuck/$u")" = /usr/bin/tuckctl
done
# systemd-analyze reads Debian 12's own systemd-sysext.service with tuck's drop-in.
install -D -m 0644 /lib/systemd/system/systemd-sysext.service "$D"/root/usr/lib/systemd/system/systemd-sysext.service
mkdir -p "$D"/root/usr/lib/systemd/system/systemd-sysext.service.d
cp "$unitdir"/systemd-sysext.service.d/tuck.conf "$D"/root/usr/lib/systemd/system/systemd-sysext.service.d/
if MANPATH=$D/root/usr/share/man:/usr/share/man systemd-analyze verify --root="$D"/root systemd-sysext.service \
        >"$D"/verify-sysext.log 2>&1; then
        ok "systemd-analyze verify systemd-sysext.service with tuck's drop-in"
else
        not_ok "systemd-analyze verify systemd-sysext.service with tuck's drop-in"
        sed 's/^/# /' "$D"/verify-sysext.log
fi

# ---- bash completion, where Debian's bash-completion looks
comp=$D/root/usr/share/bash-completion/completions/tuckctl
check "bash completion installed in bash-completion's completions directory" test -f "$comp"
# complete WORDS...: what _tuckctl offers for the last word.
complete_words() {
        bash -c 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$((${#COMP_WORDS[@]} - 1)); _tuckctl
                 ((${#COMPREPLY[@]} == 0)) || printf "%s\n" "${COMPREPLY[@]}"' _ "$comp" "$@" | sort | tr '\n' ' '
}
expect_eq "completion: verbs" "$(complete_words tuckctl '')" "beneath forget help list merge refresh status unmerge versions "
expect_eq "completion: re" "$(complete_words tuckctl re)" "refresh "
expect_eq "completion: --json=" "$(complete_words tuckctl --json = '')" "off pretty short "
expect_eq "completion: --class=c" "$(complete_words tuckctl --class = c)" "confext "
check "completion: --al offers --allow-downgrade --allow-downgrade= --allow-window --always-refresh=" \
        test "$(complete_words tuckctl --al)" = "--allow-downgrade --allow-downgrade= --allow-window --always-refresh= "
expect_eq "completion: after a verb, no more verbs" "$(complete_words tuckctl status '')" ""
# bash splits "--root=DIR" at '=' (COMP_WORDBREAKS): '=' and DIR are not the verb.
expect_eq "completion: after --root=DIR (split by bash), verbs" "$(complete_words tuckctl --root = /x '')" \
        "beneath forget help list merge refresh status unmerge versions "
expect_eq "completion: after --json pretty, verbs" "$(complete_words tuckctl --json pretty st)" "status "
# forget and --allow-downgrade= take the extensions tuckctl versions knows, below --root.
mkdir -p "$D"/comp/var/lib/tuck "$D"/comp/usr "$D"/comp/opt "$D"/comp/etc
printf '{"sysext":{"foo":"1.0","fox":"2"},"confext":{"bar-conf":"3"}}\n' >"$D"/comp/var/lib/tuck/versions.json
mkdir -p "$D"/comp-bin
ln -s "$TUCK_BUILD"/daemon/tuckctl/tuckctl "$D"/comp-bin/tuckctl
expect_eq "completion: forget offers the recorded extensions" \
        "$(PATH=$D/comp-bin:$PATH complete_words tuckctl --root = "$D"/comp forget '')" "bar-conf foo fox "
expect_eq "completion: forget fo, after one name" \
        "$(PATH=$D/comp-bin:$PATH complete_words tuckctl --root = "$D"/comp forget bar-conf fo)" "foo fox "
expect_eq "completion: --allow-downgrade=b" \
        "$(PATH=$D/comp-bin:$PATH complete_words tuckctl --root = "$D"/comp refresh --allow-downgrade = b)" "bar-conf "
check "generation records survive a restart" grep -qx 'RuntimeDirectoryPreserve=yes' "$svc"

# dbus-daemon parses the policy as part of a system bus configuration.
cat >"$D"/bus.conf <<EOF2
<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>system</type>
  <listen>unix:path=$D/bus.sock</listen>
  <auth>EXTERNAL</auth>
  <include>$D/root/usr/share/dbus-1/system.d/org.tuck1.conf</include>
</busconfig>
EOF2
dbus-daemon --config-file="$D"/bus.conf --nofork --nopidfile --print-address=1 >"$D"/addr 2>"$D"/bus.err &
bus=$!
for ((i = 0; i < 100; i++)); do [[ -s $D/addr ]] && break; sleep 0.05; done
check "dbus-daemon accepts the policy" test -s "$D"/addr
kill "$bus" 2>/dev/null || true
wait "$bus" 2>/dev/null || true
check "dbus-daemon printed no policy error" \
        bash -c "! grep -v 'fd limit' '$D'/bus.err | grep -qiE 'error|invalid'"

for m in "$TUCK_SRC"/docs/tuckd.8 "$TUCK_SRC"/docs/tuckctl.8 "$TUCK_SRC"/docs/tuck.conf.5 "$TUCK_SRC"/docs/org.tuck1.Manager.5; do
        w=$(LC_ALL=C.UTF-8 MANWIDTH=80 man --warnings=w -l -Tutf8 "$m" 2>&1 >/dev/null || true)
        check "$(basename "$m") formats without warnings" test -z "$w"
done

tap_done
