#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The compatibility suite: the same commands through Debian 12's
# systemd-sysext 252 and through tuckctl acting as systemd-sysext (the
# symlink the package puts in its place), on the same images (the same
# inodes), each on a tree of its own built anew for every run (a tmpfs whose
# /usr is a shared bind of this machine's), inside this test's private mount
# namespace. systemd-sysext runs chrooted into the tree (its status with
# --root is broken in 252: it reads the metadata outside the root); tuck runs
# with --root= on it (its staging namespace is entered with setns(2), which
# takes a process back to the namespace's root: not from inside a chroot),
# except list, which both run with --root= (identical paths).
# list and status JSON are compared key by key (systemd-sysext's keys; tuck
# may add its own), exit codes of the usual errors, and the metadata files
# the merge writes. Then the other direction: systemd-sysext 252 run against
# tuck's merge changes nothing (it would otherwise unmount it: the window).
# What differs on purpose is checked as such (tuckctl(8), "Differences from
# systemd-sysext").
set -euo pipefail
source "$(dirname "$0")/common.sh"
enter_test_ns private "$@"
: "${TUCKCTL:?}" "${MKEXT:?}"

C=
IMAGES=$(mktemp -d /tmp/tuck-compat-images.XXXXXX)
LOGS=$IMAGES/logs
mkdir -p "$LOGS" "$IMAGES/empty" "$IMAGES/bin"
TUCK_AS_SYSEXT=$IMAGES/bin/systemd-sysext
ln -s "$TUCKCTL" "$TUCK_AS_SYSEXT"
cleanup() {
        [[ -z $C ]] || umount -R -l "$C" 2>/dev/null || true
        [[ -z $C ]] || rmdir "$C" 2>/dev/null || true
        rm -rf "$IMAGES"
}
trap cleanup EXIT

"$MKEXT" --label=FOO foo 1 sysext "$IMAGES/empty" "$IMAGES/foo.raw"
"$MKEXT" --format=dir --label=BAR bar 1 sysext "$IMAGES/empty" "$IMAGES/bar"
"$MKEXT" --id=otheros other 1 sysext "$IMAGES/empty" "$IMAGES/other.raw"
head -c 65536 /dev/urandom >"$IMAGES/junk.raw"

# store_new: the images both tools see, $STORE/{run,var} (bound at
# /run/extensions and /var/lib/extensions in each tree).
store_new() {
        STORE=$(mktemp -d "$IMAGES/store.XXXXXX")
        mkdir -p "$STORE/run" "$STORE/var"
        cp "$IMAGES/foo.raw" "$STORE/run/"
        cp -a "$IMAGES/bar" "$STORE/var/"
}

# chroot_new: a fresh tree at $C: this machine's /usr (shared, so the merge
# systemd-sysext does in a child namespace shows here), an /etc with
# os-release, its own /run and /var, the images of $STORE.
chroot_new() {
        local d
        if [[ -n $C ]]; then
                umount -R -l "$C"
                rmdir "$C"
        fi
        C=$(mktemp -d /tmp/tuck-compat.XXXXXX)
        mount -t tmpfs -o mode=0755 tuck-compat "$C"
        mount --make-shared "$C"
        mkdir -p "$C"/{usr,etc,run,proc,dev,sys,tmp,opt,var/lib/extensions}
        mount --rbind /usr "$C/usr"
        mount --make-rshared "$C/usr"
        for d in bin lib lib64 sbin; do [[ -L /$d ]] && ln -s "usr/$d" "$C/$d"; done
        cp /etc/os-release /etc/passwd /etc/group "$C/etc/"
        mount -t tmpfs -o mode=0755 tuck-compat-run "$C/run"
        mkdir -p "$C/run/extensions"
        mount --bind "$STORE/run" "$C/run/extensions"
        mount --bind "$STORE/var" "$C/var/lib/extensions"
        mount -t proc proc "$C/proc"
        mount --rbind /dev "$C/dev"
        mount --rbind /sys "$C/sys"
}

# in_chroot TOOL ARGS...: systemd-sysext (sysext: chrooted) or tuckctl as systemd-sysext (tuck:
# --root=) on the tree; with IN_ROOT=1 both with --root=. Output and status in $OUT, $ERR, $RC.
in_chroot() {
        local tool=$1
        shift
        RC=0
        if [[ $tool == tuck ]]; then
                "$TUCK_AS_SYSEXT" --root="$C" "$@" >"$LOGS/out" 2>"$LOGS/err" || RC=$?
        elif [[ ${IN_ROOT:-} == 1 ]]; then
                systemd-sysext --root="$C" "$@" >"$LOGS/out" 2>"$LOGS/err" || RC=$?
        else
                chroot "$C" /usr/bin/systemd-sysext "$@" >"$LOGS/out" 2>"$LOGS/err" || RC=$?
        fi
        OUT=$(cat "$LOGS/out")
        ERR=$(cat "$LOGS/err")
}

# both NAME ARGS...: ARGS through each tool on a fresh tree, both on the same fresh images,
# prepared by $PREPARE (a function, run once on $STORE); then $AFTER TOOL. Results in SYSEXT_*, TUCK_*.
both() {
        local name=$1 tool
        shift
        store_new
        "$PREPARE"
        for tool in sysext tuck; do
                chroot_new
                in_chroot "$tool" "$@"
                printf -v "${tool^^}_C" '%s' "$C"
                printf -v "${tool^^}_OUT" '%s' "$OUT"
                printf -v "${tool^^}_ERR" '%s' "$ERR"
                printf -v "${tool^^}_RC" '%s' "$RC"
                printf -v "${tool^^}_AFTER" '%s' "$("$AFTER" "$tool")"
        done
        diag "$name: systemd-sysext rc=$SYSEXT_RC out=$SYSEXT_OUT err=${SYSEXT_ERR:0:300}"
        diag "$name: tuck           rc=$TUCK_RC out=${TUCK_OUT:0:600} err=${TUCK_ERR:0:300}"
}
nothing() { :; }
PREPARE=nothing AFTER=nothing

# same_json WHAT: systemd-sysext's JSON output and tuck's, key by key: every key systemd-sysext
# has, tuck has with the same value (SKIP: keys compared otherwise). Each ran on a tree of its
# own: paths are compared below their tree's root.
same_json() {
        [[ -z ${SYSEXT_C:-} ]] || SYSEXT_OUT=${SYSEXT_OUT//"$SYSEXT_C"/ROOT}
        [[ -z ${TUCK_C:-} ]] || TUCK_OUT=${TUCK_OUT//"$TUCK_C"/ROOT}
        check "$1: JSON, systemd-sysext's keys with its values (${SKIP:-none} compared apart)" python3 -c '
import json, sys
sys_, tuck, skip = json.loads(sys.argv[1]), json.loads(sys.argv[2]), sys.argv[3].split()
assert isinstance(tuck, type(sys_)), (sys_, tuck)
if isinstance(sys_, list):
    assert len(sys_) == len(tuck), (sys_, tuck)
    pairs = zip(sys_, tuck)
else:
    pairs = [(sys_, tuck)]
for s, t in pairs:
    for k, v in s.items():
        assert k in t, f"key {k} missing: {t}"
        if k not in skip:
            assert t[k] == v, f"{k}: systemd-sysext {v!r}, tuck {t[k]!r}"
' "$SYSEXT_OUT" "$TUCK_OUT" "${SKIP:-}"
}
same_rc() {
        expect_eq "$1: the same exit status ($SYSEXT_RC)" "$TUCK_RC" "$SYSEXT_RC"
}

# --- list ---------------------------------------------------------------------
IN_ROOT=1 both "list" list --json=short
same_rc "list --json"
SKIP= same_json "list"
IN_ROOT=1 both "list --json=pretty" list --json=pretty
SKIP= same_json "list --json=pretty"
add_broken() { cp "$IMAGES/junk.raw" "$IMAGES/other.raw" "$STORE/run/"; }
IN_ROOT=1 PREPARE=add_broken both "list, with an image for another OS and one that is no file system" list --json=short
SKIP= same_json "list with broken images (list does not validate)"
no_images() { rm -rf "$STORE/run/"* "$STORE/var/"*; }
IN_ROOT=1 PREPARE=no_images both "list, no images" list --json=short
same_json "list, no images"
expect_eq "list, no images: []" "$TUCK_OUT" "[]"
IN_ROOT=1 PREPARE=no_images both "list, no images, text" list
same_rc "list, no images, text"
expect_eq "list, no images, text: nothing on stdout, as systemd-sysext" "$TUCK_OUT" "$SYSEXT_OUT"

# --- status before a merge ----------------------------------------------------
both "status, nothing merged" --json=short
same_rc "status (the default verb)"
SKIP= same_json "status, nothing merged"
both "status --no-legend" status --no-legend
expect_eq "status text, nothing merged, --no-legend: the same lines" "$TUCK_OUT" "$SYSEXT_OUT"

# --- merge, then status, metadata, merge again, refresh, unmerge ----------------
# after_merge TOOL: what the merge left, as JSON lines: status, the metadata, the probe file, timing.
merged_state() {
        local tool=$1 before after
        before=$(date +%s%6N)
        in_chroot "$tool" merge
        after=$(date +%s%6N)
        echo "MERGE_RC=$RC"
        echo "WINDOW=$before $after"
        in_chroot "$tool" status --json=short
        echo "STATUS=$OUT"
        echo "EXTENSIONS_USR=$(tr '\n' ' ' <"$C/usr/.systemd-sysext/extensions" 2>/dev/null)"
        echo "EXTENSIONS_OPT=$(tr '\n' ' ' <"$C/opt/.systemd-sysext/extensions" 2>/dev/null)"
        echo "DEV=$(cat "$C/usr/.systemd-sysext/dev" 2>/dev/null)"
        echo "STDEV=$(stat -c '%Hd:%Ld' "$C/usr")"
        echo "PROBE=$(sed -n 's/^generation=//p' "$C/usr/lib/tuck-probe/generation" 2>/dev/null)"
        in_chroot "$tool" merge
        echo "AGAIN_RC=$RC"
        in_chroot "$tool" refresh
        echo "REFRESH_RC=$RC"
        echo "REFRESH_PROBE=$(sed -n 's/^generation=//p' "$C/usr/lib/tuck-probe/generation" 2>/dev/null)"
        in_chroot "$tool" unmerge
        echo "UNMERGE_RC=$RC"
        echo "UNMERGED_PROBE=$(sed -n 's/^generation=//p' "$C/usr/lib/tuck-probe/generation" 2>/dev/null || echo missing)"
        in_chroot "$tool" status --json=short
        echo "STATUS_AFTER=$OUT"
        in_chroot "$tool" unmerge
        echo "UNMERGE_AGAIN_RC=$RC"
}
field() { sed -n "s/^$2=//p" <<<"$1"; }
AFTER=merged_state both "merge, status, merge again, refresh, unmerge" list --json=short
S=$SYSEXT_AFTER T=$TUCK_AFTER
diag "systemd-sysext: $S"
diag "tuck: $T"
for k in MERGE_RC AGAIN_RC REFRESH_RC UNMERGE_RC UNMERGE_AGAIN_RC; do
        expect_eq "$k: the same exit status ($(field "$S" $k))" "$(field "$T" $k)" "$(field "$S" $k)"
done
SYSEXT_OUT=$(field "$S" STATUS) TUCK_OUT=$(field "$T" STATUS)
SKIP=since same_json "status after the merge"
check "status after the merge: each 'since' lies within its own merge" python3 -c '
import json, sys
for status, window in ((sys.argv[1], sys.argv[2]), (sys.argv[3], sys.argv[4])):
    lo, hi = map(int, window.split())
    for h in json.loads(status):
        assert lo - 1000000 <= h["since"] <= hi + 1000000, (h, lo, hi)
' "$(field "$S" STATUS)" "$(field "$S" WINDOW)" "$(field "$T" STATUS)" "$(field "$T" WINDOW)"
expect_eq "metadata: /usr/.systemd-sysext/extensions is the same" "$(field "$T" EXTENSIONS_USR)" "$(field "$S" EXTENSIONS_USR)"
expect_eq "metadata: /opt/.systemd-sysext/extensions is the same" "$(field "$T" EXTENSIONS_OPT)" "$(field "$S" EXTENSIONS_OPT)"
expect_eq "metadata: systemd-sysext's dev file is the overlay's MAJ:MIN" "$(field "$S" DEV)" "$(field "$S" STDEV)"
expect_eq "metadata: tuck's dev file is no device number, on purpose" "$(field "$T" DEV)" "merged by tuck, see tuckctl(8)"
expect_eq "the merged tree shows the extension, both" "$(field "$T" PROBE)/$(field "$S" PROBE)" "FOO/FOO"
expect_eq "after refresh, both" "$(field "$T" REFRESH_PROBE)/$(field "$S" REFRESH_PROBE)" "FOO/FOO"
expect_eq "after unmerge the base, both (no probe file in this machine's /usr)" \
        "$(field "$T" UNMERGED_PROBE)/$(field "$S" UNMERGED_PROBE)" "missing/missing"
SYSEXT_OUT=$(field "$S" STATUS_AFTER) TUCK_OUT=$(field "$T" STATUS_AFTER)
SKIP= same_json "status after the unmerge"

# --- the environment variable ---------------------------------------------------
env_status() {
        in_chroot "$1" merge >/dev/null
        SYSTEMD_SYSEXT_HIERARCHIES=/usr in_chroot "$1" status --json=short
        echo "$OUT"
}
AFTER=env_status both "SYSTEMD_SYSEXT_HIERARCHIES=/usr status" list --json=short
SYSEXT_OUT=$SYSEXT_AFTER TUCK_OUT=$TUCK_AFTER SKIP=since same_json "SYSTEMD_SYSEXT_HIERARCHIES=/usr: /usr only"

# --- the usual errors -------------------------------------------------------------
for args in "frobnicate" "--json=bogus" "status extra" "--image-policy=signed merge"; do
        both "$args" $args
        same_rc "$args"
done
as_nobody() {
        local rc=0
        if [[ $1 == tuck ]]; then
                setpriv --reuid=65534 --regid=65534 --clear-groups "$TUCK_AS_SYSEXT" --root="$C" merge >/dev/null 2>&1 || rc=$?
        else
                chroot --userspec=65534:65534 "$C" /usr/bin/systemd-sysext merge >/dev/null 2>&1 || rc=$?
        fi
        echo "$rc"
}
AFTER=as_nobody both "merge as nobody" list --json=short
expect_eq "merge as nobody: the same exit status ($SYSEXT_AFTER)" "$TUCK_AFTER" "$SYSEXT_AFTER"
PREPARE=no_images both "refresh, no images" refresh
same_rc "refresh, no images, nothing merged"

# --- what differs on purpose -----------------------------------------------------
both "--root= that does not exist" --root=/nonexistent merge
expect_eq "difference: systemd-sysext 252 takes a --root= that does not exist for one without images" "$SYSEXT_RC" 0
expect_eq "difference: tuck refuses it" "$TUCK_RC" 1
PREPARE=add_broken both "merge with an image that is no file system" merge
expect_eq "difference: systemd-sysext 252 fails the whole merge on one broken image" "$SYSEXT_RC" 1
expect_eq "difference: tuck merges the others" "$TUCK_RC" 0
check "...and says which it skipped" grep -q "Skipped sysext image '.*/run/extensions/junk.raw'" <<<"$TUCK_ERR"

# --- systemd-sysext 252 against tuck's merge: it changes nothing --------------------
store_new
chroot_new
in_chroot tuck merge
expect_eq "tuck merged" "$RC" 0
before=$(grep -E " $C/(usr|opt) " /proc/self/mountinfo)
for verb in unmerge refresh merge; do
        in_chroot sysext "$verb"
        diag "systemd-sysext 252 $verb on tuck's merge: rc=$RC $ERR"
        expect_eq "systemd-sysext 252 $verb: tuck's overlays untouched" "$(grep -E " $C/(usr|opt) " /proc/self/mountinfo)" "$before"
done
check "...it says why" grep -q "Failed to parse device major/minor" <<<"$ERR"
expect_eq "tuck's merge still shows" "$(sed -n 's/^generation=//p' "$C/usr/lib/tuck-probe/generation")" FOO

# --- tuck as systemd-sysext reads systemd-sysext's merge -----------------------------
store_new
chroot_new
in_chroot sysext merge
in_chroot sysext status --json=short
SYSEXT_OUT=$OUT
in_chroot tuck status --json=short
TUCK_OUT=$OUT
SKIP= same_json "status of systemd-sysext's merge, read by tuck (from its metadata)"
check "...and tuck says whose it is" python3 -c '
import json, sys
assert all(h["merged_by"] == "systemd-sysext" for h in json.loads(sys.argv[1])), sys.argv[1]' "$TUCK_OUT"
in_chroot tuck refresh
expect_eq "tuck's refresh takes systemd-sysext's overlay over" "$RC" 0
check "...one overlay on /usr, tuck's" test "$(grep -cE " $C/usr .* - overlay tuck-sysext " /proc/self/mountinfo)" = 1
check "...and none of systemd-sysext's" bash -c '! grep -qE " $1/usr .* - overlay sysext " /proc/self/mountinfo' _ "$C"
tap_done
