/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Loop devices for .raw images: one LOOP_CONFIGURE call (Linux 5.8) attaches
 * the file read-only with autoclear, and direct I/O where the backing file
 * system allows it. Autoclear releases the device when the last user goes:
 * the caller mounts it and then closes the fd, so the mounted file system is
 * what keeps it.
 */

/* Returns the open loop device fd; *ret_node is "/dev/loopN". */
int loop_attach(int file_fd, char **ret_node);
