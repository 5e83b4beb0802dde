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

/* In the child: set up the namespace, say how it went, live until the parent has pinned it. */
_Noreturn static void staging_child(const char *run_dir, int cpu, int ready_fd, int done_fd) {
        char result[64] = {}, byte;
        const char *step;

        if (cpu >= 0) {
                cpu_set_t one;

                CPU_ZERO(&one);
                CPU_SET(cpu, &one);
                (void) sched_setaffinity(0, sizeof(one), &one);
        }
        step = staging_child_setup(run_dir);
        /* One byte: 0, or the errno of the failed step followed by its name. */
        if (step)
                snprintf(result, sizeof(result), "%c%s", (char) errno, step);
        (void) !write(ready_fd, result, step ? strlen(result + 1) + 1 : 1);
        (void) !read(done_fd, &byte, 1);
        _exit(step ? EXIT_FAILURE : EXIT_SUCCESS);
}

/* Bind-mount the child's namespace file at pin. */
static int pin_namespace(pid_t pid, const char *pin) {
        _cleanup_close_ int ns_fd = proc_open(pid, "ns/mnt", O_RDONLY);
        char fd_path[64];

        if (ns_fd < 0)
                return ns_fd;
        snprintf(fd_path, sizeof(fd_path), "/proc/self/fd/%d", ns_fd);
        return RET_NERRNO(mount(fd_path, pin, NULL, MS_BIND, NULL));
}

/*
 * One attempt: a child sets up the namespace (on @cpu if >= 0) and we pin
 * it. *ret_refused: the kernel refused the pin as a namespace loop.
 */
static int staging_create_on(const char *run_dir, const char *pin, int cpu, bool *ret_refused) {
        _cleanup_close_pair_ int ready[2] = { -EBADF, -EBADF }, done[2] = { -EBADF, -EBADF };
        _cleanup_close_ int fd = -EBADF;
        char result[64] = {};
        pid_t pid;
        int r;

        *ret_refused = false;
        /* The pin's mount point: an empty file. */
        fd = open(pin, O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (fd < 0)
                return -errno;
        if (pipe2(ready, O_CLOEXEC) < 0 || pipe2(done, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0)
                staging_child(run_dir, cpu, ready[1], done[0]);

        ready[1] = safe_close(ready[1]);
        if (read(ready[0], result, sizeof(result) - 1) < 1)
                r = -EIO;
        else if (result[0] != 0)
                r = log_debug_errno((unsigned char) result[0], "Setting up the staging namespace failed at %s: %m",
                                    result + 1);
        else {
                r = pin_namespace(pid, pin);
                *ret_refused = r == -EINVAL;
                if (r < 0)
                        log_debug_errno(r, "Failed to pin the staging namespace at '%s': %m", pin);
        }
        (void) !write(done[1], "x", 1);
        (void) waitpid(pid, NULL, 0);
        return r;
}

/*
 * The pin is a bind mount of the new namespace's nsfs file into ours, and
 * the kernel allows that only for a namespace younger than ours, so that
 * namespaces cannot pin each other in a reference loop (fs/namespace.c,
 * mnt_ns_loop(): -EINVAL if current->nsproxy->mnt_ns's ID >= the target's).
 *
 * Up to 6.17, and on 6.1, the ID is one global counter (alloc_mnt_ns():
 * atomic64_inc_return(&mnt_ns_seq)): a namespace created now is always
 * younger than ours and the first attempt works. 6.18 takes mount namespace
 * IDs from the namespace cookie all namespace types share (kernel/nstree.c
 * ns_tree_gen_id() -> gen_cookie_next(), include/linux/cookie.h), which
 * hands each CPU a batch of 4096 IDs at a time: an ID taken now on one CPU
 * can be lower than ours if ours came from another CPU's later batch
 * (measured on 6.18.44, 2 CPUs: inside a namespace with ID 7623, new ones
 * got 3995 on CPU 0 and 7624 on CPU 1). On any one CPU the IDs only grow,
 * so the CPU that created our namespace always gives a younger one; we
 * cannot tell which CPU that was, so each CPU we may run on is tried in
 * turn. (The series that followed 6.18, "nstree: assign fixed ids to the
 * initial namespaces", went back to one counter.) A real host's namespace
 * is the boot-time one, with the lowest ID of all: the first attempt works
 * there; the retries matter in nested namespaces such as our tests.
 */
static int staging_create(const char *run_dir, const char *pin) {
        cpu_set_t cpus;
        bool refused;
        int r;

        r = staging_create_on(run_dir, pin, -1, &refused);
        if (!refused || sched_getaffinity(0, sizeof(cpus), &cpus) < 0)
                return r;
        for (int cpu = 0; cpu < CPU_SETSIZE && refused; cpu++)
                if (CPU_ISSET(cpu, &cpus)) {
                        log_debug("Retrying the staging namespace on CPU %d.", cpu);
                        r = staging_create_on(run_dir, pin, cpu, &refused);
                }
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
        s->root_fd = safe_close(s->root_fd);
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
        /* setns() resets root and cwd to the namespace's; put back exactly what we had.
         * Without our namespace and root, every later step would take the staging
         * namespace's mounts for the host's, with root privileges: there is no safe way
         * on, so stop here. (The next run detaches what this one staged:
         * staging_detach_orphans().) */
        if (setns(s->host_ns_fd, CLONE_NEWNS) < 0 || fchdir(s->host_root_fd) < 0 || chroot(".") < 0) {
                log_error_errno(errno, "Cannot leave the staging namespace: %m; stopping here.");
                abort();
        }
        s->inside = false;
        /* The working directory only matters to the caller's relative paths (tuck uses none):
         * one it may no longer enter (a root-squashed NFS, someone's FUSE) is no reason to stop. */
        if (fchdir(s->host_cwd_fd) < 0) {
                log_warning_errno(errno, "Cannot return to the working directory: %m; working in / instead.");
                if (chdir("/") < 0)
                        return -errno;
        }
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

/* Is something mounted at rel (below dir_fd), not just its directory there? */
static int mounted_at(int dir_fd, const char *rel) {
        _cleanup_free_ char *parent = strdup(rel);
        uint64_t a, b;
        char *slash;

        if (!parent)
                return -ENOMEM;
        slash = strrchr(parent, '/');
        if (slash)
                *slash = 0;
        /* A mount point is on another mount than its parent directory. */
        if (path_get_mnt_id(dir_fd, rel, &a) < 0 || path_get_mnt_id(dir_fd, slash ? parent : ".", &b) < 0)
                return 0;
        return a != b;
}

int staging_is_mounted(Staging *s, const char *rel) {
        if (!s->inside)
                return -EINVAL;
        return mounted_at(AT_FDCWD, rel);
}

/* From outside: the namespace's root, opened the first time. */
static int staging_root(Staging *s) {
        int r;

        if (s->root_fd >= 0)
                return 0;
        r = staging_enter(s);
        if (r >= 0) {
                s->root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (s->root_fd < 0)
                        r = -errno;
        }
        (void) staging_leave(s);
        return r;
}

int staging_open_mounted(Staging *s, const char *rel) {
        int r;

        if (!s->inside) {
                r = staging_root(s);
                if (r >= 0)
                        r = mounted_at(s->root_fd, rel);
                if (r > 0)
                        return RET_NERRNO(openat(s->root_fd, rel, O_PATH | O_DIRECTORY | O_CLOEXEC));
                return r == 0 ? -ENOENT : r;
        }
        r = staging_enter(s);
        if (r >= 0)
                r = staging_is_mounted(s, rel);
        if (r > 0)
                r = staging_open_path(s, rel);
        else if (r == 0)
                r = -ENOENT;
        (void) staging_leave(s);
        return r;
}

const char *staging_image_path(char buf[static STAGING_PATH_MAX], unsigned id) {
        snprintf(buf, STAGING_PATH_MAX, "i/%u", id);
        return buf;
}

static bool staging_table_has(const StagingTable *t, const char *name) {
        char *end;
        unsigned long id = strtoul(name, &end, 10);

        if (*end != 0)
                return false;
        for (size_t i = 0; i < t->n_images; i++)
                if (t->images[i].id == id)
                        return true;
        return false;
}

void staging_detach_orphans(Staging *s, const StagingTable *t) {
        static const char * const dirs[] = { "i", "o" };

        for (size_t k = 0; k < ELEMENTSOF(dirs); k++) {
                _cleanup_closedir_ DIR *d = opendir_at(AT_FDCWD, dirs[k]);

                for (struct dirent *de; d && (de = readdir_no_dot(d)); ) {
                        _cleanup_free_ char *rel = NULL;

                        if (streq(dirs[k], "i") && staging_table_has(t, de->d_name))
                                continue;
                        rel = path_join(dirs[k], de->d_name);
                        if (!rel)
                                break;
                        log_debug("Detaching orphaned staging mount %s.", rel);
                        (void) staging_detach(s, rel);
                }
        }
}

void staging_table_drop_unmounted(Staging *s, StagingTable *t) {
        for (size_t i = 0; i < t->n_images; ) {
                char rel[STAGING_PATH_MAX];

                if (staging_is_mounted(s, staging_image_path(rel, t->images[i].id)) > 0) {
                        i++;
                        continue;
                }
                log_debug("Staged image %u ('%s') is not mounted any more: forgotten.", t->images[i].id,
                          t->images[i].path);
                staging_table_remove(t, t->images[i].id);
        }
}

int staging_count_mounts(Staging *s) {
        _cleanup_close_ int proc = -EBADF;
        _cleanup_free_ char *text = NULL;
        int n = 0, r;

        /* No /proc in there: open it here; mountinfo opened inside shows the staging namespace. */
        proc = open("/proc/thread-self", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (proc < 0)
                return -errno;
        r = staging_enter(s);
        if (r < 0)
                return r;
        r = read_full_file_at(proc, "mountinfo", 64 * 1024 * 1024, &text);
        (void) staging_leave(s);
        if (r < 0)
                return r;
        for (const char *p = text; (p = strchr(p, '\n')); p++)
                n++;
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
