/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <linux/nsfs.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "image-class.h"
#include "log.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "nsscan.h"
#include "stale.h"
#include "util.h"
#include "worker.h"

static const char * const ns_view_state_table[_NS_VIEW_STATE_MAX] = {
        [NS_VIEW_CURRENT] = "current",
        [NS_VIEW_STALE] = "stale",
        [NS_VIEW_BASE] = "base",
        [NS_VIEW_FOREIGN] = "foreign",
        [NS_VIEW_UNREADABLE] = "unreadable",
};

const char *ns_view_state_to_string(NsViewState s) {
        return s < _NS_VIEW_STATE_MAX ? ns_view_state_table[s] : NULL;
}

void namespace_view_done(NamespaceView *v) {
        safe_close(v->pidfd);
        free(v->unit);
        free(v->user_unit);
        free(v->machine);
        free(v->path);
        free(v->source);
        free(v->error_text);
        *v = NAMESPACE_VIEW_NULL;
}

void namespace_views_free(NamespaceView *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                namespace_view_done(&v[i]);
        free(v);
}

const char *namespace_view_error(const NamespaceView *v) {
        return v->error_text ?: strerror(-v->error);
}

char *namespace_view_who(const NamespaceView *v) {
        _cleanup_free_ char *name = NULL;
        char *r = NULL;

        if (v->machine) {
                name = name_escape(v->machine);
                (void) asprintf_safe(&r, "container %s", strna(name));
        } else if (v->user_unit) {
                name = name_escape(v->user_unit);
                (void) asprintf_safe(&r, "unit %s of user %u", strna(name), (unsigned) v->owner_uid);
        } else if (v->unit) {
                name = name_escape(v->unit);
                (void) asprintf_safe(&r, "unit %s", strna(name));
        } else {
                name = name_escape(v->comm);
                (void) asprintf_safe(&r, "process %s", strna(name));
        }
        return r;
}

/* ---- the budget */

void scan_budget_start(ScanBudget *b) {
        if (b->deadline == 0)
                b->deadline = now_usec(CLOCK_MONOTONIC) + b->refresh_usec;
}

uint64_t scan_budget_namespace_deadline(ScanBudget *b) {
        uint64_t d;

        scan_budget_start(b);
        d = now_usec(CLOCK_MONOTONIC) + b->namespace_usec;
        return d < b->deadline ? d : b->deadline;
}

uint64_t scan_budget_left(ScanBudget *b) {
        uint64_t now = now_usec(CLOCK_MONOTONIC);

        scan_budget_start(b);
        return now < b->deadline ? b->deadline - now : 0;
}

void scan_budget_keepalive(const ScanBudget *b) {
        if (b && b->keepalive)
                b->keepalive(b->userdata);
}

static char *format_usec(uint64_t usec) {
        char *s = NULL;

        if (usec % 1000000 == 0)
                (void) asprintf_safe(&s, "%" PRIu64 " s", usec / 1000000);
        else
                (void) asprintf_safe(&s, "%" PRIu64 " ms", usec / 1000);
        return s;
}

/* ---- one process, bound by its pidfd */

static int open_proc_checked(pid_t pid, int pidfd) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (pidfd < 0)
                return -ESRCH;
        fd = proc_open(pid, "", O_RDONLY | O_DIRECTORY);
        if (fd == -ENOENT)
                return -ESRCH;
        if (fd < 0)
                return fd;
        /* Opened before the check: if the pidfd's process still runs now, the pid was
         * its own all along, and so is every lookup through this fd from now on. */
        r = pidfd_check_alive(pidfd);
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

int namespace_view_open_proc(const NamespaceView *v) {
        return open_proc_checked(v->pid, v->pidfd);
}

/* mountinfo in pieces, the budget checked between them: one read() of a table of
 * stacked mounts can cost milliseconds (each line's path walks the stack below it).
 * Never before the second piece: a table that comes in one read (~150 mounts) is
 * never refused for time, however loaded the machine. */
static int read_mountinfo_bounded(int proc_fd, ScanBudget *b, char **ret, size_t *ret_size) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, allocated = 0, lines = 0;
        uint64_t deadline = scan_budget_namespace_deadline(b);

        fd = openat(proc_fd, "mountinfo", O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return errno == ENOENT ? -ESRCH : -errno;
        for (;;) {
                ssize_t k;

                if (allocated - n < 16384 + 1) {
                        char *a = realloc(buf, allocated = allocated ? allocated * 2 : 65536);

                        if (!a)
                                return -ENOMEM;
                        buf = a;
                }
                k = read(fd, buf + n, 16384);
                if (k < 0 && errno == EINTR)
                        continue;
                if (k < 0)
                        return -errno;
                if (k == 0)
                        break;
                for (ssize_t i = 0; i < k; i++)
                        lines += buf[n + i] == '\n';
                n += k;
                if (lines > b->max_mounts)
                        return -E2BIG;
                scan_budget_keepalive(b);
                if (n > (size_t) k && now_usec(CLOCK_MONOTONIC) >= deadline)
                        return -ETIMEDOUT;
        }
        buf[n] = 0;
        *ret = TAKE_PTR(buf);
        *ret_size = n;
        return 0;
}

int namespace_view_mount_table(const NamespaceView *v, ScanBudget *b, struct libmnt_table **ret) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        _cleanup_close_ int proc_fd = -EBADF;
        _cleanup_free_ char *text = NULL;
        ScanBudget fallback = SCAN_BUDGET_DEFAULT;
        size_t size = 0;
        FILE *f;
        int r;

        proc_fd = namespace_view_open_proc(v);
        if (proc_fd < 0)
                return proc_fd;
        r = read_mountinfo_bounded(proc_fd, b ?: &fallback, &text, &size);
        if (r < 0)
                return r;
        tb = mnt_new_table();
        f = size > 0 ? fmemopen(text, size, "r") : NULL;
        if (!tb || (size > 0 && !f)) {
                if (f)
                        fclose(f);
                return -ENOMEM;
        }
        r = f ? mnt_table_parse_stream(tb, f, "mountinfo") : 0;
        if (f)
                fclose(f);
        if (r < 0)
                return r == -1 ? -EBADMSG : r;
        *ret = TAKE_PTR(tb);
        return 0;
}

/* ---- scans that got stuck: <run_dir>/namespaces/stuck.json (nsscan.h) */

static char *stuck_path(const ScanBudget *b) {
        return b && b->run_dir ? path_join(b->run_dir, "namespaces", "stuck.json") : NULL;
}

/* Is @pid still the process started at @start_time, and not a zombie? */
static bool process_running(pid_t pid, uint64_t start_time) {
        _cleanup_free_ char *stat = NULL;
        char path[64];
        const char *p;
        uint64_t t;

        snprintf(path, sizeof(path), "/proc/%d/stat", (int) pid);
        if (pid <= 0 || read_full_file_at(AT_FDCWD, path, 4096, &stat) < 0)
                return false;
        p = strrchr(stat, ')');
        if (!p || p[1] != ' ' || p[2] == 'Z' || p[2] == 'X')
                return false;
        return proc_stat_start_time(stat, &t) >= 0 && t == start_time;
}

static uint64_t json_u64(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) ? (uint64_t) json_object_get_uint64(v) : 0;
}

/* The entries whose worker is still stuck and whose witness still stands. */
int ns_stuck_load(const ScanBudget *b, Stuck **ret, size_t *ret_n) {
        _cleanup_free_ char *path = stuck_path(b);
        json_object *o = NULL;
        Stuck *l = NULL;
        size_t n = 0;
        int r;

        *ret = NULL;
        *ret_n = 0;
        (void) worker_reap_abandoned();
        if (!path)
                return 0;
        r = json_load(path, &o);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        if (json_object_is_type(o, json_type_object))
                l = calloc(json_object_object_length(o) ?: 1, sizeof(Stuck));
        json_object_object_foreach(o, key, value) {
                json_object *table;
                Stuck s = {
                        .ns_ino = strtoull(key, NULL, 10),
                        .pid = (pid_t) json_u64(value, "pid"),
                        .start_time = json_u64(value, "start_time"),
                        .worker = (pid_t) json_u64(value, "worker"),
                        .worker_start_time = json_u64(value, "worker_start_time"),
                        .since = json_u64(value, "since"),
                };
                uint64_t ns_ino, t;

                if (json_object_object_get_ex(value, "table", &table)) {
                        s.kind = STUCK_TABLE;
                        s.error = json_object_get_int(table);
                        s.limit = json_u64(value, "limit");
                }
                if (!l)
                        continue;
                if (s.kind == STUCK_WORKER && !process_running(s.worker, s.worker_start_time))
                        continue;
                if (s.kind == STUCK_TABLE && (s.since + STUCK_TABLE_USEC < now_usec(CLOCK_REALTIME) ||
                                              (s.error != -E2BIG && s.error != -ETIMEDOUT)))
                        continue;
                if (ns_witness_read(s.pid, &ns_ino, &t) < 0 || ns_ino != s.ns_ino || t != s.start_time)
                        continue;
                l[n++] = s;
        }
        json_object_put(o);
        *ret = l;
        *ret_n = n;
        return 0;
}

int ns_stuck_save(const ScanBudget *b, const Stuck *l, size_t n) {
        _cleanup_free_ char *path = stuck_path(b), *dir = NULL;
        json_object *o;
        int r;

        if (!path)
                return 0;
        dir = path_join(b->run_dir, "namespaces");
        o = json_object_new_object();
        if (!dir || !o) {
                json_object_put(o);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                json_object *e = json_object_new_object();
                char key[24];

                if (!e)
                        continue;
                json_object_object_add(e, "pid", json_object_new_int64(l[i].pid));
                json_object_object_add(e, "start_time", json_object_new_uint64(l[i].start_time));
                if (l[i].kind == STUCK_WORKER) {
                        json_object_object_add(e, "worker", json_object_new_int64(l[i].worker));
                        json_object_object_add(e, "worker_start_time", json_object_new_uint64(l[i].worker_start_time));
                } else {
                        json_object_object_add(e, "table", json_object_new_int(l[i].error));
                        json_object_object_add(e, "limit", json_object_new_uint64(l[i].limit));
                }
                json_object_object_add(e, "since", json_object_new_uint64(l[i].since));
                snprintf(key, sizeof(key), "%" PRIu64, l[i].ns_ino);
                json_object_object_add(o, key, e);
        }
        r = mkdir_p(dir, 0755);
        if (r >= 0)
                r = n > 0 ? json_save(path, o) : (unlink(path) < 0 && errno != ENOENT ? -errno : 0);
        json_object_put(o);
        return r;
}

/* ---- one scan */

typedef struct InoMap {
        uint64_t *keys;          /* 0: free */
        size_t *values;
        size_t cap, n;
} InoMap;

static void ino_map_done(InoMap *m) {
        free(m->keys);
        free(m->values);
}

static size_t ino_slot(const InoMap *m, uint64_t key) {
        size_t i = (size_t) (key * UINT64_C(0x9e3779b97f4a7c15) >> 17) & (m->cap - 1);

        while (m->keys[i] != 0 && m->keys[i] != key)
                i = (i + 1) & (m->cap - 1);
        return i;
}

static int ino_map_put(InoMap *m, uint64_t key, size_t value) {
        if (2 * (m->n + 1) > m->cap) {
                InoMap g = { .cap = m->cap ? 2 * m->cap : 256 };

                g.keys = calloc(g.cap, sizeof(uint64_t));
                g.values = calloc(g.cap, sizeof(size_t));
                if (!g.keys || !g.values) {
                        ino_map_done(&g);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < m->cap; i++)
                        if (m->keys[i] != 0) {
                                size_t s = ino_slot(&g, m->keys[i]);

                                g.keys[s] = m->keys[i];
                                g.values[s] = m->values[i];
                                g.n++;
                        }
                ino_map_done(m);
                *m = g;
        }
        size_t s = ino_slot(m, key);
        if (m->keys[s] == 0)
                m->n++;
        m->keys[s] = key;
        m->values[s] = value;
        return 0;
}

static size_t *ino_map_get(const InoMap *m, uint64_t key) {
        size_t s;

        if (m->cap == 0)
                return NULL;
        s = ino_slot(m, key);
        return m->keys[s] == key ? &m->values[s] : NULL;
}

typedef enum PendingState {
        PENDING_WALK,        /* to be walked */
        PENDING_WORKER,      /* the dentry cache could not answer: the worker walks it */
        PENDING_KEEP,
        PENDING_DROP,
} PendingState;

typedef struct Pending {
        NamespaceView v;
        PendingState state;
        bool want_sees_root, sees_root;
        uint64_t root_mnt_id, root_ino;   /* its root, as the scan opened it (0: unknown) */
        dev_t root_dev;
} Pending;

typedef struct Scan {
        const NsScanSpec *spec;
        ScanBudget *budget;
        struct stat our_root, slash;
        uint64_t self_ns;
        pid_t session;
        Stuck *stuck;
        size_t n_stuck;
        bool stuck_changed;
        Pending *pending;
        size_t n_pending;
        InoMap followers;        /* spec->followers_in by namespace inode: index in its list */
        size_t followers_max;    /* how many spec->followers_out may hold */
        unsigned n_processes, n_deferred, n_tables, n_following, n_reused;   /* for the debug line */
} Scan;

/* What the walk learns, the same in the parent (cache only) and in the worker. */
typedef struct WalkResult {
        int32_t error;
        uint8_t sees_root;
        uint8_t attr_known;
        uint64_t dev, mnt_id, attr;
} WalkResult;

static int fd_statx(int fd, unsigned mask, struct statx *ret) {
        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, mask, ret) < 0)
                return -errno;
        if ((ret->stx_mask & mask) != mask)
                return -EOPNOTSUPP;
        return 0;
}

static bool statx_is(const struct statx *sx, const struct stat *st) {
        return makedev(sx->stx_dev_major, sx->stx_dev_minor) == st->st_dev && sx->stx_ino == st->st_ino;
}

/*
 * The hierarchy below @root_fd: its top mount, and (for a namespace that
 * shares our root under a prefix) whether it sees the prefix itself. With
 * @cached, only what the dentry cache answers (-EAGAIN or -EOPNOTSUPP
 * otherwise); without, whatever it takes, in the worker.
 */
static int walk(const Scan *s, int root_fd, const char *name, bool want_sees_root, bool cached, WalkResult *ret) {
        _cleanup_close_ int fd = -EBADF, root_prefix = -EBADF;
        int (*resolve)(int, const char *, int) = cached ? openat_in_root_cached : openat_in_root;
        const NsScanSpec *spec = s->spec;
        struct statx sx;
        int r;

        *ret = (WalkResult) {};
        fd = resolve(root_fd, name, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        r = fd_statx(fd, STATX_MNT_ID, &sx);
        if (r < 0)
                return r;
        ret->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        ret->mnt_id = sx.stx_mnt_id;
        /* statvfs() asks the file system: only of mounts we know are ours. */
        if (ret->dev == spec->live || (spec->base != 0 && ret->dev == spec->base))
                ret->attr_known = fd_get_mount_attr(fd, &ret->attr) >= 0;
        if (want_sees_root) {
                root_prefix = resolve(root_fd, spec->root, O_PATH | O_DIRECTORY);
                /* Only its absence says the namespace does not see the prefix. */
                if (root_prefix < 0 && root_prefix != -ENOENT && root_prefix != -ENOTDIR)
                        return root_prefix;
                ret->sees_root = root_prefix >= 0 && fd_statx(root_prefix, STATX_INO, &sx) >= 0 &&
                                 statx_is(&sx, &s->our_root);
        }
        return 0;
}

/* "/a/b/usr" under root "/a/b" -> "usr"; under root "/" -> "usr". */
static const char *path_relative_to_root(const char *root, const char *path) {
        size_t n = strlen(root);

        while (n > 0 && root[n - 1] == '/')
                n--;
        if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != 0))
                return NULL;
        path += n;
        path += strspn(path, "/");
        return *path ? path : ".";
}

static void pending_unreadable(Pending *p, int error, char *text) {
        p->v.error = error;
        free(p->v.error_text);
        p->v.error_text = text;
        p->v.state = NS_VIEW_UNREADABLE;
        p->state = PENDING_KEEP;
}

/* Not kept: its pidfd goes now. A scan holds descriptors only for the namespaces it keeps. */
static void pending_drop(Pending *p) {
        p->state = PENDING_DROP;
        p->v.pidfd = safe_close(p->v.pidfd);
}

static void pending_walked(Pending *p, int r, const WalkResult *w) {
        if (r == -ENOENT || r == -ESRCH || r == -ENOTDIR) {
                pending_drop(p);        /* vanished, or no such directory */
                return;
        }
        if (r < 0) {
                pending_unreadable(p, r, NULL);
                return;
        }
        p->v.dev = (dev_t) w->dev;
        p->v.mnt_id = w->mnt_id;
        p->v.attr = w->attr;
        p->v.attr_known = w->attr_known;
        p->sees_root = w->sees_root;
        p->state = PENDING_KEEP;
}

/* A table refused under a limit is refused again only under one as tight or tighter. */
static bool stuck_applies(const Scan *s, const Stuck *st) {
        if (st->kind != STUCK_TABLE)
                return true;
        return st->error == -E2BIG ? s->budget->max_mounts <= st->limit : s->budget->namespace_usec <= st->limit;
}

static bool stuck_find(const Scan *s, uint64_t ns_ino, StuckKind kind, const Stuck **ret) {
        for (size_t i = 0; i < s->n_stuck; i++)
                if (s->stuck[i].ns_ino == ns_ino && s->stuck[i].kind == kind && stuck_applies(s, &s->stuck[i])) {
                        *ret = &s->stuck[i];
                        return true;
                }
        return false;
}

/* On the live top with no flag beyond the host's, and wanting none: it follows, nothing to do. */
static bool pending_follows(const Scan *s, const Pending *p) {
        const NsScanSpec *spec = s->spec;

        if (!(spec->flags & NSSCAN_SKIP_FOLLOWING) || p->v.error < 0 || spec->live == 0 || p->v.dev != spec->live)
                return false;
        if (!p->v.attr_known || (p->v.attr & ~spec->host_attr & TUCK_ATTR_MASK))
                return false;
        for (size_t i = 0; i < spec->n_watch; i++)
                if (spec->watch[i] == p->v.ns_ino)
                        return false;
        return true;
}

void ns_followers_done(NsFollowers *f) {
        for (size_t i = 0; i < f->n; i++) {
                safe_close(f->list[i].pidfd);
                safe_close(f->list[i].root_fd);
        }
        free(f->list);
        *f = (NsFollowers) {};
}

/* Takes over what the scan before found of @p's namespace, if it is still the same process's. */
static bool follower_reuse(Scan *s, Pending *p, int *ret_root_fd) {
        struct statx sx;
        char path[64];
        NsFollower *f;
        size_t *i;

        if (!s->spec->followers_in || !(i = ino_map_get(&s->followers, p->v.ns_ino)))
                return false;
        f = &s->spec->followers_in->list[*i];
        if (f->pid != p->v.pid || f->pidfd < 0 || f->root_fd < 0)
                return false;
        /* Its root now: the same mount and directory as the one kept (mount IDs are not
         * reused while the kept fd holds that mount). */
        snprintf(path, sizeof(path), "/proc/%d/root", (int) p->v.pid);
        if (statx(AT_FDCWD, path, AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT, STATX_INO | STATX_MNT_ID, &sx) < 0 ||
            (sx.stx_mask & (STATX_INO | STATX_MNT_ID)) != (STATX_INO | STATX_MNT_ID) ||
            sx.stx_mnt_id != f->root_mnt_id || sx.stx_ino != f->root_ino ||
            makedev(sx.stx_dev_major, sx.stx_dev_minor) != f->root_dev)
                return false;
        /* Alive after all that: it had its pid when its ns/mnt was read (this scan) and when
         * its root was looked at, so the namespace and the root are its own. */
        if (pidfd_check_alive(f->pidfd) < 0)
                return false;
        p->v.pidfd = TAKE_FD(f->pidfd);
        *ret_root_fd = TAKE_FD(f->root_fd);
        p->root_mnt_id = f->root_mnt_id;
        p->root_ino = f->root_ino;
        p->root_dev = f->root_dev;
        p->v.own_root = f->own_root;
        p->want_sees_root = f->want_sees_root;
        p->sees_root = f->sees_root;
        s->n_reused++;
        return true;
}

/* Keeps @p's pidfd and @root_fd for the next scan, if it asked and there is room. */
static bool follower_keep(Scan *s, Pending *p, int *root_fd) {
        NsFollowers *out = s->spec->followers_out;

        if (!out || out->n >= s->followers_max || p->v.pidfd < 0 || *root_fd < 0 || p->root_mnt_id == 0)
                return false;
        if (out->n == out->allocated) {
                size_t k = out->allocated ? 2 * out->allocated : 64;
                NsFollower *a = reallocarray(out->list, k, sizeof(NsFollower));

                if (!a)
                        return false;
                out->list = a;
                out->allocated = k;
        }
        out->list[out->n++] = (NsFollower) {
                .ns_ino = p->v.ns_ino,
                .pid = p->v.pid,
                .pidfd = TAKE_FD(p->v.pidfd),
                .root_fd = TAKE_FD(*root_fd),
                .root_mnt_id = p->root_mnt_id,
                .root_ino = p->root_ino,
                .root_dev = p->root_dev,
                .own_root = p->v.own_root,
                .want_sees_root = p->want_sees_root,
                .sees_root = p->sees_root,
        };
        return true;
}

/*
 * The part of a namespace that never blocks: its pidfd, its root, where it
 * names the hierarchy, and the walk if the dentry cache can answer it.
 */
static void pending_read(Scan *s, Pending *p) {
        _cleanup_close_ int root_fd = -EBADF;
        const NsScanSpec *spec = s->spec;
        const Stuck *stuck;
        struct statx sx;
        bool reused = false, sees_root;
        WalkResult w;
        int r;

        p->state = PENDING_DROP;
        /* Known from the scan before (its pidfd and root taken over), or read now. */
        if (p->v.pidfd < 0)
                reused = follower_reuse(s, p, &root_fd);
        sees_root = p->sees_root;
        /* The pidfd first: what is read from here on is believed only if its process is
         * still there once a view is kept (scan_pending() checks). */
        if (p->v.pidfd < 0) {
                r = pidfd_open_above_stdio(p->v.pid);
                if (r == -ESRCH || r == -EINVAL)
                        return;         /* gone (EINVAL: the pid is a thread's by now) */
                if (r < 0) {
                        /* Out of file descriptors or memory: the namespace is there, and may
                         * be one of ours. Unreadable, said so, never taken for gone. */
                        pending_unreadable(p, r, NULL);
                        return;
                }
                p->v.pidfd = r;
        }
        if (!reused) {
                root_fd = proc_open(p->v.pid, "root", O_PATH | O_DIRECTORY);
                if (root_fd == -ENOENT || root_fd == -ESRCH)
                        return;
                if (root_fd >= 0 && statx(root_fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC | AT_NO_AUTOMOUNT,
                                          STATX_INO | STATX_MNT_ID, &sx) >= 0 && (sx.stx_mask & STATX_INO)) {
                        p->v.own_root = !statx_is(&sx, &s->slash);
                        if (sx.stx_mask & STATX_MNT_ID) {
                                p->root_mnt_id = sx.stx_mnt_id;
                                p->root_ino = sx.stx_ino;
                                p->root_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
                        }
                }
        }

        /* A container names the hierarchy relative to its own root. */
        if (!p->v.path) {
                const char *name = p->v.own_root ? path_relative_to_root(spec->root, spec->path) : spec->path;

                if (!name)
                        return;         /* outside our root prefix */
                p->v.path = strdup(name);
                if (!p->v.path) {
                        pending_unreadable(p, -ENOMEM, NULL);
                        return;
                }
        }
        if (!streq(spec->root, "/")) {
                if (p->v.own_root && getsid(p->v.pid) != s->session)
                        return;         /* a container of another test */
                p->want_sees_root = !p->v.own_root;
        }
        if (root_fd < 0) {
                pending_unreadable(p, root_fd, NULL);
                return;
        }
        if (stuck_find(s, p->v.ns_ino, STUCK_WORKER, &stuck)) {
                _cleanup_free_ char *since = format_timestamp(stuck->since);

                pending_unreadable(p, -ETIMEDOUT, NULL);
                (void) asprintf_safe(&p->v.error_text, "did not answer: a scan of it since %s is still waiting "
                                     "(worker pid %d), a hung FUSE or network file system?", strna(since),
                                     (int) stuck->worker);
                return;
        }
        if (scan_budget_left(s->budget) == 0) {
                _cleanup_free_ char *b = format_usec(s->budget->refresh_usec);

                pending_unreadable(p, -ETIME, NULL);
                (void) asprintf_safe(&p->v.error_text, "not read: the run's scan budget (%s) was used up", strna(b));
                return;
        }
        /* Whether it sees the root prefix was found by the scan before, for one taken over. */
        r = walk(s, root_fd, p->v.path, p->want_sees_root && !reused, true, &w);
        if (r == -EAGAIN || r == -EOPNOTSUPP) {
                p->state = PENDING_WORKER;
                return;
        }
        pending_walked(p, r, &w);
        if (reused && p->state == PENDING_KEEP)
                p->sees_root = sees_root;
        /* One that follows is done with: its pidfd goes now (pending_start()), or to the next scan. */
        if (p->state == PENDING_KEEP && (!p->want_sees_root || p->sees_root) && pending_follows(s, p)) {
                p->state = PENDING_DROP;
                s->n_following++;
                (void) follower_keep(s, p, &root_fd);
        }
}

static void pending_start(Scan *s, Pending *p) {
        pending_read(s, p);
        if (p->state == PENDING_DROP)
                pending_drop(p);
}

/* In the worker: one deferred namespace, any lookup it takes. */
static void worker_walk_one(const Scan *s, const Pending *p, WalkResult *ret) {
        _cleanup_close_ int root_fd = -EBADF;
        int r;

        /* Read by pid, like the parent's own walks: the parent checks the pidfd it holds. */
        r = root_fd = proc_open(p->v.pid, "root", O_PATH | O_DIRECTORY);
        if (r == -ENOENT)
                r = -ESRCH;
        if (r >= 0)
                r = walk(s, root_fd, p->v.path, p->want_sees_root, false, ret);
        ret->error = r < 0 ? r : 0;
}

typedef struct WalkRecord {
        uint32_t index;
        WalkResult result;
} WalkRecord;

static _Noreturn void worker_main(const Scan *s, const size_t *todo, size_t n, size_t first, int out) {
        for (size_t i = first; i < n; i++) {
                WalkRecord rec = { .index = (uint32_t) i };

                worker_walk_one(s, &s->pending[todo[i]], &rec.result);
                if (write(out, &rec, sizeof(rec)) != (ssize_t) sizeof(rec))
                        _exit(EXIT_FAILURE);
        }
        _exit(EXIT_SUCCESS);
}

/* Remember @p's namespace as @kind, with itself as the witness. */
static void stuck_add(Scan *s, const Pending *p, StuckKind kind, int error, const Worker *w) {
        uint64_t ns_ino, start_time, worker_start_time = 0;
        Stuck *a;

        if (ns_witness_read(p->v.pid, &ns_ino, &start_time) < 0 || ns_ino != p->v.ns_ino)
                return;
        if (w && ns_witness_read(w->pid, &ns_ino, &worker_start_time) < 0)
                return;
        a = realloc(s->stuck, (s->n_stuck + 1) * sizeof(Stuck));
        if (!a)
                return;
        s->stuck = a;
        s->stuck[s->n_stuck++] = (Stuck) {
                .ns_ino = p->v.ns_ino, .kind = kind, .error = error, .pid = p->v.pid, .start_time = start_time,
                .limit = error == -E2BIG ? s->budget->max_mounts : s->budget->namespace_usec,
                .worker = w ? w->pid : 0, .worker_start_time = worker_start_time,
                .since = now_usec(CLOCK_REALTIME),
        };
        s->stuck_changed = true;
}

/* A namespace the worker never came back from: unreadable, and remembered while the worker waits. */
static void pending_stuck(Scan *s, Pending *p, const Worker *w) {
        _cleanup_free_ char *budget = format_usec(s->budget->namespace_usec);

        pending_unreadable(p, -ETIMEDOUT, NULL);
        (void) asprintf_safe(&p->v.error_text, "did not answer within %s, a hung FUSE or network file system?",
                             strna(budget));
        stuck_add(s, p, STUCK_WORKER, -ETIMEDOUT, w);
}

/*
 * One worker from @first on: returns the index it stopped at (n when it
 * answered for all), each answer within the namespace budget of the one
 * before. A namespace it does not answer for in time is stuck.
 */
static size_t worker_run(Scan *s, const size_t *todo, size_t n, size_t first) {
        _cleanup_close_pair_ int p[2] = { -EBADF, -EBADF };
        Worker w = WORKER_NULL;
        uint64_t deadline;
        size_t next = first;
        int r;

        if (pipe2(p, O_CLOEXEC) < 0 || (r = worker_fork(&w, &p[1], 1)) < 0) {
                pending_unreadable(&s->pending[todo[first]], negative_errno(), NULL);
                return first + 1;
        }
        if (r == 0) {
                p[0] = safe_close(p[0]);
                worker_main(s, todo, n, first, p[1]);
        }
        p[1] = safe_close(p[1]);

        deadline = scan_budget_namespace_deadline(s->budget);
        while (next < n) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                struct pollfd pfd = { .fd = p[0], .events = POLLIN };
                WalkRecord rec;
                ssize_t k;

                if (now >= deadline) {
                        pending_stuck(s, &s->pending[todo[next]], &w);
                        worker_abandon(&w);
                        return next + 1;
                }
                /* At least every 100 ms: the keepalive (tuckd's watchdog) is fed while we wait. */
                r = poll(&pfd, 1, deadline - now > 100000 ? 100 : (int) ((deadline - now + 999) / 1000));
                scan_budget_keepalive(s->budget);
                if (r <= 0)
                        continue;
                k = read(p[0], &rec, sizeof(rec));
                if (k < 0 && errno == EINTR)
                        continue;
                if (k != (ssize_t) sizeof(rec) || rec.index != next) {
                        /* It died (or lied): that namespace is unreadable, the next worker goes on. */
                        pending_unreadable(&s->pending[todo[next]], -EIO, strdup("the scan's worker died on it"));
                        worker_abandon(&w);
                        return next + 1;
                }
                pending_walked(&s->pending[todo[next]], rec.result.error, &rec.result);
                next++;
                deadline = scan_budget_namespace_deadline(s->budget);
        }
        /* It exits right after its last answer. */
        (void) worker_wait(&w, now_usec(CLOCK_MONOTONIC) + s->budget->namespace_usec, s->budget);
        return next;
}

/* Every namespace the dentry cache could not answer for, in workers. */
static void walk_deferred(Scan *s) {
        _cleanup_free_ size_t *todo = calloc(s->n_pending ?: 1, sizeof(size_t));
        size_t n = 0;

        if (!todo) {
                for (size_t i = 0; i < s->n_pending; i++)
                        if (s->pending[i].state == PENDING_WORKER)
                                pending_unreadable(&s->pending[i], -ENOMEM, NULL);
                return;
        }
        for (size_t i = 0; i < s->n_pending; i++)
                if (s->pending[i].state == PENDING_WORKER)
                        todo[n++] = i;
        s->n_deferred = (unsigned) n;
        for (size_t next = 0; next < n; ) {
                if (scan_budget_left(s->budget) == 0) {
                        _cleanup_free_ char *b = format_usec(s->budget->refresh_usec);

                        for (; next < n; next++) {
                                pending_unreadable(&s->pending[todo[next]], -ETIME, NULL);
                                (void) asprintf_safe(&s->pending[todo[next]].v.error_text,
                                                     "not read: the run's scan budget (%s) was used up", strna(b));
                        }
                        break;
                }
                next = worker_run(s, todo, n, next);
        }
}

static bool is_extension_source(const char *source) {
        for (ImageClass k = 0; source && k < _IMAGE_CLASS_MAX; k++)
                if (streq(source, image_class_info[k].overlay_source) ||
                    streq(source, image_class_info[k].foreign_source))
                        return true;
        return false;
}

/*
 * A view on an earlier overlay's number (or, taking over, on anything): is
 * that mount an overlay of tuck's or systemd-sysext's? Its mount table says,
 * within the budget; its flags come from there too.
 */
/* Too long or too slow (past @limit): unreadable, said in words; @since: when that was found, if earlier. */
static void pending_table_refused(Pending *p, int error, uint64_t limit, uint64_t since) {
        _cleanup_free_ char *budget = format_usec(limit), *why = NULL, *when = NULL;

        pending_unreadable(p, error, NULL);
        if (error == -E2BIG)
                (void) asprintf_safe(&why, "its mount table has more than %" PRIu64 " mounts", limit);
        else
                (void) asprintf_safe(&why, "its mount table could not be read within %s", strna(budget));
        if (since != 0)
                when = format_timestamp(since);
        (void) asprintf_safe(&p->v.error_text, "%s%s%s: not read", strna(why), when ? ", seen at " : "",
                             strempty(when));
}

static void pending_confirm(Scan *s, Pending *p) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        const Stuck *stuck;
        struct libmnt_fs *fs;
        int r;

        if (stuck_find(s, p->v.ns_ino, STUCK_TABLE, &stuck)) {
                pending_table_refused(p, stuck->error, stuck->limit, stuck->since);
                return;
        }
        s->n_tables++;
        r = namespace_view_mount_table(&p->v, s->budget, &tb);
        if (r == -ESRCH) {
                pending_drop(p);
                return;
        }
        if (r == -E2BIG || r == -ETIMEDOUT) {
                pending_table_refused(p, r, r == -E2BIG ? s->budget->max_mounts : s->budget->namespace_usec, 0);
                stuck_add(s, p, STUCK_TABLE, r, NULL);
                return;
        }
        if (r < 0) {
                pending_unreadable(p, r, NULL);
                return;
        }
        fs = mount_table_find_id(tb, (int) p->v.mnt_id);
        if (!fs)
                return;
        p->v.attr = mount_attr_from_options(mnt_fs_get_vfs_options(fs));
        p->v.attr_known = true;
        if (streq_ptr(mnt_fs_get_fstype(fs), "overlay") && is_extension_source(mnt_fs_get_source(fs))) {
                p->v.source = strdup(mnt_fs_get_source(fs));
                if (!p->v.source)
                        pending_unreadable(p, -ENOMEM, NULL);
        }
}

/* After the walk: which views are kept, and the mount tables of the few that need one. */
static void pending_settle(Scan *s, Pending *p) {
        const NsScanSpec *spec = s->spec;
        bool candidate;

        if (p->state != PENDING_KEEP || p->v.error < 0)
                return;
        if (p->want_sees_root && !p->sees_root) {
                pending_drop(p);        /* another test host's namespace */
                return;
        }
        if (pending_follows(s, p)) {
                pending_drop(p);
                s->n_following++;
                return;
        }
        if (p->v.dev == spec->live && spec->live != 0)
                return;
        if (spec->base != 0 && p->v.dev == spec->base)
                return;
        candidate = dev_in(p->v.dev, spec->ours, spec->n_ours) || (spec->flags & NSSCAN_ANY_CANDIDATE);
        if (candidate)
                pending_confirm(s, p);
        if (p->state != PENDING_KEEP || p->v.error < 0 || (spec->flags & NSSCAN_ALL))
                return;
        if (!p->v.source) {
                if (candidate)
                        log_debug("%s: pid %d shows device %u:%u, a number one of our past overlays had: not "
                                  "ours now.", spec->path, (int) p->v.pid, major(p->v.dev), minor(p->v.dev));
                pending_drop(p);
        }
}

static void read_comm(int proc_fd, char comm[static 16]) {
        _cleanup_free_ char *text = NULL;

        if (read_full_file_at(proc_fd, "comm", 64, &text) < 0) {
                strcpy(comm, "?");
                return;
        }
        /* Only the trailing newline the kernel adds: the rest is the process's own. */
        if (*text && text[strlen(text) - 1] == '\n')
                text[strlen(text) - 1] = 0;
        snprintf(comm, 16, "%s", text);
}

static uint64_t ns_owner(int proc_fd) {
        _cleanup_close_ int ns_fd = -EBADF, user_fd = -EBADF;
        struct stat st;

        ns_fd = openat(proc_fd, "ns/mnt", O_RDONLY | O_CLOEXEC);
        if (ns_fd < 0)
                return 0;
        user_fd = ioctl(ns_fd, NS_GET_USERNS);
        if (user_fd < 0 || fstat(user_fd, &st) < 0)
                return 0;
        return st.st_ino;
}

/*
 * Who it is, from systemd's view of its cgroup (and machined's registry),
 * read by pid: so only believed if the pidfd's process is still there
 * afterwards. -ESRCH: it is gone, and with it what was read.
 */
static int view_identify(NamespaceView *v) {
        _cleanup_close_ int proc_fd = -EBADF;
        struct stat st;
        uid_t uid;

        proc_fd = namespace_view_open_proc(v);
        if (proc_fd < 0)
                return proc_fd;
        read_comm(proc_fd, v->comm);
        v->userns_ino = ns_owner(proc_fd);
        v->userns_ours = v->userns_ino != 0 && stat("/proc/self/ns/user", &st) >= 0 && st.st_ino == v->userns_ino;
        free(v->unit);
        free(v->user_unit);
        free(v->machine);
        v->unit = v->user_unit = v->machine = NULL;

        if (sd_pid_get_unit(v->pid, &v->unit) < 0)
                v->unit = NULL;
        if (sd_pid_get_user_unit(v->pid, &v->user_unit) < 0)
                v->user_unit = NULL;
        v->owner_uid = sd_pid_get_owner_uid(v->pid, &uid) >= 0 ? uid : UID_INVALID;
        if (sd_pid_get_machine_name(v->pid, &v->machine) < 0)
                v->machine = NULL;
        return pidfd_check_alive(v->pidfd);
}

int namespace_view_identify(NamespaceView *v) {
        int r = view_identify(v);

        if (r < 0) {
                /* Read from someone else, or from no one: nothing of it stands. */
                free(v->unit);
                free(v->user_unit);
                free(v->machine);
                v->unit = v->user_unit = v->machine = NULL;
                v->owner_uid = UID_INVALID;
                strcpy(v->comm, "?");
        }
        return r;
}

static uint64_t link_ino(int dir_fd, const char *path) {
        char buf[64];
        ssize_t k;

        k = readlinkat(dir_fd, path, buf, sizeof(buf) - 1);
        if (k < 0)
                return 0;
        buf[k] = 0;
        /* "mnt:[4026531841]" */
        return strncmp(buf, "mnt:[", 5) == 0 ? strtoull(buf + 5, NULL, 10) : 0;
}

/* Every process, one pending view per mount namespace (the first process found in it). */
static int enumerate(Scan *s) {
        _cleanup_(ino_map_done) InoMap seen = {};
        _cleanup_closedir_ DIR *d = NULL;
        int r;

        d = opendir_at(AT_FDCWD, "/proc");
        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir_no_dot(d)); ) {
                char *end, path[64];
                long pid = strtol(de->d_name, &end, 10);
                uint64_t ino;
                size_t *known;
                Pending *a;

                if (*end != 0 || pid <= 0)
                        continue;
                s->n_processes++;
                snprintf(path, sizeof(path), "%ld/ns/mnt", pid);
                ino = link_ino(dirfd(d), path);
                if (ino == 0)
                        continue;       /* gone, or a kernel thread */
                known = ino_map_get(&seen, ino);
                if (known) {
                        if (*known != SIZE_MAX)
                                s->pending[*known].v.n_processes++;
                        continue;
                }
                if ((s->spec->flags & NSSCAN_SKIP_SELF) && ino == s->self_ns) {
                        r = ino_map_put(&seen, ino, SIZE_MAX);
                        if (r < 0)
                                return r;
                        continue;
                }
                a = realloc(s->pending, (s->n_pending + 1) * sizeof(Pending));
                if (!a)
                        return -ENOMEM;
                s->pending = a;
                s->pending[s->n_pending] = (Pending) { .v = NAMESPACE_VIEW_NULL };
                s->pending[s->n_pending].v.ns_ino = ino;
                s->pending[s->n_pending].v.pid = (pid_t) pid;
                s->pending[s->n_pending].v.n_processes = 1;
                r = ino_map_put(&seen, ino, s->n_pending++);
                if (r < 0)
                        return r;
        }
        return 0;
}

static int scan_init(Scan *s, const NsScanSpec *spec, ScanBudget *fallback) {
        int r;

        *s = (Scan) {
                .spec = spec,
                .budget = spec->budget ?: fallback,
                .session = getsid(0),
        };
        scan_budget_start(s->budget);
        if (stat(spec->root, &s->our_root) < 0 || stat("/", &s->slash) < 0)
                return -errno;
        s->self_ns = link_ino(AT_FDCWD, "/proc/self/ns/mnt");
        r = ns_stuck_load(s->budget, &s->stuck, &s->n_stuck);
        if (r < 0)
                log_debug_errno(r, "Ignoring the record of stuck scans: %m");
        for (size_t i = 0; spec->followers_in && i < spec->followers_in->n; i++) {
                r = ino_map_put(&s->followers, spec->followers_in->list[i].ns_ino, i);
                if (r < 0)
                        return r;
        }
        if (spec->followers_out) {
                struct rlimit rl;

                /* Two descriptors each, in at most a quarter of what the limit leaves above 1024. */
                if (getrlimit(RLIMIT_NOFILE, &rl) >= 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur > 1024)
                        s->followers_max = (size_t) (rl.rlim_cur - 1024) / 8;
        }
        return 0;
}

static void scan_done(Scan *s) {
        if (s->stuck_changed) {
                int r = ns_stuck_save(s->budget, s->stuck, s->n_stuck);

                if (r < 0)
                        log_debug_errno(r, "Cannot record the scans that got stuck: %m");
        }
        free(s->stuck);
        for (size_t i = 0; i < s->n_pending; i++)
                namespace_view_done(&s->pending[i].v);
        free(s->pending);
        ino_map_done(&s->followers);
}

/* Walk, settle, identify; the kept views, in the order their processes were found. */
static int scan_pending(Scan *s, NamespaceView **ret, size_t *ret_n) {
        NamespaceView *views;
        size_t n = 0;

        for (size_t i = 0; i < s->n_pending; i++) {
                pending_start(s, &s->pending[i]);
                scan_budget_keepalive(s->budget);
        }
        walk_deferred(s);
        for (size_t i = 0; i < s->n_pending; i++)
                pending_settle(s, &s->pending[i]);

        views = calloc(s->n_pending ?: 1, sizeof(NamespaceView));
        if (!views)
                return -ENOMEM;
        for (size_t i = 0; i < s->n_pending; i++) {
                Pending *p = &s->pending[i];

                if (p->state != PENDING_KEEP)
                        continue;
                /* Still the process whose pidfd was taken before any of it was read? Then all of
                 * it was its own. (An unreadable view says so about the process that is there.)
                 * One without a pidfd (none could be had) was never read: it stays, unreadable,
                 * nameless and not to be acted on (namespace_view_open_proc() refuses it). */
                if (p->v.pidfd < 0 && p->v.error < 0) {
                        strcpy(p->v.comm, "?");
                        views[n++] = p->v;
                        p->v = NAMESPACE_VIEW_NULL;
                        continue;
                }
                if (pidfd_check_alive(p->v.pidfd) < 0)
                        continue;
                if ((s->spec->flags & NSSCAN_IDENTIFY) && namespace_view_identify(&p->v) == -ESRCH)
                        continue;       /* gone meanwhile */
                views[n++] = p->v;
                p->v = NAMESPACE_VIEW_NULL;
        }
        *ret = views;
        *ret_n = n;
        return 0;
}

int namespaces_scan(const NsScanSpec *spec, NamespaceView **ret, size_t *ret_n) {
        ScanBudget fallback = SCAN_BUDGET_DEFAULT;
        uint64_t start = now_usec(CLOCK_MONOTONIC);
        Scan s;
        int r;

        r = scan_init(&s, spec, &fallback);
        if (r >= 0)
                r = enumerate(&s);
        if (r >= 0)
                r = scan_pending(&s, ret, ret_n);
        if (r >= 0)
                log_debug("%s: %u processes, %zu namespaces, %u following, %zu kept, %u known from the scan "
                          "before, %u walked by a worker, %u mount tables read, in %" PRIu64 " us.", spec->path,
                          s.n_processes, s.n_pending, s.n_following, *ret_n, s.n_reused, s.n_deferred, s.n_tables,
                          now_usec(CLOCK_MONOTONIC) - start);
        scan_done(&s);
        return r;
}

/* One namespace, by its pidfd (taken over), read whatever it shows. */
static int read_one(const NsScanSpec *spec, pid_t pid, int pidfd, NamespaceView *ret) {
        _cleanup_close_ int proc_fd = -EBADF;
        NsScanSpec all = *spec;
        ScanBudget fallback = SCAN_BUDGET_DEFAULT;
        NamespaceView *views = NULL;
        size_t n = 0;
        Scan s;
        int r;

        /* Whatever it shows, with its flags: from its mount table where the number is not ours now. */
        all.flags |= NSSCAN_ALL | NSSCAN_IDENTIFY | NSSCAN_ANY_CANDIDATE;
        all.flags &= ~NSSCAN_SKIP_SELF;
        r = scan_init(&s, &all, &fallback);
        if (r < 0) {
                safe_close(pidfd);
                scan_done(&s);
                return r;
        }
        s.pending = calloc(1, sizeof(Pending));
        if (!s.pending) {
                safe_close(pidfd);
                scan_done(&s);
                return -ENOMEM;
        }
        s.n_pending = 1;
        s.pending[0] = (Pending) { .v = NAMESPACE_VIEW_NULL };
        s.pending[0].v.pid = pid;
        s.pending[0].v.pidfd = pidfd;
        s.pending[0].v.n_processes = 1;
        proc_fd = namespace_view_open_proc(&s.pending[0].v);
        r = proc_fd < 0 ? proc_fd : 0;
        if (r >= 0)
                s.pending[0].v.ns_ino = link_ino(proc_fd, "ns/mnt");
        if (r >= 0 && s.pending[0].v.ns_ino == 0)
                r = -ESRCH;
        if (r >= 0)
                r = scan_pending(&s, &views, &n);
        if (r >= 0 && n == 0)
                r = -ESRCH;     /* gone, or no such directory there */
        if (r >= 0) {
                *ret = views[0];
                views[0] = NAMESPACE_VIEW_NULL;
        }
        namespace_views_free(views, n);
        scan_done(&s);
        return r;
}

int namespace_view_reread(const NamespaceView *old, const NsScanSpec *spec, NamespaceView *ret) {
        int fd;

        if (old->pidfd < 0)
                return -ESRCH;
        fd = RET_NERRNO(fcntl(old->pidfd, F_DUPFD_CLOEXEC, 3));
        if (fd < 0)
                return fd;
        return read_one(spec, old->pid, fd, ret);
}

int namespace_view_read(pid_t pid, const char *root, const char *path, NamespaceView *ret) {
        NsScanSpec spec = { .root = root, .path = path };
        int fd;

        fd = pidfd_open_above_stdio(pid);
        if (fd < 0)
                return fd;
        return read_one(&spec, pid, fd, ret);
}

bool dev_in(dev_t d, const dev_t *devs, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (devs[i] == d)
                        return true;
        return false;
}

void namespace_view_classify(NamespaceView *v, const Generation *g) {
        v->state = v->error < 0 ? NS_VIEW_UNREADABLE : NS_VIEW_FOREIGN;
        v->generation = 0;
        if (!g || v->error < 0)
                return;
        if (g->merged && v->dev == g->overlay_dev) {
                v->state = NS_VIEW_CURRENT;
                v->generation = g->number;
                return;
        }
        for (size_t i = 0; i < g->n_history; i++)
                if (v->dev == g->history[i].dev) {
                        v->state = NS_VIEW_STALE;
                        v->generation = g->history[i].number;
                        return;
                }
        if (g->base_dev != 0 && v->dev == g->base_dev)
                v->state = NS_VIEW_BASE;
}

int nsscan_hierarchy(const char *root, const char *path, const Generation *g, ScanBudget *budget,
                     NamespaceView **ret, size_t *ret_n) {
        dev_t history[GENERATION_HISTORY_MAX];
        size_t n_history = 0;
        NsScanSpec spec = {
                .root = root,
                .path = path,
                .ours = history,
                .flags = NSSCAN_ALL | NSSCAN_IDENTIFY,
                .budget = budget,
        };
        struct stat st;
        int r;

        /* Numbers known to be theirs: what is on top here now, and the base while tuck holds it (merged). */
        if (stat(path, &st) < 0)
                return -errno;
        if (g && g->merged && st.st_dev == g->overlay_dev)
                spec.live = st.st_dev;
        if (g && g->base_dev != 0 && (g->merged || st.st_dev == g->base_dev))
                spec.base = g->base_dev;

        for (size_t i = 0; g && i < g->n_history && n_history < ELEMENTSOF(history); i++)
                if (g->history[i].dev != spec.live && g->history[i].dev != spec.base)
                        history[n_history++] = g->history[i].dev;
        spec.n_ours = n_history;

        r = namespaces_scan(&spec, ret, ret_n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < *ret_n; i++) {
                NamespaceView *v = &(*ret)[i];

                namespace_view_classify(v, g);
                /* An older overlay's number may be someone else's mount by now. */
                if (v->state == NS_VIEW_STALE && !v->source) {
                        v->state = NS_VIEW_FOREIGN;
                        v->generation = 0;
                }
        }
        return 0;
}
