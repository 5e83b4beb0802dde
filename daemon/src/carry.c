/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "carry.h"
#include "log.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "swap.h"
#include "util.h"
#include "worker.h"

/* ---------------------------------------------------------------- the plan (pure) */

typedef struct Entry {
        int id, parent;
        char decides;           /* what it is, with everything below it (UNDECIDED: ask its parent) */
        char verdict;           /* what it is, as entry_class() found */
        struct libmnt_fs *fs;
} Entry;

/* What a mount is to a classification: below which of the mounts asked about, or outside them. */
enum { UNDECIDED, OUTSIDE, BELOW_TOP, BELOW_OTHER };

static int entry_cmp(const void *a, const void *b) {
        const Entry *x = a, *y = b;

        return x->id < y->id ? -1 : x->id > y->id;
}

static Entry *entry_find(Entry *e, size_t n, int id) {
        Entry key = { .id = id };

        return bsearch(&key, e, n, sizeof(Entry), entry_cmp);
}

static bool below(const char *target, const char *path) {
        const char *rel;

        if (streq(path, "/"))
                return target[0] == '/' && target[1] != 0;
        rel = startswith(target, path);
        return rel && rel[0] == '/' && rel[strspn(rel, "/")] != 0;
}

static Entry *entry_parent(Entry *e, size_t n, const Entry *x) {
        Entry *p = entry_find(e, n, x->parent);

        return p == x ? NULL : p;
}

/*
 * What entry @i is: what the first mount on the way up from it that decides
 * says, OUTSIDE if none does. Walks up its parents until one is known, then
 * marks the whole way with the answer, so every entry is walked past once. A
 * chain longer than the table loops (a table read while mounts came and
 * went): -ELOOP.
 */
static int entry_class(Entry *e, size_t n, size_t i) {
        char verdict = OUTSIDE;
        Entry *x = &e[i];
        size_t steps;

        for (steps = 0; steps <= n && x; steps++) {
                if (x->verdict != UNDECIDED) {
                        verdict = x->verdict;
                        break;
                }
                if (x->decides != UNDECIDED) {
                        verdict = x->decides;
                        break;
                }
                x = entry_parent(e, n, x);
        }
        if (steps > n)
                return -ELOOP;
        for (x = &e[i]; x && x->verdict == UNDECIDED; x = x->decides != UNDECIDED ? NULL : entry_parent(e, n, x))
                x->verdict = verdict;
        return verdict;
}

/*
 * The table's mounts as entries sorted by ID, each with its verdict: what
 * @decide says of it or of the first mount above it it decides for
 * (entry_class()). -ELOOP for parents that loop.
 */
static int entries_classify(struct libmnt_table *tb, char (*decide)(struct libmnt_fs *fs, const void *userdata),
                            const void *userdata, Entry **ret, size_t *ret_n) {
        _cleanup_free_ Entry *e = NULL;
        struct libmnt_iter *it;
        struct libmnt_fs *fs;
        size_t n = 0, cap = (size_t) mnt_table_get_nents(tb);

        e = calloc(cap ?: 1, sizeof(Entry));
        it = mnt_new_iter(MNT_ITER_FORWARD);
        if (!e || !it) {
                mnt_free_iter(it);
                return -ENOMEM;
        }
        while (n < cap && mnt_table_next_fs(tb, it, &fs) == 0)
                e[n++] = (Entry) {
                        .id = mnt_fs_get_id(fs),
                        .parent = mnt_fs_get_parent_id(fs),
                        .decides = decide(fs, userdata),
                        .fs = fs,
                };
        mnt_free_iter(it);
        qsort(e, n, sizeof(Entry), entry_cmp);
        for (size_t i = 0; i < n; i++) {
                int r = entry_class(e, n, i);

                if (r < 0)
                        return r;
        }
        *ret = TAKE_PTR(e);
        *ret_n = n;
        return 0;
}

typedef struct PlanAsk {
        int top_id;
        const char *path;
} PlanAsk;

/* Sits on the top, below the hierarchy: it and all below it are carried. */
static char decide_carried(struct libmnt_fs *fs, const void *userdata) {
        const PlanAsk *q = userdata;
        const char *t = mnt_fs_get_target(fs);

        return mnt_fs_get_parent_id(fs) == q->top_id && mnt_fs_get_id(fs) != q->top_id && t && below(t, q->path)
                ? BELOW_TOP : UNDECIDED;
}

int carry_plan(struct libmnt_table *tb, int top_id, const char *path, char ***ret_places, unsigned *ret_n_mounts,
               char **ret_error) {
        _cleanup_strv_free_ char **places = NULL;
        _cleanup_free_ Entry *e = NULL;
        size_t n = 0;
        unsigned carried = 0;
        int r;

        r = mount_table_submounts(tb, top_id, path, &places);
        if (r < 0)
                return r;
        r = entries_classify(tb, decide_carried, &(PlanAsk) { .top_id = top_id, .path = path }, &e, &n);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                const char *opt;

                if (e[i].verdict != BELOW_TOP)
                        continue;
                if (++carried > CARRY_MAX_MOUNTS)
                        return -E2BIG;
                /* A clone skips unbindable mounts without a word (copy_tree()): refuse instead. */
                opt = mnt_fs_get_optional_fields(e[i].fs);
                if (opt && strstr(opt, "unbindable")) {
                        (void) asprintf_safe(ret_error, "'%s' is an unbindable mount: no clone can carry it",
                                             strna(mnt_fs_get_target(e[i].fs)));
                        return -EPERM;
                }
        }
        *ret_places = TAKE_PTR(places);
        *ret_n_mounts = carried;
        return 0;
}

typedef struct HalfwayAsk {
        int top_id, under_id;
} HalfwayAsk;

/* The top's own mounts, and the ones on the mount under it but for the top. */
static char decide_halfway(struct libmnt_fs *fs, const void *userdata) {
        const HalfwayAsk *q = userdata;
        int id = mnt_fs_get_id(fs), parent = mnt_fs_get_parent_id(fs);

        if (id == q->top_id)
                return OUTSIDE;
        if (parent == q->top_id)
                return BELOW_TOP;
        if (parent == q->under_id)
                return BELOW_OTHER;
        return UNDECIDED;
}

/* A mount as a carried clone of it shows: place, file system, root, type, flags. */
static char *mount_key(struct libmnt_fs *fs) {
        dev_t d = mnt_fs_get_devno(fs);
        char *k = NULL;

        (void) asprintf_safe(&k, "%s\n%u:%u\n%s\n%s\n%s", strna(mnt_fs_get_target(fs)), major(d), minor(d),
                             strna(mnt_fs_get_root(fs)), strna(mnt_fs_get_fstype(fs)),
                             strna(mnt_fs_get_vfs_options(fs)));
        return k;
}

/* Whether sorted @sub is a sub-multiset of sorted @set. */
static bool strv_sorted_within(char **sub, char **set) {
        for (; sub && *sub; sub++) {
                int c = 1;

                while (set && *set && (c = strcmp(*set, *sub)) < 0)
                        set++;
                if (c != 0)
                        return false;
                set++;
        }
        return true;
}

int carry_find_halfway(struct libmnt_table *tb, int top_id, dev_t dev, int *ret_id, unsigned *ret_kept,
                       uint64_t *ret_attr) {
        _cleanup_strv_free_ char **own = NULL, **under_own = NULL;
        _cleanup_free_ Entry *e = NULL;
        struct libmnt_fs *top, *under;
        const char *opt;
        size_t n = 0, counts[2] = {};
        int r;

        top = mount_table_find_id(tb, top_id);
        under = top ? mount_table_find_id(tb, mnt_fs_get_parent_id(top)) : NULL;
        if (!under || under == top || !streq_ptr(mnt_fs_get_target(under), mnt_fs_get_target(top)) ||
            mnt_fs_get_devno(under) != dev)
                return 0;
        /* Received by propagation (the host's copy in a slave namespace), not attached by a swap. */
        opt = mnt_fs_get_optional_fields(under);
        if (opt && strstr(opt, "master:"))
                return 0;

        r = entries_classify(tb, decide_halfway,
                             &(HalfwayAsk) { .top_id = top_id, .under_id = mnt_fs_get_id(under) }, &e, &n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < n; i++) {
                char ***l;

                if (e[i].verdict != BELOW_TOP && e[i].verdict != BELOW_OTHER)
                        continue;
                l = e[i].verdict == BELOW_TOP ? &own : &under_own;
                if (++counts[e[i].verdict == BELOW_OTHER] > CARRY_MAX_MOUNTS)
                        return 0;       /* more than a carry would take: not one of ours */
                r = strv_consume(l, mount_key(e[i].fs));
                if (r < 0)
                        return r;
        }
        strv_sort(own);
        strv_sort(under_own);
        if (!strv_sorted_within(own, under_own))
                return 0;
        *ret_id = mnt_fs_get_id(under);
        *ret_kept = (unsigned) counts[0];
        *ret_attr = mount_attr_from_options(mnt_fs_get_vfs_options(under));
        return 1;
}

/* ---------------------------------------------------------------- in the private copy */

typedef struct Peeled {
        const char *place;      /* relative to the top (points into the plan) */
        int fd;                 /* private recursive clone of what was topmost there */
        int id;                 /* its mount ID in the private copy (in the table) */
} Peeled;

typedef struct Carry {
        const CarrySpec *spec;
        int top_fd;             /* the top's copy, in our private namespace */
        uint64_t top_id;
        struct libmnt_table *table;     /* the private copy's, as it was before the peeling */
        char **places;
        unsigned n_mounts;
        unsigned dropped;       /* mounts the new tree already had, equal: not carried */
        Peeled *peeled;
        size_t n_peeled;
        char *error;
} Carry;


static void carry_done(Carry *c) {
        safe_close(c->top_fd);
        mnt_unref_table(c->table);
        strv_free(c->places);
        for (size_t i = 0; i < c->n_peeled; i++)
                safe_close(c->peeled[i].fd);
        free(c->peeled);
        free(c->error);
}

static int fd_mount_id(int fd, uint64_t *ret_id, mode_t *ret_mode) {
        struct statx sx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID | STATX_TYPE, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        *ret_id = sx.stx_mnt_id;
        if (ret_mode)
                *ret_mode = sx.stx_mode;
        return 0;
}

/*
 * Opens @place below @dir_fd (the root of mount @id) the way the kernel
 * would name it, but one component at a time, O_PATH|O_NOFOLLOW: every
 * directory on the way must be a directory of mount @id itself (else
 * -EXDEV: another mount covers the way there; -ELOOP: a symlink). The
 * last component is opened the same way, so it lands on whatever is
 * mounted there, if anything: *ret_id says which mount that is.
 */
static int open_place(int dir_fd, uint64_t id, const char *place, int *ret_fd, uint64_t *ret_id, mode_t *ret_mode) {
        _cleanup_close_ int cur = RET_NERRNO(fcntl(dir_fd, F_DUPFD_CLOEXEC, 3));
        const char *p = place;

        if (cur < 0)
                return cur;
        for (;;) {
                char c[NAME_MAX + 1];
                size_t k = strcspn(p, "/");
                uint64_t at;
                mode_t mode;
                int fd, r;

                if (k == 0 || k > NAME_MAX)
                        return -EINVAL;
                memcpy(c, p, k);
                c[k] = 0;
                if (streq(c, ".") || streq(c, ".."))
                        return -EINVAL;   /* a mount table's paths are canonical */
                p += k;
                p += strspn(p, "/");

                fd = RET_NERRNO(openat(cur, c, O_PATH | O_NOFOLLOW | O_CLOEXEC));
                if (fd < 0)
                        return fd;
                safe_close(cur);
                cur = fd;
                r = fd_mount_id(cur, &at, &mode);
                if (r < 0)
                        return r;
                if (*p == 0) {
                        *ret_id = at;
                        if (ret_mode)
                                *ret_mode = mode;
                        *ret_fd = TAKE_FD(cur);
                        return 0;
                }
                if (S_ISLNK(mode))
                        return -ELOOP;
                if (!S_ISDIR(mode))
                        return -ENOTDIR;
                if (at != id)
                        return -EXDEV;
        }
}

static int carry_fail(Carry *c, int r, const char *fmt, ...) _printf_(3, 4);
static int carry_fail(Carry *c, int r, const char *fmt, ...) {
        va_list ap;

        va_start(ap, fmt);
        (void) free_and_vasprintf(&c->error, fmt, ap);
        va_end(ap);
        return r;
}

/*
 * The root of the mount @fd is on (mount @id): up ".." while that stays on
 * it. A hierarchy that is no mount point yet (a first merge) is a directory
 * of the mount below it, whose propagation is what must change.
 */
static int open_mount_root(int fd, uint64_t id) {
        _cleanup_close_ int cur = RET_NERRNO(fcntl(fd, F_DUPFD_CLOEXEC, 3));

        if (cur < 0)
                return cur;
        for (unsigned depth = 0; depth < 4096; depth++) {
                _cleanup_close_ int up = RET_NERRNO(openat(cur, "..", O_PATH | O_DIRECTORY | O_CLOEXEC));
                struct stat a, b;
                uint64_t up_id = 0;
                int r;

                if (up < 0)
                        return up;
                r = fd_mount_id(up, &up_id, NULL);
                if (r < 0)
                        return r;
                if (fstat(cur, &a) < 0 || fstat(up, &b) < 0)
                        return -errno;
                /* Across into the mount below, or stuck at our root: this is it. */
                if (up_id != id || (a.st_ino == b.st_ino && a.st_dev == b.st_dev))
                        return TAKE_FD(cur);
                safe_close(cur);
                cur = TAKE_FD(up);
        }
        return -ELOOP;
}

/* Our namespace is a private copy now: find the top's copy, make everything below it private. */
static int carry_enter_copy(Carry *c) {
        _cleanup_close_ int root = -EBADF, mount_root = -EBADF;
        struct mount_attr a = { .propagation = MS_PRIVATE };
        struct stat st;
        int r;

        if (unshare(CLONE_NEWNS) < 0)
                return carry_fail(c, -errno, "cannot make a private copy of the mount namespace: %s",
                                  strerror(errno));
        root = RET_NERRNO(open("/", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (root < 0)
                return root;
        c->top_fd = openat_in_root(root, c->spec->path, O_PATH | O_DIRECTORY);
        if (c->top_fd < 0)
                return carry_fail(c, c->top_fd, "cannot open '%s': %s", c->spec->path, strerror(-c->top_fd));
        if (fstat(c->top_fd, &st) < 0)
                return -errno;
        if (st.st_dev != c->spec->top_dev)
                return carry_fail(c, -ESTALE, "'%s' changed while its mounts were being carried", c->spec->path);
        r = fd_mount_id(c->top_fd, &c->top_id, NULL);
        if (r < 0)
                return r;
        mount_root = open_mount_root(c->top_fd, c->top_id);
        if (mount_root < 0)
                return carry_fail(c, mount_root, "cannot find the mount '%s' is on: %s", c->spec->path,
                                  strerror(-mount_root));
        /* The top and everything below, private: what we unmount here must not propagate back. */
        if (mount_setattr(mount_root, "", AT_EMPTY_PATH | AT_RECURSIVE, &a, sizeof(a)) < 0)
                return carry_fail(c, -errno, "cannot make the copy of '%s' private: %s", c->spec->path,
                                  strerror(errno));
        return 0;
}

/* Our own (copied) mount table, through the procfs we were given. */
static int read_table(Carry *c, struct libmnt_table **ret) {
        int r = mount_table_read_at(c->spec->proc_fd, ret);

        if (r == -EIO)
                return carry_fail(c, r, "cannot parse the mount table");
        if (r < 0)
                return carry_fail(c, r, "cannot read the mount table: %s", strerror(-r));
        return 0;
}

/* The places where mounts sit on the top. */
static int carry_read_plan(Carry *c) {
        int r;

        r = read_table(c, &c->table);
        if (r < 0)
                return r;
        r = carry_plan(c->table, (int) c->top_id, c->spec->path, &c->places, &c->n_mounts, &c->error);
        if (r == -E2BIG)
                return carry_fail(c, r, "more than %u mounts below '%s'", CARRY_MAX_MOUNTS, c->spec->path);
        if (r == -ELOOP)
                return carry_fail(c, r, "the mount table of '%s' changed while it was read", c->spec->path);
        if (r >= 0)
                log_debug("%s: %u mounts below its top (mount %" PRIu64 ") to carry, at %zu places.",
                          c->spec->path, c->n_mounts, c->top_id, strv_length(c->places));
        return r;
}

static int peel_one(Carry *c, const char *place, int fd, uint64_t id) {
        _cleanup_free_ char *where = path_join(c->spec->path, place);
        Peeled *p;
        int clone;

        if (!where)
                return -ENOMEM;
        clone = open_tree(fd, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (clone < 0)
                return carry_fail(c, -errno, "cannot clone the mount at '%s': %s", where, strerror(errno));
        p = realloc(c->peeled, (c->n_peeled + 1) * sizeof(Peeled));
        if (!p) {
                safe_close(clone);
                return -ENOMEM;
        }
        c->peeled = p;
        c->peeled[c->n_peeled++] = (Peeled) { .place = place, .fd = clone, .id = (int) id };
        /* Here only (private copy): reveals what it covered. The path was just
         * walked component by component on the top: it names this mount. */
        if (umount2(where, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                return carry_fail(c, -errno, "cannot unmount '%s' in the private copy: %s", where,
                                  strerror(errno));
        return 0;
}

/*
 * Clone and unmount, round after round, the topmost mount at each place
 * still reachable, until no place has a mount on the top. A place covered
 * by another mount waits for a later round; a round without progress means
 * something cannot be reached.
 */
static int carry_peel(Carry *c) {
        size_t n = strv_length(c->places), left = n;
        _cleanup_free_ bool *done = calloc(n ?: 1, sizeof(bool));

        if (!done)
                return -ENOMEM;
        while (left > 0) {
                const char *blocked = NULL;
                bool progress = false;

                for (size_t i = 0; i < n; i++) {
                        _cleanup_close_ int fd = -EBADF;
                        uint64_t id;
                        int r;

                        if (done[i])
                                continue;
                        r = open_place(c->top_fd, c->top_id, c->places[i], &fd, &id, NULL);
                        if (r == -EXDEV) {
                                blocked = c->places[i];
                                continue;
                        }
                        if (r < 0)
                                return carry_fail(c, r, "cannot reach '%s/%s': %s", c->spec->path, c->places[i],
                                                  strerror(-r));
                        progress = true;
                        if (id == c->top_id) {
                                done[i] = true;
                                left--;
                                continue;
                        }
                        /* Each round takes at least one mount away: never more rounds than mounts. */
                        if (c->n_peeled >= c->n_mounts)
                                return carry_fail(c, -EBUSY, "more mounts below '%s' than its mount table listed",
                                                  c->spec->path);
                        r = peel_one(c, c->places[i], fd, id);
                        if (r < 0)
                                return r;
                }
                if (!progress)
                        return carry_fail(c, -EXDEV, "the mount at '%s/%s' cannot be reached", c->spec->path,
                                          strna(blocked));
        }
        return 0;
}

/* Our 4 flags and the rest of what makes a mount what it is, for comparing two. */
static bool same_flags(struct libmnt_fs *a, struct libmnt_fs *b) {
        static const char *const names[] = { "ro", "nosuid", "nodev", "noexec" };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                if ((mnt_fs_get_option(a, names[i], NULL, NULL) == 0) !=
                    (mnt_fs_get_option(b, names[i], NULL, NULL) == 0))
                        return false;
        return true;
}

/*
 * Is the bottom mount @id peeled at @place one the new tree already has
 * there, equal (the same file system, root and flags), with nothing of its
 * own below it? A heal's new tree brings the host's mounts below the
 * hierarchy afresh (umount propagation took the namespace's copies of them
 * off the stale top), and the clones of them an earlier heal left there are
 * such: carried, they would pile up one more at every heal.
 */
static bool tree_has_it(Carry *c, struct libmnt_table *now, uint64_t tree_id, const char *place, int id) {
        _cleanup_free_ char *where = path_join(c->spec->path, place);
        struct libmnt_fs *x = mount_table_find_id(c->table, id), *h = NULL, *fs;
        struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
        bool own = false;

        if (!where || !x || !it) {
                mnt_free_iter(it);
                return false;
        }
        while (mnt_table_next_fs(now, it, &fs) == 0)
                if (mnt_fs_get_parent_id(fs) == (int) tree_id && mnt_fs_streq_target(fs, where))
                        h = fs;
        mnt_reset_iter(it, MNT_ITER_FORWARD);
        /* Mounts of its own below it (its toppers were peeled apart, they do not count). */
        while (!own && mnt_table_next_fs(c->table, it, &fs) == 0)
                own = mnt_fs_get_parent_id(fs) == id && !mnt_fs_streq_target(fs, where);
        mnt_free_iter(it);
        return h && !own && mnt_fs_get_devno(h) == mnt_fs_get_devno(x) &&
               streq_ptr(mnt_fs_get_root(h), mnt_fs_get_root(x)) &&
               streq_ptr(mnt_fs_get_fstype(h), mnt_fs_get_fstype(x)) && same_flags(h, x);
}

/* Attach the new tree, open every place it needs, then the clones: bottom first, coverers last. */
static int carry_assemble(Carry *c, int *ret_fd) {
        size_t n = strv_length(c->places);
        _cleanup_free_ int *target = malloc((n ?: 1) * sizeof(int));
        _cleanup_free_ bool *bottom_seen = calloc(n ?: 1, sizeof(bool));
        _cleanup_mnt_table_ struct libmnt_table *now = NULL;
        int tree = c->spec->tree_fd;
        uint64_t tree_id;
        int r = 0, fd;

        if (!target || !bottom_seen)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                target[i] = -EBADF;
        /* The caller's tree itself (no kernel before 6.15 clones a detached one): it goes
         * with this copy of the namespace, and what the caller gets back is a clone. */
        if (move_mount(tree, "", c->top_fd, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
                r = carry_fail(c, -errno, "cannot attach the new tree in the private copy: %s", strerror(errno));
                goto done;
        }
        r = fd_mount_id(tree, &tree_id, NULL);
        if (r < 0)
                goto done;
        for (size_t i = 0; i < n; i++) {
                uint64_t id;
                mode_t mode;

                r = open_place(tree, tree_id, c->places[i], &target[i], &id, &mode);
                if (r >= 0 && S_ISLNK(mode))
                        r = -ELOOP;
                if (r < 0) {
                        r = carry_fail(c, r, "the new generation has no mount point for the mount at '%s/%s' "
                                       "(%s)", c->spec->path, c->places[i], strerror(-r));
                        goto done;
                }
        }
        if (c->n_peeled > 0) {
                r = read_table(c, &now);
                if (r < 0)
                        goto done;
        }
        for (size_t k = c->n_peeled; k > 0; k--) {
                const Peeled *p = &c->peeled[k - 1];
                size_t i = 0;

                while (i < n && c->places[i] != p->place)
                        i++;
                /* Peeled top first: the first met here, going back, is the bottom of its place. */
                if (!bottom_seen[i]) {
                        bottom_seen[i] = true;
                        if (tree_has_it(c, now, tree_id, p->place, p->id)) {
                                log_debug("%s/%s: the new tree has that mount already.", c->spec->path, p->place);
                                c->dropped++;
                                continue;
                        }
                }
                if (move_mount(p->fd, "", target[i], "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH) < 0) {
                        r = carry_fail(c, -errno, "cannot carry the mount at '%s/%s' onto the new tree: %s",
                                       c->spec->path, p->place, strerror(errno));
                        goto done;
                }
        }
        fd = open_tree(tree, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (fd < 0)
                r = carry_fail(c, -errno, "cannot clone the new tree with what it carries: %s", strerror(errno));
        else
                *ret_fd = fd;
done:
        for (size_t i = 0; i < n; i++)
                safe_close(target[i]);
        return r;
}

/* ---------------------------------------------------------------- the child and its answer */

typedef struct CarryAnswer {
        int error;              /* positive errno, 0 with the tree's fd attached */
        unsigned carried;
        char text[480];
} CarryAnswer;

static _Noreturn void carry_child(const CarrySpec *spec, int sock) {
        _cleanup_(carry_done) Carry c = { .spec = spec, .top_fd = -EBADF };
        CarryAnswer a = {};
        int fd = -EBADF, r;

        /* Never outlive the process that waits for us (a heal's worker killed at its deadline). */
        (void) prctl(PR_SET_PDEATHSIG, SIGKILL);
        r = carry_enter_copy(&c);
        if (r >= 0)
                r = carry_read_plan(&c);
        if (r >= 0)
                r = carry_peel(&c);
        if (r >= 0)
                r = carry_assemble(&c, &fd);
        a.error = r < 0 ? -r : 0;
        a.carried = c.n_mounts - c.dropped;
        snprintf(a.text, sizeof(a.text), "%s", c.error ?: (r < 0 ? strerror(-r) : ""));
        r = send_with_fd(sock, &a, sizeof(a), fd);
        _exit(r < 0 ? 1 : 0);
}

int carry_children(const CarrySpec *spec, int *ret_fd, unsigned *ret_carried, char **ret_error) {
        _cleanup_close_pair_ int pair[2] = { -EBADF, -EBADF };
        CarryAnswer a = {};
        Worker w = WORKER_NULL;
        int fd = -EBADF, r;

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return -errno;
        r = worker_fork(&w, (int[]) { spec->proc_fd, spec->tree_fd, pair[1] }, 3);
        if (r < 0)
                return r;
        if (r == 0)
                carry_child(spec, pair[1]);
        pair[1] = safe_close(pair[1]);
        r = worker_recv_wait(&w, pair[0], &a, sizeof(a), &fd,
                             spec->deadline ?: now_usec(CLOCK_MONOTONIC) + CARRY_TIMEOUT_USEC, spec->budget);
        if (r == -ETIMEDOUT)
                return refuse_with(ret_error, "carrying the mounts below '%s' did not finish in time", spec->path),
                       -ETIMEDOUT;
        if (r < 0 || r > 0)
                return refuse_with(ret_error, "the helper carrying the mounts below '%s' died", spec->path),
                       r < 0 ? r : -EPROTO;
        if (a.error != 0) {
                safe_close(fd);
                a.text[sizeof(a.text) - 1] = 0;
                (void) free_and_strdup(ret_error, a.text);
                return -a.error;
        }
        if (fd < 0)
                return -EPROTO;
        *ret_fd = fd;
        *ret_carried = a.carried;
        return 0;
}
