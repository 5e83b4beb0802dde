/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Helpers shared by the MOVE_MOUNT_BENEATH semantics suite and its race
 * stress test: scratch namespaces, tmpfs mounts with a marker file that says
 * which mount a path shows, mountinfo snapshots, and the move_mount() calls.
 *
 * Every function that can fail returns a negative errno (or NULL with errno
 * set) and prints nothing; the tests decide what a failure means.
 */

#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

#include "macro.h"
#include "mount-api.h"

/* Each mount the suite makes carries a file of this name naming the mount. */
#define MARKER_FILE "marker"

#define streq(a, b) (strcmp((a), (b)) == 0)

static inline void *mfree(void *p) {
        free(p);
        return NULL;
}

/* Write @content to @path (relative to @dir_fd), creating or truncating it. */
int write_file_at(int dir_fd, const char *path, const char *content);

/* Read a whole (small) file. Returns a malloc'd string or NULL with errno. */
char *read_file_at(int dir_fd, const char *path);

/*
 * What the marker file under @dir says: the marker of the mount visible at
 * @dir, or "<no marker: ESTR>" when there is none. Never NULL (aborts on OOM).
 */
char *marker_at(const char *dir);

/* mkdir -p */
int mkdir_p(const char *path, mode_t mode);

/* Mount a fresh tmpfs on @path (created if missing) holding marker @marker. */
int tmpfs_mount_at(const char *path, const char *marker);

/* A detached tmpfs (fsopen/fsmount) holding marker @marker: a mount fd. */
int tmpfs_detached(const char *marker);

/*
 * move_mount(@from_fd, @from, @to_fd, @to, MOVE_MOUNT_BENEATH | @extra);
 * an empty @from or @to adds the matching *_EMPTY_PATH flag. 0 or -errno.
 */
int move_beneath(int from_fd, const char *from, int to_fd, const char *to, unsigned extra);

/* Plain move_mount() with explicit flags: 0 or -errno. */
int move_mount_raw(int from_fd, const char *from, int to_fd, const char *to, unsigned flags);

/* Set propagation (MS_SHARED, MS_SLAVE, MS_PRIVATE, MS_UNBINDABLE) of one mount. */
int set_propagation(const char *path, unsigned long type);

/* The same for the (possibly detached) mount @fd refers to, by mount_setattr(). */
int set_propagation_fd(int fd, unsigned long type);

/* mount --bind @from @to (not recursive). */
int bind_mount(const char *from, const char *to);

/* Put @to into the peer group (and under the master) of @from: MOVE_MOUNT_SET_GROUP. */
int set_group(const char *from, const char *to);

/* An O_PATH | O_CLOEXEC fd on @path (a directory or not), or -errno. */
int open_path(const char *path);

/* Enter the mount namespace of @pid (setns), or -errno. */
int enter_mount_ns_of(pid_t pid);

/*
 * Enter a new mount namespace in which nothing propagates back to the one
 * we came from (everything private), so a test cannot touch the machine.
 */
int enter_private_mount_ns(void);

/*
 * Enter a new user and mount namespace as root inside it (uid/gid 0 map to
 * our own). Mounts inherited this way are MNT_LOCKED.
 */
int enter_user_and_mount_ns(void);

/*
 * Fork a process that enters a new mount namespace (copied from ours: shared
 * mounts get peers there), runs @setup(@userdata) in it unless NULL (a
 * negative return makes it exit), and then sleeps until killed. Returns its
 * pid once @setup is done, or -errno. Reach its view through
 * /proc/PID/root and /proc/PID/mountinfo.
 */
pid_t spawn_mount_ns(int (*setup)(void *userdata), void *userdata);

/* Wait for @pid: its exit status, 128 + the signal that killed it, or -errno. */
int wait_child(pid_t pid);

/* SIGKILL and reap @pid, if > 0. */
void kill_child(pid_t pid);

/* /proc/self/mountinfo (pid 0) or /proc/PID/mountinfo, as one string. */
char *mountinfo_read(pid_t pid);

/* Print the lines only in @before ("-") and only in @after ("+"). */
void mountinfo_print_diff(FILE *f, const char *before, const char *after);

/* The mount id of the top-most mount at @path (statx STATX_MNT_ID), or -errno. */
int mount_id_at(int dir_fd, const char *path);

/* Parent id of mount @id in @mountinfo, or -ENOENT. */
int mountinfo_parent(const char *mountinfo, int id);

/* How many mounts in @mountinfo sit on mount point @path. */
unsigned mountinfo_count_at(const char *mountinfo, const char *path);

/* The value N of mount @id's optional field @tag ("shared:", "master:"), or -ENOENT. */
int mountinfo_tag(const char *mountinfo, int id, const char *tag);

/*
 * Mounts that share a parent and a mount point with another one (shadow
 * mounts, which the overmounted-source rule exists to prevent), logged to
 * @log: how many.
 */
int mountinfo_shadowed(const char *mountinfo, FILE *log);

/*
 * Consistency of a mount table: every mount's parent is in the table, except
 * for the bottom mount on "/" (its parent, the namespace root, is not listed).
 * Returns the number of other mounts whose parent is missing, logged to @log.
 */
int mountinfo_orphans(const char *mountinfo, FILE *log);

/* Name of an errno value ("EINVAL"), or "0" for 0; a static string. */
const char *errno_name(int err);
