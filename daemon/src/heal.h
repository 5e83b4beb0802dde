/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Healing: bring a mount namespace that did not follow a swap onto the new
 * generation, atomically and without loosening its sandbox.
 *
 * Why namespaces fall behind (measured on 6.18, see docs/tuckd.8 "HEALING"):
 *   - a read-only bind on top of the hierarchy (ProtectSystem=full) or a
 *     container's own bind of it stays on the old overlay forever: umount
 *     propagation reparents the bind, which still points into the old tree;
 *   - a namespace whose propagated copy was remounted read-only in place
 *     (ProtectSystem=strict) receives the new overlay, but the copy carries
 *     the host's flags: its read-only /usr silently turns writable
 *     (systemd #9857).
 *
 * A view is what one mount namespace sees at a hierarchy: read through
 * /proc/PID/root, so scanning never enters a namespace. Healing enters it
 * (a forked child, setns) and does the host's beneath swap there with a clone
 * of the host's new top whose flags are the stale top's, or restores the
 * flags in place when only they were lost.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>


typedef struct NsView {
        pid_t pid;
        uint64_t ns_ino;        /* inode of /proc/PID/ns/mnt: one view per namespace */
        bool own_root;          /* its root is not the host's (a container) */
        char *path;             /* the hierarchy as this namespace names it */
        dev_t dev;              /* st_dev at the hierarchy: identifies the overlay */
        uint64_t mnt_id;        /* the top mount at the hierarchy */
        uint64_t attr;          /* MOUNT_ATTR_* of that top (TUCK_ATTR_MASK: a heal may add them, never clear) */
        char comm[16];
        char *unit;             /* owning systemd unit, from the cgroup path, or NULL */
        char *machine;          /* container name (machine-NAME.scope, or nspawn payload), or NULL */
} NsView;

typedef enum HealAction {
        HEAL_NONE,              /* the view is current, flags intact */
        HEAL_SWAP,              /* old content: beneath swap in the namespace */
        HEAL_ATTR,              /* current content, loosened flags: restore them */
        HEAL_PIN,               /* before a swap: cover a propagated copy with a private
                                 * clone of itself, so the swap cannot loosen it */
        _HEAL_ACTION_MAX,
} HealAction;

const char *heal_action_to_string(HealAction a);

void ns_view_done(NsView *v);
void ns_views_free(NsView *v, size_t n);

/*
 * Read PID's view of @hierarchy. @root is the tuck root prefix ("/" on a real
 * host): a namespace that shares the host's root sees the hierarchy at
 * @hierarchy, a container with its own root at the same path relative to
 * @root. Returns -ENOENT when the process is gone or has no such path.
 */
int ns_view_read(pid_t pid, const char *root, const char *hierarchy, NsView *ret);

/*
 * Every mount namespace on the machine but our own, one view each (the first
 * live process found in it), whose st_dev at the hierarchy is one of @devs
 * (the overlays we care about). Processes that vanish while scanning are
 * skipped.
 */
int ns_views_scan(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                  NsView **ret, size_t *ret_n);

/*
 * What to do for a namespace that showed @before (taken before the swap) and
 * now shows @now, when the host's new top is @new_dev.
 */
HealAction heal_plan(const NsView *before, const NsView *now, dev_t new_dev);

/*
 * Apply @action in @now's namespace. @host_fd is an O_PATH fd of the host's
 * new top at the hierarchy (taken in the host namespace); @attr the flags to
 * keep (the view's flags before the swap). HEAL_SWAP clones @host_fd's tree,
 * sets @attr on it, moves it beneath the stale top and unmounts that top;
 * HEAL_ATTR sets @attr on the top in place. The namespace is re-checked
 * inside: if its top is no longer the one in @now, nothing is done and
 * -ESTALE is returned. Returns 0 on success, negative errno otherwise.
 */
int heal_apply(const NsView *now, HealAction action, int host_fd, uint64_t attr);

/* What tuckd does with a namespace that did not follow (tuck.conf StalePolicy=). */
typedef enum StalePolicy {
        STALE_POLICY_HEAL,      /* default: beneath swap inside the namespace */
        STALE_POLICY_REPORT,    /* log and list it, touch nothing */
        STALE_POLICY_RESTART,   /* restart the owning unit through systemd */
        _STALE_POLICY_MAX,
        _STALE_POLICY_INVALID = -EINVAL,
} StalePolicy;

const char *stale_policy_to_string(StalePolicy p);
StalePolicy stale_policy_from_string(const char *s);

/* One namespace that did not follow a swap, and what became of it. */
typedef struct HealReport {
        NsView view;            /* as seen after the swap */
        uint64_t want_attr;     /* flags it had before the swap */
        HealAction action;      /* what it needed */
        int result;             /* 0 healed, <0 failed, 1 left alone (report/restart) */
} HealReport;

void heal_reports_free(HealReport *r, size_t n);

/*
 * Around one swap of @hierarchy. Before: heal_snapshot() records every
 * namespace that sees one of @devs (the current overlay, and older ones
 * still known to be stale). After: heal_after_swap() finds which of them
 * (and which other namespaces still on an old @devs overlay) did not follow
 * the host's new top @host_fd, and heals them when @heal is true.
 */
int heal_snapshot(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                  NsView **ret, size_t *ret_n);

/*
 * Before a swap: a namespace whose top is a propagated copy (a slave of the
 * host's top) with stricter flags than the host's would receive the new
 * overlay with the host's flags (systemd #9857). Pin it: mount a private
 * clone of its own top over it with its flags (same content, so readers see
 * no change); the swap then leaves it on the old generation and
 * heal_after_swap() swaps it the atomic way, never loosened. @host_attr are
 * the host top's flags. Returns the number of namespaces pinned; failures
 * are left to heal_after_swap() (which then restores flags afterwards).
 */
int heal_pin_loosenable(const NsView *views, size_t n, uint64_t host_attr);
int heal_after_swap(const char *root, const char *hierarchy, int host_fd,
                    const dev_t *devs, size_t n_devs,
                    const NsView *before, size_t n_before, bool heal,
                    HealReport **ret, size_t *ret_n);
