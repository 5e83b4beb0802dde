/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "swap.h"
#include "util.h"

/* Child side of the probe. Returns the errno of move_mount(), 0 on success. */
static int probe_child(const char *scratch) {
        _cleanup_free_ char *top = path_join(scratch, "t"), *src = path_join(scratch, "s");

        if (!top || !src)
                return ENOMEM;
        if (unshare(CLONE_NEWNS) < 0 || mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return errno;
        if (mount("tuck-probe", scratch, "tmpfs", 0, "size=64k") < 0)
                return errno;
        if (mkdir(top, 0700) < 0 || mkdir(src, 0700) < 0)
                return errno;
        if (mount("tuck-probe-top", top, "tmpfs", 0, "size=64k") < 0 ||
            mount("tuck-probe-new", src, "tmpfs", 0, "size=64k") < 0)
                return errno;
        /*
         * An attached source moved by path: the flags differ from the real
         * swap's (which moves a detached tree, MOVE_MOUNT_F_EMPTY_PATH), so a
         * test can fail one without the other.
         */
        if (move_mount(AT_FDCWD, src, AT_FDCWD, top, MOVE_MOUNT_BENEATH) < 0)
                return errno;
        return 0;
}

int mount_beneath_supported(const char *scratch_dir) {
        static int cached = -1;
        int status;
        pid_t pid;

        if (cached >= 0)
                return cached;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                _exit(probe_child(scratch_dir) & 0xff);
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        if (!WIFEXITED(status))
                return -EIO;
        switch (WEXITSTATUS(status)) {
        case 0:
                cached = 1;
                break;
        case EINVAL:
                /* Unknown flag and every beneath refusal are EINVAL; our layout is valid, so: missing. */
                cached = 0;
                break;
        default:
                return log_debug_errno(WEXITSTATUS(status), "MOVE_MOUNT_BENEATH probe failed: %m");
        }
        log_debug("MOVE_MOUNT_BENEATH is %s.", cached ? "supported" : "not supported");
        return cached;
}

static int check_top(const char *target, uint64_t old_top_id) {
        uint64_t id;
        int r;

        r = path_get_mnt_id(AT_FDCWD, target, &id);
        if (r < 0)
                return r;
        return id == old_top_id ? 0 : -ESTALE;
}

int mount_beneath(int tree_fd, const char *target) {
        return RET_NERRNO(move_mount(tree_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_BENEATH));
}

int swap_beneath(int tree_fd, const char *target, uint64_t old_top_id) {
        int r;

        r = check_top(target, old_top_id);
        if (r < 0)
                return r;
        r = mount_beneath(tree_fd, target);
        if (r < 0)
                return r;
        /*
         * The new tree now sits beneath the old top here and, by propagation,
         * in every slave namespace. The path still resolves to the old top:
         * unmounting it reveals the new tree everywhere at once.
         */
        if (umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                return log_debug_errno(errno, "Attached beneath '%s' but failed to unmount the old top: %m", target);
        return 0;
}

int swap_on_top(int tree_fd, const char *target) {
        return RET_NERRNO(move_mount(tree_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH));
}

int swap_window(int tree_fd, const char *target, uint64_t old_top_id) {
        int r;

        r = check_top(target, old_top_id);
        if (r < 0)
                return r;
        if (umount2(target, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                return -errno;
        /* The window: every namespace sees the bare base until this returns. */
        r = swap_on_top(tree_fd, target);
        if (r < 0)
                log_error_errno(r, "Unmounted the old overlay at '%s' but could not mount the new one: %m. "
                                "'%s' now shows the base.", target, target);
        return r;
}

int send_fd(int sock, int fd) {
        char control[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = { .iov_base = (char *) "f", .iov_len = 1 };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control,
                .msg_controllen = sizeof(control),
        };
        struct cmsghdr *c = CMSG_FIRSTHDR(&msg);

        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &fd, sizeof(int));
        return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int receive_fd(int sock) {
        char control[CMSG_SPACE(sizeof(int))] = {}, byte;
        struct iovec iov = { .iov_base = &byte, .iov_len = 1 };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control,
                .msg_controllen = sizeof(control),
        };
        struct cmsghdr *c;
        int fd;

        if (recvmsg(sock, &msg, MSG_CMSG_CLOEXEC) <= 0)
                return -EIO;
        c = CMSG_FIRSTHDR(&msg);
        if (!c || c->cmsg_type != SCM_RIGHTS || c->cmsg_len != CMSG_LEN(sizeof(int)))
                return -EIO;
        memcpy(&fd, CMSG_DATA(c), sizeof(int));
        return fd;
}

/*
 * A clone made by open_tree() joins the peer group of its original. The
 * base's original is the host's root (or /usr) peer group: without this,
 * every mount the host makes there (our own overlay first of all) would
 * propagate onto the base in the staging namespace.
 */
int mount_make_private(int fd, bool recursive) {
        struct mount_attr a = { .propagation = MS_PRIVATE };

        return RET_NERRNO(mount_setattr(fd, "", AT_EMPTY_PATH | (recursive ? AT_RECURSIVE : 0), &a, sizeof(a)));
}

static int clone_top(const char *path) {
        _cleanup_close_ int fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        int r;

        if (fd < 0)
                return -errno;
        r = mount_make_private(fd, false);
        if (r < 0)
                return r;
        /* The base is only ever a lower layer: nothing writes through the clone. */
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &(struct mount_attr) { .attr_set = MOUNT_ATTR_RDONLY },
                          sizeof(struct mount_attr)) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* In the child: peel `peel` mounts off path in a private copy of our namespace, clone what is left. */
static int peel_child(const char *path, unsigned peel, int sock) {
        _cleanup_close_ int fd = -EBADF;

        if (unshare(CLONE_NEWNS) < 0)
                return -errno;
        /* Private first: an unmount here must not propagate back to the host. */
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return -errno;
        for (unsigned i = 0; i < peel; i++)
                if (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        return -errno;
        fd = clone_top(path);
        if (fd < 0)
                return fd;
        return send_fd(sock, fd);
}

int base_capture(const char *path, unsigned peel, int *ret_fd) {
        int pair[2], status, fd, r;
        pid_t pid;

        if (peel == 0) {
                fd = clone_top(path);
                if (fd < 0)
                        return fd;
                *ret_fd = fd;
                return 0;
        }

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                r = -errno;
                safe_close(pair[0]);
                safe_close(pair[1]);
                return r;
        }
        if (pid == 0) {
                safe_close(pair[0]);
                r = peel_child(path, peel, pair[1]);
                _exit(r < 0 ? (-r & 0xff) : 0);
        }
        safe_close(pair[1]);
        if (waitpid(pid, &status, 0) < 0) {
                r = -errno;
                safe_close(pair[0]);
                return r;
        }
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
                safe_close(pair[0]);
                return WIFEXITED(status) ? -(int) WEXITSTATUS(status) : -EIO;
        }
        fd = receive_fd(pair[0]);
        safe_close(pair[0]);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}
