#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Hierarchy paths as an operator writes them: "Hierarchies=/usr/" is /usr
# (not one more overlay stacked on every refresh); a symlinked /opt (ostree,
# Fedora CoreOS: /opt -> var/opt) is resolved inside the root to where the
# overlay really goes; SYSTEMD_SYSEXT_HIERARCHIES and
# SYSTEMD_CONFEXT_HIERARCHIES replace the configured hierarchies, as
# systemd-sysext reads them; ',' and ':' (overlayfs option syntax) are
# refused, with the path named.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

conf() {
        mkdir -p "$ROOT/etc/tuck"
        printf '%s\n' "$@" >"$ROOT/etc/tuck/tuck.conf"
}

# overlays MOUNTPOINT: how many overlays are stacked at MOUNTPOINT.
overlays() {
        awk -v t="$1" '$5 == t && $0 ~ / - overlay /' /proc/self/mountinfo | wc -l
}

# fresh_root: a new host tree at $ROOT; the images made so far stay.
fresh_root() {
        local keep=$IMAGES
        umount -R -l "$ROOT"
        rmdir "$ROOT"
        host_setup
        rm -rf "$IMAGES"
        IMAGES=$keep
}

# refreshes N: N refreshes alternating two images of foo.
refreshes() {
        local i
        for ((i = 0; i < $1; i++)); do
                if ((i % 2)); then install_img "$a" foo; else install_img "$b" foo; fi
                tuck refresh >/dev/null
        done
}

host_setup
a=$(mkimg foo 1 sysext A)
b=$(mkimg foo 1 sysext B)

# --- a trailing slash --------------------------------------------------------
conf '[Sysext]' 'Hierarchies=/usr/ /opt//'
install_img "$a" foo
out=$(tuck merge 2>&1) || true
diag "$out"
check "Hierarchies=/usr/ merges /usr" grep -q '^/usr: merged' <<<"$out"
refreshes 3
expect_eq "after 3 refreshes one overlay on /usr, not one more per refresh" "$(overlays "$ROOT/usr")" 1
expect_eq "and one on /opt (Hierarchies=/opt//)" "$(overlays "$ROOT/opt")" 1
check "status calls it /usr" grep -q '^/usr (sysext): generation 4' <<<"$(tuck status)"
check "its record is usr.json, not usr-.json" test -e "$ROOT/run/tuck/generations/usr.json"
tuck unmerge >/dev/null

# --- a symlinked /opt: relative and absolute links, resolved inside the root ---
for link in var/opt /var/opt; do
        fresh_root
        mkdir -p "$ROOT/var/opt"
        mv "$ROOT/opt/tuck-probe" "$ROOT/var/opt/"
        rmdir "$ROOT/opt"
        ln -s "$link" "$ROOT/opt"
        install_img "$a" foo
        out=$(tuck merge 2>&1) || true
        diag "$out"
        check "/opt -> $link: merge" grep -q '^/opt: merged' <<<"$out"
        expect_eq "/opt -> $link: the overlay is on the link's target, inside the root" "$(overlays "$ROOT/var/opt")" 1
        # Read where the link leads inside the root (an absolute link read from
        # outside the root would lead to this machine's /var/opt).
        expect_eq "/opt -> $link: the extension shows there" \
                "$(probe_label "$ROOT/var/opt/tuck-probe/generation")" A
        refreshes 2
        expect_eq "/opt -> $link: two refreshes later, one overlay" "$(overlays "$ROOT/var/opt")" 1
        expect_eq "/opt -> $link: the last image shows" "$(probe_label "$ROOT/var/opt/tuck-probe/generation")" A
        check "/opt -> $link: status names /opt" grep -q '^/opt (sysext): generation 3' <<<"$(tuck status)"
        out=$(tuck unmerge 2>&1)
        check "/opt -> $link: unmerge" grep -q '^/opt: unmerged' <<<"$out"
        expect_eq "/opt -> $link: the base again" "$(probe_label "$ROOT/var/opt/tuck-probe/generation")" base
done

# --- the environment variables ----------------------------------------------
fresh_root
c=$(mkimg cfg 1 confext CA)
install_img "$a" foo
install_img "$c" cfg run/confexts
out=$(SYSTEMD_SYSEXT_HIERARCHIES=/usr/ SYSTEMD_CONFEXT_HIERARCHIES= tuck merge 2>&1) || true
diag "$out"
check "SYSTEMD_SYSEXT_HIERARCHIES=/usr/: /usr merged" grep -q '^/usr: merged' <<<"$out"
expect_eq "...and /opt left alone" "$(overlays "$ROOT/opt")" 0
expect_eq "SYSTEMD_CONFEXT_HIERARCHIES= (empty): /etc left alone" "$(overlays "$ROOT/etc")" 0
out=$(SYSTEMD_SYSEXT_HIERARCHIES=/usr:/opt tuck refresh 2>&1) || true
check "SYSTEMD_SYSEXT_HIERARCHIES=/usr:/opt: /opt merged too" grep -q '^/opt: merged' <<<"$out"
check "...and /etc, from tuck.conf's default again" grep -q '^/etc: merged' <<<"$out"
tuck unmerge >/dev/null

# refused: each one names the path and why, exits 2 (usage), changes nothing
before=$(host_mountinfo)
refused() {
        local what=$1 want=$2 rc=0 out
        shift 2
        out=$("$@" 2>&1) || rc=$?
        diag "$out"
        expect_eq "$what: exit status 2" "$rc" 2
        check "$what: says why" grep -qF "$want" <<<"$out"
}
refused "SYSTEMD_SYSEXT_HIERARCHIES=usr (relative)" "\$SYSTEMD_SYSEXT_HIERARCHIES: 'usr' is not a normalized absolute path" \
        env SYSTEMD_SYSEXT_HIERARCHIES=usr "$TUCKCTL" --root="$ROOT" merge
refused "SYSTEMD_SYSEXT_HIERARCHIES=/usr/../opt" "'/usr/../opt' is not a normalized absolute path" \
        env SYSTEMD_SYSEXT_HIERARCHIES=/usr/../opt "$TUCKCTL" --root="$ROOT" merge
refused "SYSTEMD_SYSEXT_HIERARCHIES=/a,b" "hierarchy '/a,b' contains ',' or ':'" \
        env SYSTEMD_SYSEXT_HIERARCHIES=/a,b "$TUCKCTL" --root="$ROOT" merge
refused "SYSTEMD_CONFEXT_HIERARCHIES=/" "'/' cannot be a hierarchy" \
        env SYSTEMD_CONFEXT_HIERARCHIES=/ "$TUCKCTL" --root="$ROOT" merge
conf '[Sysext]' 'Hierarchies=/usr /o:pt'
refused "Hierarchies=/o:pt" "line 2: hierarchy '/o:pt' contains ',' or ':'" "$TUCKCTL" --root="$ROOT" merge
conf '[Confext]' 'Hierarchies=/et,c'
refused "Hierarchies=/et,c" "line 2: hierarchy '/et,c' contains ',' or ':'" "$TUCKCTL" --root="$ROOT" merge
conf '[Sysext]' 'Hierarchies=/usr /usr/'
refused "Hierarchies=/usr /usr/" "hierarchy /usr is configured twice" "$TUCKCTL" --root="$ROOT" merge
ln -s usr "$ROOT/usr2"
conf '[Sysext]' 'Hierarchies=/usr /usr2'
refused "Hierarchies=/usr /usr2 (a link to usr)" "hierarchies /usr and /usr2 are the same directory" \
        "$TUCKCTL" --root="$ROOT" merge
expect_eq "nothing was mounted by the refused calls" "$(host_mountinfo)" "$before"

# --- the top replaced while tuckctl resolves the hierarchy ---------------------
# tuckctl resolves its hierarchies before it takes the lock, while a refresh of
# tuckd's may be replacing the top. A name read from a top that was detached
# meanwhile is "/", one moved away is where it went (and it may come back before
# a second look): a refresh would then work on "/" or /usr/park as its /usr. Here
# a loop detaches or moves the top as fast as it can; every status must name
# $ROOT/usr: the name comes from the directories walked, not from the mount.
conf '[Sysext]' 'Hierarchies=/usr'
# flip MODE CALLS: "detach" mounts a tmpfs on /usr and detaches it; "move" moves one
# between /usr and /usr/park below it (the fd of a top moved elsewhere is named
# /usr/park, though /usr is the hierarchy). It moves it by fds, on a private tmpfs of its own: a mount whose
# parent is shared (the test's root) cannot be moved.
flip() {
        local mode=$1 calls=$2 wrong right flipper paths
        rm -f "$ROOT/tmp/flip.stop"
        python3 - "$mode" "$ROOT/usr" "$ROOT/tmp/flip.stop" <<'PY' &
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
mode, target, stop = sys.argv[1], sys.argv[2].encode(), sys.argv[3]
MS_PRIVATE, MNT_DETACH = 1 << 18, 2
SYS_move_mount, F_EMPTY, T_EMPTY = 429, 0x4, 0x40
def move(src, dst):
    return libc.syscall(SYS_move_mount, src, b"", dst, b"", F_EMPTY | T_EMPTY)
n = 0
if mode == "move":
    libc.mount(b"tuck-flip-base", target, b"tmpfs", 0, None)
    libc.mount(None, target, None, MS_PRIVATE, None)
    os.mkdir(target + b"/park")
    base, park = os.open(target, os.O_PATH), os.open(target + b"/park", os.O_PATH)
    libc.mount(b"tuck-flip", target, b"tmpfs", 0, None)
    top = os.open(target, os.O_PATH)
while not os.path.exists(stop):
    if mode == "detach":
        if libc.mount(b"tuck-flip", target, b"tmpfs", 0, None) == 0:
            libc.umount2(target, MNT_DETACH)
            n += 1
    elif move(top, park) == 0 and move(top, base) == 0:
        n += 1
if mode == "move":
    libc.umount2(target, MNT_DETACH)
    libc.umount2(target, MNT_DETACH)
print(n, file=open(stop + ".count", "w"))
PY
        flipper=$!
        # The status calls first, their paths read after, in one python3:
        # on a slow day a python3 per call took as long as the calls.
        : >"$ROOT/tmp/flip.status"
        for ((i = 0; i < calls; i++)); do
                { tuck status --json=short 2>&1 || true; } | tr '\n' ' ' >>"$ROOT/tmp/flip.status"
                echo >>"$ROOT/tmp/flip.status"
        done
        touch "$ROOT/tmp/flip.stop"
        wait "$flipper"
        paths=$(python3 - "$ROOT/tmp/flip.status" <<'PY'
import json, sys
for line in open(sys.argv[1]):
    path = ""
    try:
        for h in json.loads(line):
            if h["hierarchy"] == "/usr":
                path = h["path"]
    except Exception:
        pass
    print(path if path else "-")
PY
)
        right=$(grep -cxF -- "$ROOT/usr" <<<"$paths") || true
        wrong=$((calls - right))
        ((wrong == 0)) || diag "status named /usr otherwise: $(paste -d '|' <(echo "$paths") "$ROOT/tmp/flip.status" | grep -vF -- "$ROOT/usr|" | head -n 3)"
        diag "$mode: $calls status calls while the top moved $(cat "$ROOT/tmp/flip.stop.count") times: $right named $ROOT/usr"
        expect_eq "$mode: every status named $ROOT/usr, none another path or none" "$wrong" 0
        expect_eq "$mode: the loop left nothing mounted" "$(host_mountinfo)" "$before"
}
flip detach 100
flip move 50
tap_done
