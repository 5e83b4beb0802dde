#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# What tuck reads and accepts of an image, and from where (issue 10, items 5
# to 7): names systemd-sysext 252 takes, a 300 KB release-file line, every
# path a check reads resolved inside the image, layers that would hide the
# host's os-release or the extension-release directory refused, and the
# trust model (who may write a search directory, an image, a symlink's
# target). Images are squashfs made by mksquashfs from trees built here.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# tree NAME [CLASS]: a fresh tree for image NAME with its release file; prints its path.
tree() {
        local name=$1 class=${2:-sysext} t
        t=$IMAGES/tree-$name
        rm -rf "$t"
        if [[ $class == sysext ]]; then
                mkdir -p "$t/usr/lib/extension-release.d" "$t/usr/share/$name"
                echo "ID=_any" >"$t/usr/lib/extension-release.d/extension-release.$name"
                echo "$name" >"$t/usr/share/$name/file"
        else
                mkdir -p "$t/etc/extension-release.d" "$t/etc/$name"
                echo "ID=_any" >"$t/etc/extension-release.d/extension-release.$name"
                echo "$name" >"$t/etc/$name/file"
        fi
        echo "$t"
}

# squash TREE OUT: the tree as a squashfs image (xattrs, devices and owners kept).
squash() {
        mksquashfs "$1" "$2" -noappend -quiet -no-progress -xattrs >/dev/null
}

# entry PATH-PART: the image's line of `tuck list` and its reason line, if any, as one line.
entry() {
        awk -v want="$1" 'index($0, want) && !found { found = 1; line = $0; next }
                found == 1 { if ($1 == "not") line = line " " $0; found = 2 }
                END { print line }' <<<"$LIST"
}

# refused PATH-PART REGEX DESCRIPTION: `tuck list` says the image is not usable, for a reason matching REGEX.
refused() {
        local line
        line=$(entry "$1")
        if [[ $line == *"not usable"* ]] && grep -Eq -- "$2" <<<"$line"; then
                ok "$3"
        else
                not_ok "$3 (list says: ${line:-nothing about '$1'})"
        fi
}

usable() {
        local line
        line=$(entry "$1")
        if [[ -n $line && $line != *"not usable"* ]]; then ok "$2"; else not_ok "$2 (list says: ${line:-nothing})"; fi
}

# --- names and limits systemd-sysext 252 accepts ------------------------------
host_setup
for name in "sp ace" ".hidden" "ü"; do
        squash "$(tree "$name")" "$ROOT/run/extensions/$name.raw"
done
t=$(tree long)
{ echo "ID=_any"; printf 'LONG=%0307200d\n' 0; } >"$t/usr/lib/extension-release.d/extension-release.long"
squash "$t" "$ROOT/run/extensions/long.raw"
LIST=$(tuck list 2>&1)
diag "$LIST"
usable "sp ace.raw" "an image named 'sp ace' is usable, as systemd-sysext 252 merges it"
usable ".hidden.raw" "an image named '.hidden' is usable"
usable "ü.raw" "an image named 'ü' is usable"
usable "long.raw" "a release file with a 300 KB line is read (the limit is 1 MiB)"
out=$(tuck merge 2>&1) || true
diag "$out"
check "they merge" test -f "$ROOT/usr/share/sp ace/file" -a -f "$ROOT/usr/share/.hidden/file" -a -f "$ROOT/usr/share/long/file"
host_teardown

# --- every path a check reads resolves inside the image -------------------------
host_setup
outside=$(mktemp -d /tmp/tuck-outside.XXXXXX)
# What a check must never read: a release file for 'escape' on the machine itself.
mkdir -p "$outside/lib/extension-release.d"
echo "ID=_any" >"$outside/lib/extension-release.d/extension-release.escape"
echo "ID=_any" >"$outside/release"
echo "SYSEXT_VERSION_ID=outside" >>"$outside/release"

# usr/lib is an absolute symlink out of the image: overlayfs would put that
# symlink over the host's /usr/lib, and the old check read the release file
# through it from the machine.
t=$(tree escape)
rm -rf "$t/usr/lib"
ln -s "$outside/lib" "$t/usr/lib"
squash "$t" "$ROOT/run/extensions/escape.raw"

# The release file itself an absolute symlink: resolved inside the image, so
# the image's own copy of that path is read, never the machine's.
t=$(tree inroot)
mkdir -p "$t/$outside"
printf 'ID=_any\nSYSEXT_VERSION_ID=inside\n' >"$t/$outside/release"
ln -sf "$outside/release" "$t/usr/lib/extension-release.d/extension-release.inroot"
squash "$t" "$ROOT/run/extensions/inroot.raw"

# /usr itself a symlink: it would replace the host's whole /usr.
t=$(tree usrlink)
mkdir -p "$t/opt/x"
mv "$t/usr" "$t/real-usr"
ln -s /usr "$t/usr"
squash "$t" "$ROOT/run/extensions/usrlink.raw"

LIST=$(tuck list 2>&1)
diag "$LIST"
refused "escape.raw" "ships /usr/lib as a symlink, which would hide the host's /usr/lib/os-release" \
        "a symlinked usr/lib is refused, and nothing is read through it"
usable "inroot.raw" "a symlinked release file is resolved inside the image"
expect_eq "its version comes from the image's copy, not the machine's" "$(entry inroot.raw | awk '{print $4}')" inside
refused "usrlink.raw" "ships /usr as a symlink" "an image whose /usr is a symlink is refused"
rm -rf "$outside"
host_teardown

# --- layers that would hide the host's os-release or the release directory -------
host_setup
t=$(tree opaque)
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.overlay.opaque", b"y")' "$t/usr/lib"
squash "$t" "$ROOT/run/extensions/opaque.raw"
t=$(tree whiteout)
mknod "$t/usr/lib/os-release" c 0 0
squash "$t" "$ROOT/run/extensions/whiteout.raw"
t=$(tree xwhiteout)
: >"$t/usr/lib/os-release"
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.overlay.whiteout", b"")' "$t/usr/lib/os-release"
squash "$t" "$ROOT/run/extensions/xwhiteout.raw"
t=$(tree reldir)
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "user.overlay.opaque", b"y")' \
        "$t/usr/lib/extension-release.d"
squash "$t" "$ROOT/run/extensions/reldir.raw"
t=$(tree redirect)
python3 -c 'import os, sys; os.setxattr(sys.argv[1], "trusted.overlay.redirect", b"/elsewhere")' "$t/usr/lib"
squash "$t" "$ROOT/run/extensions/redirect.raw"
t=$(tree osrel)
cp /etc/os-release "$t/usr/lib/os-release"
squash "$t" "$ROOT/run/extensions/osrel.raw"
t=$(tree plain)
squash "$t" "$ROOT/run/extensions/plain.raw"
t=$(tree confosrel confext)
cp /etc/os-release "$t/etc/os-release"
squash "$t" "$ROOT/run/confexts/confosrel.raw"
t=$(tree confwhiteout confext)
mknod "$t/etc/os-release" c 0 0
squash "$t" "$ROOT/run/confexts/confwhiteout.raw"

LIST=$(tuck list 2>&1)
diag "$LIST"
refused "opaque.raw" "opaque directory.*hide the host's /usr/lib/os-release" "an opaque /usr/lib is refused"
refused "whiteout.raw" "ships /usr/lib/os-release as a whiteout \(character device 0/0\)" \
        "a whiteout of /usr/lib/os-release is refused"
refused "xwhiteout.raw" "ships /usr/lib/os-release as a whiteout \(overlay.whiteout xattr\)" \
        "an xattr whiteout (Linux 6.7) of /usr/lib/os-release is refused"
refused "reldir.raw" "ships /usr/lib/extension-release.d as an opaque directory" \
        "an opaque extension-release directory (user.overlay.opaque) is refused"
refused "redirect.raw" "redirect or metacopy" "a redirect xattr on /usr/lib is refused"
refused "osrel.raw" "ships /usr/lib/os-release as a file" "an image shipping /usr/lib/os-release is refused"
refused "confosrel.raw" "ships /etc/os-release as a file" "a confext shipping /etc/os-release is refused"
refused "confwhiteout.raw" "ships /etc/os-release as a whiteout" "a confext whiteout of /etc/os-release is refused"
usable "plain.raw" "the same image without any of that is usable"
out=$(tuck merge 2>&1) || true
diag "$out"
check "after the merge the host's os-release is still there" test -f "$ROOT/usr/lib/os-release" -o -f "$ROOT/etc/os-release"
out=$(tuck refresh 2>&1) && ok "and the next refresh still reads it" || not_ok "and the next refresh still reads it: $out"
host_teardown

# --- a directory image on FUSE that cannot list xattrs, but can get them ------------
# A FUSE server without LISTXATTR makes listxattr() fail with ENOTSUP while getxattr()
# still answers, and overlayfs only ever gets: there the failed list is no "none".
# (squashfs and erofs, which refuse both alike when built without xattrs, are where it is.)
# fuse_up ARGS...: tuck-fuse-hang ARGS in the background, answering every lookup.
fuse_up() {
        : >"$LOGS/fuse.out"
        "$TUCK_FUSE" --answer=1000000 "$@" >>"$LOGS/fuse.out" 2>&1 &
        fuse_pid=$!
        for ((i = 0; i < 200; i++)); do grep -q '^ready ' "$LOGS/fuse.out" && break; sleep 0.05; done
        check "a FUSE file system ($*) is up" grep -q '^ready ' "$LOGS/fuse.out"
}
# fuse_down: its container process and the server (SIGTERM: it closes /dev/fuse).
fuse_down() {
        kill $(awk '/^ready / { print $2 }' "$LOGS/fuse.out") 2>/dev/null || true
        kill -TERM "$fuse_pid" 2>/dev/null || true
        wait "$fuse_pid" 2>/dev/null || true
}
host_setup
mkdir -p "$ROOT/run/extensions/fz"
fuse_up --dir=usr --xattr=trusted.overlay.opaque=y "$ROOT/run/extensions/fz"
check "listing usr's xattrs fails with ENOTSUP" python3 -c '
import errno, os, sys
try:
    os.listxattr(sys.argv[1])
except OSError as e:
    sys.exit(e.errno != errno.EOPNOTSUPP)
sys.exit(1)' "$ROOT/run/extensions/fz/usr"
check "getting trusted.overlay.opaque gives y" python3 -c '
import os, sys
sys.exit(os.getxattr(sys.argv[1], "trusted.overlay.opaque") != b"y")' "$ROOT/run/extensions/fz/usr"
LIST=$(tuck list 2>&1)
diag "$(entry extensions/fz)"
refused "extensions/fz" "ships /usr as an opaque directory" \
        "an opaque /usr on FUSE that cannot list xattrs is refused"
fuse_down
host_teardown

# --- a user's FUSE mount: every file says it is root's, and none is believed ---------
# fusermount3 (with user_allow_other in /etc/fuse.conf, so root may enter) lets a user
# mount a server that reports whatever owner and mode it likes. The mounts above are
# root's (user_id=0) and pass the trust walk (they are refused for what they hold);
# these say uid 1000 made them, as fusermount3 writes it: a directory image, and a
# whole search directory (where a file image would be).
host_setup
mkdir -p "$ROOT/run/extensions/fz"
fuse_up --user=1000 --dir=usr "$ROOT/run/extensions/fz"
check "its files say they are root's" test "$(stat -c %u "$ROOT/run/extensions/fz/usr")" = 0
LIST=$(tuck list 2>&1)
diag "$(entry extensions/fz)"
refused "extensions/fz" "'$ROOT/run/extensions/fz' is on a FUSE file system mounted by uid 1000" \
        "a directory image on a user's FUSE mount is refused, whatever owner it reports"
fuse_down
umount -l "$ROOT/run/extensions/fz"
squash "$(tree good)" "$ROOT/run/extensions/good.raw"
fuse_up --user=1000 --dir=usr "$ROOT/var/lib/extensions"
out=$(tuck merge 2>&1) || true
diag "$out"
check "a search directory that is a user's FUSE mount is refused, and said so" \
        grep -q "'$ROOT/var/lib/extensions' is on a FUSE file system mounted by uid 1000" <<<"$out"
check "the images of the other search directories are still merged" grep -q '^/usr: merged' <<<"$out"
tuck unmerge >/dev/null
fuse_down
host_teardown

# --- the trust model -------------------------------------------------------------
host_setup
t=$(tree good)
squash "$t" "$IMAGES/good.raw"

# An image others may write.
cp "$IMAGES/good.raw" "$ROOT/run/extensions/worldw.raw"
chmod 0666 "$ROOT/run/extensions/worldw.raw"
# An image not owned by root.
cp "$IMAGES/good.raw" "$ROOT/run/extensions/notroot.raw"
chown 1000:1000 "$ROOT/run/extensions/notroot.raw"
# A symlink into a directory others may write (not sticky).
ww=$(mktemp -d /tmp/tuck-ww.XXXXXX)
chmod 0777 "$ww"
cp "$IMAGES/good.raw" "$ww/inww.raw"
ln -s "$ww/inww.raw" "$ROOT/run/extensions/inww.raw"
# Flatcar's layout: a symlink to /opt/extensions/NAME/NAME-V.raw (root's).
mkdir -p "$ROOT/opt/extensions/flat"
t=$(tree flat)
squash "$t" "$ROOT/opt/extensions/flat/flat-1.raw"
ln -s "$ROOT/opt/extensions/flat/flat-1.raw" "$ROOT/run/extensions/flat.raw"
# A search directory its group may write: its images are refused and shadow nothing.
t=$(tree shadow)
echo lower >"$t/usr/share/shadow/file"
squash "$t" "$ROOT/var/lib/extensions/shadow.raw"
mkdir -p "$ROOT/etc/extensions"
chmod 0775 "$ROOT/etc/extensions"
t=$(tree shadow)
echo upper >"$t/usr/share/shadow/file"
squash "$t" "$ROOT/etc/extensions/shadow.raw"
# A directory image with a file others may write.
t=$(tree dirimg)
chmod 0666 "$t/usr/share/dirimg/file"
cp -a "$t" "$ROOT/run/extensions/dirimg"

LIST=$(tuck list 2>&1)
diag "$LIST"
refused "worldw.raw" "worldw.raw' is writable by others \(mode 0666\)" "an image others may write is refused"
refused "notroot.raw" "owned by uid 1000, not root" "an image not owned by root is refused"
refused "inww.raw" "'$ww' \(reached through the symlink '.*inww.raw'\) is writable by others" \
        "a symlink whose target lies in a directory others may write is refused"
usable "flat.raw" "Flatcar's /etc/extensions/NAME.raw -> /opt/extensions/NAME/NAME-V.raw is usable"
refused "etc/extensions/shadow.raw" "search directory is not root's alone: .*etc/extensions' is writable by its group" \
        "the images of a search directory its group may write are refused"
usable "var/lib/extensions/shadow.raw" "and they shadow nothing: the same name further down is used"
refused "dirimg" "'/usr/share/dirimg/file' in the directory image is writable by others" \
        "a directory image with a file others may write is refused"
out=$(tuck merge 2>&1) || true
diag "$out"
expect_eq "the shadowed image's content is merged, not the untrusted one's" "$(cat "$ROOT/usr/share/shadow/file")" lower
rm -rf "$ww"
tap_done
