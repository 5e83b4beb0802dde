#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# The crash campaign: tuckd SIGKILLed, with everything it forked (as
# systemd's KillMode=control-group kills a service), at random points of
# merge, refresh (with the heals it does in namespaces that stayed behind),
# rollback (an older image with RefreshEx's allow-downgrade-names, the
# operator's recorded decision), unmerge and its own start-up recovery, the
# moment a heal is seen inside a namespace, and at the moment it writes a
# state file (tuck-fault --kill-armed: at fsync() of the temporary, or the
# rename() that would replace the file; in start-up or in the refresh that
# merges a new image). Then restarted, many times.
#
# tuck.conf keeps the default policy (no AllowDowngrade=): every image
# dropped is a new, higher version, built as it is needed, and only the
# rollback goes down.
#
# After every kill:
#   - the hierarchy shows the old or the new generation, never a missing
#     file (and the base only when that is the old or the new one: before a
#     merge, after an unmerge);
#   - every state file loads with libtuck's own loaders, the generation
#     record holds the old layers or the new ones, and versions.json the old
#     floors or the new (crash-state);
# after every restart:
#   - tuckd is ready, and the images on disk are merged, in the host and in
#     every namespace (the stale ones healed), with the floors they set; but
#     a rollback whose decision the kill came before is held back: b stays
#     at the version it ran, tuckd says Degraded and names b in HeldBack (a
#     boot never silently drops or downgrades an extension);
#   - no namespace is left half-healed: its own mounts below the hierarchy
#     (a tmpfs at usr/lib/tuck-child in the namespace "full") are all there;
#   - the mount stack at /usr, loop devices, dm devices and the staging
#     namespace's image mounts are back where they were, and staging.json
#     records every image mount there. (This host has no device-mapper: the
#     images here are plain squashfs, and dm devices stay at 0; verity's
#     cleanup is the vm suite's.)
# Readers in the host, a service and the namespaces healed each time read
# the probe file all along (through every kind but merge and unmerge, which
# show the base by design): never the base, never a missing file.
#
# Before each kill the process group is stopped (SIGSTOP) and looked at, so
# the kill's moment is known exactly: how many kills found a heal inside
# another namespace, or tuckd between writing a state file and renaming it.
#
# TUCKD_CRASH_RUNS (default 100; 300 with TUCK_SOAK=1) and TUCKD_CRASH_SEED
# (default: random) steer it; the seed is printed so a failure can be
# replayed.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

CRASH_STATE=$TUCK_BUILD/tests/host/crash-state
RUNS=${TUCKD_CRASH_RUNS:-$(stress_size 100 300)}
SEED=${TUCKD_CRASH_SEED:-$(od -An -N2 -tu2 /dev/urandom | tr -d ' ')}
RANDOM=$SEED
diag "seed $SEED, $RUNS kills (replay: TUCKD_CRASH_SEED=$SEED TUCKD_CRASH_RUNS=$RUNS)"

# Kinds of kill, by weight: refresh (and its heals) most. The window probes
# read through the first set; merge and unmerge show the base by design, so
# they come last, a fifth of the kills, with the probes stopped.
KINDS=(refresh refresh refresh heal startup write rollback rollback)
KINDS_BASE=(merge unmerge)
RUNS_BASE=$((RUNS / 5))

EXT=$ROOT/var/lib/extensions
H=$ROOT/usr
printf '[Daemon]\nWatch=no\nStalePolicy=heal\n' >"$CONF"

# Images "a" and "b", b on top; a layer is NAME and VERSION (b12), its image
# $W/b12.raw, its probe label gen-b12. on_disk: what the search directory
# holds; active: what the hierarchy runs once tuckd is back (the same, but
# for a rollback held back); floors: what versions.json should hold then.
declare -A top_version=([a]=0 [b]=0)
image_of() {    # image_of b12: build it the first time
        [[ -f $W/$1.raw ]] || make_raw "$W/$1.raw" "${1:0:1}" "${1:1}" "gen-$1"
}
put() {         # put b12: into the search directory, as an update lands (rename)
        image_of "$1"
        cp "$W/$1.raw" "$EXT/.${1:0:1}.raw.tmp"
        mv "$EXT/.${1:0:1}.raw.tmp" "$EXT/${1:0:1}.raw"
}
for l in a1 b1; do
        put "$l"
done
top_version=([a]=1 [b]=1)
on_disk=(a1 b1) active=(a1 b1) floors=a:1,b:1
# The mount point of the healed namespace's own mount below /usr.
mkdir -p "$H"/lib/tuck-child

# ---------------------------------------------------------------- tuckd
# One notify sink for the whole campaign: a restart waits for one more READY=1.
NOTIFY=$LOGS/notify
NOTIFY_SOCK=$W/notify.sock
: >"$NOTIFY"
python3 "$DGRAM_SINK" "$NOTIFY_SOCK" "$NOTIFY" >/dev/null &
pids+=($!)
for ((i = 0; i < 100; i++)); do
        [[ -S $NOTIFY_SOCK ]] && break
        sleep 0.05
done

ready_count() {
        grep -c '^READY=1$' "$NOTIFY" || true
}

# Without a fork per call (300 kills make every fork count): a sleep that is
# a read timing out on a pipe nobody writes, and files read by bash itself.
exec {sleep_fd}<> <(:)
sleep_ms() {
        local s
        printf -v s '%d.%03d' $(($1 / 1000)) $(($1 % 1000))
        read -r -t "$s" -u "$sleep_fd" || true
}
read_label() {   # read_label FILE: "generation=LABEL" -> LABEL, else "missing"
        local l=
        { read -r l <"$1"; } 2>/dev/null || true
        [[ $l == generation=?* ]] && echo "${l#generation=}" || echo missing
}

# launch [WRAP...]: tuckd in a process group of its own (its pid is the
# group's id; the same session, where the scan finds the test's container),
# not waiting for it.
launch() {
        NOTIFY_SOCKET=$NOTIFY_SOCK perl -e 'setpgrp(0, 0); exec @ARGV or die "exec: $!"' -- \
                "$@" "$TUCKD" --root="$ROOT" --config="$CONF" >>"$LOGS"/tuckd.log 2>&1 &
        TUCKD_PID=$!
        pids+=($TUCKD_PID)
}

# await_ready N: until READY=1 number N, or tuckd dies.
await_ready() {
        local i
        for ((i = 0; i < 2000; i++)); do
                (($(ready_count) >= $1)) && return 0
                kill -0 "$TUCKD_PID" 2>/dev/null || return 1
                sleep_ms 10
        done
        return 1
}

restart() {
        local n=$(($(ready_count) + 1))
        launch
        await_ready "$n"
}

# The moment of each kill, seen with the group stopped.
inside_heal=0 inside_write=0 inside_staging=0

# group_members: the processes of process group PGID in MEMBERS (field 5 of
# /proc/PID/stat), without a fork: the heal kind polls it.
group_members() {
        local f line rest
        MEMBERS=()
        for f in /proc/[0-9]*/stat; do
                { read -r line <"$f"; } 2>/dev/null || continue
                rest=${line##*) }
                set -- $rest
                if [[ ${3:-} == "$PGID" ]]; then
                        f=${f#/proc/}
                        MEMBERS+=("${f%/stat}")
                fi
        done
}

# kill_group: stop tuckd and everything it forked, look, kill them all.
kill_group() {
        local p n temps=()
        PGID=$TUCKD_PID
        # The process too: killed right after launch, perl may not have made the group yet.
        kill -STOP "$TUCKD_PID" 2>/dev/null || true
        kill -STOP -- -"$PGID" 2>/dev/null || true
        group_members
        for p in "${MEMBERS[@]}"; do
                for n in service full container; do
                        pid=NS_PID_$n
                        if [[ /proc/$p/ns/mnt -ef /proc/${!pid}/ns/mnt ]]; then
                                inside_heal=$((inside_heal + 1))
                                kill_where+=" heal-in-$n"
                        fi
                done
                if [[ /proc/$p/ns/mnt -ef $ROOT/run/tuck/staging.mnt ]]; then
                        inside_staging=$((inside_staging + 1))
                        kill_where+=" staging"
                fi
        done
        temps=("$ROOT"/run/tuck/*.tmp.* "$ROOT"/run/tuck/*/*.tmp.* "$ROOT"/var/lib/tuck/*.tmp.*)
        if ((${#temps[@]} > temps_seen)); then
                inside_write=$((inside_write + 1))
                kill_where+=" state-write"
        fi
        kill -KILL -- -"$PGID" 2>/dev/null || true
        kill -KILL "$TUCKD_PID" 2>/dev/null || true
        wait "$TUCKD_PID" 2>/dev/null || true
        # What the group forked is gone too (children of a killed process are
        # reparented to us, the namespace's init, and reaped here).
        for ((p = 0; p < 200; p++)); do
                kill -0 -- -"$PGID" 2>/dev/null || break
                sleep_ms 5
        done
}

# ---------------------------------------------------------------- what is seen
marker_of() {   # marker_of a1 b2 -> gen-b2 (b is the top layer); no layers: base
        if (($# == 0)); then echo base; else echo "gen-${!#}"; fi
}
layers_of() {   # layers_of a1 b2 -> a:1,b:2
        local out= l
        for l in "$@"; do out+="${out:+,}${l:0:1}:${l:1}"; done
        echo "$out"
}
state_line() {
        "$CRASH_STATE" "$ROOT" /usr
}
field() {       # field NAME LINE
        [[ " $2 " =~ \ $1=([^ ]*)\  ]] && echo "${BASH_REMATCH[1]}"
}

mounts_at_usr() {
        awk -v m="$H" '$5 == m' /proc/self/mountinfo | wc -l
}
loops() {
        losetup -l -n -O NAME,BACK-FILE 2>/dev/null | grep -c "$W" || true
}
dm_devices() {
        find /sys/block -maxdepth 1 -name 'dm-*' 2>/dev/null | wc -l
}
# settle_loops: the loop devices in NLOOPS, once readers let go. A reader
# that opened the probe file on the old generation just before a swap keeps
# that generation (its overlay, the image mounts below it, their loop
# devices) until it closes the file: what a lazy unmount promises, not a
# leak. The probes read at nice 19 and, on a loaded machine, may sit on an
# open file for a while. So: until the count is back, at most 10 s; the
# waits are counted (loop_waits, longest loop_wait_ms) and said.
loop_waits=0 loop_wait_ms=0
settle_loops() {
        local i
        for ((i = 0; i < 500; i++)); do
                NLOOPS=$(loops)
                ((NLOOPS <= loops0)) && break
                sleep_ms 20
        done
        if ((i > 0)); then
                loop_waits=$((loop_waits + 1))
                loop_wait_ms=$((i * 20 > loop_wait_ms ? i * 20 : loop_wait_ms))
        fi
}
# What holds a generation: each namespace's stack at /usr (mount, parent, device).
stacks_at_usr() {
        local n pid
        for n in host service full container; do
                pid=NS_PID_$n
                [[ $n == host ]] && pid=BASHPID
                printf '%s: %s ' "$n" "$(awk -v m="$H" '$5 == m || $5 == "/usr" { printf "%s<%s %s, ", $1, $2, $3 }' \
                        "/proc/${!pid}/mountinfo" 2>/dev/null)"
        done
}
staging_mounts() {   # image mounts in the staging namespace
        field mounted "$(state_line)"
}
# A namespace's view, through its process's root (/proc/PID/root walks that
# namespace's mounts), as the scan reads it.
child_present() {    # the healed namespace's own mount below /usr
        [[ -f /proc/$NS_PID_full/root$H/lib/tuck-child/here ]]
}

# ---------------------------------------------------------------- the host
start_journal
start_bus
launch
await_ready 1
shopt -s nullglob
P=$ROOT/$PROBE_REL
check "first generation merged at start" test "$(read_label "$P")" = gen-b1

spawn_ns service "true"
# Stays behind at every refresh (its own read-only bind of /usr), with a
# mount of its own below it: every refresh heals it, carrying that mount.
spawn_ns full "mount --bind $H $H && mount -o remount,bind,ro,nodev $H \
        && mount -t tmpfs child $H/lib/tuck-child && touch $H/lib/tuck-child/here"
spawn_container container "$H" "$W"/ctr
for n in service full container; do
        pid=NS_PID_$n
        ns_name[$(stat -L -c %i /proc/"${!pid}"/ns/mnt)]=$n
done
start_probe host $$ "$P"
start_probe service "$NS_PID_service" "$P"
start_probe full "$NS_PID_full" "$P"
start_probe container "$NS_PID_container" /usr/lib/tuck-probe/generation

# One refresh heals the namespaces left behind before the campaign.
call Refresh t 1 >/dev/null
mounts0=$(mounts_at_usr) loops0=$(loops) dm0=$(dm_devices) staged0=$(staging_mounts)
temps_seen=0
diag "before: $mounts0 mounts at /usr, $loops0 loop devices, $dm0 dm devices, $staged0 staged images"

# ---------------------------------------------------------------- kinds
# Each starts what is to be killed and sets before/after (the on-disk image
# sets the hierarchy may show after the kill), then returns; the kill follows.

# drop_next: a new version of b, and now and then of a, on disk (an update).
drop_next() {
        local l n out=()
        for l in "${on_disk[@]}"; do
                n=${l:0:1}
                if [[ $n == b ]] || ((RANDOM % 3 == 0)); then
                        l=$n$((++top_version[$n]))
                        put "$l"
                fi
                out+=("$l")
        done
        on_disk=("${out[@]}")
}

async_call() {
        bctl call --timeout=30 org.tuck1 /org/tuck1 org.tuck1.Manager "$@" >/dev/null 2>&1 &
        caller=$!
}

kind_refresh() {
        before=("${active[@]}")
        drop_next
        after=("${on_disk[@]}")
        async_call Refresh t 0
        sleep_ms $((RANDOM % 250))
}

# A refresh killed the moment one of its heals is seen inside a namespace
# left behind (its forked child setns()ed there), or after 2 s.
kind_heal() {
        local i p n pid
        before=("${active[@]}")
        drop_next
        after=("${on_disk[@]}")
        async_call Refresh t 0
        PGID=$TUCKD_PID
        for ((i = 0; i < 20000; i++)); do
                group_members
                for p in "${MEMBERS[@]}"; do
                        for n in full container; do
                                pid=NS_PID_$n
                                [[ /proc/$p/ns/mnt -ef /proc/${!pid}/ns/mnt ]] && return 0
                        done
                done
                kill -0 "$caller" 2>/dev/null || return 0   # done: killed after the refresh
        done
}

kind_merge() {
        call Unmerge t 0 >/dev/null
        before=()
        drop_next
        after=("${on_disk[@]}")
        async_call Merge t 0
        sleep_ms $((RANDOM % 200))
}

kind_unmerge() {
        before=("${active[@]}")
        after=()
        async_call Unmerge t 0
        sleep_ms $((RANDOM % 150))
}

# Killed while idle, then again during the start-up recovery of new images.
kind_startup() {
        kill_group
        before=("${active[@]}")
        drop_next
        after=("${on_disk[@]}")
        launch
        sleep_ms $((RANDOM % 300))
}

# Killed as it writes a state file: at fsync() of the temporary, or at the
# rename() over the file, one of the first three such calls. Every other
# time (so that a short campaign has both) armed from the start: start-up's
# refresh writes state files even when nothing changed (staging.json, the
# namespaces' wishes), so that is where such a kill lands. Otherwise armed
# once tuckd is ready: in the refresh that merges a new image, between
# mounting it and recording it.
kind_write() {
        local sys n arm=$W/write.arm started=0
        sys=$( ((RANDOM % 2)) && echo fsync || echo rename)
        kill_where+=" kill-at-$sys"
        kill_group
        n=$(($(ready_count) + 1))
        rm -f "$arm"
        if ((write_kinds_done++ % 2 == 0)); then
                : >"$arm"
        fi
        launch "$TUCK_FAULT" --kill-armed="$sys" --arm-file="$arm" --arm-skip=$((RANDOM % 3)) --
        if await_ready "$n"; then
                : >"$arm"
                started=1
        else
                kill_where+=" during-start-up"
                write_kills_startup=$((write_kills_startup + 1))
        fi
        before=("${active[@]}")
        drop_next
        after=("${on_disk[@]}")
        async_call Refresh t 0
        wait "$caller" 2>/dev/null || true
        caller=
        if kill -0 "$TUCKD_PID" 2>/dev/null; then
                # Fewer such calls than the skip, or a forked child's was the one.
                kill_where+=" tuckd-not-killed-at-write"
        elif ((started)); then
                write_kills_refresh=$((write_kills_refresh + 1))
        fi
}
write_kills_startup=0 write_kills_refresh=0 write_kinds_done=0

# An operator's rollback: b's image goes back to an older version (one
# below what runs, or further), allowed for b alone, as `tuckctl refresh
# --allow-downgrade=b` asks tuckd. Its floor goes down with it, recorded as
# a decision, before the swap.
kind_rollback() {
        local v=${active[1]:1}
        before=("${active[@]}")
        v=$((v - 1 - (v > 2 && RANDOM % 4 == 0)))
        rolled=b$v
        put "$rolled"
        on_disk=("${on_disk[0]}" "$rolled")
        after=("${on_disk[@]}")
        floors_after="${floors%%,*},b:$v:allowed"
        async_call RefreshEx 'a{sv}' 2 allow-downgrade-names as 1 b command s "tuckd-crash rollback of b"
        sleep_ms $((RANDOM % 250))
}

# ---------------------------------------------------------------- the campaign
declare -A kinds=() where=()
bad=0 bad_state=0 bad_floors=0 unrecovered=0 half_healed=0 not_ready=0 leaked=0
rollbacks_recorded=0 rollbacks_held=0 silent=0
for ((run = 1; run <= RUNS; run++)); do
        if ((run == RUNS - RUNS_BASE + 1)); then
                stop_probes
                diag "the last $RUNS_BASE kills: merge and unmerge, the window probes stopped"
                if [[ ${active[*]} != "${on_disk[*]}" ]]; then
                        # b held back by the last rollback: an update ends it.
                        drop_next
                        call Refresh t 0 >/dev/null
                        active=("${on_disk[@]}") floors=$(layers_of "${on_disk[@]}")
                fi
        fi
        if ((run <= RUNS - RUNS_BASE)); then
                kind=${KINDS[RANDOM % ${#KINDS[@]}]}
                # Nothing older than b1 to go back to.
                [[ $kind == rollback && ${active[1]} == b1 ]] && kind=refresh
        else
                kind=${KINDS_BASE[RANDOM % ${#KINDS_BASE[@]}]}
        fi
        kinds[$kind]=$((${kinds[$kind]:-0} + 1))
        kill_where= caller= floors_after= f=
        "kind_$kind"
        if [[ -z $floors_after ]]; then
                # An unmerge leaves the floors; everything else activates what it merges.
                [[ $kind == unmerge ]] && floors_after=$floors || floors_after=$(layers_of "${after[@]}")
        fi
        kill_group
        [[ -z $caller ]] || wait "$caller" 2>/dev/null || true
        for w in ${kill_where:-elsewhere}; do
                where[$w]=$((${where[$w]:-0} + 1))
        done

        # Old or new, in what is mounted and in what is recorded.
        now=$(read_label "$P")
        if [[ $now != "$(marker_of "${before[@]}")" && $now != "$(marker_of "${after[@]}")" ]]; then
                bad=$((bad + 1))
                diag "run $run ($kind,$kill_where): hierarchy shows '$now', not $(marker_of "${before[@]}") or $(marker_of "${after[@]}")"
        fi
        if ! st=$(state_line 2>&1); then
                bad_state=$((bad_state + 1))
                diag "run $run ($kind,$kill_where): $st"
        else
                l=$(field layers "$st")
                if [[ $l != "$(layers_of "${before[@]}")" && $l != "$(layers_of "${after[@]}")" ]]; then
                        bad_state=$((bad_state + 1))
                        diag "run $run ($kind,$kill_where): record holds '$l', not '$(layers_of "${before[@]}")' or '$(layers_of "${after[@]}")'"
                fi
                temps_seen=$(field temps "$st")
                f=$(field floors "$st")
                if [[ $f != "$floors" && $f != "$floors_after" ]]; then
                        bad_floors=$((bad_floors + 1))
                        diag "run $run ($kind,$kill_where): versions.json holds floors '$f', not '$floors' or '$floors_after'"
                fi
        fi

        # What the restart must bring: the images on disk, with their floors;
        # but a rollback the kill came before is not the operator's decision
        # yet: b is held back at the version it ran.
        held=
        if [[ $kind == rollback ]]; then
                if [[ $f == "$floors_after" ]]; then
                        rollbacks_recorded=$((rollbacks_recorded + 1))
                else
                        rollbacks_held=$((rollbacks_held + 1))
                        held=b
                fi
        fi
        if [[ -n $held ]]; then
                active=("${before[@]}")
        else
                active=("${on_disk[@]}") floors=$floors_after
        fi

        # Restart: the start-up recovery finishes what the killed run did not,
        # and merges what is on disk, healing the namespaces left behind.
        if ! restart; then
                not_ready=$((not_ready + 1))
                diag "run $run ($kind,$kill_where): tuckd did not come back: $(tail -n 5 "$LOGS"/tuckd.log)"
                break
        fi
        want=$(marker_of "${active[@]}")
        for n in host full container; do
                case $n in
                host) got=$(read_label "$P") ;;
                full) got=$(read_label "/proc/$NS_PID_full/root$P") ;;
                container) got=$(read_label "/proc/$NS_PID_container/root/usr/lib/tuck-probe/generation") ;;
                esac
                if [[ $got != "$want" ]]; then
                        unrecovered=$((unrecovered + 1))
                        diag "run $run ($kind,$kill_where): after restart $n shows '$got', not $want"
                fi
        done
        if ! child_present; then
                half_healed=$((half_healed + 1))
                ((half_healed <= 3)) && diag "run $run ($kind,$kill_where): namespace full lost its mount at usr/lib/tuck-child"
        fi
        # Never silent: held back is Degraded, with b in HeldBack; otherwise not.
        degraded=$(prop Degraded) heldback=$(prop HeldBack)
        if [[ -n $held && ($degraded != "b true" || $heldback != *'"b"'*) ]] ||
           [[ -z $held && $degraded != "b false" ]]; then
                silent=$((silent + 1))
                diag "run $run ($kind,$kill_where): after restart Degraded is '$degraded', HeldBack '$heldback' (held back: ${held:-none})"
        fi
        # Back where it was: the state files, the floors and nothing leaked.
        if ! st=$(state_line 2>&1); then
                bad_state=$((bad_state + 1))
                diag "run $run ($kind,$kill_where), after restart: $st"
                continue
        fi
        temps_seen=$(field temps "$st")
        f=$(field floors "$st")
        if [[ $f != "$floors" ]]; then
                bad_floors=$((bad_floors + 1))
                diag "run $run ($kind,$kill_where): after restart versions.json holds floors '$f', not '$floors'"
        fi
        settle_loops
        depth=$(mounts_at_usr) nloops=$NLOOPS dm=$(dm_devices)
        if ((depth > mounts0 || nloops > loops0 || dm > dm0 ||
             $(field mounted "$st") > staged0 || $(field mounted "$st") != $(field staged "$st"))); then
                leaked=$((leaked + 1))
                ((leaked <= 5)) && diag "run $run ($kind,$kill_where): after restart $depth mounts at /usr (were $mounts0)," \
                        "$nloops loop devices ($loops0), $dm dm devices ($dm0); $st (staged $staged0);" \
                        "stacks at /usr: $(stacks_at_usr)"
        fi
done

diag "kills by kind: $(for k in "${!kinds[@]}"; do printf '%s %s, ' "$k" "${kinds[$k]}"; done)"
diag "kills found: $(for k in "${!where[@]}"; do printf '%s %s, ' "$k" "${where[$k]}"; done)"
diag "a heal inside another namespace at $inside_heal kills, tuckd in its staging namespace at $inside_staging, between a state file's write and its rename at $inside_write"
# The write kind reaches both: start-up's writes and a refresh's (a kill
# that never lands there, e.g. tuck-fault's supervisor gone and every armed
# call failing with ENOSYS instead, would go unnoticed otherwise).
check "kills at a state file write: $write_kills_startup in start-up, $write_kills_refresh in a refresh (both, from ${kinds[write]:-0} of that kind)" \
        test "${kinds[write]:-0}" -lt 8 -o "$write_kills_startup" -gt 0 -a "$write_kills_refresh" -gt 0
check "$((run > RUNS ? RUNS : run)) kills: tuckd came back after every one" test "$not_ready" -eq 0 -a "$run" -gt "$RUNS"
check "after every kill: old or new, never base (unless old or new) or missing ($bad not)" test "$bad" -eq 0
check "after every kill: the state files load and the record holds old or new ($bad_state not)" test "$bad_state" -eq 0
check "after every kill and restart: versions.json holds the old floors or the new ($bad_floors not)" \
        test "$bad_floors" -eq 0
diag "rollbacks: $rollbacks_recorded killed after the decision was recorded (honoured at restart), $rollbacks_held before it (held back)"
check "a rollback killed before its decision was recorded is held back, and tuckd says so; otherwise not degraded ($silent not)" \
        test "$silent" -eq 0
diag "loop devices still held for a moment after a restart: $loop_waits times, at most ${loop_wait_ms} ms"
check "after every restart: mounts at /usr, loop, dm devices and staging mounts back where they were ($leaked not)" \
        test "$leaked" -eq 0
check "after every restart: the images on disk active in the host and in every namespace ($unrecovered not)" \
        test "$unrecovered" -eq 0
check_probes host service full container

# Half-healed: a heal carries a namespace's own mounts below the hierarchy
# onto the new tree before the old top goes (issue 8), killed at any point or
# not: "full" keeps its tmpfs through every restart.
check "no namespace left half-healed: full kept its mount below /usr ($half_healed of $run restarts lost it)" \
        test "$half_healed" -eq 0

# Nothing leaked.
call Refresh t 1 >/dev/null
depth=$(mounts_at_usr) nloops=$(loops) dm=$(dm_devices) staged=$(staging_mounts)
st=$(state_line)
diag "after: $depth mounts at /usr, $nloops loop devices, $dm dm devices, $staged staged images; $st"
check "mount stack at /usr did not grow ($mounts0 -> $depth)" test "$depth" -le "$mounts0"
check "loop devices did not leak ($loops0 -> $nloops)" test "$nloops" -le "$loops0"
check "dm devices did not leak ($dm0 -> $dm)" test "$dm" -le "$dm0"
check "staging image mounts did not leak ($staged0 -> $staged)" test "$staged" -le "$staged0"
check "staging.json records every image mount ($(field staged "$st") recorded, $staged mounted)" \
        test "$(field staged "$st")" -eq "$staged"
check "no state file temporaries left ($(field temps "$st"))" test "$(field temps "$st")" -eq 0

tap_done
