/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <linux/nsfs.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "staging.h"
#include "util.h"

static const char * const staging_dirs[] = { "i", "b", "o" };

int run_dir_make_private(const char *run_dir) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_fs *top;
        int r;

        r = mkdir_p(run_dir, 0755);
        if (r < 0)
                return r;
        r = mount_table_read(0, &tb);
        if (r < 0)
                return r;
        top = mount_table_find_top(tb, run_dir);
        if (!top && mount(run_dir, run_dir, NULL, MS_BIND, NULL) < 0)
                return -errno;
        /* Idempotent: the self-bind of an earlier run is made private again. */
        return RET_NERRNO(mount(NULL, run_dir, NULL, MS_PRIVATE, NULL));
}

static int pin_path(const char *run_dir, char **ret) {
        *ret = path_join(run_dir, "staging.mnt");
        return *ret ? 0 : -ENOMEM;
}

static int open_pinned(const char *pin) {
        _cleanup_close_ int fd = open(pin, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);

        if (fd < 0)
                return -errno;
        if (ioctl(fd, NS_GET_NSTYPE) != CLONE_NEWNS)
                return -ENOENT;   /* an empty file: the pin is gone (or never was) */
        return TAKE_FD(fd);
}

/* In the child: a fresh namespace whose root is a small private tmpfs. Returns the failed step. */
static const char *staging_child_setup(const char *run_dir) {
        if (unshare(CLONE_NEWNS) < 0)
                return "unshare";
        if (mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
                return "make-private";
        if (mount("tuck-staging", run_dir, "tmpfs", MS_NOSUID | MS_NODEV | MS_NOEXEC, "mode=0700,size=1m") < 0)
                return "tmpfs";
        if (chdir(run_dir) < 0)
                return "chdir";
        /* pivot_root(".", ".") stacks the old root under the new one; detach it. */
        if (syscall(SYS_pivot_root, ".", ".") < 0)
                return "pivot_root";
        if (umount2(".", MNT_DETACH) < 0)
                return "umount-old-root";
        if (chdir("/") < 0)
                return "chdir-root";
        for (size_t i = 0; i < ELEMENTSOF(staging_dirs); i++)
                if (mkdir(staging_dirs[i], 0700) < 0)
                        return "mkdir";
        return NULL;
}

static int staging_create_on(const char *run_dir, const char *pin, int cpu);

/*
 * The pin is a bind mount of the new namespace's nsfs file into ours, which
 * the kernel allows only for a namespace with a higher ID than ours
 * (mnt_ns_loop(): no reference loops). IDs come from per-CPU batches
 * (gen_cookie_next()), so a namespace created now on another CPU may carry a
 * lower ID than one created earlier: -EINVAL. The CPU that created our
 * namespace only hands out higher IDs, so trying each CPU in turn succeeds.
 * (A real host's namespace is the boot-time one: the first try works.)
 */
static int staging_create(const char *run_dir, const char *pin) {
        cpu_set_t cpus;
        int r;

        r = staging_create_on(run_dir, pin, -1);
        if (r != -EINVAL || sched_getaffinity(0, sizeof(cpus), &cpus) < 0)
                return r;
        for (int cpu = 0; cpu < CPU_SETSIZE && r == -EINVAL; cpu++)
                if (CPU_ISSET(cpu, &cpus)) {
                        log_debug("Retrying the staging namespace on CPU %d.", cpu);
                        r = staging_create_on(run_dir, pin, cpu);
                }
        return r;
}

static int staging_create_on(const char *run_dir, const char *pin, int cpu) {
        _cleanup_close_ int fd = -EBADF, nsfd = -EBADF;
        int ready[2] = { -EBADF, -EBADF }, done[2] = { -EBADF, -EBADF };
        char byte = 0, ns_path[64], fd_path[64];
        int r, status;
        pid_t pid;

        fd = open(pin, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0) {
                r = -errno;
                goto out;
        }

        pid = fork();
        if (pid < 0) {
                r = -errno;
                goto out;
        }
        if (pid == 0) {
                const char *step;

                if (cpu >= 0) {
                        cpu_set_t one;

                        CPU_ZERO(&one);
                        CPU_SET(cpu, &one);
                        (void) sched_setaffinity(0, sizeof(one), &one);
                }
                step = staging_child_setup(run_dir);
                char result[64] = {};

                if (step)
                        snprintf(result, sizeof(result), "%c%s", (char) errno, step);
                (void) !write(ready[1], result, step ? strlen(result + 1) + 1 : 1);
                (void) !read(done[0], &byte, 1);   /* live until the parent has pinned us */
                _exit(step ? EXIT_FAILURE : EXIT_SUCCESS);
        }

        safe_close(ready[1]), ready[1] = -EBADF;
        {
                char result[64] = {};

                if (read(ready[0], result, sizeof(result) - 1) < 1)
                        result[0] = EIO;
                byte = result[0];
                if (byte)
                        log_debug("Setting up the staging namespace failed at %s: %s", result + 1,
                                  strerror((unsigned char) byte));
        }
        if (byte == 0) {
                snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/mnt", (int) pid);
                nsfd = open(ns_path, O_RDONLY | O_CLOEXEC);
                if (nsfd < 0)
                        byte = (char) errno;
        }
        if (byte == 0) {
                snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", nsfd);
                if (mount(fd_path, pin, NULL, MS_BIND, NULL) < 0) {
                        byte = (char) errno;
                        log_debug_errno(errno, "Failed to pin the staging namespace at '%s': %m", pin);
                }
        }
        (void) !write(done[1], "x", 1);
        (void) waitpid(pid, &status, 0);
        r = byte ? -(int) (unsigned char) byte : 0;
        if (r < 0)
                log_debug_errno(r, "Failed to create the staging namespace: %m");
out:
        safe_close(ready[0]);
        safe_close(ready[1]);
        safe_close(done[0]);
        safe_close(done[1]);
        return r;
}

int staging_open(const char *run_dir, Staging *ret) {
        _cleanup_free_ char *pin = NULL;
        Staging s = STAGING_INIT;
        struct stat st;
        int r;

        r = pin_path(run_dir, &pin);
        if (r < 0)
                return r;

        s.ns_fd = open_pinned(pin);
        if (s.ns_fd == -ENOENT) {
                r = staging_create(run_dir, pin);
                if (r < 0)
                        return r;
                s.ns_fd = open_pinned(pin);
        }
        if (s.ns_fd < 0)
                return s.ns_fd;
        if (fstat(s.ns_fd, &st) < 0) {
                r = -errno;
                staging_close(&s);
                return r;
        }
        s.ns_ino = st.st_ino;
        *ret = s;
        return 0;
}

void staging_close(Staging *s) {
        if (s->inside)
                (void) staging_leave(s);
        s->ns_fd = safe_close(s->ns_fd);
        s->host_ns_fd = safe_close(s->host_ns_fd);
        s->host_root_fd = safe_close(s->host_root_fd);
        s->host_cwd_fd = safe_close(s->host_cwd_fd);
}

int staging_enter(Staging *s) {
        if (s->inside)
                return 0;
        if (s->host_ns_fd < 0) {
                s->host_ns_fd = open("/proc/self/ns/mnt", O_RDONLY | O_CLOEXEC);
                if (s->host_ns_fd < 0)
                        return -errno;
        }
        s->host_root_fd = safe_close(s->host_root_fd);
        s->host_cwd_fd = safe_close(s->host_cwd_fd);
        s->host_root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        s->host_cwd_fd = open(".", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (s->host_root_fd < 0 || s->host_cwd_fd < 0)
                return -errno;

        if (setns(s->ns_fd, CLONE_NEWNS) < 0)
                return -errno;
        s->inside = true;
        /* setns() put us at the staging namespace's root: relative paths below are from there. */
        return RET_NERRNO(chdir("/"));
}

int staging_leave(Staging *s) {
        if (!s->inside)
                return 0;
        if (setns(s->host_ns_fd, CLONE_NEWNS) < 0)
                return -errno;
        s->inside = false;
        /* setns() reset root and cwd to the namespace's; put back exactly what we had. */
        if (fchdir(s->host_root_fd) < 0 || chroot(".") < 0 || fchdir(s->host_cwd_fd) < 0)
                return -errno;
        return 0;
}

int staging_attach(Staging *s, int mount_fd, const char *rel) {
        if (!s->inside)
                return -EINVAL;
        if (mkdir(rel, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (move_mount(mount_fd, "", AT_FDCWD, rel, MOVE_MOUNT_F_EMPTY_PATH) < 0)
                return -errno;
        return 0;
}

int staging_detach(Staging *s, const char *rel) {
        int r = 0;

        if (!s->inside)
                return -EINVAL;
        /* Everything stacked there, so a half-finished earlier attempt is cleaned up too. */
        while (umount2(rel, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
                ;
        if (errno != EINVAL && errno != ENOENT)
                r = -errno;
        if (rmdir(rel) < 0 && errno != ENOENT && r == 0)
                r = -errno;
        return r;
}

int staging_open_path(Staging *s, const char *rel) {
        if (!s->inside)
                return -EINVAL;
        return RET_NERRNO(open(rel, O_PATH | O_DIRECTORY | O_CLOEXEC));
}

int staging_count_mounts(Staging *s) {
        _cleanup_close_ int proc = -EBADF;
        FILE *f;
        char line[4096];
        int n = 0, fd, r;

        /* No /proc in there: open it here, and mountinfo once inside (it binds to the namespace at open). */
        proc = open("/proc/thread-self", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (proc < 0)
                return -errno;
        r = staging_enter(s);
        if (r < 0)
                return r;
        fd = openat(proc, "mountinfo", O_RDONLY | O_CLOEXEC);
        r = fd < 0 ? -errno : 0;
        (void) staging_leave(s);
        if (r < 0)
                return r;
        f = fdopen(fd, "re");
        if (!f) {
                safe_close(fd);
                return -errno;
        }
        while (fgets(line, sizeof(line), f))
                n++;
        fclose(f);
        return n;
}

int staging_destroy(const char *run_dir) {
        _cleanup_free_ char *pin = NULL;
        int r;

        r = pin_path(run_dir, &pin);
        if (r < 0)
                return r;
        if (umount2(pin, MNT_DETACH | UMOUNT_NOFOLLOW) < 0 && errno != EINVAL && errno != ENOENT)
                return -errno;
        return 0;
}
