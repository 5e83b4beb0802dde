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
 * Which namespaces see what is nsscan.c's job (read through /proc/PID/root,
 * never entering a namespace). Healing enters one (a forked worker, setns,
 * with a deadline: HealBudgetSec=) and does the host's swap there, with the
 * host's primitive (swap.h): a clone of the host's new top whose flags are
 * the stale top's, beneath the stale top, with every mount the namespace
 * has below its top carried onto it first (carry.h: its sandbox, its
 * volumes), then the stale top goes. Or it restores the flags on the top
 * alone when only they were lost. All or nothing: a mount that cannot be
 * carried leaves the namespace as it was, reported with the reason.
 *
 * A namespace owned by a user namespace other than ours is never entered:
 * a mount tuck made there would not be MNT_LOCKED, nor its flags locked, so
 * that namespace's owner could unmount what covers part of the hierarchy,
 * or clear nodev. It is reported instead.
 */

#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "nsscan.h"

typedef enum HealAction {
        HEAL_NONE,              /* the view is current, flags intact */
        HEAL_SWAP,              /* old content: beneath swap in the namespace */
        HEAL_ATTR,              /* current content, loosened flags: restore them */
        HEAL_PIN,               /* before a swap: cover a propagated copy with a private
                                 * clone of itself, so the swap cannot loosen it */
        HEAL_UNPIN,             /* the swap did not happen: the pin goes again */
        _HEAL_ACTION_MAX,
} HealAction;

const char *heal_action_to_string(HealAction a);

/*
 * What to do for a namespace that showed @before (taken before the swap) and
 * now shows @now, when the host's new top is @new_dev.
 */
HealAction heal_plan(const NamespaceView *before, const NamespaceView *now, dev_t new_dev);

/* What heal_apply() did. */
typedef struct HealResult {
        int stage;              /* HEAL_SWAP: how far its swap got (SwapStage, swap.h) */
        bool finished;          /* HEAL_SWAP: it finished a heal stopped halfway before (swap.h) */
        bool left_halfway;      /* HEAL_SWAP: it left such a heal's tree beneath, lacking flags (swap.h) */
        unsigned carried;       /* HEAL_SWAP: the namespace's own mounts carried onto the new tree */
        uint64_t pin_id;        /* HEAL_PIN: the pin's mount ID in that namespace */
        char *error;            /* why not, in words (NULL: errno says it) */
} HealResult;

void heal_result_done(HealResult *r);

/*
 * Apply @action in @now's namespace, in a worker entering it (see above),
 * within @budget (NULL: the defaults). @host_fd is an O_PATH fd of the
 * host's new top at the hierarchy (taken in the host namespace); @attr the
 * flags the namespace wants. HEAL_SWAP replaces its top (swap.h); HEAL_ATTR
 * sets @attr on the top in place, on it alone; HEAL_PIN covers it with a
 * private clone of itself (ret->pin_id), HEAL_UNPIN unmounts pin @pin_id.
 * The namespace is re-checked inside: if its top is no longer the one in
 * @now (or the pin), nothing is done and -ESTALE is returned. -EPERM: owned
 * by another user namespace, never entered. Returns 0 on success, negative
 * errno otherwise, with ret->error saying why where it can.
 */
int heal_apply(const NamespaceView *now, HealAction action, int host_fd, uint64_t attr, uint64_t pin_id,
               ScanBudget *budget, HealResult *ret);

/* One namespace that did not follow a swap, and what became of it. */
typedef struct HealReport {
        NamespaceView view;     /* as seen after the swap (view.error < 0: could not be read) */
        uint64_t want_attr;     /* flags it had before the swap */
        HealAction action;      /* what it needed */
        int result;             /* 0 healed, <0 failed, 1 left alone (report/restart) */
        int stage;              /* a swap's SwapStage (swap.h) */
        bool finished;          /* a swap: it finished one stopped halfway before */
        bool left_halfway;      /* a swap: it left one stopped halfway beneath, lacking flags */
        unsigned carried;       /* a swap: its own mounts carried onto the new tree */
        char *reason;           /* why a heal failed, in words, or NULL */
        char *outcome;          /* in words, for logs and reports (stale.c); may be NULL */
} HealReport;

void heal_reports_free(HealReport *r, size_t n);

/*
 * The flags a namespace (by mount namespace inode) is known to want on a
 * hierarchy. The inode number alone is reused by the kernel once the
 * namespace is gone, so a wish kept across runs also names a witness: a
 * process that was in the namespace when it was recorded (stale.h).
 */
typedef struct NsWant {
        uint64_t ns_ino;
        uint64_t attr;
        pid_t pid;              /* the witness; 0: none (the wish cannot be confirmed) */
        uint64_t start_time;    /* its start time: /proc/PID/stat field 22, clock ticks since boot */
} NsWant;

/*
 * Plan and (with @heal) apply, for every view in @now (scanned after a swap,
 * or without one), against the host's top @host_fd: a view on another
 * overlay is swapped, one that lost flags it wants (@want, by namespace;
 * otherwise its own) gets them back. Views are taken over by the reports
 * (and cleared in @now). A namespace whose top changed meanwhile (-ESTALE:
 * typically a service inside a container that followed when the container
 * was healed) is read again from @root/@path and planned once more.
 * Unreadable views are reported as failed.
 */
int heal_views(const char *root, const char *path, int host_fd, NamespaceView *now, size_t n_now,
               const NsWant *want, size_t n_want, bool heal, ScanBudget *budget, HealReport **ret,
               size_t *ret_n);

/*
 * Around one swap of @hierarchy (root prefix applied). Before:
 * heal_snapshot() records every namespace but ours that sees one of @devs
 * (the current overlay, and older ones still known to be stale). After: heal_after_swap() finds which of them
 * (and which other namespaces still on an old @devs overlay) did not follow
 * the host's new top @host_fd, and heals them when @heal is true.
 */
int heal_snapshot(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                  NamespaceView **ret, size_t *ret_n);

/*
 * Before a swap: a namespace whose top is a propagated copy (a slave of the
 * host's top) with stricter flags than the host's and nothing of its own
 * below would receive the new overlay with the host's flags (systemd #9857).
 * Pin it: mount a private clone of its own top over it with its flags (same
 * content, so readers see no change); the swap then leaves it on the old
 * generation and heal_after_swap() swaps it the atomic way, never
 * loosened. @host_attr are the host top's flags. Returns the number of
 * namespaces pinned, each pin's mount ID in @ret_pins (0: not pinned; @n of
 * them); failures are left to heal_after_swap() (which then restores flags
 * afterwards). heal_unpin() takes them away again when the swap did not
 * happen.
 */
int heal_pin_loosenable(const NamespaceView *views, size_t n, uint64_t host_attr, ScanBudget *budget,
                        uint64_t *ret_pins);
void heal_unpin(const NamespaceView *views, size_t n, const uint64_t *pins, ScanBudget *budget);
int heal_after_swap(const char *root, const char *hierarchy, int host_fd,
                    const dev_t *devs, size_t n_devs,
                    const NamespaceView *before, size_t n_before, bool heal, ScanBudget *budget,
                    HealReport **ret, size_t *ret_n);
