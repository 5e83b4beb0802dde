/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "heal.h"
#include "macro.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "util.h"

static const char *const heal_action_table[_HEAL_ACTION_MAX] = {
        [HEAL_NONE] = "none",
        [HEAL_SWAP] = "swap",
        [HEAL_ATTR] = "restore-flags",
        [HEAL_PIN] = "pin",
};

const char *heal_action_to_string(HealAction a) {
        return a >= 0 && a < _HEAL_ACTION_MAX ? heal_action_table[a] : NULL;
}

HealAction heal_plan(const NamespaceView *before, const NamespaceView *now, dev_t new_dev) {
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
static int heal_in_namespace(const NamespaceView *now, HealAction action, int tree_fd, uint64_t attr) {
        _cleanup_close_ int top_fd = -EBADF;
        uint64_t mnt_id, cur_attr;
        dev_t dev;
        int r;

        top_fd = openat_in_root(AT_FDCWD, now->path, O_PATH | O_DIRECTORY);
        if (top_fd < 0)
                return -top_fd;
        r = fd_get_mount(top_fd, &mnt_id, &dev, &cur_attr);
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

int heal_apply(const NamespaceView *now, HealAction action, int host_fd, uint64_t attr) {
        _cleanup_close_ int ns_fd = -EBADF, root_fd = -EBADF, tree_fd = -EBADF;
        struct stat st;
        pid_t child;
        int status;

        if (action == HEAL_NONE)
                return 0;
        if (action != HEAL_SWAP && action != HEAL_ATTR && action != HEAL_PIN)
                return -EINVAL;

        ns_fd = proc_open(now->pid, "ns/mnt", O_RDONLY);
        if (ns_fd < 0)
                return ns_fd;
        if (fstat(ns_fd, &st) < 0)
                return -errno;
        if (st.st_ino != now->ns_ino)
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
                namespace_view_done(&r[i].view);
        free(r);
}

int heal_snapshot(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                  NamespaceView **ret, size_t *ret_n) {
        return namespaces_scan(root, hierarchy, devs, n_devs, NSSCAN_ONLY_OURS | NSSCAN_SKIP_SELF, ret, ret_n);
}

static const NamespaceView *find_before(const NamespaceView *before, size_t n, uint64_t ns_ino) {
        for (size_t i = 0; i < n; i++)
                if (before[i].ns_ino == ns_ino)
                        return before + i;
        return NULL;
}

int heal_after_swap(const char *root, const char *hierarchy, int host_fd,
                    const dev_t *devs, size_t n_devs,
                    const NamespaceView *before, size_t n_before, bool heal,
                    HealReport **ret, size_t *ret_n) {
        HealReport *reports = NULL;
        NamespaceView *now = NULL;
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
        r = heal_snapshot(root, hierarchy, all, n_devs + 1, &now, &n_now);
        free(all);
        if (r < 0)
                return r;

        reports = calloc(n_now ? n_now : 1, sizeof *reports);
        if (!reports) {
                namespace_views_free(now, n_now);
                return -ENOMEM;
        }

        for (size_t i = 0; i < n_now; i++) {
                const NamespaceView *b = find_before(before, n_before, now[i].ns_ino);
                HealAction a;

                /* A namespace we did not see before the swap: its current flags
                 * are the best record of what it wants. */
                a = heal_plan(b ?: &now[i], &now[i], st.st_dev);
                if (a == HEAL_NONE) {
                        namespace_view_done(&now[i]);
                        continue;
                }

                reports[n] = (HealReport) {
                        .view = now[i],
                        .want_attr = (b ?: &now[i])->attr | (a == HEAL_SWAP ? now[i].attr : 0),
                        .action = a,
                        .result = 1,
                };
                now[i] = (NamespaceView) {};
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
static int view_top_would_receive(const NamespaceView *v) {
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

int heal_pin_loosenable(const NamespaceView *views, size_t n, uint64_t host_attr) {
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
