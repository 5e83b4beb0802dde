/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Reading mount tables with libmount (/proc/PID/mountinfo), and the per-mount
 * flags a sandbox relies on. Paths in a table are as the process whose table
 * it is sees them (relative to its root).
 */

#include <libmount/libmount.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "macro.h"

/* ro, nosuid, nodev, noexec: what a refresh may add but never clear. */
#define TUCK_ATTR_MASK (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOEXEC)

DEFINE_TRIVIAL_CLEANUP_FUNC(struct libmnt_table *, mnt_unref_table);
#define _cleanup_mnt_table_ _cleanup_(mnt_unref_tablep)

/* Parses /proc/PID/mountinfo (pid 0: our own). */
int mount_table_read(pid_t pid, struct libmnt_table **ret);
/* Parses self/mountinfo below the procfs @proc_fd (-EBADF: /proc): ours, as that procfs shows it. */
int mount_table_read_at(int proc_fd, struct libmnt_table **ret);

/*
 * The top of the mount stack at target: the mount with that mount point that
 * no other mount with the same mount point sits on. NULL if nothing is mounted
 * exactly there.
 */
struct libmnt_fs *mount_table_find_top(struct libmnt_table *tb, const char *target);

struct libmnt_fs *mount_table_find_id(struct libmnt_table *tb, int id);

/* The mount ID of the top mount at path in our namespace (statx STATX_MNT_ID). */
int path_get_mnt_id(int dir_fd, const char *path, uint64_t *ret);

/* MOUNT_ATTR_* (masked by TUCK_ATTR_MASK) of the mount that path resolves to. */
int path_get_mount_attr(int dir_fd, const char *path, uint64_t *ret);
/* The same of the mount an fd is on (statvfs: it asks the file system, so only of one known not to hang). */
int fd_get_mount_attr(int fd, uint64_t *ret);

/* The mount an fd is on: its ID, its st_dev and its flags (TUCK_ATTR_MASK). */
int fd_get_mount(int fd, uint64_t *ret_mnt_id, dev_t *ret_dev, uint64_t *ret_attr);

/* "ro,nosuid,nodev,relatime" (a table's per-mount options) -> MOUNT_ATTR_* (TUCK_ATTR_MASK). */
uint64_t mount_attr_from_options(const char *opts);

/* "ro,nosuid,nodev,noexec" for the bits set, "rw" if none. buf >= 32 bytes. */
const char *mount_attr_to_string(uint64_t attr, char *buf, size_t size);

/*
 * Mounts sitting directly on the mount top_id, within the hierarchy (their
 * targets relative to it, sorted, e.g. "foo" for /opt/foo). Children of
 * children come along with a recursive clone of each.
 */
int mount_table_submounts(struct libmnt_table *tb, int top_id, const char *target, char ***ret_relative);

/* "MAJ:MIN" */
char *format_devnum(dev_t d);
