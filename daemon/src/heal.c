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
 * In the namespace, the host's rule: the new tree beneath the stale top,
 * then the top goes; readers see old, then new, never the base.
 *
 * The top is unmounted through its own fd (our cwd on it: "." is that
 * mount's root), never by name. A name is resolved once more, by the kernel
 * this time: a container whose /usr is a symlink to where it binds the
 * hierarchy makes umount2("usr", UMOUNT_NOFOLLOW) fail with EINVAL after the
 * beneath move succeeded, and the new tree stayed hidden under the old top,
 * one more (holding one more of our old overlays) on every refresh.
 */
static int heal_swap_here(int top_fd, int tree_fd) {
        if (move_mount(tree_fd, "", top_fd, "",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH | MOVE_MOUNT_BENEATH) < 0)
                return errno;
        if (fchdir(top_fd) < 0)
                return errno;
        if (umount2(".", MNT_DETACH) < 0)
                return errno;
        return 0;
}

/* In the namespace: the lost flags back on the top, in place. */
static int heal_attr_here(int top_fd, uint64_t attr) {
        struct mount_attr a = { .attr_set = attr & TUCK_ATTR_MASK };

        if (mount_setattr(top_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
                return errno;
        return 0;
}

/* In the namespace: a private clone of the top, with its flags, mounted over it. */
static int heal_pin_here(int top_fd, uint64_t attr) {
        _cleanup_close_ int clone_fd = -EBADF;
        struct mount_attr a = { .attr_set = attr & TUCK_ATTR_MASK, .propagation = MS_PRIVATE };

        clone_fd = open_tree(top_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (clone_fd < 0)
                return errno;
        if (mount_setattr(clone_fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
                return errno;
        if (move_mount(clone_fd, "", top_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0)
                return errno;
        return 0;
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
                return heal_swap_here(top_fd, tree_fd);
        case HEAL_ATTR:
                return heal_attr_here(top_fd, attr);
        case HEAL_PIN:
                return heal_pin_here(top_fd, attr);
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
        _cleanup_close_ int proc_fd = -EBADF, ns_fd = -EBADF, root_fd = -EBADF, tree_fd = -EBADF;
        struct stat st;
        pid_t child;
        int status;

        if (action == HEAL_NONE)
                return 0;
        if (action != HEAL_SWAP && action != HEAL_ATTR && action != HEAL_PIN)
                return -EINVAL;

        /* Through the pidfd the scan took: the process it read, never one given its pid since. */
        proc_fd = namespace_view_open_proc(now);
        if (proc_fd < 0)
                return proc_fd;
        ns_fd = RET_NERRNO(openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC));
        if (ns_fd < 0)
                return ns_fd == -ENOENT ? -ESRCH : ns_fd;
        if (fstat(ns_fd, &st) < 0)
                return -errno;
        if (st.st_ino != now->ns_ino)
                return -ESRCH;          /* it moved to another namespace (setns) */
        root_fd = RET_NERRNO(openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (root_fd < 0)
                return root_fd == -ENOENT ? -ESRCH : root_fd;

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

void heal_reports_free(HealReport *r, size_t n) {
        for (size_t i = 0; i < n; i++) {
                namespace_view_done(&r[i].view);
                free(r[i].outcome);
        }
        free(r);
}

int heal_snapshot(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                  NamespaceView **ret, size_t *ret_n) {
        NsScanSpec spec = {
                .root = root, .path = hierarchy, .ours = devs, .n_ours = n_devs, .flags = NSSCAN_SKIP_SELF,
        };
        struct stat st;

        if (stat(hierarchy, &st) < 0)
                return -errno;
        spec.live = st.st_dev;
        return namespaces_scan(&spec, ret, ret_n);
}

static uint64_t want_of(const NsWant *want, size_t n, const NamespaceView *v) {
        for (size_t i = 0; i < n; i++)
                if (want[i].ns_ino == v->ns_ino)
                        return want[i].attr | v->attr;
        /* A namespace we did not see before: its flags now are the best record of its wish. */
        return v->attr;
}

/* Plan and apply for one view; -ESTALE when its top changed under us. */
static int heal_one(HealReport *rep, dev_t new_dev, int host_fd, bool heal) {
        NamespaceView want = { .attr = rep->want_attr };

        rep->action = heal_plan(&want, &rep->view, new_dev);
        rep->result = rep->action == HEAL_NONE ? 0 : 1;
        if (heal && rep->action != HEAL_NONE)
                rep->result = heal_apply(&rep->view, rep->action, host_fd, rep->want_attr);
        return rep->result;
}

int heal_views(const char *root, const char *path, int host_fd, NamespaceView *now, size_t n_now,
               const NsWant *want, size_t n_want, bool heal, HealReport **ret, size_t *ret_n) {
        HealReport *reports;
        size_t n = 0;
        struct stat st;

        if (fstat(host_fd, &st) < 0)
                return -errno;
        reports = calloc(n_now ?: 1, sizeof(HealReport));
        if (!reports)
                return -ENOMEM;

        for (size_t i = 0; i < n_now; i++) {
                HealReport *rep = &reports[n];

                *rep = (HealReport) { .view = now[i], .want_attr = want_of(want, n_want, &now[i]) };
                now[i] = NAMESPACE_VIEW_NULL;
                if (rep->view.error < 0) {
                        rep->result = rep->view.error;
                        n++;
                        continue;
                }
                /* A swap brings new content: the stale top's own flags are wanted too. */
                if (rep->view.dev != st.st_dev)
                        rep->want_attr |= rep->view.attr;

                /* Its top moved since the scan: most likely it followed a namespace healed just
                 * before (a service in a container is a slave of the container's). Look again. */
                for (unsigned tries = 0; heal_one(rep, st.st_dev, host_fd, heal) == -ESTALE && tries < 2; tries++) {
                        NamespaceView again;

                        if (namespace_view_reread(&rep->view, &(NsScanSpec) { .root = root, .path = path },
                                                  &again) < 0)
                                break;
                        namespace_view_done(&rep->view);
                        rep->view = again;
                }
                if (rep->action == HEAL_NONE && rep->result == 0) {
                        /* Current, flags intact: nothing to say about it. */
                        namespace_view_done(&rep->view);
                        continue;
                }
                n++;
        }

        *ret = reports;
        *ret_n = n;
        return 0;
}

/* After a swap: namespaces on an old overlay, and on the new one (propagation may have loosened its flags). */
static int scan_after_swap(const char *root, const char *hierarchy, const dev_t *devs, size_t n_devs,
                           dev_t new_dev, NamespaceView **ret, size_t *ret_n) {
        _cleanup_free_ dev_t *all = malloc((n_devs + 1) * sizeof(dev_t));

        if (!all)
                return -ENOMEM;
        memcpy(all, devs, n_devs * sizeof(dev_t));
        all[n_devs] = new_dev;
        return heal_snapshot(root, hierarchy, all, n_devs + 1, ret, ret_n);
}

int heal_after_swap(const char *root, const char *hierarchy, int host_fd,
                    const dev_t *devs, size_t n_devs,
                    const NamespaceView *before, size_t n_before, bool heal,
                    HealReport **ret, size_t *ret_n) {
        _cleanup_free_ NsWant *want = calloc(n_before ?: 1, sizeof(NsWant));
        NamespaceView *now = NULL;
        size_t n_now = 0;
        struct stat st;
        int r;

        if (!want)
                return -ENOMEM;
        for (size_t i = 0; i < n_before; i++)
                want[i] = (NsWant) { before[i].ns_ino, before[i].attr };
        if (fstat(host_fd, &st) < 0)
                return negative_errno();
        r = scan_after_swap(root, hierarchy, devs, n_devs, st.st_dev, &now, &n_now);
        if (r < 0)
                return r;
        r = heal_views(root, hierarchy, host_fd, now, n_now, want, n_before, heal, ret, ret_n);
        namespace_views_free(now, n_now);
        return r;
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

        /* Bounded (nsscan.h): a namespace of 20,000 stacked binds takes seconds to list. */
        r = namespace_view_mount_table(v, NULL, &tb);
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
