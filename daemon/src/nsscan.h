/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The namespace scan: what every mount namespace on the machine sees at a
 * hierarchy. Namespaces are found through /proc/PID/ns/mnt (deduplicated by
 * inode) and read through the process's own root: the hierarchy is opened
 * with openat2(RESOLVE_IN_ROOT) below /proc/PID/root, so a symlink inside a
 * container resolves inside it, and scanning never enters a namespace
 * (statx: device and mount ID of the top mount there; statvfs: its flags).
 * A namespace is named by one of its processes, that process's comm, its
 * systemd unit (from /proc/PID/cgroup) and, for a systemd-nspawn container,
 * the machine name.
 *
 * Two users: tuckctl status classifies every view against the generation
 * record (NS_VIEW_*), and tuckd's healing (heal.c) takes the views that
 * still show one of our older overlays.
 *
 * The root prefix (tests; "/" on a real host): a namespace that shares our
 * root names the hierarchy as we do, PREFIX/usr; a container with its own
 * root names it as configured, /usr, inside its root. With a prefix, a scan
 * keeps the namespaces of that test host only: those that see the prefix
 * directory itself, and containers started in our session (the test's own;
 * other tests on the same machine run in sessions of their own).
 *
 * Which overlay a view shows is told by its st_dev, but an st_dev alone is
 * not proof: once an old overlay is gone the kernel hands its anonymous
 * device number to the next tmpfs or overlay mounted anywhere. Healing
 * touches a namespace only if the mount there is also an overlay of tuck's
 * or systemd-sysext's, and status calls a view stale only then.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "state.h"

typedef enum NsViewState {
        NS_VIEW_CURRENT,     /* the current generation's overlay */
        NS_VIEW_STALE,       /* an older generation of ours */
        NS_VIEW_BASE,        /* the bare base (unmerged view) */
        NS_VIEW_FOREIGN,     /* something else: a container's own tree, systemd-sysext, ... */
        NS_VIEW_UNREADABLE,  /* its view could not be read (error): it may be one of ours */
        _NS_VIEW_STATE_MAX,
} NsViewState;

typedef struct NamespaceView {
        uint64_t ns_ino;         /* inode of /proc/PID/ns/mnt: one view per namespace */
        pid_t pid;               /* the first process found in it */
        unsigned n_processes;
        char comm[16];
        char *unit;              /* "foo.service", or NULL */
        char *machine;           /* nspawn machine name, or NULL */
        bool own_root;           /* its root is not ours (a container) */
        char *path;              /* the hierarchy as this namespace names it, below its root */
        dev_t dev;               /* st_dev at the hierarchy: identifies the overlay */
        uint64_t mnt_id;         /* its top mount at the hierarchy */
        uint64_t attr;           /* MOUNT_ATTR_* of that mount (TUCK_ATTR_MASK) */
        int error;               /* <0: the view could not be read, why (NS_VIEW_UNREADABLE) */
        NsViewState state;       /* set by namespace_view_classify() */
        uint64_t generation;     /* for STALE/CURRENT: which generation it sees */
} NamespaceView;

const char *ns_view_state_to_string(NsViewState s);

void namespace_view_done(NamespaceView *v);
void namespace_views_free(NamespaceView *v, size_t n);

/*
 * PID's view of the hierarchy at @path (root prefix applied, where it is
 * mounted in our namespace). -ENOENT and friends when the process is gone or
 * has no such directory.
 */
int namespace_view_read(pid_t pid, const char *root, const char *path, NamespaceView *ret);

typedef enum NsScanFlags {
        NSSCAN_ONLY_OURS = 1 << 0,   /* only views on one of @ours that is an overlay of tuck's
                                      * or systemd-sysext's (healing) */
        NSSCAN_SKIP_SELF = 1 << 1,   /* not our own namespace (the swap itself took care of it) */
} NsScanFlags;

/*
 * One view per mount namespace of the root (see above) at @path; @ours are
 * the st_devs of our overlays of that hierarchy (NSSCAN_ONLY_OURS).
 * Processes that vanish while scanning are skipped, and so are namespaces
 * without the hierarchy. A namespace whose view cannot be read for another
 * reason (permissions, a sandbox refusing a system call) is kept with
 * .error set: it may well be one of ours, and whoever scans must say so
 * rather than take it for absent.
 */
int namespaces_scan(const char *root, const char *path, const dev_t *ours, size_t n_ours, NsScanFlags flags,
                    NamespaceView **ret, size_t *ret_n);

/* Is @d one of the @n device numbers in @devs? */
bool dev_in(dev_t d, const dev_t *devs, size_t n);

/*
 * The mount source of the mount @v shows ("tuck-sysext", "sysext", ...) if
 * it is an overlay, else NULL; read from the view's mount table. Owned by
 * the caller.
 */
char *namespace_view_overlay_source(const NamespaceView *v);

/* What a view shows, against generation record @g (NULL: never merged). */
void namespace_view_classify(NamespaceView *v, const Generation *g);

/* Every namespace of the root at hierarchy @path, classified against @g (tuckctl status). */
int nsscan_hierarchy(const char *root, const char *path, const Generation *g,
                     NamespaceView **ret, size_t *ret_n);

/*
 * From a cgroup path: the unit (the innermost *.service or *.scope outside a
 * container) and the nspawn machine (machine-NAME.scope or
 * systemd-nspawn@NAME.service, \x2d unescaped). Either may be NULL.
 */
int cgroup_path_identify(const char *path, char **ret_unit, char **ret_machine);

/* The systemd unit and nspawn machine a process belongs to (either may be NULL). */
int process_identify(pid_t pid, char **ret_unit, char **ret_machine);
