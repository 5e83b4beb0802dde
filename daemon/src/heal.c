/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heal.h"
#include "macro.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "nsscan.h"

#ifndef STATX_MNT_ID
#define STATX_MNT_ID 0x00001000U
#endif

static const char *const heal_action_table[_HEAL_ACTION_MAX] = {
        [HEAL_NONE] = "none",
        [HEAL_SWAP] = "swap",
        [HEAL_ATTR] = "restore-flags",
        [HEAL_PIN] = "pin",
};

const char *heal_action_to_string(HealAction a) {
        return a >= 0 && a < _HEAL_ACTION_MAX ? heal_action_table[a] : NULL;
}

void ns_view_done(NsView *v) {
        if (!v)
                return;
        free(v->path);
        free(v->unit);
        free(v->machine);
        *v = (NsView) {};
}

void ns_views_free(NsView *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                ns_view_done(v + i);
        free(v);
}

static int openat2_in_root(int root_fd, const char *path, int flags) {
        struct open_how how = {
                .flags = flags | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };

        return RET_NERRNO((int) syscall(SYS_openat2, root_fd, path, &how, sizeof how));
}

static int proc_open(pid_t pid, const char *what, int flags) {
        char p[64];

        snprintf(p, sizeof p, "/proc/%d/%s", (int) pid, what);
        return RET_NERRNO(open(p, flags | O_CLOEXEC));
}

static int fd_inode(int fd, uint64_t *ret_ino, dev_t *ret_dev) {
        struct stat st;

        if (fstat(fd, &st) < 0)
                return negative_errno();
        if (ret_ino)
                *ret_ino = st.st_ino;
        if (ret_dev)
                *ret_dev = st.st_dev;
        return 0;
}

/* Top mount at an O_PATH fd: its id, its st_dev and its per-mount flags. */
static int fd_mount_info(int fd, uint64_t *ret_mnt_id, dev_t *ret_dev, uint64_t *ret_attr) {
        struct statx sx;
        int r;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) < 0)
                return negative_errno();
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        r = path_get_mount_attr(fd, "", ret_attr);
        if (r < 0)
                return r;

        *ret_mnt_id = sx.stx_mnt_id;
        *ret_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        *ret_attr &= TUCK_ATTR_MASK;
        return 0;
}

/* "/a/b/usr" under root "/a/b" → "usr"; root "/" → "usr". */
static const char *path_relative_to_root(const char *root, const char *path) {
        size_t n = strlen(root);

        while (n > 0 && root[n - 1] == '/')
                n--;
        if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != 0))
                return NULL;
        path += n;
        while (*path == '/')
                path++;
        return *path ? path : ".";
}

int ns_view_read(pid_t pid, const char *root, const char *hierarchy, NsView *ret) {
        _cleanup_close_ int ns_fd = -EBADF, root_fd = -EBADF, fd = -EBADF;
        NsView v = { .pid = pid };
        struct stat our_root, their_root;
        const char *path;
        ssize_t l;
        int r;

        ns_fd = proc_open(pid, "ns/mnt", O_RDONLY);
        if (ns_fd < 0)
                return ns_fd;
        r = fd_inode(ns_fd, &v.ns_ino, NULL);
        if (r < 0)
                return r;

        root_fd = proc_open(pid, "root", O_PATH | O_DIRECTORY);
        if (root_fd < 0)
                return root_fd;
        if (fstat(root_fd, &their_root) < 0 || stat("/", &our_root) < 0)
                return negative_errno();
        v.own_root = their_root.st_dev != our_root.st_dev || their_root.st_ino != our_root.st_ino;

        /* A container names the hierarchy relative to its own root. */
        path = v.own_root ? path_relative_to_root(root, hierarchy) : hierarchy;
        if (!path)
                return -EINVAL;
        fd = openat2_in_root(root_fd, path, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        r = fd_mount_info(fd, &v.mnt_id, &v.dev, &v.attr);
        if (r < 0)
                return r;

        v.path = strdup(path);
        if (!v.path)
                return -ENOMEM;

        fd = safe_close(fd);
        fd = proc_open(pid, "comm", O_RDONLY);
        if (fd >= 0) {
                l = read(fd, v.comm, sizeof v.comm - 1);
                v.comm[l > 0 ? l : 0] = 0;
                v.comm[strcspn(v.comm, "\n")] = 0;
        }
        (void) process_identify(pid, &v.unit, &v.machine);

        *ret = v;
        return 0;
}

static bool dev_in(dev_t d, const dev_t *devs, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (devs[i] == d)
                        return true;
        return false;
}

static bool ns_seen(const NsView *views, size_t n, uint64_t ino) {
        for (size_t i = 0; i < n; i++)
                if (views[i].ns_ino == ino)
                        return true;
        return false;
}

int ns_views_scan(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                  NsView **ret, size_t *ret_n) {
        NsView *views = NULL;
        size_t n = 0;
        uint64_t own_ns;
        struct stat st;
        struct dirent *de;
        DIR *d;

        if (stat("/proc/self/ns/mnt", &st) < 0)
                return negative_errno();
        own_ns = st.st_ino;

        d = opendir("/proc");
        if (!d)
                return negative_errno();

        while ((de = readdir(d))) {
                NsView v;
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                char p[64];

                if (*end || pid <= 0)
                        continue;
                /* Cheap dedupe before reading the whole view. */
                snprintf(p, sizeof p, "/proc/%ld/ns/mnt", pid);
                if (stat(p, &st) < 0 || st.st_ino == own_ns || ns_seen(views, n, st.st_ino))
                        continue;
                if (ns_view_read((pid_t) pid, root, hierarchy, &v) < 0)
                        continue;       /* gone, a kernel thread, or no such path there */
                if (!dev_in(v.dev, devs, n_devs)) {
                        ns_view_done(&v);
                        continue;
                }

                NsView *nv = realloc(views, (n + 1) * sizeof *views);
                if (!nv) {
                        ns_view_done(&v);
                        closedir(d);
                        ns_views_free(views, n);
                        return -ENOMEM;
                }
                views = nv;
                views[n++] = v;
        }
        closedir(d);

        *ret = views;
        *ret_n = n;
        return 0;
}

HealAction heal_plan(const NsView *before, const NsView *now, dev_t new_dev) {
        if (now->dev != new_dev)
                return HEAL_SWAP;
        if ((before->attr & ~now->attr) & TUCK_ATTR_MASK)
                return HEAL_ATTR;
        return HEAL_NONE;
}

/*
 * Runs in the forked child, inside the target namespace, rooted at its root.
 * Returns 0 or a positive errno (the child's exit status).
 */
static int heal_in_namespace(const NsView *now, HealAction action, int tree_fd, uint64_t attr) {
        _cleanup_close_ int top_fd = -EBADF;
        uint64_t mnt_id, cur_attr;
        dev_t dev;
        int r;

        top_fd = openat2_in_root(AT_FDCWD, now->path, O_PATH | O_DIRECTORY);
        if (top_fd < 0)
                return -top_fd;
        r = fd_mount_info(top_fd, &mnt_id, &dev, &cur_attr);
        if (r < 0)
                return -r;
        if (mnt_id != now->mnt_id)
                return ESTALE;          /* something else changed it since we looked */

        switch (action) {
        case HEAL_SWAP:
                /* Same rule as the host's swap: attach beneath the live top, then
                 * drop the top; readers see old, then new, never the base. */
                if (move_mount(tree_fd, "", top_fd, "",
                               MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH | MOVE_MOUNT_BENEATH) < 0)
                        return errno;
                top_fd = safe_close(top_fd);
                if (umount2(now->path, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                        return errno;
                return 0;

        case HEAL_ATTR: {
                struct mount_attr a = { .attr_set = attr & TUCK_ATTR_MASK };

                if (mount_setattr(top_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
                        return errno;
                return 0;
        }

        case HEAL_PIN: {
                _cleanup_close_ int clone_fd = -EBADF;
                struct mount_attr a = { .attr_set = attr & TUCK_ATTR_MASK, .propagation = MS_PRIVATE };

                clone_fd = open_tree(top_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
                if (clone_fd < 0)
                        return errno;
                if (mount_setattr(clone_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
                        return errno;
                if (move_mount(clone_fd, "", top_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                        return errno;
                return 0;
        }

        case HEAL_NONE:
        case _HEAL_ACTION_MAX:
                break;
        }
        return 0;
}

/* A detached, private clone of the host's new top with the stale top's flags. */
static int heal_make_tree(int host_fd, uint64_t attr) {
        _cleanup_close_ int fd = -EBADF;
        struct mount_attr a = {
                .attr_set = attr & TUCK_ATTR_MASK,
                /* Private: a shared clone would join the host's peer group and
                 * let mounts made inside the service propagate back out. */
                .propagation = MS_PRIVATE,
        };

        fd = RET_NERRNO(open_tree(host_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
        if (fd < 0)
                return fd;
        if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof a) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

int heal_apply(const NsView *now, HealAction action, int host_fd, uint64_t attr) {
        _cleanup_close_ int ns_fd = -EBADF, root_fd = -EBADF, tree_fd = -EBADF;
        uint64_t ino;
        pid_t child;
        int r, status;

        if (action == HEAL_NONE)
                return 0;
        if (action != HEAL_SWAP && action != HEAL_ATTR && action != HEAL_PIN)
                return -EINVAL;

        ns_fd = proc_open(now->pid, "ns/mnt", O_RDONLY);
        if (ns_fd < 0)
                return ns_fd;
        r = fd_inode(ns_fd, &ino, NULL);
        if (r < 0)
                return r;
        if (ino != now->ns_ino)
                return -ESRCH;          /* the pid was reused by another namespace */
        root_fd = proc_open(now->pid, "root", O_PATH | O_DIRECTORY);
        if (root_fd < 0)
                return root_fd;

        if (action == HEAL_SWAP) {
                tree_fd = heal_make_tree(host_fd, attr);
                if (tree_fd < 0)
                        return tree_fd;
        }

        /* setns(CLONE_NEWNS) needs a task that shares its fs_struct with no one:
         * a fresh child, which also keeps the daemon itself in the host's
         * namespace whatever happens. */
        child = fork();
        if (child < 0)
                return negative_errno();
        if (child == 0) {
                if (setns(ns_fd, CLONE_NEWNS) < 0)
                        _exit(errno);
                if (fchdir(root_fd) < 0 || chroot(".") < 0 || chdir("/") < 0)
                        _exit(errno);
                _exit(heal_in_namespace(now, action, tree_fd, attr));
        }

        while (waitpid(child, &status, 0) < 0)
                if (errno != EINTR)
                        return negative_errno();
        if (!WIFEXITED(status))
                return -EPROTO;
        return -WEXITSTATUS(status);
}

static const char *const stale_policy_table[_STALE_POLICY_MAX] = {
        [STALE_POLICY_HEAL] = "heal",
        [STALE_POLICY_REPORT] = "report",
        [STALE_POLICY_RESTART] = "restart",
};

const char *stale_policy_to_string(StalePolicy p) {
        return p >= 0 && p < _STALE_POLICY_MAX ? stale_policy_table[p] : NULL;
}

StalePolicy stale_policy_from_string(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(stale_policy_table); i++)
                if (s && strcmp(s, stale_policy_table[i]) == 0)
                        return (StalePolicy) i;
        return _STALE_POLICY_INVALID;
}

void heal_reports_free(HealReport *r, size_t n) {
        for (size_t i = 0; i < n; i++)
                ns_view_done(&r[i].view);
        free(r);
}

int heal_snapshot(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                  NsView **ret, size_t *ret_n) {
        return ns_views_scan(root, hierarchy, devs, n_devs, ret, ret_n);
}

static const NsView *find_before(const NsView *before, size_t n, uint64_t ns_ino) {
        for (size_t i = 0; i < n; i++)
                if (before[i].ns_ino == ns_ino)
                        return before + i;
        return NULL;
}

int heal_after_swap(const char *root, const char *hierarchy, int host_fd,
                    const dev_t *devs, size_t n_devs,
                    const NsView *before, size_t n_before, bool heal,
                    HealReport **ret, size_t *ret_n) {
        HealReport *reports = NULL;
        NsView *now = NULL;
        size_t n_now = 0, n = 0;
        dev_t *all = NULL;
        struct stat st;
        int r;

        if (fstat(host_fd, &st) < 0)
                return negative_errno();

        /* Look for namespaces on an old overlay and on the new one (whose
         * flags may have been loosened by propagation). */
        all = malloc((n_devs + 1) * sizeof *all);
        if (!all)
                return -ENOMEM;
        memcpy(all, devs, n_devs * sizeof *all);
        all[n_devs] = st.st_dev;
        r = ns_views_scan(root, hierarchy, all, n_devs + 1, &now, &n_now);
        free(all);
        if (r < 0)
                return r;

        reports = calloc(n_now ? n_now : 1, sizeof *reports);
        if (!reports) {
                ns_views_free(now, n_now);
                return -ENOMEM;
        }

        for (size_t i = 0; i < n_now; i++) {
                const NsView *b = find_before(before, n_before, now[i].ns_ino);
                HealAction a;

                /* A namespace we did not see before the swap: its current flags
                 * are the best record of what it wants. */
                a = heal_plan(b ?: &now[i], &now[i], st.st_dev);
                if (a == HEAL_NONE) {
                        ns_view_done(&now[i]);
                        continue;
                }

                reports[n] = (HealReport) {
                        .view = now[i],
                        .want_attr = (b ?: &now[i])->attr | (a == HEAL_SWAP ? now[i].attr : 0),
                        .action = a,
                        .result = 1,
                };
                now[i] = (NsView) {};
                if (heal)
                        reports[n].result = heal_apply(&reports[n].view, a, host_fd, reports[n].want_attr);
                n++;
        }
        free(now);

        *ret = reports;
        *ret_n = n;
        return 0;
}

/*
 * Would the top mount of @v receive the host's next overlay? Only a copy that
 * receives the host's mount events (a slave) and sits directly on the
 * propagated parent does: the kernel tucks the propagated mount beneath it
 * and the host's umount then removes it. A bind stacked on another mount at
 * the same place (ProtectSystem=full's read-only bind) receives nothing, and
 * pinning it would only keep the old overlay alive underneath.
 */
static int view_top_would_receive(const NsView *v) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_fs *fs, *parent;
        const char *opt;
        int r;

        r = mount_table_read(v->pid, &tb);
        if (r < 0)
                return r;
        fs = mount_table_find_id(tb, (int) v->mnt_id);
        if (!fs)
                return -ESRCH;
        opt = mnt_fs_get_optional_fields(fs);
        if (!opt || !strstr(opt, "master:"))
                return 0;
        parent = mount_table_find_id(tb, mnt_fs_get_parent_id(fs));
        return !(parent && mnt_fs_streq_target(parent, mnt_fs_get_target(fs)));
}

int heal_pin_loosenable(const NsView *views, size_t n, uint64_t host_attr) {
        int pinned = 0;

        for (size_t i = 0; i < n; i++) {
                if (!(views[i].attr & ~host_attr & TUCK_ATTR_MASK))
                        continue;       /* the host's flags would not loosen it */
                if (view_top_would_receive(&views[i]) <= 0)
                        continue;       /* a swap leaves it stale, not loosened */
                if (heal_apply(&views[i], HEAL_PIN, -EBADF, views[i].attr) >= 0)
                        pinned++;
        }
        return pinned;
}
