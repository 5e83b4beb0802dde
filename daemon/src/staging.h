/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The staging area: a mount namespace of its own, pinned by a bind mount of
 * its nsfs file at /run/tuck/staging.mnt, whose root is a small tmpfs:
 *
 *   /i/<id>    extension images, read-only (kept across refreshes while unchanged)
 *   /b/<hid>   the base of each hierarchy: a private clone taken before the
 *              first merge, the lowest layer of every overlay
 *   /o/<hid>   where an overlay is assembled before it is cloned out
 *
 * Keeping these mounts out of the host's namespace means no service or
 * container that starts later copies them (and pins loop devices of images
 * long dropped), and the host's mount table changes only at the swap.
 *
 * tuck enters the namespace with setns() and leaves it again: callers must
 * be single-threaded (setns(CLONE_NEWNS) refuses shared fs_struct).
 */

#include <stdbool.h>
#include <stdint.h>

#include "state.h"

typedef struct Staging {
        int ns_fd;           /* the staging namespace */
        uint64_t ns_ino;
        int host_ns_fd;      /* where we came from */
        int host_root_fd;
        int host_cwd_fd;
        int root_fd;         /* O_PATH on the staging namespace's root, for looking in from outside */
        bool inside;
} Staging;

#define STAGING_INIT { .ns_fd = -EBADF, .host_ns_fd = -EBADF, .host_root_fd = -EBADF, .host_cwd_fd = -EBADF, \
                       .root_fd = -EBADF }

/* Opens the pinned staging namespace below run_dir, creating it if needed. */
int staging_open(const char *run_dir, Staging *ret);
void staging_close(Staging *s);

/*
 * Enter and leave. Leaving restores our namespace, root and working
 * directory exactly; if it cannot get the first two back, the process stops
 * (abort()) rather than go on inside, and if only the working directory is
 * gone, it works in "/".
 */
int staging_enter(Staging *s);
int staging_leave(Staging *s);

/* Inside: attach a detached mount at rel ("i/3"), creating the directory. */
int staging_attach(Staging *s, int mount_fd, const char *rel);
/* Inside: detach whatever is mounted at rel and remove the directory. */
int staging_detach(Staging *s, const char *rel);
/* Inside: an O_PATH fd for rel, usable after leaving. */
int staging_open_path(Staging *s, const char *rel);
/* Inside: is something mounted at rel, not just its directory there? */
int staging_is_mounted(Staging *s, const char *rel);
/*
 * An O_PATH fd for what is mounted at rel, -ENOENT if nothing is. From
 * outside it looks in through the namespace's root (entered once, for that
 * fd), so a run that opens every staged image does not enter for each;
 * inside, it leaves afterwards.
 */
int staging_open_mounted(Staging *s, const char *rel);
/*
 * Inside: detach what a killed run left, image mounts in i/ that the table
 * does not list and overlays half-assembled in o/. Both would otherwise
 * stay until reboot.
 */
void staging_detach_orphans(Staging *s, const StagingTable *t);

/* Inside: forget the table's images that are not mounted any more (a lost staging namespace). */
void staging_table_drop_unmounted(Staging *s, StagingTable *t);

/* "i/<id>": where staged image <id> is mounted. */
#define STAGING_PATH_MAX 32
const char *staging_image_path(char buf[static STAGING_PATH_MAX], unsigned id);

/* The number of mounts in the staging namespace (for status and leak checks). */
int staging_count_mounts(Staging *s);

/* Unpins the staging namespace (its mounts go once nothing else holds them). */
int staging_destroy(const char *run_dir);

/* Makes run_dir a private mount point, so mounts below it never propagate. */
int run_dir_make_private(const char *run_dir);
