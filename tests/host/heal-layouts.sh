# SPDX-License-Identifier: LGPL-2.1-or-later
#
# Sourced (after tuckd-lib.sh) by the healing tests, tuckd-heal.sh and
# tuckctl-heal.sh: one image "foo" in $ROOT/var/lib/extensions, and the
# layouts of spawn_layouts "$ROOT/usr" read the way those tests read them.

# drop N: generation N of foo, dropped in the way operators must (write, then rename).
drop() {
        make_raw "$W/.foo.raw.tmp" foo "$1" "v$1"
        mv "$W/.foo.raw.tmp" "$ROOT"/var/lib/extensions/foo.raw
}

# The probe file as layout $1 sees it: the containers have the hierarchy at /usr.
path_in() {
        [[ $1 == container || $1 == nested ]] && echo "/$PROBE_REL" || echo "$ROOT/$PROBE_REL"
}

# view LAYOUT: the marker it reads; flags LAYOUT: its mount flags on /usr.
view() {
        local pid=NS_PID_$1
        ns_read "${!pid}" "$(path_in "$1")"
}
flags() {
        local pid=NS_PID_$1
        ns_flags "${!pid}" "$ROOT/usr"
}

# unit_cgroup NAME: a cgroup named as a unit (NAME.service), so the scan can
# name the unit owning a namespace whose process joins it (echo $$ >
# $CG/$UNIT/cgroup.procs); sets CG and UNIT. Killed and removed on exit.
unit_cgroup() {
        CG=/sys/fs/cgroup
        [[ -d /sys/fs/cgroup/unified ]] && CG=/sys/fs/cgroup/unified
        UNIT=$1.service
        mkdir "$CG/$UNIT"
        trap 'cleanup_cgroup; tuck_cleanup' EXIT
}
cleanup_cgroup() {
        local p
        for p in $(cat "$CG/$UNIT"/cgroup.procs 2>/dev/null); do kill -KILL "$p" 2>/dev/null || true; done
        sleep 0.1
        rmdir "$CG/$UNIT" 2>/dev/null || true
}
