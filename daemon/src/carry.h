/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Carrying a top mount's children onto the tree that replaces it.
 *
 * A hierarchy's top mount has mounts of its own below it: on a host, what
 * was mounted below /usr or /opt (nested mounts); in a service's namespace,
 * its sandbox (InaccessiblePaths=, TemporaryFileSystem=, ReadWritePaths=,
 * BindPaths= and the rest all mount there); in a container, its --bind
 * volumes. Unmounting the old top with MNT_DETACH takes all of them along,
 * so the tree that replaces it must carry them first: the same mounts, with
 * the same flags, types, stacking order and places.
 *
 * The kernel reaches a mount by path only where it is on top and not
 * covered, and a detached tree cannot be mounted on before Linux 6.15. So
 * the carrying is done in a private, disposable copy of the namespace (a
 * forked child that unshares): there every mount below the top is made
 * private (nothing done there reaches the original namespace), the topmost
 * mount at each place is cloned (recursively: what sits inside it comes
 * along) and unmounted to reveal what it covered, round after round until
 * the top has nothing left below it. The new tree is attached there, every
 * mount point it needs opened before anything is attached (a place the
 * carried mounts will cover stays reachable), and the clones attached in
 * the reverse of the order they were taken: bottom of each stack first,
 * what covered another after it. A recursive clone of that, detached, goes
 * back to the caller, which only has to swap it in. Nothing in the caller's
 * namespace changes on the way: a mount that cannot be carried (no mount
 * point for it in the new tree, an unbindable mount, too many mounts) is an
 * error before the swap.
 *
 * Carried mounts are private: a clone left in the peer group of its
 * original would lose its own submounts when the old tree is unmounted
 * (umount propagates through the peer group), and one in the namespace's
 * propagation would receive mount events meant for the old tree. Attached
 * beneath a shared parent, the new tree and everything on it become shared
 * in peer groups of their own, as any new mount there does.
 */

#include <stdint.h>
#include <sys/types.h>

#include "nsscan.h"

/* At most this many mounts are carried below one top (a namespace's sandbox has tens). */
#define CARRY_MAX_MOUNTS 4096U

typedef struct CarrySpec {
        int proc_fd;            /* a procfs that shows this process (opened before any chroot) */
        const char *path;       /* the hierarchy, absolute in this process's root */
        dev_t top_dev;          /* st_dev of the top mount there (checked in the copy) */
        int tree_fd;            /* the new tree: detached, private; used up (it is attached in the
                                 * copy, which goes). A carried mount whose place holds one
                                 * of the tree's own goes on top of it. */
        uint64_t deadline;      /* CLOCK_MONOTONIC µs; 0: CARRY_TIMEOUT_USEC from now */
        const ScanBudget *budget;   /* its keepalive is fed while waiting (may be NULL) */
} CarrySpec;

#define CARRY_TIMEOUT_USEC (60 * UINT64_C(1000000))

/*
 * The mounts below the top at @spec->path, carried onto a clone of
 * @spec->tree_fd, in a forked child (see above). On success *ret_fd is the
 * new detached tree with them on it and *ret_carried how many mounts came
 * along. On failure *ret_error says why (the mount, the place), nothing in
 * our namespace changed, and -errno is returned.
 */
int carry_children(const CarrySpec *spec, int *ret_fd, unsigned *ret_carried, char **ret_error);

/*
 * The places below @top_id (at @path) where mounts sit directly on it, and
 * how many mounts are below it in all; -ELOOP for a mount table whose
 * parents loop, -E2BIG past CARRY_MAX_MOUNTS, -EPERM (with *ret_error) for
 * a mount a clone cannot carry. Pure: tested on fixtures.
 */
int carry_plan(struct libmnt_table *tb, int top_id, const char *path, char ***ret_places, unsigned *ret_n_mounts,
               char **ret_error);

/*
 * A swap stopped halfway (killed between its two halves, or its unmount
 * refused: SWAP_HIDDEN) leaves its new tree beneath the old top, with the old
 * top's mounts carried onto it. Another swap would attach a second tree
 * beneath the old top and leave the first under it for good, pinning a
 * generation's overlay and loop devices that nothing can see any more. So:
 * is the mount under @top_id that tree? At the same place, on file system
 * @dev, not received by propagation (no master), and carrying every mount
 * below the top (same places, file systems, roots, types and flags; it may
 * have more: the host's own mounts a heal's tree brings). Returns 1 with
 * *ret_id that mount, *ret_kept how many of the top's mounts it carries and
 * *ret_attr its own flags (TUCK_ATTR_MASK), 0 if it is not, -ELOOP for
 * parents that loop. Pure: tested on fixtures.
 */
int carry_find_halfway(struct libmnt_table *tb, int top_id, dev_t dev, int *ret_id, unsigned *ret_kept,
                       uint64_t *ret_attr);
