/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The new mount API as glibc 2.36 declares it (open_tree, move_mount,
 * fsopen/fsconfig/fsmount, mount_setattr), plus what it lacks:
 * MOVE_MOUNT_BENEATH arrived in Linux 6.5 (6ac392815628) and is backported
 * to Debian 12's 6.1 by kernel/patches/. glibc's <sys/mount.h> and
 * <linux/mount.h> conflict, so only the former is included.
 */

#include <fcntl.h>
#include <sys/mount.h>

#ifndef MOVE_MOUNT_BENEATH
#define MOVE_MOUNT_BENEATH 0x00000200
#endif

#ifndef AT_RECURSIVE
#define AT_RECURSIVE 0x8000
#endif

#ifndef MOUNT_ATTR_SIZE_VER0
#define MOUNT_ATTR_SIZE_VER0 32
#endif
