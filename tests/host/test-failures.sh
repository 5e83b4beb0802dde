#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Every failure path leaves the old generation in place: the host's and two
# services' mount tables byte-for-byte the same, the old content visible, and
# an error that says why. One service has /usr read-only and nosuid in place,
# which the swap would loosen: a refresh pins it first (heal.h) and must
# take that pin away again when its swap does not happen. Each case starts
# from a fresh host-like tree.
set -euo pipefail
source "$(dirname "$0")/lib.sh"

# A fresh host with foo 2.0 (label A) and cfg 1 (label CA) merged, and a service.
setup_merged() {
        [[ -n $ROOT ]] && host_teardown
        host_setup
        A=$(mkimg foo 2.0 sysext A)
        CA=$(mkimg cfg 1 confext CA)
        install_img "$A" foo
        install_img "$CA" cfg run/confexts
        tuck merge -v >/dev/null 2>"$ROOT/tmp/merge.log" || { cat "$ROOT/tmp/merge.log"; exit 1; }
        service plain
        PLAIN=$SERVICE_PID
        spawn_ns pinned "mount -o remount,bind,ro,nosuid,nodev $ROOT/usr"
        PINNED=$NS_PID_pinned
}

# A generation record without what it says is held back: a refused
# extension is held back alone and recorded so (test-versions.sh), which is
# not a change of the mounts.
record() {
        python3 -c '
import json, sys
for p in sys.argv[1:]:
    g = json.load(open(p))
    g.pop("held_back", None)
    print(json.dumps(g, sort_keys=True))' "$@"
}

# Everything, or with ONLY=/opt just that hierarchy (the others may go ahead).
snapshot() {
        local filter=.
        [[ -n ${ONLY:-} ]] && filter=" $ROOT$ONLY "
        grep -- "$filter" /proc/self/mountinfo || true
        echo ---
        nsenter --mount --target "$PLAIN" cat /proc/self/mountinfo | grep -- "$filter" || true
        echo ---
        nsenter --mount --target "$PINNED" cat /proc/self/mountinfo | grep -- "$filter" || true
        echo ---
        if [[ -n ${ONLY:-} ]]; then
                cat "$ROOT/${ONLY#/}/"{,lib/}tuck-probe/generation 2>/dev/null || true
                record "$ROOT/run/tuck/generations/${ONLY#/}.json"
        else
                probe_label "$ROOT/usr/lib/tuck-probe/generation"
                probe_label "$ROOT/etc/tuck-probe/generation"
                record "$ROOT"/run/tuck/generations/*.json
        fi
}

# fails_unchanged DESCRIPTION EXIT-CODE MESSAGE-REGEX CMD...: CMD exits with
# EXIT-CODE, says MESSAGE-REGEX, and nothing changed.
fails_unchanged() {
        local what=$1 want_rc=$2 regex=$3 rc=0 before after out
        shift 3
        before=$(snapshot)
        out=$("$@" 2>&1) || rc=$?
        after=$(snapshot)
        diag "$out"
        expect_eq "$what: exit status" "$rc" "$want_rc"
        if grep -Eq -- "$regex" <<<"$out"; then ok "$what: says why"; else not_ok "$what: says why (no /$regex/)"; fi
        if [[ $before == "$after" ]]; then
                ok "$what: mount tables, content and generation record unchanged"
        else
                not_ok "$what: mount tables, content and generation record unchanged"
                diff <(echo "$before") <(echo "$after") | sed 's/^/# /' || true
        fi
}

# --- bad images are reported, the rest are merged -------------------------
host_setup
good=$(mkimg foo 1 sysext A)
wrong_os=$(mkimg bar 1 sysext X --id=not-this-os)
no_release=$(mkimg baz 1 sysext X --no-release)
install_img "$good" foo
install_img "$wrong_os" bar
install_img "$no_release" baz
truncate -s 2M "$ROOT/run/extensions/ddi.raw"
echo 'label: gpt' | sfdisk -q "$ROOT/run/extensions/ddi.raw" >/dev/null
head -c 8192 /dev/urandom >"$ROOT/run/extensions/junk.raw"
out=$(tuck merge 2>&1)
diag "$out"
expect_eq "a bad image does not stop the others: foo is merged" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" A
check "the wrong-OS image is reported with the reason" grep -q "Skipped sysext image '.*bar.raw': built for OS 'not-this-os'" <<<"$out"
check "the image without a release file is reported" grep -q "baz.raw': no usr/lib/extension-release.d/" <<<"$out"
check "a GPT disk image without a root or usr partition is refused, saying so" \
        grep -q "ddi.raw': GPT disk image: no root or usr partition for" <<<"$out"
check "a file without squashfs/erofs is refused" grep -q "junk.raw': no squashfs or erofs file system found" <<<"$out"
list=$(tuck list)
diag "$list"
check "list says why each bad image is not usable" test "$(grep -c 'not usable:' <<<"$list")" = 4
check "list --json: 1 valid, 4 invalid" python3 -c '
import json, sys
l = json.load(sys.stdin)
assert sorted(i["name"] for i in l if i["valid"]) == ["foo"], l
assert len([i for i in l if not i["valid"]]) == 4
' <<<"$(tuck list --json)"

# --- a hierarchy that does not exist is skipped, the others merged --------------
tuck unmerge >/dev/null
rm -rf "$ROOT/opt"
out=$(tuck merge 2>&1)
diag "$out"
check "a missing /opt is skipped and said so" grep -q "^/opt: nothing: .*/opt does not exist here, skipped" <<<"$out"
check "/usr is merged anyway" grep -q '^/usr: merged' <<<"$out"

# --- the host's os-release cannot be read -----------------------------------
# (a host without confexts, so that /etc is the plain base and can lose it)
host_teardown
host_setup
install_img "$(mkimg foo 2.0 sysext A)" foo
tuck merge >/dev/null
service plain
PLAIN=$SERVICE_PID
install_img "$(mkimg foo 2.1 sysext B)" foo
mv "$ROOT/etc/os-release" "$ROOT/tmp/os-release"
fails_unchanged "no os-release on the host" 1 "cannot read the host's os-release below '$ROOT'" tuck refresh
rc=0
out=$(tuck list 2>&1) || rc=$?
diag "$out"
expect_eq "list fails too (exit status)" "$rc" 1
expect_eq "and says why, in one error line" "$(grep -c . <<<"$out")/$(grep -c "os-release below '$ROOT'" <<<"$out")" 1/1
mv "$ROOT/tmp/os-release" "$ROOT/etc/os-release"

# --- an active extension whose new image is bad is held back, not dropped ---
setup_merged
bad=$(mkimg foo 3.0 sysext B --id=not-this-os)
install_img "$bad" foo
fails_unchanged "active extension, new image invalid" 3 \
        "held back: foo: its image .* is not valid: built for OS 'not-this-os'.*; foo 2.0 stays \(use --remove=foo" \
        tuck refresh
check "the confext hierarchy went ahead independently (nothing to do)" grep -q '^/etc: unchanged' <<<"$(tuck refresh 2>&1 || true)"

# --- downgrade -----------------------------------------------------------
setup_merged
old=$(mkimg foo 1.9 sysext OLD)
install_img "$old" foo
fails_unchanged "downgrade 2.0 -> 1.9" 3 \
        "held back: foo: downgrade 2.0 → 1.9 not allowed .*--allow-downgrade=foo" tuck refresh
out=$(tuck refresh --allow-downgrade 2>&1)
check "--allow-downgrade activates it" grep -q '^/usr: refreshed' <<<"$out"
expect_eq "and the host sees it" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" OLD
check "the floor moves to 1.9: a recorded decision" grep -q '"foo":{"floor":"1.9","decision":{"kind":"downgrade-allowed"' \
        <<<"$(tr -d ' \n' <"$ROOT/var/lib/tuck/versions.json")"
# A reboot: /run is gone (mounts and records), /var/lib/tuck stays.
tuck unmerge >/dev/null
umount "$ROOT/run/tuck/staging.mnt"
umount "$ROOT/run/tuck"
rm -rf "$ROOT/run/tuck"
rc=0; out=$(tuck merge 2>&1) || rc=$?
diag "$out"
expect_eq "after a reboot, the allowed version merges without the flag" "$rc" 0
expect_eq "and is what the host sees" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" OLD

# --- an unrequested removal ------------------------------------------------
setup_merged
rm "$ROOT/run/extensions/foo.raw"
fails_unchanged "image of an active extension removed" 3 \
        "held back: foo: its image is gone .*foo 2.0 stays \(use --remove=foo" tuck refresh
out=$(tuck refresh --remove=foo 2>&1)
check "--remove=foo: the removal was requested, the hierarchy is unmerged" grep -q '^/usr: unmerged' <<<"$out"
expect_eq "the base is visible" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" base

# --- kernel without MOVE_MOUNT_BENEATH (hidden by seccomp) -----------------
setup_merged
B=$(mkimg foo 2.1 sysext B)
install_img "$B" foo
fails_unchanged "no MOVE_MOUNT_BENEATH" 4 \
        "the kernel lacks MOVE_MOUNT_BENEATH .*--allow-window" "$TUCK_FAULT" --hide-beneath -- "$TUCKCTL" --root="$ROOT" refresh
check "status says the feature is missing" grep -q "MOVE_MOUNT_BENEATH: NOT supported" \
        <<<"$("$TUCK_FAULT" --hide-beneath -- "$TUCKCTL" --root="$ROOT" status)"
out=$("$TUCK_FAULT" --hide-beneath -- "$TUCKCTL" --root="$ROOT" refresh --allow-window 2>&1)
diag "$out"
check "--allow-window refreshes anyway" grep -q '^/usr: refreshed' <<<"$out"
check "and says loudly that it opened a window" grep -q 'WARNING: this swap opened a window' <<<"$out"
check "the generation record says so" grep -q '"window":true' <<<"$(tr -d ' \n' <"$ROOT/run/tuck/generations/usr.json")"
# The window that cannot close: the old overlay is unmounted and attaching the
# new one fails (EIO injected into the move on top; in a forced refresh of
# images already staged nothing else moves with exactly F_EMPTY_PATH). The
# report must say that the base shows, not that the old generation is in
# place; the next refresh merges again.
rc=0
out=$("$TUCK_FAULT" --hide-beneath --fail=move_mount:EIO:4=0x4 -- \
        "$TUCKCTL" --root="$ROOT" refresh --always-refresh --allow-window 2>&1) || rc=$?
diag "$out"
expect_eq "a window that cannot be closed fails (exit status)" "$rc" 1
check "and says the base shows, not that the old generation is in place" grep -q \
        "^/usr: failed, generation 2: unmounted the old overlay but cannot mount the new one: Input/output error; $ROOT/usr shows the base" \
        <<<"$out"
expect_eq "the base does show" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" base
check "the next refresh merges again" grep -q '^/usr: merged, generation 2 -> 3' <<<"$(tuck refresh 2>&1)"
expect_eq "and the extension shows" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" B

# --- injected failures before the swap --------------------------------------
setup_merged
B=$(mkimg foo 2.1 sysext B)
install_img "$B" foo
# mount(2) with MS_RDONLY|MS_NODEV is the sysext overlay (confext adds nosuid, noexec).
fails_unchanged "overlay mount fails (EIO injected)" 1 \
        "/usr: failed, generation 1: overlayfs refused 2 layers: Input/output error; generation 1 left in place" \
        "$TUCK_FAULT" --fail=mount:EIO:3=5 -- "$TUCKCTL" --root="$ROOT" refresh
# A detached tree moved beneath the top's fd (F_EMPTY_PATH|T_EMPTY_PATH|BENEATH) is the
# swap itself; the probe moves by path.
fails_unchanged "the swap fails (EIO injected into move_mount beneath)" 1 \
        "cannot move the new overlay beneath the live one: Input/output error; generation 1 left in place" \
        "$TUCK_FAULT" --fail=move_mount:EIO:4=0x244 -- "$TUCKCTL" --root="$ROOT" refresh
fails_unchanged "cloning the assembled overlay fails (ENOMEM injected)" 1 \
        "cannot clone the assembled overlay" \
        "$TUCK_FAULT" --fail=open_tree:ENOMEM:2=0x88001 -- "$TUCKCTL" --root="$ROOT" refresh
fails_unchanged "no loop device (LOOP_CONFIGURE fails)" 3 \
        "image .* is not valid: cannot mount: No space left on device" \
        "$TUCK_FAULT" --fail=ioctl:ENOSPC:1=0x4C0A -- "$TUCKCTL" --root="$ROOT" refresh
out=$(tuck refresh 2>&1)
check "with the faults gone the same refresh succeeds" grep -q '^/usr: refreshed, generation 1 -> 2' <<<"$out"

# --- a crash in the middle of a refresh -------------------------------------------
setup_merged
staging_mounts() { python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["staging_mounts"])' <<<"$(tuck status --json)"; }
normal=$(staging_mounts)
install_img "$(mkimg foo 2.1 sysext B)" foo
# Killed (SIGSYS) right after the overlay was assembled in the staging namespace,
# before it is cloned out: new image staged, overlay mounted there, nothing saved.
fails_unchanged "tuckctl killed mid-refresh" 159 "" \
        "$TUCK_FAULT" --kill=open_tree:2=0x88001 -- "$TUCKCTL" --root="$ROOT" refresh
crashed=$(staging_mounts)
diag "staging mounts: $normal normally, $crashed after the crash"
check "the crash left mounts behind in the staging namespace ($crashed > $normal)" test "$crashed" -gt "$normal"
out=$(tuck refresh 2>&1)
check "the next refresh works" grep -q '^/usr: refreshed, generation 1 -> 2' <<<"$out"
expect_eq "and cleans up what the crash left (staging mounts back to $normal)" "$(staging_mounts)" "$normal"

# --- tuck cannot leave the staging namespace ---------------------------------------
# Staying inside, every later step would take the staging namespace's mounts for the
# host's. chroot() only runs on the way out (back to the root tuck came from): failing
# it, tuckctl stops at once (SIGABRT: 134), naming why, before anything changed.
install_img "$(mkimg foo 2.2 sysext C)" foo
fails_unchanged "leaving the staging namespace fails (chroot EIO injected)" 134 \
        "Cannot leave the staging namespace: Input/output error; stopping here" \
        "$TUCK_FAULT" --fail=chroot:EIO -- "$TUCKCTL" --root="$ROOT" refresh
out=$(tuck refresh 2>&1)
check "the next refresh works" grep -q '^/usr: refreshed, generation 2 -> 3' <<<"$out"
expect_eq "and leaves the usual staging mounts ($normal)" "$(staging_mounts)" "$normal"

# --- a working directory root can no longer enter ----------------------------------
# On the way back from the staging namespace tuck returns to the caller's working
# directory. One root may not enter (a root-squashed NFS, someone's FUSE; here a FUSE
# server that refuses ACCESS from SIGUSR2 on) is no reason to stop: tuck works in "/".
mkdir -p "$ROOT/tmp/fusecwd"
: >"$LOGS/fuse.out"
"$TUCK_FUSE" --answer=1000000 "$ROOT/tmp/fusecwd" >>"$LOGS/fuse.out" 2>&1 &
fuse=$!
for ((i = 0; i < 200; i++)); do grep -q '^ready ' "$LOGS/fuse.out" && break; sleep 0.05; done
install_img "$(mkimg foo 2.3 sysext D)" foo
rc=0
out=$(cd "$ROOT/tmp/fusecwd" && kill -USR2 $fuse &&
        for ((i = 0; i < 200; i++)); do grep -q '^access denied' "$LOGS/fuse.out" && break; sleep 0.05; done &&
        "$TUCKCTL" --root="$ROOT" refresh 2>&1) || rc=$?
diag "$out"
expect_eq "a working directory root cannot enter again: exit status" "$rc" 0
check "it says so and works in /" \
        grep -q "Cannot return to the working directory: Permission denied; working in / instead" <<<"$out"
check "and the refresh is done" grep -q '^/usr: refreshed, generation 3 -> 4' <<<"$out"
kill $(awk '/^ready / { print $2 }' "$LOGS/fuse.out") $fuse 2>/dev/null || true
wait $fuse 2>/dev/null || true

# --- a swap stopped between its two halves ----------------------------------------
# The unmount of the old top (MNT_DETACH|UMOUNT_NOFOLLOW) fails right after
# the new overlay was moved beneath it, as if tuckctl had been killed there
# (a seccomp kill cannot tell that unmount from the staging area's, which
# come first): two of our overlays on /usr, the old one still showing. The
# next run finishes that swap instead of leaving the new overlay hidden (and
# an unmerge revealing it instead of the base).
usr_overlays() { nsenter --mount --target "$1" awk -v t="$ROOT/usr" '$5 == t && / - overlay tuck-sysext /' /proc/self/mountinfo | wc -l; }
for next in refresh unmerge; do
        setup_merged
        install_img "$(mkimg foo 2.1 sysext B)" foo
        rc=0
        out=$("$TUCK_FAULT" --fail=umount2:EBUSY:1=0xa -- "$TUCKCTL" --root="$ROOT" refresh 2>&1) || rc=$?
        diag "$out"
        expect_eq "stopped between beneath and unmount ($next next): exit status" "$rc" 1
        expect_eq "stopped between beneath and unmount: still the old generation" \
                "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" A
        expect_eq "stopped between beneath and unmount: two overlays stacked on /usr" "$(usr_overlays $$)" 2
        expect_eq "stopped between beneath and unmount: the service has both too" "$(usr_overlays "$PLAIN")" 2
        out=$(tuck "$next" 2>&1) || true
        diag "$out"
        check "the next $next says it finished the half-done swap" grep -q 'finished the swap a killed run left half done' <<<"$out"
        expect_eq "after the $next: one overlay on /usr or none" "$(usr_overlays $$)" "$([[ $next == refresh ]] && echo 1 || echo 0)"
        expect_eq "after the $next: the service agrees" "$(usr_overlays "$PLAIN")" "$([[ $next == refresh ]] && echo 1 || echo 0)"
        expect_eq "after the $next: the host sees $([[ $next == refresh ]] && echo 'the new generation' || echo 'the base')" \
                "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" "$([[ $next == refresh ]] && echo B || echo base)"
done

# --- not a half-done swap: someone else's mount on top, under a reused mount ID
# Mount IDs are reused (lowest free first): once our recorded top is gone,
# the next mount anywhere may get its number. Here a tmpfs stacked on our
# overlay holds the recorded ID (the record is pointed at it, as a reuse
# would); the next run must not take it for our old top and unmount it.
setup_merged
mkdir -p "$ROOT"/tmp/foreign-usr/lib/tuck-probe
echo generation=foreign >"$ROOT"/tmp/foreign-usr/lib/tuck-probe/generation
mount --bind "$ROOT"/tmp/foreign-usr "$ROOT"/usr
foreign_id=$(awk -v t="$ROOT/usr" '$5 == t { id = $1 } END { print id }' /proc/self/mountinfo)
python3 -c '
import json, sys
p = sys.argv[1]
g = json.load(open(p))
g["overlay_mount_id"] = int(sys.argv[2])
json.dump(g, open(p, "w"))' "$ROOT/run/tuck/generations/usr.json" "$foreign_id"
out=$(tuck refresh 2>&1) || true
diag "$out"
check "a foreign top with the recorded mount ID is no half-done swap" \
        bash -c '! grep -q "finished the swap a killed run left half done" <<<"$1"' _ "$out"
expect_eq "the foreign mount is still on top of /usr" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" foreign
umount "$ROOT"/usr 2>/dev/null || true

# --- lock contention ----------------------------------------------------------
setup_merged
B=$(mkimg foo 2.1 sysext B)
install_img "$B" foo
flock "$ROOT/run/tuck/lock" sleep 3 &
holder=$!
sleep 0.3
fails_unchanged "lock held, --no-block" 5 "another tuck operation holds .*/lock" tuck refresh --no-block
start=$SECONDS
out=$(tuck refresh 2>&1)
check "without --no-block it waits for the lock, then refreshes" grep -q '^/usr: refreshed' <<<"$out"
check "it waited (~3 s)" test $((SECONDS - start)) -ge 1
wait "$holder"

# --- a nested mount whose mount point is gone in the new generation -----------
setup_merged
mkdir -p "$IMAGES/tree/opt/app"
nested=$("$MKEXT" --label=N foo 2.1 sysext "$IMAGES/tree" "$IMAGES/nested.raw" && echo "$IMAGES/nested.raw")
install_img "$nested" foo
tuck refresh >/dev/null
mount -t tmpfs nested "$ROOT/opt/app"
install_img "$(mkimg foo 2.2 sysext B)" foo
ONLY=/opt fails_unchanged "nested mount without a mount point in the new generation" 1 \
        "the new generation has no mount point for the mount at '$ROOT/opt/app' \(No such file or directory\)" \
        tuck refresh
expect_eq "each hierarchy on its own: /usr went ahead" "$(probe_label "$ROOT/usr/lib/tuck-probe/generation")" B
umount "$ROOT/opt/app"

# --- something mounted on top of our overlay ----------------------------------
setup_merged
install_img "$(mkimg foo 2.1 sysext B)" foo
mount --bind "$ROOT/usr" "$ROOT/usr"
ONLY=/usr fails_unchanged "someone's mount on top of our overlay" 1 \
        "something is mounted on top of our overlay at /usr .*refusing to swap beneath it" tuck refresh
expect_eq "each hierarchy on its own: /opt went ahead" "$(probe_label "$ROOT/opt/tuck-probe/generation")" B
umount "$ROOT/usr"

host_teardown
tap_done
