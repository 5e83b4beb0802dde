/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The swap: putting a new detached mount tree in place of the top mount at a
 * hierarchy, carrying the mounts below the old top onto it (carry.h), and the
 * kernel feature it rests on. One primitive for the host's swap, the crash
 * recovery's second half and the heal of a namespace (heal.c, which calls it
 * from inside that namespace), so a fix to it fixes all three:
 *
 *   SWAP_BENEATH   move_mount(MOVE_MOUNT_BENEATH) the new tree beneath the
 *                  live top, then unmount the old top, through its fd. Every
 *                  namespace that receives propagation sees old content,
 *                  then new content, never the base. (Linux 6.5, 6ac392815628.)
 *   SWAP_ON_TOP    first merge: attach on top of the base (which keeps its
 *                  own mounts below, hidden; the new tree carries clones).
 *   SWAP_WINDOW    the fallback, only with --allow-window: unmount, then
 *                  mount. Between the two, everyone sees the base.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "nsscan.h"

typedef enum SwapHow {
        SWAP_BENEATH,
        SWAP_ON_TOP,
        SWAP_WINDOW,
        _SWAP_HOW_MAX,
} SwapHow;

/* How far a swap got: what the namespace shows now. */
typedef enum SwapStage {
        SWAP_UNTOUCHED,         /* nothing changed: the old top is in place */
        SWAP_HIDDEN,            /* the new tree is beneath the old top, which could not be unmounted:
                                 * everyone still sees the old content; finishing is unmounting it */
        SWAP_EXPOSED,           /* the window opened and the new tree could not be attached: the base shows */
        SWAP_DONE,
} SwapStage;

typedef struct SwapSpec {
        int proc_fd;            /* a procfs that shows this process; -EBADF: /proc */
        const char *path;       /* the hierarchy, absolute in this process's root */
        uint64_t top_id;        /* the top mount expected there (-ESTALE if another is) */
        int tree_fd;            /* the new tree: detached, private, flags set on its root (a heal's
                                 * has the host's mounts below it); used up (carry.h) */
        SwapHow how;
        bool finish_halfway;    /* SWAP_BENEATH: if a swap stopped halfway here left its tree beneath
                                 * the top, finish that one (a heal: its namespace keeps no record
                                 * of it; the host's swap has the generation record's) */
        uint64_t deadline;      /* for carrying the children (carry.h); 0: its default */
        const ScanBudget *budget;   /* keepalive while waiting (may be NULL) */
} SwapSpec;

typedef struct SwapResult {
        SwapStage stage;
        unsigned carried;       /* mounts below the old top carried onto the new tree */
        dev_t new_dev;
        bool finished;          /* a swap stopped halfway here before had attached the new tree
                                 * already: only the old top went (carry_find_halfway()) */
        bool left_halfway;      /* such a tree was there but lacked flags wanted now: swapped anew,
                                 * and it stays beneath, pinning its generation */
        char *error;            /* why it stopped short of SWAP_DONE */
} SwapResult;

void swap_result_done(SwapResult *r);

/*
 * Replace the top mount at @spec->path (in this process's namespace and
 * root) by @spec->tree_fd with the old top's mounts carried onto it. Returns
 * 0 (SWAP_DONE) or -errno with ret->stage saying what the namespace shows
 * and ret->error why. With finish_halfway, a swap stopped halfway there
 * before (its tree beneath the top: carry_find_halfway()) is finished
 * instead of a second tree attached beneath the top (ret->finished).
 */
int swap_replace_top(const SwapSpec *spec, SwapResult *ret);

/*
 * The second half alone: unmount the top at @path if it is still mount
 * @top_id (-ESTALE otherwise), through its fd, revealing what is beneath it
 * (crash recovery: a swap killed between its two halves).
 */
int swap_finish(const char *path, uint64_t top_id);

/* MNT_DETACH the mount whose root @fd is, never by name. */
int umount_fd(int fd);

/*
 * Does the kernel support MOVE_MOUNT_BENEATH? Probed once per process by
 * trying it in a scratch mount namespace (a forked child), never by version.
 * scratch_dir: an existing directory to mount a tmpfs on inside that
 * namespace. Returns 1, 0 (the kernel said EINVAL), or a negative errno if
 * the probe itself failed.
 */
int mount_beneath_supported(const char *scratch_dir);

/* Moves tree_fd beneath the top mount at target, nothing more (tuckctl beneath). */
int mount_beneath(int tree_fd, const char *target);

/*
 * A private, detached clone of the base hierarchy at path: the top mount
 * there, without submounts. With peel > 0, the top `peel` mounts (an overlay
 * of systemd-sysext, or ours after a lost record) are first unmounted in a
 * forked child's private namespace and the base revealed there is cloned and
 * passed back over a socket; the host never sees a gap.
 */
int base_capture(const char *path, unsigned peel, int *ret_fd);

/* Take a detached tree (fd from open_tree/fsmount) out of every peer group. */
int mount_make_private(int fd, bool recursive);

/* SCM_RIGHTS helpers: one message of @size bytes, with @fd attached unless it is negative. */
int send_with_fd(int sock, const void *buf, size_t size, int fd);
int send_fd(int sock, int fd);
/* One message into @buf (its length returned) and the fd it carried into *ret_fd (-EBADF if none). */
ssize_t receive_with_fd(int sock, void *buf, size_t size, int *ret_fd);
int receive_fd(int sock);
