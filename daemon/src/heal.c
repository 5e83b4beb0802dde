/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>
#include <linux/nsfs.h>

#include "heal.h"
#include "log.h"
#include "macro.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "swap.h"
#include "util.h"
#include "worker.h"

static const char *const heal_action_table[_HEAL_ACTION_MAX] = {
        [HEAL_NONE] = "none",
        [HEAL_SWAP] = "swap",
        [HEAL_ATTR] = "restore-flags",
        [HEAL_PIN] = "pin",
        [HEAL_UNPIN] = "unpin",
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

void heal_result_done(HealResult *r) {
        free(r->error);
        *r = (HealResult) {};
}

/* What a heal's worker says when it is done. */
typedef struct HealAnswer {
        int error;              /* positive errno, or 0 */
        int stage;              /* SwapStage of a swap */
        bool finished;          /* a swap: it finished one stopped halfway before (swap.h) */
        bool left_halfway;      /* a swap: it left one stopped halfway beneath (swap.h) */
        unsigned carried;
        uint64_t pin_id;        /* HEAL_PIN: the pin's mount ID there */
        char text[448];
} HealAnswer;

static int answer(HealAnswer *a, int r, const char *fmt, ...) _printf_(3, 4);
static int answer(HealAnswer *a, int r, const char *fmt, ...) {
        va_list ap;

        a->error = r < 0 ? -r : 0;
        va_start(ap, fmt);
        (void) vsnprintf(a->text, sizeof(a->text), fmt, ap);
        va_end(ap);
        return r;
}

/* In the namespace: the top at the hierarchy, if it is still mount @id. */
static int open_top_checked(const char *path, uint64_t id, HealAnswer *a) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t now_id;
        int r;

        fd = openat_in_root(AT_FDCWD, path, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return answer(a, fd, "cannot open %s there: %s", path, strerror(-fd));
        r = path_get_mnt_id(fd, "", &now_id);
        if (r < 0)
                return answer(a, r, "cannot tell the mount at %s there: %s", path, strerror(-r));
        if (now_id != id)
                return answer(a, -ESTALE, "its top changed since it was looked at");
        return TAKE_FD(fd);
}

/* The stale top replaced, the mounts below it carried over: the host's primitive (swap.h). */
static void heal_swap_here(const NamespaceView *now, int proc_fd, int tree_fd, uint64_t deadline, HealAnswer *a) {
        _cleanup_(swap_result_done) SwapResult res = {};
        int r;

        r = swap_replace_top(&(SwapSpec) {
                                .proc_fd = proc_fd,
                                .path = now->path,
                                .top_id = now->mnt_id,
                                .tree_fd = tree_fd,
                                .how = SWAP_BENEATH,
                                .finish_halfway = true,
                                .deadline = deadline,
                             }, &res);
        a->stage = res.stage;
        a->finished = res.finished;
        a->left_halfway = res.left_halfway;
        a->carried = res.carried;
        (void) answer(a, r, "%s", r < 0 ? strna(res.error) : "");
}

/*
 * The lost flags back, on the top only: the namespace's own mounts below
 * (a ReadWritePaths= bind) keep theirs.
 */
static void heal_attr_here(const NamespaceView *now, uint64_t attr, HealAnswer *a) {
        _cleanup_close_ int top = open_top_checked(now->path, now->mnt_id, a);
        struct mount_attr m = { .attr_set = attr & TUCK_ATTR_MASK };

        if (top < 0)
                return;
        if (mount_setattr(top, "", AT_EMPTY_PATH, &m, sizeof(m)) < 0)
                (void) answer(a, -errno, "cannot restore its flags: %s", strerror(errno));
}

/*
 * A private clone of the top, with its flags on its root and its own
 * mounts below as they are, mounted over it: a topper the coming swap's
 * umount propagation reparents instead of revealing the new tree loosened.
 * Private throughout, so that unmounting it later propagates nowhere.
 */
static void heal_pin_here(const NamespaceView *now, uint64_t attr, HealAnswer *a) {
        _cleanup_close_ int top = open_top_checked(now->path, now->mnt_id, a), clone = -EBADF;
        struct mount_attr private = { .propagation = MS_PRIVATE }, flags = { .attr_set = attr & TUCK_ATTR_MASK };
        int r;

        if (top < 0)
                return;
        clone = open_tree(top, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (clone < 0 ||
            mount_setattr(clone, "", AT_EMPTY_PATH | AT_RECURSIVE, &private, sizeof(private)) < 0 ||
            mount_setattr(clone, "", AT_EMPTY_PATH, &flags, sizeof(flags)) < 0 ||
            move_mount(clone, "", top, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
                (void) answer(a, -errno, "cannot pin its top: %s", strerror(errno));
                return;
        }
        r = path_get_mnt_id(clone, "", &a->pin_id);
        if (r < 0)
                (void) answer(a, r, "cannot tell the pin's mount: %s", strerror(-r));
}

/* The pin goes again (its swap did not happen), if it is still the top. */
static void heal_unpin_here(const NamespaceView *now, uint64_t pin_id, HealAnswer *a) {
        _cleanup_close_ int top = open_top_checked(now->path, pin_id, a);
        int r;

        if (top < 0)
                return;
        r = umount_fd(top);
        if (r < 0)
                (void) answer(a, r, "cannot unmount its pin: %s", strerror(-r));
}

typedef struct HealJob {
        const NamespaceView *now;
        HealAction action;
        uint64_t attr;          /* the flags it wants */
        uint64_t pin_id;        /* HEAL_UNPIN */
        int ns_fd, root_fd, proc_fd, tree_fd;
        uint64_t deadline;
} HealJob;

/* The worker: into the namespace and its root, do it, answer. */
static _Noreturn void heal_child(const HealJob *j, int sock) {
        HealAnswer a = {};

        if (setns(j->ns_fd, CLONE_NEWNS) < 0)
                (void) answer(&a, -errno, "cannot enter its mount namespace: %s", strerror(errno));
        else if (fchdir(j->root_fd) < 0 || chroot(".") < 0 || chdir("/") < 0)
                (void) answer(&a, -errno, "cannot enter its root: %s", strerror(errno));
        else
                switch (j->action) {
                case HEAL_SWAP:
                        heal_swap_here(j->now, j->proc_fd, j->tree_fd, j->deadline, &a);
                        break;
                case HEAL_ATTR:
                        heal_attr_here(j->now, j->attr, &a);
                        break;
                case HEAL_PIN:
                        heal_pin_here(j->now, j->attr, &a);
                        break;
                case HEAL_UNPIN:
                        heal_unpin_here(j->now, j->pin_id, &a);
                        break;
                case HEAL_NONE:
                case _HEAL_ACTION_MAX:
                        break;
                }
        _exit(send_with_fd(sock, &a, sizeof(a), -EBADF) < 0 ? 1 : 0);
}

/*
 * A detached, private clone of the host's new top with the stale top's flags
 * on its root. Recursive: the host's own mounts below the hierarchy come
 * along, as the namespace had copies of them (umount propagation took those
 * off the stale top with the host's old ones); what the namespace has of its
 * own below its top is carried from there (swap.h).
 */
static int heal_make_tree(int host_fd, uint64_t attr) {
        _cleanup_close_ int fd = -EBADF;
        /* Private: a shared clone would join the host's peer groups and let
         * mounts made inside the service propagate back out. */
        struct mount_attr private = { .propagation = MS_PRIVATE }, flags = { .attr_set = attr & TUCK_ATTR_MASK };

        fd = RET_NERRNO(open_tree(host_fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE));
        if (fd < 0)
                return fd;
        if (mount_setattr(fd, "", AT_EMPTY_PATH | AT_RECURSIVE, &private, sizeof(private)) < 0 ||
            mount_setattr(fd, "", AT_EMPTY_PATH, &flags, sizeof(flags)) < 0)
                return negative_errno();
        return TAKE_FD(fd);
}

/* Is the mount namespace @ns_fd owned by our own user namespace? */
static int ns_owned_by_ours(int ns_fd, uint64_t *ret_owner) {
        _cleanup_close_ int user_fd = -EBADF;
        struct stat ours, theirs;

        user_fd = RET_NERRNO(ioctl(ns_fd, NS_GET_USERNS));
        if (user_fd < 0)
                return user_fd;
        if (fstat(user_fd, &theirs) < 0 || stat("/proc/self/ns/user", &ours) < 0)
                return -errno;
        *ret_owner = theirs.st_ino;
        return theirs.st_ino == ours.st_ino && theirs.st_dev == ours.st_dev;
}

/* The worker's fds: the namespace, its root, our procfs, and for a swap the new tree. */
static int heal_job_open(HealJob *j, int host_fd, HealResult *ret) {
        _cleanup_close_ int proc_fd = -EBADF;
        uint64_t owner = 0;
        struct stat st;
        int r;

        /* Through the pidfd the scan took: the process it read, never one given its pid since. */
        proc_fd = namespace_view_open_proc(j->now);
        if (proc_fd < 0)
                return proc_fd;
        j->ns_fd = RET_NERRNO(openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC));
        if (j->ns_fd < 0)
                return j->ns_fd == -ENOENT ? -ESRCH : j->ns_fd;
        if (fstat(j->ns_fd, &st) < 0)
                return -errno;
        if (st.st_ino != j->now->ns_ino)
                return -ESRCH;          /* it moved to another namespace (setns) */
        /*
         * Never one owned by another user namespace: what we mounted there would
         * not be locked (MNT_LOCKED, nor its flags), and that namespace's owner
         * could unmount what covers part of the hierarchy, or clear nodev.
         */
        r = ns_owned_by_ours(j->ns_fd, &owner);
        if (r < 0)
                return r;
        if (r == 0)
                return refuse_with(&ret->error, "its mount namespace belongs to user namespace %" PRIu64 ", not "
                                   "ours: never entered (what tuck mounted there would not be locked against "
                                   "its owner)", owner), -EPERM;
        j->root_fd = RET_NERRNO(openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (j->root_fd < 0)
                return j->root_fd == -ENOENT ? -ESRCH : j->root_fd;
        j->proc_fd = RET_NERRNO(open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (j->proc_fd < 0)
                return j->proc_fd;
        if (j->action == HEAL_SWAP) {
                j->tree_fd = heal_make_tree(host_fd, j->attr);
                if (j->tree_fd < 0)
                        return j->tree_fd;
        }
        return 0;
}

static void heal_job_close(HealJob *j) {
        safe_close(j->ns_fd);
        safe_close(j->root_fd);
        safe_close(j->proc_fd);
        safe_close(j->tree_fd);
}

int heal_apply(const NamespaceView *now, HealAction action, int host_fd, uint64_t attr, uint64_t pin_id,
               ScanBudget *budget, HealResult *ret) {
        _cleanup_close_pair_ int pair[2] = { -EBADF, -EBADF };
        HealJob j = {
                .now = now,
                .action = action,
                .attr = attr,
                .pin_id = pin_id,
                .ns_fd = -EBADF,
                .root_fd = -EBADF,
                .proc_fd = -EBADF,
                .tree_fd = -EBADF,
        };
        ScanBudget defaults = SCAN_BUDGET_DEFAULT;
        HealAnswer a = {};
        Worker w = WORKER_NULL;
        int r;

        *ret = (HealResult) {};
        if (action == HEAL_NONE)
                return 0;
        if (action < 0 || action >= _HEAL_ACTION_MAX)
                return -EINVAL;
        if (!budget)
                budget = &defaults;
        /* A heal starts only while the run has time left; once started it has its own. */
        if (scan_budget_left(budget) == 0)
                return refuse_with(&ret->error, "the refresh's time budget (RefreshBudgetSec=) is used up"),
                       -ETIME;
        j.deadline = now_usec(CLOCK_MONOTONIC) + budget->heal_usec;

        r = heal_job_open(&j, host_fd, ret);
        if (r >= 0 && socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                r = -errno;
        /* setns(CLONE_NEWNS) needs a task that shares its fs_struct with no one: a
         * fresh child, which also keeps us in our own namespace whatever happens,
         * and is killed at the deadline if a file system there does not answer. */
        if (r >= 0)
                r = worker_fork(&w, (int[]) { j.ns_fd, j.root_fd, j.proc_fd, j.tree_fd, pair[1] }, 5);
        if (r == 0)
                heal_child(&j, pair[1]);
        heal_job_close(&j);
        if (r < 0)
                return r;
        pair[1] = safe_close(pair[1]);
        r = worker_recv_wait(&w, pair[0], &a, sizeof(a), NULL, j.deadline, budget);
        if (r == -ETIMEDOUT)
                return refuse_with(&ret->error, "did not finish within HealBudgetSec= (a file system there does "
                                   "not answer?)"), -ETIMEDOUT;
        if (r != 0)
                return r < 0 ? r : -EPROTO;
        a.text[sizeof(a.text) - 1] = 0;
        ret->stage = (SwapStage) a.stage;
        ret->finished = a.finished;
        ret->left_halfway = a.left_halfway;
        ret->carried = a.carried;
        ret->pin_id = a.pin_id;
        if (a.error == 0)
                return 0;
        if (a.text[0])
                (void) free_and_strdup(&ret->error, a.text);
        return -a.error;
}

static void heal_report_done(HealReport *r) {
        namespace_view_done(&r->view);
        free(r->outcome);
        free(r->reason);
        r->outcome = r->reason = NULL;
}

void heal_reports_free(HealReport *r, size_t n) {
        for (size_t i = 0; i < n; i++)
                heal_report_done(&r[i]);
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
static int heal_one(HealReport *rep, dev_t new_dev, int host_fd, bool heal, ScanBudget *budget) {
        NamespaceView want = { .attr = rep->want_attr };
        _cleanup_(heal_result_done) HealResult res = {};

        rep->action = heal_plan(&want, &rep->view, new_dev);
        rep->result = rep->action == HEAL_NONE ? 0 : 1;
        if (!heal || rep->action == HEAL_NONE)
                return rep->result;
        rep->result = heal_apply(&rep->view, rep->action, host_fd, rep->want_attr, 0, budget, &res);
        rep->stage = res.stage;
        rep->finished = res.finished;
        rep->left_halfway = res.left_halfway;
        rep->carried = res.carried;
        free(rep->reason);
        rep->reason = TAKE_PTR(res.error);
        return rep->result;
}

int heal_views(const char *root, const char *path, int host_fd, NamespaceView *now, size_t n_now,
               const NsWant *want, size_t n_want, bool heal, ScanBudget *budget, HealReport **ret,
               size_t *ret_n) {
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
                for (unsigned tries = 0; heal_one(rep, st.st_dev, host_fd, heal, budget) == -ESTALE && tries < 2; tries++) {
                        NamespaceView again;

                        if (namespace_view_reread(&rep->view, &(NsScanSpec) { .root = root, .path = path },
                                                  &again) < 0)
                                break;
                        namespace_view_done(&rep->view);
                        rep->view = again;
                }
                if (rep->action == HEAL_NONE && rep->result == 0) {
                        /* Current, flags intact (a first try may have found it moving,
                         * and said why): nothing to say about it. */
                        heal_report_done(rep);
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
                    const NamespaceView *before, size_t n_before, bool heal, ScanBudget *budget,
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
        r = heal_views(root, hierarchy, host_fd, now, n_now, want, n_before, heal, budget, ret, ret_n);
        namespace_views_free(now, n_now);
        return r;
}

/*
 * Would the swap loosen the top mount of @v? Only a copy that receives the
 * host's mount events (a slave) and sits directly on the propagated parent
 * receives the new overlay: the kernel tucks the propagated mount beneath
 * it, and the host's umount then removes it, unless it has mounts of its
 * own below it (a sandbox): umount propagation leaves such a copy in place,
 * behind, for the heal to swap. A bind stacked on another mount at the same
 * place (ProtectSystem=full's read-only bind) receives nothing either;
 * pinning those would only keep the old overlay alive underneath.
 */
static int view_top_would_receive(const NamespaceView *v, ScanBudget *budget) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_iter *it;
        struct libmnt_fs *fs, *parent, *child;
        const char *opt;
        bool own = false;
        int r;

        /* Bounded (nsscan.h): a namespace of 20,000 stacked binds takes seconds to list. */
        r = namespace_view_mount_table(v, budget, &tb);
        if (r < 0)
                return r;
        fs = mount_table_find_id(tb, (int) v->mnt_id);
        if (!fs)
                return -ESRCH;
        opt = mnt_fs_get_optional_fields(fs);
        if (!opt || !strstr(opt, "master:"))
                return 0;
        parent = mount_table_find_id(tb, mnt_fs_get_parent_id(fs));
        if (parent && mnt_fs_streq_target(parent, mnt_fs_get_target(fs)))
                return 0;
        it = mnt_new_iter(MNT_ITER_FORWARD);
        if (!it)
                return -ENOMEM;
        while (!own && mnt_table_next_child_fs(tb, it, fs, &child) == 0)
                own = !mnt_fs_streq_target(child, mnt_fs_get_target(fs));
        mnt_free_iter(it);
        return !own;
}

int heal_pin_loosenable(const NamespaceView *views, size_t n, uint64_t host_attr, ScanBudget *budget,
                        uint64_t *ret_pins) {
        int pinned = 0;

        for (size_t i = 0; i < n; i++) {
                _cleanup_(heal_result_done) HealResult res = {};

                ret_pins[i] = 0;
                if (!(views[i].attr & ~host_attr & TUCK_ATTR_MASK))
                        continue;       /* the host's flags would not loosen it */
                if (view_top_would_receive(&views[i], budget) <= 0)
                        continue;       /* a swap leaves it stale, not loosened */
                if (heal_apply(&views[i], HEAL_PIN, -EBADF, views[i].attr, 0, budget, &res) < 0) {
                        log_debug("Cannot pin the namespace of pid %d: %s", (int) views[i].pid,
                                  res.error ?: "failed");
                        continue;
                }
                ret_pins[i] = res.pin_id;
                pinned++;
        }
        return pinned;
}

void heal_unpin(const NamespaceView *views, size_t n, const uint64_t *pins, ScanBudget *budget) {
        for (size_t i = 0; pins && i < n; i++) {
                _cleanup_(heal_result_done) HealResult res = {};

                if (pins[i] == 0)
                        continue;
                if (heal_apply(&views[i], HEAL_UNPIN, -EBADF, 0, pins[i], budget, &res) < 0)
                        log_debug("Cannot unpin the namespace of pid %d: %s", (int) views[i].pid,
                                  res.error ?: "failed");
        }
}
