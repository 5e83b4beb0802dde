# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Shared by the host tests (bash, set -euo pipefail). Every test runs in a
# fresh private mount namespace built to look like a host:
#
#   $ROOT                a tmpfs, a shared peer group: the host's root for tuck
#                        (tuckctl --root=$ROOT); /usr, /opt, /etc below it hold
#                        the base, with the probe files saying generation=base
#   $ROOT/run, /var/lib  tuck's /run/tuck and /var/lib/tuck, extension dirs
#   services             processes in slave namespaces (unshare --propagation
#                        slave), as systemd starts services
#   protect              a service with its own read-only bind of /usr on top
#                        (what ProtectSystem=full does)
#
# Nothing escapes: the namespace is private, and everything is on tmpfs.
#
# Environment from meson: TUCKCTL, TUCK_PROBE, TUCK_FAULT, MKEXT.

source "$(dirname "${BASH_SOURCE[0]}")/common.sh"
enter_test_ns private "$@"

: "${TUCKCTL:?}" "${TUCK_PROBE:?}" "${TUCK_FAULT:?}" "${MKEXT:?}"

ROOT=
IMAGES=

# host_teardown: stop the services, unmount and remove the tree and the images.
host_teardown() {
        local pid
        # Services, probes, workers: everything this test left in the background.
        for pid in $(jobs -p); do
                kill "$pid" 2>/dev/null || true
        done
        kill_pids
        wait 2>/dev/null || true
        # The namespace dies with us; unmounting is only for tidiness of losetup.
        if [[ -n $ROOT ]]; then
                umount -R -l "$ROOT" 2>/dev/null || true
                rmdir "$ROOT" 2>/dev/null || true
        fi
        if [[ -n $IMAGES ]]; then
                rm -rf "$IMAGES"
        fi
        ROOT= IMAGES=
}
trap host_teardown EXIT

# host_setup: a fresh host-like tree at $ROOT.
host_setup() {
        ROOT=$(mktemp -d /tmp/tuck-host.XXXXXX)
        mount -t tmpfs -o mode=0755 tuck-host "$ROOT"
        mount --make-shared "$ROOT"
        mkdir -p "$ROOT"/{usr/lib/tuck-probe,opt/tuck-probe,etc/tuck-probe,run/extensions,run/confexts,var/lib/extensions,tmp}
        cp /etc/os-release "$ROOT/etc/os-release"
        echo "base of /usr" >"$ROOT/usr/lib/base-file"
        for d in usr/lib opt etc; do
                echo generation=base >"$ROOT/$d/tuck-probe/generation"
        done
        IMAGES=$(mktemp -d /tmp/tuck-images.XXXXXX)
        LOGS=$ROOT/tmp
}

# tuck ARGS...: tuckctl on the test host.
tuck() {
        "$TUCKCTL" --root="$ROOT" "$@"
}

# mkimg NAME VERSION CLASS LABEL [mkext options...]: an image in $IMAGES, prints its path.
mkimg() {
        local name=$1 version=$2 class=$3 label=$4
        shift 4
        local out="$IMAGES/$name-$version-$label.raw"
        mkdir -p "$IMAGES/empty"
        "$MKEXT" --label="$label" "$@" "$name" "$version" "$class" "$IMAGES/empty" "$out"
        echo "$out"
}

# install_img PATH NAME [DIR]: drop an image into a search directory, atomically
# (a new inode: an image that is mounted must never change under its loop device).
install_img() {
        local dir=${3:-run/extensions}
        cp "$1" "$ROOT/$dir/.$2.raw.$BASHPID"
        mv -f "$ROOT/$dir/.$2.raw.$BASHPID" "$ROOT/$dir/$2.raw"
}

# link_img PATH NAME [DIR]: point NAME.raw at PATH with an atomic symlink flip
# (how sysupdate and sysext-bakery stage updates).
link_img() {
        local dir=${3:-run/extensions}
        ln -s "$1" "$ROOT/$dir/.$2.raw.$BASHPID"
        mv -Tf "$ROOT/$dir/.$2.raw.$BASHPID" "$ROOT/$dir/$2.raw"
}

probe_label() {
        sed -n 's/^generation=//p' "$1"
}

# host_mountinfo: our mount table without the per-boot noise, for before/after comparisons.
host_mountinfo() {
        cat /proc/self/mountinfo
}

# service NAME [--protect]: a long-running process in a slave namespace; sets SERVICE_PID.
# With --protect it first puts a read-only bind of /usr on top (ProtectSystem=full).
service() {
        local name=$1 setup=true pid
        if [[ ${2:-} == --protect ]]; then
                setup="mount --bind $ROOT/usr $ROOT/usr && mount -o remount,bind,ro $ROOT/usr"
        fi
        spawn_ns "$name" "$setup"
        pid=NS_PID_$name
        SERVICE_PID=${!pid}
}

# in_ns PID CMD...: run CMD in PID's mount namespace.
in_ns() {
        local pid=$1
        shift
        nsenter --mount --target "$pid" -- "$@"
}
