/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <linux/loop.h>
#include <stdio.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "util.h"

static int loop_configure(int loop_fd, int file_fd, uint64_t offset, uint64_t size, bool direct_io) {
        struct loop_config config = {
                .fd = file_fd,
                .info.lo_flags = LO_FLAGS_READ_ONLY | LO_FLAGS_AUTOCLEAR | (direct_io ? LO_FLAGS_DIRECT_IO : 0),
                .info.lo_offset = offset,
                .info.lo_sizelimit = size,
        };

        return RET_NERRNO(ioctl(loop_fd, LOOP_CONFIGURE, &config));
}

int loop_attach(int file_fd, uint64_t offset, uint64_t size, char **ret_node) {
        _cleanup_close_ int control = -EBADF;

        control = open("/dev/loop-control", O_RDWR | O_CLOEXEC);
        if (control < 0)
                return -errno;

        /* Another process may take the free device between GET_FREE and CONFIGURE: retry. */
        for (unsigned attempt = 0; attempt < 64; attempt++) {
                _cleanup_close_ int fd = -EBADF;
                char node[32];
                int nr, r;

                nr = ioctl(control, LOOP_CTL_GET_FREE);
                if (nr < 0)
                        return -errno;
                snprintf(node, sizeof(node), "/dev/loop%d", nr);
                fd = open(node, O_RDONLY | O_CLOEXEC);
                if (fd < 0) {
                        if (errno == ENOENT)   /* no devtmpfs node yet */
                                continue;
                        return -errno;
                }

                r = loop_configure(fd, file_fd, offset, size, true);
                if (r == -EINVAL) {
                        /* Backing file system without O_DIRECT (tmpfs): plain buffered I/O. */
                        log_debug("Direct I/O not possible for loop%d, using buffered I/O.", nr);
                        r = loop_configure(fd, file_fd, offset, size, false);
                }
                if (r == -EBUSY)
                        continue;
                if (r < 0)
                        return r;

                *ret_node = strdup(node);
                if (!*ret_node)
                        return -ENOMEM;
                return TAKE_FD(fd);
        }
        return -EBUSY;
}
