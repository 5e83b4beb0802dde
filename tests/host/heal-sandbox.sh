#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# A heal keeps every sandbox (issue 8; tuckd(8), WHAT A HEAL KEEPS). Service
# namespaces built the way systemd 252 builds them, one per sandbox kind and
# ProtectSystem= level, with mounts of their own below /usr, /opt and /etc:
#
#   hidden   InaccessiblePaths=: an empty mode-000 directory bound over it,
#            remounted ro,nosuid,nodev,noexec (a file below stays hidden)
#   tmpfs    TemporaryFileSystem=: a tmpfs of its own (its scratch file stays)
#   ro       ReadOnlyPaths=: the path bound onto itself, read-only
#   rw       ReadWritePaths= on a writable mount the host has there: left
#            writable while ProtectSystem= makes the rest read-only
#   bind     BindPaths=: a writable directory of the host bound there
#   bindro   BindReadOnlyPaths=: the same, read-only
#
# with ProtectSystem=full (/usr and /etc read-only in place, as systemd does
# for a hierarchy that is a mount point) or =strict (every mount read-only),
# the explicit modes above kept (systemd's deny list); plus a container with
# a --bind volume below its /usr. Each namespace is a slave of the host, so
# its copies of the overlays have mounts of their own below them: umount
# propagation leaves exactly these behind at a refresh, and tuckctl heals
# them. After each heal the namespace's mount table below each hierarchy is
# what it was (targets, types, flags, in order), the hidden file is still
# hidden, writable paths are still writable, read-only ones still read-only,
# the tmpfs still holds its file, and readers there never see the base or a
# missing file. Then every namespace left behind gets a heal stopped halfway
# (tuckd-heal-tool halfway: the new tree beneath its stale top), and the next
# refresh finishes each one: nothing stacked, nothing pinned, nothing
# loosened; one tree lacking a flag is swapped anew instead, and said so.

. "$(dirname "$0")"/tuckd-lib.sh
tuck_enter_ns "$@"
tuck_setup_root

MKEXT=$TUCK_SRC/images/mkext
printf '[Daemon]\nStalePolicy=heal\n' >"$CONF"
unset DBUS_SYSTEM_BUS_ADDRESS
tuckctl() {
        "$TUCKCTL" --root="$ROOT" --config="$CONF" "$@"
}

kinds=(hidden tmpfs ro rw bind bindro)
hierarchies=(usr opt etc)

# ---- the host: the base, the places, a writable mount below each hierarchy
# (every service here lists it in ReadWritePaths=, so ProtectSystem= leaves
# it writable), sources for BindPaths=

mkdir -p "$ROOT"/etc/tuck-probe "$ROOT"/opt/tuck-probe "$ROOT"/run/extensions "$ROOT"/run/confexts \
        "$W"/srv/rw "$W"/srv/ro "$W"/inaccessible/dir "$W"/srv/vol
echo generation=base >"$ROOT"/etc/tuck-probe/generation
echo generation=base >"$ROOT"/opt/tuck-probe/generation
cp "$ROOT"/usr/lib/os-release "$ROOT"/etc/os-release
chmod 000 "$W"/inaccessible/dir
echo bound >"$W"/srv/rw/file
echo bound-ro >"$W"/srv/ro/file
echo volume >"$W"/srv/vol/file
for h in "${hierarchies[@]}"; do
        for k in "${kinds[@]}"; do
                mkdir -p "$ROOT/$h/sb/$k"
                echo "base $h $k" >"$ROOT/$h/sb/$k/file"
        done
        echo "secret of $h" >"$ROOT/$h/sb/hidden/secret"
done
mkdir -p "$ROOT"/usr/share/vol

# generation N of both images, dropped the way operators must (write, then rename).
drop() {
        local t=$W/img.tmp
        "$MKEXT" --label="v$1" sb "$1" sysext "$W"/empty "$t" >/dev/null
        mv "$t" "$ROOT"/run/extensions/sb.raw
        "$MKEXT" --label="v$1" sbconf "$1" confext "$W"/empty "$t" >/dev/null
        mv "$t" "$ROOT"/run/confexts/sbconf.raw
}
mkdir -p "$W"/empty
drop 1
check "merge generation 1" tuckctl merge
# The host's writable mounts below each hierarchy: carried onto the overlay by the merge.
for h in "${hierarchies[@]}"; do
        mount -t tmpfs -o size=1m "host-rw-$h" "$ROOT/$h/sb/rw"
        echo "host rw $h" >"$ROOT/$h/sb/rw/file"
done

# ---- the namespaces
# sandbox KIND PROTECT: the shell that builds one (run in a new slave namespace).
sandbox() {
        local k=$1 p=$2 h s=""
        for h in "${hierarchies[@]}"; do
                local at=$ROOT/$h/sb/$k
                case $k in
                hidden) s+="mount --bind $W/inaccessible/dir $at && mount -o remount,bind,ro,nosuid,nodev,noexec $at && " ;;
                tmpfs) s+="mount -t tmpfs -o mode=0755,nodev,strictatime sb-tmpfs $at && echo scratch >$at/scratch && " ;;
                ro) s+="mount --bind $at $at && mount -o remount,bind,ro $at && " ;;
                rw) ;;
                bind) s+="mount --bind $W/srv/rw $at && " ;;
                bindro) s+="mount --bind $W/srv/ro $at && mount -o remount,bind,ro $at && " ;;
                esac
        done
        # ProtectSystem=: read-only in place, every mount below too, but for the
        # paths given a mode of their own (they stay as they are).
        local cover="$ROOT/usr $ROOT/etc"
        [[ $p == strict ]] && cover=$ROOT
        # Like systemd's bind_remount_recursive(): the flags a mount has, plus ro.
        s+="for m in \$(findmnt -rn -o TARGET -R $cover | sort -u); do \
                case \$m in */sb/tmpfs|*/sb/rw|*/sb/bind|*/sb/hidden|*/sb/ro|*/sb/bindro) continue ;; esac; \
                o=\$(findmnt -rn -o VFS-OPTIONS --mountpoint \$m | tail -n 1 | tr , '\\n' | \
                        grep -E '^(nosuid|nodev|noexec)\$' | tr '\\n' , ); \
                mount -o remount,bind,ro,\${o}relatime \$m; done"
        echo "$s"
}

names=()
for p in full strict; do
        for k in "${kinds[@]}"; do
                spawn_ns "${k}_$p" "$(sandbox "$k" "$p")"
                names+=("${k}_$p")
        done
done
# A container whose /usr is a read-only bind of the host's, with a volume bound below it.
spawn_container container "$ROOT/usr" "$W"/ctr "mount --bind $W/srv/vol $ROOT/usr/share/vol"
names+=(container)

pid_of() {
        local v=NS_PID_$1
        echo "${!v}"
}
# Where NAME sees hierarchy H: the container has it at /usr, the rest as the host.
where() {
        if [[ $1 == container ]]; then echo "/$2"; else echo "$ROOT/$2"; fi
}
# hierarchy_of NAME: what the container has of ours (its /usr only).
hierarchies_of() {
        if [[ $1 == container ]]; then echo usr; else echo "${hierarchies[@]}"; fi
}

# below NAME H: the mounts of NAME below its top mount at hierarchy H, what
# it sees there and what lies hidden in stacks alike, one line each, in a
# canonical order: place relative to H, depth in the stack at that place,
# type, the flags a sandbox is made of. (Mount IDs and creation order change
# with a heal; what hangs below the top, and where, must not.)
below() {
        python3 - "$(where "$1" "$2")" "/proc/$(pid_of "$1")/mountinfo" <<-'PY'
	import sys
	at, path = sys.argv[1], sys.argv[2]
	m = {}
	for line in open(path):
	    f = line.split()
	    sep = f.index("-", 6)
	    flags = [o for o in f[5].split(",") if o in ("ro", "rw", "nosuid", "nodev", "noexec")]
	    m[int(f[0])] = dict(parent=int(f[1]), target=f[4].replace("\040", " "), type=f[sep + 1], flags=",".join(flags))
	# The top of the stack at the hierarchy: the one nothing else there sits on.
	ids = [i for i, x in m.items() if x["target"] == at]
	top = [i for i in ids if not any(m[j]["parent"] == i for j in ids if j != i)][0]
	rows, todo = [], [top]
	while todo:
	    p = todo.pop()
	    for i, x in m.items():
	        if x["parent"] == p and i != p:
	            todo.append(i)
	            depth, q = 0, x["parent"]
	            while q in m and m[q]["target"] == x["target"] and q != top:
	                depth, q = depth + 1, m[q]["parent"]
	            rel = x["target"][len(at) + 1:] if x["target"] != at else "."
	            rows.append((rel, depth, x["type"], x["flags"]))
	for r in sorted(rows):
	    print(*r)
	PY
}
# top NAME H: type and flags of the top mount at H.
top() {
        local at
        at=$(where "$1" "$2")
        awk -v at="$at" '
                { for (i = 7; $i != "-"; i++); type = $(i + 1) }
                $5 == at { n = split($6, o, ","); f = o[1]
                        for (j = 2; j <= n; j++) if (o[j] ~ /^(nosuid|nodev|noexec)$/) f = f "," o[j]
                        last = type " " f }
                END { print last }' "/proc/$(pid_of "$1")/mountinfo"
}
in_ns() {
        local n=$1
        shift
        nsenter -t "$(pid_of "$n")" -m -r "$@"
}
label() {
        in_ns "$1" cat "$(where "$1" "$2")/$([[ $2 == usr ]] && echo lib/)tuck-probe/generation" 2>/dev/null |
                sed 's/^generation=//' || echo missing
}

declare -A before tops
for n in "${names[@]}"; do
        for h in $(hierarchies_of "$n"); do
                before[$n/$h]=$(below "$n" "$h")
                tops[$n/$h]=$(top "$n" "$h")
        done
done
diag "hidden_strict below /usr before: $(below hidden_strict usr | tr '\n' ';')"

# What each kind must still be like, from inside, after every heal.
sandbox_intact() {
        local n=$1 h=$2 k=${1%_*} at
        at=$(where "$n" "$h")/sb/$k
        case $k in
        hidden) ! in_ns "$n" cat "$at/secret" >/dev/null 2>&1 && [[ -z $(in_ns "$n" ls -A "$at") ]] ;;
        tmpfs) in_ns "$n" grep -qx scratch "$at/scratch" && in_ns "$n" touch "$at/w" ;;
        ro) in_ns "$n" grep -qx "base $h ro" "$at/file" && ! in_ns "$n" touch "$at/w" 2>/dev/null ;;
        rw) in_ns "$n" grep -qx "host rw $h" "$at/file" && in_ns "$n" touch "$at/w-$n" ;;
        bind) in_ns "$n" grep -qx bound "$at/file" && in_ns "$n" touch "$at/w-$n" ;;
        bindro) in_ns "$n" grep -qx bound-ro "$at/file" && ! in_ns "$n" touch "$at/w" 2>/dev/null ;;
        container) in_ns "$n" grep -qx volume /usr/share/vol/file && in_ns "$n" touch /usr/share/vol/w ;;
        esac
}

for n in "${names[@]}"; do
        for h in $(hierarchies_of "$n"); do
                check "before: $n /$h sandbox as built" sandbox_intact "$n" "$h"
        done
done

# Readers in a few of them, all along.
for n in hidden_full rw_strict container; do
        start_probe "$n-usr" "$(pid_of "$n")" "$(where "$n" usr)/lib/tuck-probe/generation"
done
start_probe "tmpfs_strict-opt" "$(pid_of tmpfs_strict)" "$ROOT/opt/tuck-probe/generation"
start_probe "bind_full-etc" "$(pid_of bind_full)" "$ROOT/etc/tuck-probe/generation"
sleep 0.3
kill -STOP "${probe_pids[@]}"

for g in 2 3; do
        drop "$g"
        # The readers spin: they run through each refresh, and wait while it is checked.
        kill -CONT "${probe_pids[@]}"
        tuckctl refresh >"$LOGS/refresh-$g.out" 2>&1 || true
        sleep 0.2
        kill -STOP "${probe_pids[@]}"
        diag "$(grep -E 'healed|heal failed|not healed|refreshed' "$LOGS/refresh-$g.out" | head -n 12)"
        check "refresh $g: every namespace healed, none failed" \
                bash -c "! grep -Eq 'heal failed|not healed|cannot' '$LOGS/refresh-$g.out'"
        for n in "${names[@]}"; do
                for h in $(hierarchies_of "$n"); do
                        expect_eq "refresh $g: $n sees v$g in /$h" "$(label "$n" "$h")" "v$g"
                        expect_eq "refresh $g: $n's mounts below /$h are as they were" \
                                "$(below "$n" "$h" | tr '\n' ';')" "$(tr '\n' ';' <<<"${before[$n/$h]}")"
                        check "refresh $g: $n /$h sandbox intact" sandbox_intact "$n" "$h"
                done
        done
        for n in "${names[@]}"; do
                for h in $(hierarchies_of "$n"); do
                        expect_eq "refresh $g: $n's top of /$h has its flags" "$(top "$n" "$h")" "${tops[$n/$h]}"
                done
        done
done

# ---- a heal stopped halfway (killed between its two halves, or its unmount
# refused): the new tree, the sandbox carried onto it, beneath the stale top.
# The next heal finishes it (unmounts the old top); a second tree attached
# beneath would leave the first under it for good, pinning a generation.
# depth NAME H: how many mounts are stacked at H there.
depth() {
        awk -v at="$(where "$1" "$2")" '$5 == at' "/proc/$(pid_of "$1")/mountinfo" | wc -l
}
loops() {
        losetup -l -n -O BACK-FILE 2>/dev/null | grep -c "$ROOT" || true
}
declare -A depths
for n in "${names[@]}"; do
        for h in $(hierarchies_of "$n"); do
                depths[$n/$h]=$(depth "$n" "$h")
        done
done
loops3=$(loops)
printf '[Daemon]\nStalePolicy=report\n' >"$CONF"
drop 4
tuckctl refresh >"$LOGS/refresh-4.out" 2>&1 || true
printf '[Daemon]\nStalePolicy=heal\n' >"$CONF"
# The namespaces left behind (a sandbox with mounts of its own below a
# hierarchy; the others followed): each gets the half of a heal. One's tree
# lacks a flag its top has (ro): finishing would show it writable for a
# moment, so that one is swapped anew, and its tree stays beneath (a loop
# device held: the price of never loosening a sandbox).
stale=()
loose=hidden_full/usr
for n in "${names[@]}"; do
        for h in $(hierarchies_of "$n"); do
                [[ $(label "$n" "$h") == v3 ]] || continue
                stale+=("$n/$h")
                extra=()
                [[ $n/$h != "$loose" ]] || extra=(writable)
                "$TUCK_BUILD"/tests/host/tuckd-heal-tool halfway "$(pid_of "$n")" "$ROOT/$h" "$(where "$n" "$h")" \
                        "${extra[@]}" >>"$LOGS/halfway.out" 2>&1 || echo "$n /$h: failed" >>"$LOGS/halfway.out"
        done
done
diag "${#stale[@]} left behind by refresh 4: ${stale[*]}"
diag "$(head -n 4 "$LOGS/halfway.out")"
check "halfway: every stale top has the new tree beneath it" \
        test "$(grep -c '^attached beneath' "$LOGS/halfway.out")" = "${#stale[@]}" -a "${#stale[@]}" -ge 30
for s in "${stale[@]}"; do
        expect_eq "halfway: ${s%/*} still sees v3 in /${s#*/}" "$(label "${s%/*}" "${s#*/}")" v3
        check "halfway: ${s%/*} /${s#*/} sandbox intact" sandbox_intact "${s%/*}" "${s#*/}"
done
kill -CONT "${probe_pids[@]}"
tuckctl refresh >"$LOGS/refresh-finish.out" 2>&1 || true
sleep 0.2
kill -STOP "${probe_pids[@]}"
diag "$(grep -E 'halfway|healed|failed' "$LOGS/refresh-finish.out" | head -n 4)"
check "finish: every heal stopped halfway is finished but the one lacking ro, none failed" \
        test "$(grep -c 'healed: finished the heal stopped halfway before' "$LOGS/refresh-finish.out")" = \
        "$((${#stale[@]} - 1))" -a "$(grep -Ec 'heal failed|not healed|cannot' "$LOGS/refresh-finish.out")" = 0
check "finish: the one lacking ro is swapped anew, its tree left beneath and said so" \
        grep -Eq "^/usr: .*\(pid $(pid_of "${loose%/*}"), .*: healed, [0-9]+ mounts? of its own carried over; the tree of a heal stopped halfway before stays beneath" \
        "$LOGS/refresh-finish.out"
for n in "${names[@]}"; do
        for h in $(hierarchies_of "$n"); do
                expect_eq "finish: $n sees v4 in /$h" "$(label "$n" "$h")" v4
                if [[ $n/$h == "$loose" ]]; then
                        expect_eq "finish: $n's stack at /$h is one deeper (the tree lacking ro left beneath)" \
                                "$(depth "$n" "$h")" "$((${depths[$n/$h]} + 1))"
                else
                        expect_eq "finish: $n's stack at /$h is as deep as before (no tree left under another)" \
                                "$(depth "$n" "$h")" "${depths[$n/$h]}"
                fi
                expect_eq "finish: $n's mounts below /$h are as they were" \
                        "$(below "$n" "$h" | tr '\n' ';')" "$(tr '\n' ';' <<<"${before[$n/$h]}")"
                check "finish: $n /$h sandbox intact" sandbox_intact "$n" "$h"
                expect_eq "finish: $n's top of /$h has its flags" "$(top "$n" "$h")" "${tops[$n/$h]}"
        done
done
drop 5
kill -CONT "${probe_pids[@]}"
tuckctl refresh >"$LOGS/refresh-5.out" 2>&1 || true
sleep 0.2
check "refresh 5: every namespace healed, none failed" \
        bash -c "! grep -Eq 'heal failed|not healed|cannot' '$LOGS/refresh-5.out'"
expect_eq "refresh 5: as many loop devices as after refresh 3 (none pinned by a tree left hidden, but the one lacking ro)" \
        "$(loops)" "$((loops3 + 1))"

stop_probes
check_probes hidden_full-usr rw_strict-usr container-usr tmpfs_strict-opt bind_full-etc

# The host's own writable mounts below the hierarchies came along with each swap.
for h in "${hierarchies[@]}"; do
        expect_eq "host: its writable mount below /$h is still there" "$(cat "$ROOT/$h/sb/rw/file")" "host rw $h"
done

tap_done
