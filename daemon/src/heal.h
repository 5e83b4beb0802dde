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
 * never entering a namespace). Healing enters one (a forked child, setns)
 * and does the host's beneath swap there with a clone of the host's new top
 * whose flags are the stale top's, or restores the flags in place when only
 * they were lost.
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
        _HEAL_ACTION_MAX,
} HealAction;

const char *heal_action_to_string(HealAction a);

/*
 * What to do for a namespace that showed @before (taken before the swap) and
 * now shows @now, when the host's new top is @new_dev.
 */
HealAction heal_plan(const NamespaceView *before, const NamespaceView *now, dev_t new_dev);

/*
 * Apply @action in @now's namespace. @host_fd is an O_PATH fd of the host's
 * new top at the hierarchy (taken in the host namespace); @attr the flags to
 * keep (the view's flags before the swap). HEAL_SWAP clones @host_fd's tree,
 * sets @attr on it, moves it beneath the stale top and unmounts that top;
 * HEAL_ATTR sets @attr on the top in place. The namespace is re-checked
 * inside: if its top is no longer the one in @now, nothing is done and
 * -ESTALE is returned. Returns 0 on success, negative errno otherwise.
 */
int heal_apply(const NamespaceView *now, HealAction action, int host_fd, uint64_t attr);

/* One namespace that did not follow a swap, and what became of it. */
typedef struct HealReport {
        NamespaceView view;     /* as seen after the swap (view.error < 0: could not be read) */
        uint64_t want_attr;     /* flags it had before the swap */
        HealAction action;      /* what it needed */
        int result;             /* 0 healed, <0 failed, 1 left alone (report/restart) */
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
               const NsWant *want, size_t n_want, bool heal, HealReport **ret, size_t *ret_n);

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
 * host's top) with stricter flags than the host's would receive the new
 * overlay with the host's flags (systemd #9857). Pin it: mount a private
 * clone of its own top over it with its flags (same content, so readers see
 * no change); the swap then leaves it on the old generation and
 * heal_after_swap() swaps it the atomic way, never loosened. @host_attr are
 * the host top's flags. Returns the number of namespaces pinned; failures
 * are left to heal_after_swap() (which then restores flags afterwards).
 */
int heal_pin_loosenable(const NamespaceView *views, size_t n, uint64_t host_attr);
int heal_after_swap(const char *root, const char *hierarchy, int host_fd,
                    const dev_t *devs, size_t n_devs,
                    const NamespaceView *before, size_t n_before, bool heal,
                    HealReport **ret, size_t *ret_n);
