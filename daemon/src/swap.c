/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <poll.h>
#include <stdarg.h>
#include <string.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carry.h"
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

int mount_beneath(int tree_fd, const char *target) {
        return RET_NERRNO(move_mount(tree_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_BENEATH));
}

int umount_fd(int fd) {
        _cleanup_close_ int cwd = RET_NERRNO(open(".", O_PATH | O_DIRECTORY | O_CLOEXEC));
        int r;

        /*
         * Through the fd, never by name: a name is resolved once more, by the
         * kernel this time, and a container whose /usr is a symlink to where it
         * binds the hierarchy makes umount2("usr", UMOUNT_NOFOLLOW) fail after
         * the beneath move succeeded. "." with our cwd on the mount's root is
         * that mount; the cwd is put back (tuckd is single-threaded).
         */
        if (cwd < 0)
                return cwd;
        if (fchdir(fd) < 0)
                return -errno;
        r = RET_NERRNO(umount2(".", MNT_DETACH | UMOUNT_NOFOLLOW));
        if (fchdir(cwd) < 0 && r >= 0)
                r = -errno;
        return r;
}

/* The top at @path, if it is mount @top_id. */
static int open_top(const char *path, uint64_t top_id) {
        _cleanup_close_ int root = -EBADF, fd = -EBADF;
        uint64_t id;
        int r;

        root = RET_NERRNO(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (root < 0)
                return root;
        fd = openat_in_root(root, path, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        r = path_get_mnt_id(fd, "", &id);
        if (r < 0)
                return r;
        return id == top_id ? TAKE_FD(fd) : -ESTALE;
}

int swap_finish(const char *path, uint64_t top_id) {
        _cleanup_close_ int top = open_top(path, top_id);

        if (top < 0)
                return top;
        return umount_fd(top);
}

void swap_result_done(SwapResult *r) {
        free(r->error);
        r->error = NULL;
}

static int swap_fail(SwapResult *res, SwapStage stage, int r, const char *fmt, ...) _printf_(4, 5);
static int swap_fail(SwapResult *res, SwapStage stage, int r, const char *fmt, ...) {
        va_list ap;

        res->stage = stage;
        va_start(ap, fmt);
        (void) free_and_vasprintf(&res->error, fmt, ap);
        va_end(ap);
        return r;
}

/* The new tree, with the old top's mounts on it, in place of the old top. */
static int swap_attach(const SwapSpec *s, int top, int full, SwapResult *res) {
        int r;

        switch (s->how) {
        case SWAP_ON_TOP:
                if (move_mount(full, "", top, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                        return swap_fail(res, SWAP_UNTOUCHED, -errno, "cannot attach the overlay: %s",
                                         strerror(errno));
                break;
        case SWAP_BENEATH:
                if (move_mount(full, "", top, "",
                               MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH | MOVE_MOUNT_BENEATH) < 0)
                        return swap_fail(res, SWAP_UNTOUCHED, -errno,
                                         "cannot move the new overlay beneath the live one: %s", strerror(errno));
                /* Beneath the old top here and, by propagation, in every slave namespace.
                 * Unmounting the old top reveals it everywhere at once. */
                r = umount_fd(top);
                if (r < 0)
                        return swap_fail(res, SWAP_HIDDEN, r, "the new overlay is attached beneath the old "
                                         "one, which cannot be unmounted: %s", strerror(-r));
                break;
        case SWAP_WINDOW:
                r = umount_fd(top);
                if (r < 0)
                        return swap_fail(res, SWAP_UNTOUCHED, r, "cannot unmount the old overlay: %s", strerror(-r));
                /* The window: every namespace sees the bare base until this returns. */
                if (move_mount(full, "", AT_FDCWD, s->path, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                        return swap_fail(res, SWAP_EXPOSED, -errno, "unmounted the old overlay but cannot mount "
                                         "the new one: %s", strerror(errno));
                break;
        case _SWAP_HOW_MAX:
                return -EINVAL;
        }
        res->stage = SWAP_DONE;
        return 0;
}

/*
 * A swap here stopped halfway before (carry_find_halfway()): its tree, with
 * the new content and the top's mounts on it, is beneath the top already.
 * Finishing it is the second half alone, if that tree has every flag the new
 * one would have on its root: set after the unmount, a flag would be missing
 * for a moment (and nothing can reach the tree to set it before). Returns 1
 * when finished, 0 if there is no such tree, -errno with ret's stage saying
 * what the namespace shows.
 */
static int swap_finish_halfway(const SwapSpec *s, int proc_fd, int top, SwapResult *res) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        uint64_t want, has;
        struct stat st;
        unsigned kept;
        int under_id, r;

        if (fstat(s->tree_fd, &st) < 0)
                return -errno;
        r = mount_table_read_at(proc_fd, &tb);
        if (r < 0)
                return swap_fail(res, SWAP_UNTOUCHED, r, "cannot read the mount table: %s", strerror(-r));
        r = carry_find_halfway(tb, (int) s->top_id, st.st_dev, &under_id, &kept, &has);
        if (r == -ELOOP)
                return swap_fail(res, SWAP_UNTOUCHED, r, "the mount table of '%s' changed while it was read", s->path);
        if (r <= 0)
                return r;
        r = fd_get_mount_attr(s->tree_fd, &want);
        if (r < 0)
                return r;
        if (want & ~has & TUCK_ATTR_MASK) {
                log_debug("%s: beneath its top is the tree of a swap stopped halfway (mount %d), without flags "
                          "wanted now: swapping anew.", s->path, under_id);
                res->left_halfway = true;
                return 0;
        }
        log_debug("%s: beneath its top (mount %" PRIu64 ") is the tree of a swap stopped halfway (mount %d), "
                  "carrying its %u mounts: finishing.", s->path, s->top_id, under_id, kept);
        r = umount_fd(top);
        if (r < 0)
                return swap_fail(res, SWAP_HIDDEN, r, "the new overlay is beneath the old one from a swap stopped "
                                 "halfway, and the old one cannot be unmounted: %s", strerror(-r));
        res->stage = SWAP_DONE;
        res->new_dev = st.st_dev;
        res->carried = kept;
        res->finished = true;
        return 1;
}

int swap_replace_top(const SwapSpec *spec, SwapResult *res) {
        _cleanup_close_ int proc = -EBADF, top = -EBADF, full = -EBADF;
        _cleanup_free_ char *error = NULL, *path = NULL;
        SwapSpec copy = *spec, *s = &copy;
        struct stat st;
        int r;

        *res = (SwapResult) { .stage = SWAP_UNTOUCHED };
        /* Absolute: a namespace's view names its hierarchy relative to its root ("usr"). */
        path = spec->path[0] == '/' ? strdup(spec->path) : strjoin("/", spec->path);
        if (!path)
                return -ENOMEM;
        s->path = path;
        top = open_top(s->path, s->top_id);
        if (top == -ESTALE)
                return swap_fail(res, SWAP_UNTOUCHED, top, "another mount than the one planned for is on top of "
                                 "'%s' now", s->path);
        if (top < 0 || fstat(top, &st) < 0) {
                r = top < 0 ? top : -errno;
                return swap_fail(res, SWAP_UNTOUCHED, r, "cannot open '%s': %s", s->path, strerror(-r));
        }
        if (s->proc_fd < 0) {
                proc = RET_NERRNO(open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
                if (proc < 0)
                        return swap_fail(res, SWAP_UNTOUCHED, proc, "cannot open /proc: %s", strerror(-proc));
        }
        if (s->how == SWAP_BENEATH && s->finish_halfway) {
                r = swap_finish_halfway(s, s->proc_fd >= 0 ? s->proc_fd : proc, top, res);
                if (r != 0)
                        return r < 0 ? r : 0;
        }
        r = carry_children(&(CarrySpec) {
                                .proc_fd = s->proc_fd >= 0 ? s->proc_fd : proc,
                                .path = s->path,
                                .top_dev = st.st_dev,
                                .tree_fd = s->tree_fd,
                                .deadline = s->deadline,
                                .budget = s->budget,
                           }, &full, &res->carried, &error);
        if (r < 0)
                return swap_fail(res, SWAP_UNTOUCHED, r, "%s", error ?: strerror(-r));
        if (fstat(full, &st) < 0)
                return swap_fail(res, SWAP_UNTOUCHED, -errno, "cannot stat the new overlay: %s", strerror(errno));
        res->new_dev = st.st_dev;
        return swap_attach(s, top, full, res);
}

int send_with_fd(int sock, const void *buf, size_t size, int fd) {
        char control[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = { .iov_base = (void *) buf, .iov_len = size };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
        };
        struct cmsghdr *c;

        if (fd >= 0) {
                msg.msg_control = control;
                msg.msg_controllen = sizeof(control);
                c = CMSG_FIRSTHDR(&msg);
                c->cmsg_level = SOL_SOCKET;
                c->cmsg_type = SCM_RIGHTS;
                c->cmsg_len = CMSG_LEN(sizeof(int));
                memcpy(CMSG_DATA(c), &fd, sizeof(int));
        }
        return sendmsg(sock, &msg, MSG_NOSIGNAL) < 0 ? -errno : 0;
}

int send_fd(int sock, int fd) {
        return send_with_fd(sock, "f", 1, fd);
}

ssize_t receive_with_fd(int sock, void *buf, size_t size, int *ret_fd) {
        char control[CMSG_SPACE(sizeof(int))] = {};
        struct iovec iov = { .iov_base = buf, .iov_len = size };
        struct msghdr msg = {
                .msg_iov = &iov,
                .msg_iovlen = 1,
                .msg_control = control,
                .msg_controllen = sizeof(control),
        };
        struct cmsghdr *c;
        ssize_t k;

        *ret_fd = -EBADF;
        k = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC | MSG_DONTWAIT);
        if (k < 0)
                return -errno;
        c = CMSG_FIRSTHDR(&msg);
        if (c && c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
                memcpy(ret_fd, CMSG_DATA(c), sizeof(int));
        if (msg.msg_flags & (MSG_CTRUNC | MSG_TRUNC)) {
                *ret_fd = safe_close(*ret_fd);
                return -EPROTO;
        }
        return k;
}

int receive_fd(int sock) {
        struct pollfd p = { .fd = sock, .events = POLLIN };
        char byte;
        ssize_t k;
        int fd;

        if (poll(&p, 1, -1) < 0)
                return -errno;
        k = receive_with_fd(sock, &byte, 1, &fd);
        if (k <= 0) {
                safe_close(fd);
                return k < 0 ? (int) k : -EIO;
        }
        return fd >= 0 ? fd : -EIO;
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
        _cleanup_close_pair_ int pair[2] = { -EBADF, -EBADF };
        int status, fd, r;
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
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                pair[0] = safe_close(pair[0]);
                r = peel_child(path, peel, pair[1]);
                _exit(r < 0 ? (-r & 0xff) : 0);
        }
        pair[1] = safe_close(pair[1]);
        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
                return WIFEXITED(status) ? -(int) WEXITSTATUS(status) : -EIO;
        fd = receive_fd(pair[0]);
        if (fd < 0)
                return fd;
        *ret_fd = fd;
        return 0;
}
