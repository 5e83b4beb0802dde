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

if [[ ${TUCK_TEST_IN_NS:-} != 1 ]]; then
        if ((EUID != 0)); then
                echo "Bail out! host tests need root (mount namespaces, loop devices)"
                exit 1
        fi
        export TUCK_TEST_IN_NS=1
        exec unshare --mount --propagation private -- "$BASH" "$0" "$@"
fi

: "${TUCKCTL:?}" "${TUCK_PROBE:?}" "${TUCK_FAULT:?}" "${MKEXT:?}"

ROOT=
IMAGES=
SERVICE_PIDS=()
TAP_N=0
TAP_FAILED=0

cleanup_host() {
        local pid
        # Services, probes, workers: everything this test left in the background.
        for pid in "${SERVICE_PIDS[@]}" $(jobs -p); do
                kill "$pid" 2>/dev/null || true
        done
        wait 2>/dev/null || true
        # The namespace dies with us; unmounting is only for tidiness of losetup.
        if [[ -n $ROOT ]]; then
                umount -R -l "$ROOT" 2>/dev/null || true
                rmdir "$ROOT" 2>/dev/null || true
        fi
        if [[ -n $IMAGES ]]; then
                rm -rf "$IMAGES"
        fi
}
trap cleanup_host EXIT

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
        local name=$1 protect=${2:-}
        local ready="$ROOT/tmp/service-$name.ready"
        unshare --mount --propagation slave -- bash -c '
                set -e
                if [[ $2 == --protect ]]; then
                        mount --bind "$1/usr" "$1/usr"
                        mount -o remount,bind,ro "$1/usr"
                fi
                touch "$3"
                exec sleep infinity' service "$ROOT" "$protect" "$ready" &
        SERVICE_PID=$!
        SERVICE_PIDS+=("$SERVICE_PID")
        while [[ ! -e $ready ]]; do sleep 0.01; done
}

# in_ns PID CMD...: run CMD in PID's mount namespace.
in_ns() {
        local pid=$1
        shift
        nsenter --mount --target "$pid" -- "$@"
}

ok() {
        TAP_N=$((TAP_N + 1))
        echo "ok $TAP_N - $*"
}

not_ok() {
        TAP_N=$((TAP_N + 1))
        TAP_FAILED=$((TAP_FAILED + 1))
        echo "not ok $TAP_N - $*"
}

# check DESCRIPTION CMD...: one TAP line for whether CMD succeeds.
check() {
        local what=$1
        shift
        if "$@"; then ok "$what"; else not_ok "$what"; fi
}

# expect_eq DESCRIPTION GOT WANT
expect_eq() {
        if [[ $2 == "$3" ]]; then ok "$1"; else not_ok "$1 (got '$2', want '$3')"; fi
}

diag() {
        sed 's/^/# /' <<<"$*"
}

tap_done() {
        echo "1..$TAP_N"
        ((TAP_FAILED == 0))
}
