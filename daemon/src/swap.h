/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The swap: putting a new detached mount tree in place of the top mount at a
 * hierarchy, and the kernel feature it rests on.
 *
 *   swap_beneath()   move_mount(MOVE_MOUNT_BENEATH) the new tree beneath the
 *                    live top, then umount2(MNT_DETACH) the old top. Every
 *                    namespace that receives propagation sees old content,
 *                    then new content, never the base. (Linux 6.5, 6ac392815628.)
 *   swap_on_top()    first merge: attach on top of the base.
 *   swap_window()    the fallback, only with --allow-window: unmount, then
 *                    mount. Between the two, everyone sees the base.
 */

#include <stdbool.h>
#include <stdint.h>

/*
 * Does the kernel support MOVE_MOUNT_BENEATH? Probed once per process by
 * trying it in a scratch mount namespace (a forked child), never by version.
 * scratch_dir: an existing directory to mount a tmpfs on inside that
 * namespace. Returns 1, 0 (the kernel said EINVAL), or a negative errno if
 * the probe itself failed.
 */
int mount_beneath_supported(const char *scratch_dir);

/*
 * tree_fd: a detached mount tree. old_top_id: the mount ID of the top at
 * target we expect to replace; refuses (-ESTALE) if something else is there.
 */
int swap_beneath(int tree_fd, const char *target, uint64_t old_top_id);
int swap_on_top(int tree_fd, const char *target);
int swap_window(int tree_fd, const char *target, uint64_t old_top_id);

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

/* SCM_RIGHTS helpers. */
int send_fd(int sock, int fd);
int receive_fd(int sock);
