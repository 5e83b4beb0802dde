/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The namespace scan: which mount namespaces see which generation of a
 * hierarchy. Every mount namespace on the machine is found through
 * /proc/[pid]/ns/mnt (deduplicated by inode), and its view of the hierarchy
 * is read through /proc/PID/root/<hierarchy> (statx: the device and mount
 * ID of its top mount there; statvfs: its flags), so scanning never enters a
 * namespace. A namespace is identified by one of its processes, that
 * process's comm, its systemd unit (from /proc/PID/cgroup) and, for a
 * systemd-nspawn container, the machine name.
 *
 * tuckd builds healing on this: NS_VIEW_STALE namespaces still see an older
 * overlay (a ProtectSystem= read-only bind keeps it forever).
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
        _NS_VIEW_STATE_MAX,
} NsViewState;

typedef struct NamespaceView {
        uint64_t ns_ino;         /* inode of /proc/PID/ns/mnt */
        pid_t pid;               /* the first process found in it */
        unsigned n_processes;
        char comm[17];
        char *unit;              /* "foo.service", or NULL */
        char *machine;           /* nspawn machine name, or NULL */
        bool own_root;           /* its root is not ours (a container) */
        dev_t dev;               /* st_dev at the hierarchy */
        uint64_t mnt_id;         /* its top mount at the hierarchy */
        uint64_t attr;           /* MOUNT_ATTR_* of that mount (TUCK_ATTR_MASK) */
        NsViewState state;
        uint64_t generation;     /* for STALE/CURRENT: which generation it sees */
} NamespaceView;

const char *ns_view_state_to_string(NsViewState s);

void namespace_views_free(NamespaceView *v, size_t n);

/*
 * One view per mount namespace that can see root (the --root prefix; "/"
 * means every namespace), of the hierarchy (without root prefix, e.g.
 * "/usr"), classified against generation g.
 */
int nsscan_hierarchy(const char *root, const char *hierarchy, const Generation *g,
                     NamespaceView **ret, size_t *ret_n);

/*
 * From a cgroup path: the unit (the innermost *.service or *.scope outside a
 * container) and the nspawn machine (machine-NAME.scope or
 * systemd-nspawn@NAME.service, \x2d unescaped). Either may be NULL.
 */
int cgroup_path_identify(const char *path, char **ret_unit, char **ret_machine);

/* The systemd unit and nspawn machine a process belongs to (either may be NULL). */
int process_identify(pid_t pid, char **ret_unit, char **ret_machine);
