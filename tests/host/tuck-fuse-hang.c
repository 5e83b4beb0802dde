/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * tuck-fuse-hang: a FUSE file system that stops answering, for the tests of
 * the bounded scan (tuckd-hostile.sh, stale-pidfd.sh). Raw /dev/fuse, no
 * libfuse: a handful of requests, answered as an empty directory would be
 * (or one holding the directory of --dir).
 *
 *   tuck-fuse-hang [--answer=N] [--hold=inside] [--user=UID] [--dir=NAME [--bind=PATH] [--xattr=NAME=VALUE]] DIR
 *
 * Mounts an empty FUSE file system on DIR (in the caller's mount namespace:
 * start it in one of its own), starts a process whose root is that file
 * system (chroot, then a mount namespace of its own: a container whose root
 * is fuse-overlayfs, say) and prints "ready PID" with that process's pid.
 * From then on it answers every request until the (N+1)th LOOKUP (default
 * N = 0, the first): that one, and every request after it, it reads and
 * never answers; it prints "hung LOOKUP NAME". The task that asked waits for
 * the answer; once the request is read not even SIGKILL ends that wait
 * (fs/fuse/dev.c request_wait_answer()). SIGUSR1 answers what it holds
 * (LOOKUP: ENOENT) and every request after it, and prints "released".
 * SIGTERM ends the server: closing /dev/fuse aborts the connection, and
 * every waiter wakes with ENOTCONN. SIGUSR2 toggles refusing ACCESS
 * requests (EACCES), which the kernel asks for chdir() even by root: a
 * working directory root can no longer enter, as on a root-squashed NFS.
 *
 * --dir=NAME: the root holds one directory, NAME, looked up afresh each
 * time (no entry is valid for any time); --bind=PATH: the container binds a
 * clone of PATH (taken before its chroot) onto /NAME, as a container's own
 * bind of the host's /usr. --hold=inside: the request held is the first
 * LOOKUP from a process in the container's mount namespace (someone who
 * entered it: a heal), not from anyone else. --xattr=NAME=VALUE: the
 * directory NAME has that one extended attribute (any other reads as absent),
 * while listing them stays unimplemented (ENOSYS): the kernel then answers
 * listxattr() with ENOTSUP and getxattr() with the value. --user=UID: the
 * mount says user UID made it (user_id=, group_id=), as fusermount3 writes
 * for a user's mount; every file still says it is root's, as such a
 * server may say.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/fuse.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/signalfd.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#define BUFSIZE (FUSE_MIN_READ_BUFFER + 1024 * 1024)

static int fuse_fd = -1;
static const char *arg_dir, *arg_bind, *arg_xattr_name, *arg_xattr_value;
static unsigned arg_user;
static bool deny_access;
#define DIR_ID 2

static void reply(uint64_t unique, int error, const void *arg, size_t size) {
        struct fuse_out_header h = {
                .len = (uint32_t) (sizeof(h) + (error ? 0 : size)),
                .error = error,
                .unique = unique,
        };
        struct iovec iov[2] = { { &h, sizeof(h) }, { (void *) arg, error ? 0 : size } };

        if (writev(fuse_fd, iov, 2) < 0 && errno != ENOENT)     /* ENOENT: the request was interrupted */
                fprintf(stderr, "tuck-fuse-hang: reply: %m\n");
}

static void root_attr(struct fuse_attr *a) {
        *a = (struct fuse_attr) {
                .ino = FUSE_ROOT_ID,
                .mode = S_IFDIR | 0755,
                .nlink = 2,
                .blksize = 4096,
        };
}

/* One request; false if it is the one held back. */
static bool answer(const struct fuse_in_header *in, const void *arg) {
        switch (in->opcode) {
        case FUSE_INIT: {
                const struct fuse_init_in *i = arg;
                struct fuse_init_out o = {
                        .major = FUSE_KERNEL_VERSION,
                        .minor = 31,
                        .max_readahead = i->max_readahead,
                        .max_background = 16,
                        .congestion_threshold = 12,
                        .max_write = 4096,
                        .time_gran = 1,
                };
                reply(in->unique, 0, &o, sizeof(o));
                return true;
        }
        case FUSE_GETATTR: {
                /* Valid for no time at all: every look at it asks again. */
                struct fuse_attr_out o = {};

                root_attr(&o.attr);
                o.attr.ino = in->nodeid;
                reply(in->unique, 0, &o, sizeof(o));
                return true;
        }
        case FUSE_STATFS: {
                struct fuse_statfs_out o = { .st = { .bsize = 4096, .namelen = 255, .frsize = 4096 } };

                reply(in->unique, 0, &o, sizeof(o));
                return true;
        }
        case FUSE_OPENDIR: {
                struct fuse_open_out o = {};

                reply(in->unique, 0, &o, sizeof(o));
                return true;
        }
        case FUSE_READDIR: {
                /* The root lists the directory of --dir (once: from offset 0), anything else is empty. */
                const struct fuse_read_in *r = arg;
                char out[FUSE_DIRENT_ALIGN(FUSE_NAME_OFFSET + NAME_MAX)] = {};
                struct fuse_dirent *d = (struct fuse_dirent *) out;
                size_t len;

                if (!arg_dir || in->nodeid != FUSE_ROOT_ID || r->offset > 0) {
                        reply(in->unique, 0, NULL, 0);
                        return true;
                }
                len = strlen(arg_dir);
                *d = (struct fuse_dirent) { .ino = DIR_ID, .off = 1, .namelen = (uint32_t) len, .type = DT_DIR };
                memcpy(d->name, arg_dir, len);
                len = FUSE_DIRENT_SIZE(d);
                reply(in->unique, 0, out, len <= r->size ? len : 0);
                return true;
        }
        case FUSE_RELEASEDIR:
        case FUSE_FLUSH:
                reply(in->unique, 0, NULL, 0);
                return true;
        case FUSE_LOOKUP:
                if (arg_dir && in->nodeid == FUSE_ROOT_ID && strcmp(arg, arg_dir) == 0) {
                        struct fuse_entry_out o = { .nodeid = DIR_ID, .generation = 1 };

                        root_attr(&o.attr);
                        o.attr.ino = DIR_ID;
                        reply(in->unique, 0, &o, sizeof(o));
                } else
                        reply(in->unique, -ENOENT, NULL, 0);
                return true;
        case FUSE_GETXATTR: {
                const struct fuse_getxattr_in *g = arg;
                size_t len = arg_xattr_value ? strlen(arg_xattr_value) : 0;

                if (!arg_xattr_name)
                        reply(in->unique, -ENOSYS, NULL, 0);
                else if (in->nodeid != DIR_ID || strcmp((const char *) (g + 1), arg_xattr_name) != 0)
                        reply(in->unique, -ENODATA, NULL, 0);
                else if (g->size == 0) {
                        struct fuse_getxattr_out o = { .size = (uint32_t) len };

                        reply(in->unique, 0, &o, sizeof(o));
                } else if (g->size < len)
                        reply(in->unique, -ERANGE, NULL, 0);
                else
                        reply(in->unique, 0, arg_xattr_value, len);
                return true;
        }
        case FUSE_ACCESS:
                /* Answered (not ENOSYS, which would stop the kernel asking): SIGUSR2 toggles a refusal. */
                reply(in->unique, deny_access ? -EACCES : 0, NULL, 0);
                return true;
        case FUSE_FORGET:
        case FUSE_BATCH_FORGET:
        case FUSE_INTERRUPT:
                return true;            /* no answer expected (and an interrupt changes nothing) */
        default:
                reply(in->unique, -ENOSYS, NULL, 0);
                return true;
        }
}

/* The process whose root is the file system: chroot, a namespace of its own, then wait. */
static _Noreturn void container(const char *dir, int ready) {
        pid_t pid = getpid();
        int tree = -1;
        char target[PATH_MAX];

        close(fuse_fd);                 /* the server's death must abort the connection */
        if (arg_bind) {
                tree = open_tree(AT_FDCWD, arg_bind, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
                if (tree < 0) {
                        fprintf(stderr, "tuck-fuse-hang: open_tree %s: %m\n", arg_bind);
                        _exit(EXIT_FAILURE);
                }
        }
        if (chroot(dir) < 0 || chdir("/") < 0 || unshare(CLONE_NEWNS) < 0) {
                fprintf(stderr, "tuck-fuse-hang: container: %m\n");
                _exit(EXIT_FAILURE);
        }
        snprintf(target, sizeof(target), "/%s", arg_dir ?: "");
        if (tree >= 0 && move_mount(tree, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                fprintf(stderr, "tuck-fuse-hang: bind onto %s: %m\n", target);
                _exit(EXIT_FAILURE);
        }
        (void) !write(ready, &pid, sizeof(pid));
        close(ready);
        for (;;)
                pause();
}

static int setup(const char *dir, int *ret_ready, sigset_t *mask) {
        char opts[160];
        int p[2];
        pid_t pid;

        fuse_fd = open("/dev/fuse", O_RDWR | O_CLOEXEC);
        if (fuse_fd < 0)
                return -errno;
        snprintf(opts, sizeof(opts), "fd=%d,rootmode=40755,user_id=%u,group_id=%u,allow_other", fuse_fd, arg_user,
                 arg_user);
        if (mount("tuck-fuse-hang", dir, "fuse", MS_NOSUID | MS_NODEV, opts) < 0)
                return -errno;
        if (pipe2(p, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                sigprocmask(SIG_UNBLOCK, mask, NULL);
                close(p[0]);
                container(dir, p[1]);
        }
        close(p[1]);
        *ret_ready = p[0];
        return 0;
}

/* Requests read and not answered, to answer on SIGUSR1. */
#define HELD_MAX 256
#define HELD_SIZE 4096
static char held[HELD_MAX][HELD_SIZE];
static unsigned n_held;

static void hold(const struct fuse_in_header *in, size_t size) {
        if (n_held < HELD_MAX)
                memcpy(held[n_held++], in, size < HELD_SIZE ? size : HELD_SIZE);
}

/* The mount namespace inode of a process, 0 if it is gone. */
static ino_t ns_of(pid_t pid) {
        char path[64];
        struct stat st;

        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int) pid);
        return stat(path, &st) < 0 ? 0 : st.st_ino;
}

int main(int argc, char *argv[]) {
        static char buf[BUFSIZE];
        const char *dir = NULL;
        unsigned answer_lookups = 0, lookups = 0;
        bool ready = false, hung = false, released = false, hold_inside = false;
        ino_t container_ns = 0;
        int ready_fd = -1, sig_fd, r;
        sigset_t mask;

        for (int i = 1; i < argc; i++)
                if (strncmp(argv[i], "--answer=", 9) == 0)
                        answer_lookups = (unsigned) atoi(argv[i] + 9);
                else if (strcmp(argv[i], "--hold=inside") == 0)
                        hold_inside = true;
                else if (strncmp(argv[i], "--dir=", 6) == 0)
                        arg_dir = argv[i] + 6;
                else if (strncmp(argv[i], "--user=", 7) == 0)
                        arg_user = (unsigned) atoi(argv[i] + 7);
                else if (strncmp(argv[i], "--bind=", 7) == 0)
                        arg_bind = argv[i] + 7;
                else if (strncmp(argv[i], "--xattr=", 8) == 0 && strchr(argv[i] + 8, '=')) {
                        char *eq = strchr(argv[i] + 8, '=');

                        *eq = 0;
                        arg_xattr_name = argv[i] + 8;
                        arg_xattr_value = eq + 1;
                }
                else
                        dir = argv[i];
        if (!dir || ((arg_bind || arg_xattr_name) && !arg_dir)) {
                fprintf(stderr, "usage: %s [--answer=N] [--hold=inside] [--user=UID] [--dir=NAME [--bind=PATH] "
                        "[--xattr=NAME=VALUE]] DIR\n",
                        argv[0]);
                return 2;
        }

        sigemptyset(&mask);
        sigaddset(&mask, SIGUSR1);
        sigaddset(&mask, SIGUSR2);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        sig_fd = signalfd(-1, &mask, SFD_CLOEXEC);
        r = sig_fd < 0 ? -errno : setup(dir, &ready_fd, &mask);
        if (r < 0) {
                fprintf(stderr, "tuck-fuse-hang: %s\n", strerror(-r));
                return 1;
        }
        setvbuf(stdout, NULL, _IOLBF, 0);

        for (;;) {
                struct pollfd p[3] = {
                        { .fd = fuse_fd, .events = POLLIN },
                        { .fd = sig_fd, .events = POLLIN },
                        { .fd = ready ? -1 : ready_fd, .events = POLLIN },
                };
                const struct fuse_in_header *in = (const void *) buf;
                ssize_t k;

                if (poll(p, 3, -1) < 0 && errno != EINTR)
                        return 1;
                if (p[1].revents & POLLIN) {
                        struct signalfd_siginfo si;

                        if (read(sig_fd, &si, sizeof(si)) != sizeof(si))
                                continue;
                        if (si.ssi_signo == SIGUSR2) {
                                deny_access = !deny_access;
                                printf("access %s\n", deny_access ? "denied" : "allowed");
                                continue;
                        }
                        if (si.ssi_signo != SIGUSR1)
                                return 0;       /* exit closes /dev/fuse: the connection aborts */
                        for (unsigned i = 0; i < n_held; i++) {
                                const struct fuse_in_header *h = (const void *) held[i];

                                answer(h, h + 1);
                        }
                        n_held = 0;
                        released = true;
                        printf("released\n");
                }
                if (p[2].revents & (POLLIN | POLLHUP)) {
                        pid_t pid;

                        if (read(ready_fd, &pid, sizeof(pid)) != sizeof(pid)) {
                                fprintf(stderr, "tuck-fuse-hang: the container did not start\n");
                                return 1;
                        }
                        ready = true;
                        container_ns = ns_of(pid);
                        printf("ready %d\n", (int) pid);
                }
                if (!(p[0].revents & POLLIN))
                        continue;
                k = read(fuse_fd, buf, sizeof(buf));
                if (k < 0 && (errno == EINTR || errno == EAGAIN || errno == ENOENT))
                        continue;
                if (k < 0) {
                        fprintf(stderr, "tuck-fuse-hang: read: %m\n");
                        return errno == ENODEV ? 0 : 1;         /* unmounted */
                }
                if ((size_t) k < sizeof(*in))
                        continue;
                if (!hung && !released && ready && in->opcode == FUSE_LOOKUP &&
                    (!hold_inside || ns_of((pid_t) in->pid) == container_ns) && lookups++ >= answer_lookups) {
                        hung = true;
                        printf("hung LOOKUP %s\n", (const char *) (in + 1));
                }
                else if (hung && !released && in->opcode == FUSE_LOOKUP)
                        printf("held LOOKUP %s\n", (const char *) (in + 1));
                if (hung && !released && in->opcode != FUSE_FORGET && in->opcode != FUSE_BATCH_FORGET &&
                    in->opcode != FUSE_INTERRUPT) {
                        hold(in, (size_t) k);
                        continue;
                }
                answer(in, in + 1);
        }
}
