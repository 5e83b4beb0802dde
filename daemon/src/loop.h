/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Loop devices for .raw images: one LOOP_CONFIGURE call (Linux 5.8) attaches
 * the file read-only with autoclear, and direct I/O where the backing file
 * system allows it. Autoclear releases the device when the last user goes:
 * the caller mounts it and then closes the fd, so the mounted file system is
 * what keeps it.
 */

#include <stdint.h>

/*
 * Returns the open loop device fd; *ret_node is "/dev/loopN". With a size
 * (0: to the end of the file) the device shows the file's bytes offset to
 * offset + size only: one partition of a DDI, no partition scanning.
 */
int loop_attach(int file_fd, uint64_t offset, uint64_t size, char **ret_node);
