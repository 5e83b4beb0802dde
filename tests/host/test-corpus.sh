#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The image corpus (tests/corpus/mkcorpus) on the build machine's kernel,
# against Debian 12's systemd-sysext 252 as the oracle: each image alone,
# in a fresh tree, merged by systemd-sysext and listed by tuck. Every image
# systemd-sysext merges, tuck must use too, or refuse for one of the
# stricter rules below, with its reason. This kernel has no device-mapper:
# images with a root hash are verified in userspace, then refused (the vm
# suite mounts them). Then tampering, ImagePolicy=signed, and a merge of
# everything usable.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

: "${TUCK_CORPUS:?}"
mount -t tmpfs tuck-test-run /run   # systemd-sysext wants /run a mount point of its own

# What tuck says about each image here: "ok" (usable) or a regex its reason matches.
declare -A want=(
        [c-dir]=ok [c-squashfs]=ok [c-erofs]=ok [c-confext]=ok
        [c-ddi-root]=ok [c-ddi-usr]=ok [c-ddi-generic]=ok [c-ddi-verity]=ok
        [c-ddi-ext4]="holds file system 'ext4': tuck mounts squashfs and erofs only"
        [c-ddi-verity-hash]="verified against its root hash, but this kernel has no device-mapper"
        [c-ddi-signed]="verified against its root hash, but this kernel has no device-mapper"
        [c-ddi-usr-signed]="verified against its root hash, but this kernel has no device-mapper"
        [c-ddi-signed-hash]="verified against its root hash, but this kernel has no device-mapper"
        [c-verity]="verified against its root hash, but this kernel has no device-mapper"
        [c-signed]="verified against its root hash, but this kernel has no device-mapper"
        [r-ddi-arm64]="built for another architecture: a root-arm64 partition, and none for this host's x86-64"
        [r-ddi-two]="two candidates for root-x86-64 \(partitions 1 and 2\)"
        [r-ddi-truncated]="a protective MBR, but no valid GPT behind it"
        [r-ddi-garbage]="a protective MBR, but no valid GPT behind it"
        [r-mbr]="a 'dos' partition table: tuck reads GPT disk images \(DDIs\) only"
        [r-ddi-unknown]="signed by a certificate not in verity.d \(issuer /CN=some other key"
        [r-ddi-disagree]="r-ddi-disagree.roothash' is not this image's"
        [r-sig-unknown]="signed by a certificate not in verity.d"
        [r-sig-impostor]="does not verify with the certificate it names.*made with another key, or corrupt"
        [r-sig-corrupt]="made with another key, or corrupt"
        [r-sig-other]="is over another root hash"
        [r-no-tree]="a root hash .* but no hash tree"
)
# Where tuck is stricter than systemd-sysext 252 on purpose (each with its reason above): a
# writable file system type, two candidates (252 picks one), an MBR table, another
# architecture's partitions (252 mounts them), a root hash with no hash tree (252 ignores
# the root hash and mounts it unverified).
stricter="c-ddi-ext4 r-ddi-two r-mbr r-ddi-arm64 r-no-tree"

# install NAME: the corpus image NAME (and its sidecars) into the tree's search directory.
install_corpus() {
        local dir=run/extensions f
        [[ $1 == c-confext ]] && dir=run/confexts
        mkdir -p "$ROOT/etc/verity.d" "$ROOT/$dir"
        cp "$TUCK_CORPUS/keys/ca.crt" "$ROOT/etc/verity.d/tuck-test.crt"
        if [[ -d $TUCK_CORPUS/$1 ]]; then
                cp -a "$TUCK_CORPUS/$1" "$ROOT/$dir/"
        fi
        for f in "$TUCK_CORPUS/$1".*; do
                [[ -e $f ]] && cp -a "$f" "$ROOT/$dir/"
        done
        return 0
}

# The image's line of `tuck list` and its detail line.
entry() {
        awk -v want="$1" '$2 == want && !found { found = 1; line = $0; next }
                found == 1 { if ($1 == "not" || $1 == "dm-verity") line = line " " $0; found = 2 }
                END { print line }' <<<"$LIST"
}

# systemd-sysext 252 with this image alone: "merged" if its release file shows up.
oracle() {
        local name=$1 hier=usr out
        [[ $name == c-confext ]] && { echo "no confext in 252"; return; }
        out=$(systemd-sysext --root="$ROOT" merge 2>&1) || true
        if [[ -e $ROOT/$hier/lib/extension-release.d/extension-release.$name ]]; then
                echo merged
        else
                echo "refused: $(tr '\n' ' ' <<<"$out" | cut -c1-160)"
        fi
        systemd-sysext --root="$ROOT" unmerge >/dev/null 2>&1 || true
}

table=()
while IFS=$'\t' read -r name what; do
        host_setup
        install_corpus "$name"
        sysext=$(oracle "$name")
        LIST=$(tuck list 2>&1)
        line=$(entry "$name")
        if [[ $(awk '{ print $5 }' <<<"$line") == valid ]]; then tuck_says=ok; else tuck_says=${line#*not usable: }; fi
        table+=("$(printf '%-18s | %-44s | %-10s | %s' "$name" "$what" "${sysext%%:*}" "$tuck_says")")
        w=${want[$name]:-}
        if [[ -z $w ]]; then
                not_ok "$name: no expectation in this test (add it to want[])"
        elif [[ $w == ok ]]; then
                if [[ $tuck_says == ok ]]; then ok "$name ($what): usable"; else not_ok "$name: usable (tuck: $line)"; fi
        elif [[ $tuck_says != ok ]] && grep -Eq -- "$w" <<<"$tuck_says"; then
                ok "$name ($what): refused, saying why"
        else
                not_ok "$name: refused for /$w/ (tuck: $line)"
        fi
        # The oracle: what systemd-sysext merges, tuck uses, unless stricter on purpose (or no device-mapper here).
        if [[ $sysext == merged && $tuck_says != ok && " $stricter " != *" $name "* &&
              $tuck_says != *"no device-mapper"* ]]; then
                not_ok "$name: systemd-sysext 252 merges it, tuck refuses it ($tuck_says)"
        fi
        host_teardown
done <"$TUCK_CORPUS/MANIFEST"
diag "image              | what                                         | sysext 252 | tuck (this kernel: no device-mapper)"
for l in "${table[@]}"; do diag "$l"; done

# --- libblkid parses only what tuck mounts, or names -------------------------------
# Every image of the corpus at once, with libblkid listing each superblock prober it runs
# (LIBBLKID_DEBUG). A hostile image must meet only the parsers of squashfs and erofs, and,
# in a DDI's partition, of the file systems a refusal names (what systemd-repart makes).
host_setup
while IFS=$'\t' read -r name _; do install_corpus "$name"; done <"$TUCK_CORPUS/MANIFEST"
probers=$(LIBBLKID_DEBUG=lowprobe tuck list 2>&1 | sed 's/^[0-9]*: libblkid: *LOWPROBE: //' | awk '
        /^chain .*superblocks:? ENABLED/ { sb = 1; next }
        /^chain / { sb = 0; next }
        sb && /^\[[0-9]+\] [^ ]+:/ { sub(/:.*/, "", $2); print $2 }' | sort -u)
diag "superblock probers libblkid ran: $(tr '\n' ' ' <<<"$probers")"
check "libblkid's probing is seen (LIBBLKID_DEBUG)" test -n "$probers"
check "no superblock parser beyond squashfs, erofs and those a refusal names read the images" \
        bash -c '! grep -vxE "squashfs|erofs|ext4|xfs|btrfs|vfat|f2fs|linux_raid_member|ddf_raid_member|isw_raid_member|LVM2_member|bcache|crypto_LUKS" <<<"$1"' _ "$probers"
host_teardown

# --- an image that is also an LVM physical volume -------------------------------------
# A valid erofs whose first KiB (which erofs leaves unused) carries an LVM2 label, padded
# to the size libblkid looks for one in: attached, udev's LVM rules would pvscan its loop
# device. Narrowing libblkid's probers must not make it an erofs image: it is refused.
host_setup
mkdir -p "$ROOT/tmp/pv/usr/lib/extension-release.d"
echo ID=_any >"$ROOT/tmp/pv/usr/lib/extension-release.d/extension-release.pv"
mkfs.erofs "$ROOT/run/extensions/pv.raw" "$ROOT/tmp/pv" >/dev/null 2>&1
truncate -s 4M "$ROOT/run/extensions/pv.raw"
python3 - "$ROOT/run/extensions/pv.raw" <<'PY'
import struct, sys
# libblkid's lvm2 prober: "LABELONE", its sector, a CRC (LVM's) from offset 20, "LVM2 001".
tab = [0x00000000, 0x1db71064, 0x3b6e20c8, 0x26d930ac, 0x76dc4190, 0x6b6b51f4, 0x4db26158, 0x5005713c,
       0xedb88320, 0xf00f9344, 0xd6d6a3e8, 0xcb61b38c, 0x9b64c2b0, 0x86d3d2d4, 0xa00ae278, 0xbdbdf21c]
def crc(b):
    c = 0xf597a6cf
    for x in b:
        c ^= x
        c = (c >> 4) ^ tab[c & 0xf]
        c = (c >> 4) ^ tab[c & 0xf]
    return c
label = bytearray(512)
label[0:8] = b"LABELONE"
label[8:16] = struct.pack("<Q", 1)
label[20:24] = struct.pack("<I", 32)
label[24:32] = b"LVM2 001"
label[32:64] = b"tuckTestPVtuckTestPVtuckTestPV01"
label[16:20] = struct.pack("<I", crc(label[20:]))
with open(sys.argv[1], "r+b") as f:
    f.seek(512)
    f.write(label)
PY
check "blkid sees the LVM2 label in it" bash -c 'blkid -p -o value -s TYPE "$1" | grep -qx LVM2_member' _ "$ROOT/run/extensions/pv.raw"
out=$(tuck list 2>&1 || true)
diag "$(grep -A1 -E '^sysext +pv ' <<<"$out" || true)"
expect_eq "an erofs that is also an LVM physical volume is not usable" \
        "$(awk '$1 == "sysext" && $2 == "pv" { print $5 }' <<<"$out")" invalid
check "and tuck names what it is" grep -q "not usable: file system 'LVM2_member' is not supported" <<<"$out"
host_teardown

# --- libcrypto and libcryptsetup: loaded for the images that need them, only ------
# ld.so names every library whose initialiser runs (LD_DEBUG=libs): an unsigned image
# must not pull either in; a signed one needs both (its signature, then its hash tree).
loaded() { LD_DEBUG=libs tuck refresh 2>&1 | sed -n 's/.*calling init: //p' | sort -u; }
host_setup
install_corpus c-squashfs
libs=$(loaded)
diag "libraries initialised for c-squashfs: $(tr '\n' ' ' <<<"$libs")"
check "ld.so's report is seen (LD_DEBUG)" grep -q libmount <<<"$libs"
check "an unsigned image loads neither libcrypto nor libcryptsetup" \
        bash -c '! grep -E "libcrypto|libcryptsetup" <<<"$1"' _ "$libs"
install_corpus c-signed
libs=$(loaded)
check "a signed image loads libcrypto and libcryptsetup" \
        bash -c 'grep -q libcrypto.so.3 <<<"$1" && grep -q libcryptsetup.so.12 <<<"$1"' _ "$libs"
out=$(tuck list 2>&1 || true)
check "and it is still verified, then refused for want of device-mapper" \
        grep -q "verified against its root hash, but this kernel has no device-mapper" <<<"$out"
host_teardown

# --- tampering is found in userspace, before anything is mounted ---------------
host_setup
install_corpus c-verity
# One byte of the file system flipped, past the superblock.
python3 -c 'import sys; p = sys.argv[1]; d = bytearray(open(p, "rb").read()); d[2000] ^= 1; open(p, "wb").write(d)' \
        "$ROOT/run/extensions/c-verity.raw"
LIST=$(tuck list 2>&1)
line=$(entry c-verity)
diag "$line"
# (A one-block image has no tree below the root hash: libcryptsetup names no position then.)
check "a flipped byte is found: refused before anything is mounted" grep -Eq \
        "does not match its root hash \((Verification failed at position [0-9]+|Verification of root hash failed).\): tampered or corrupt" \
        <<<"$line"
host_teardown

# --- a sidecar others may write decides nothing ------------------------------------
host_setup
install_corpus c-verity
chmod 0666 "$ROOT/run/extensions/c-verity.roothash"
LIST=$(tuck list 2>&1)
check "a root hash sidecar others may write: refused, naming it" \
        grep -q "c-verity.roothash' is writable by others (mode 0666)" <<<"$(entry c-verity)"
host_teardown

# --- sidecars added to a staged image: mounted anew, never taken as verified ----------
# The file stays the same; only how it must be mounted changes. The plain mount staged
# before must not stand in for the dm-verity one, nor the layer count as unchanged:
# here the image is mounted again with its root hash, which this kernel cannot.
host_setup
install_corpus c-verity
mkdir -p "$ROOT/tmp/sidecars"
mv "$ROOT/run/extensions/c-verity.roothash" "$ROOT/run/extensions/c-verity.verity" "$ROOT/tmp/sidecars/"
out=$(tuck merge 2>&1) || true
check "without its sidecars c-verity merges as a plain squashfs" \
        test -f "$ROOT/usr/lib/extension-release.d/extension-release.c-verity"
mv "$ROOT/tmp/sidecars/c-verity.roothash" "$ROOT/tmp/sidecars/c-verity.verity" "$ROOT/run/extensions/"
LIST=$(tuck list 2>&1)
diag "$(entry c-verity)"
check "with them added, the plain mount staged before is not taken for a verified one" \
        grep -q "verified against its root hash, but this kernel has no device-mapper" <<<"$(entry c-verity)"
out=$(tuck refresh 2>&1) || true
diag "$out"
check "a refresh holds the plain layer back, saying why, rather than calling it unchanged" \
        grep -q "/usr: held back: c-verity: .*no device-mapper.*c-verity 1 stays" <<<"$out"
out=$(tuck unmerge 2>&1) && ok "unmerge" || not_ok "unmerge: $out"
host_teardown

# --- ImagePolicy=signed ------------------------------------------------------------
host_setup
for n in c-squashfs c-verity c-signed c-ddi-verity c-dir; do install_corpus "$n"; done
mkdir -p "$ROOT/etc/tuck"
printf '[Sysext]\nImagePolicy=signed\n' >"$ROOT/etc/tuck/tuck.conf"
LIST=$(tuck --config="$ROOT/etc/tuck/tuck.conf" list 2>&1)
diag "$LIST"
check "ImagePolicy=signed: a plain squashfs is refused" \
        grep -q "not protected by dm-verity, and ImagePolicy=signed asks for more" <<<"$(entry c-squashfs)"
check "ImagePolicy=signed: an unsigned verity image is refused" \
        grep -q "dm-verity, but its root hash is not signed, and ImagePolicy=signed asks for more" <<<"$(entry c-verity)"
check "ImagePolicy=signed: a hash tree without a root hash does not count" \
        grep -q "a hash tree but no root hash" <<<"$(entry c-ddi-verity)"
check "ImagePolicy=signed: a directory is refused" grep -q "a directory cannot be verified" <<<"$(entry c-dir)"
check "ImagePolicy=signed: the signed image passes the policy (and this kernel cannot mount it)" \
        grep -q "no device-mapper" <<<"$(entry c-signed)"
host_teardown

# --- everything usable here merges, refreshes and unmerges ----------------------------
host_setup
for n in c-dir c-squashfs c-erofs c-confext c-ddi-root c-ddi-usr c-ddi-generic c-ddi-verity; do
        install_corpus "$n"
done
out=$(tuck merge 2>&1) || true
diag "$out"
for n in c-dir c-squashfs c-erofs c-ddi-root c-ddi-usr c-ddi-generic c-ddi-verity; do
        check "$n is in /usr" test -f "$ROOT/usr/lib/extension-release.d/extension-release.$n"
done
check "c-confext is in /etc" test -f "$ROOT/etc/extension-release.d/extension-release.c-confext"
check "the usr partition's files are below /usr" test -f "$ROOT/usr/lib/tuck-probe/generation"
out=$(tuck refresh 2>&1) && ok "refresh" || not_ok "refresh: $out"
out=$(tuck unmerge 2>&1) && ok "unmerge" || not_ok "unmerge: $out"
check "no loop device of theirs is left" test -z "$(losetup -a | grep -F "$ROOT" || true)"
tap_done
