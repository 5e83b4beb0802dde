/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/statfs.h>
#include <unistd.h>

#include "mountinfo.h"
#include "trust.h"
#include "util.h"

#define TRUST_MAX_SYMLINKS 40

const char *trust_refusal(const struct stat *st, bool on_the_way, char buf[static 64]) {
        if (st->st_uid != 0) {
                snprintf(buf, 64, "owned by uid %u, not root", (unsigned) st->st_uid);
                return buf;
        }
        if (S_ISLNK(st->st_mode))
                return NULL;   /* a symlink's mode means nothing; its directory and target count */
        /* Sticky: others may add entries but never rename or remove root's. */
        if ((st->st_mode & (S_IWGRP | S_IWOTH)) && !(on_the_way && S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX))) {
                snprintf(buf, 64, "writable by %s (mode %04o)",
                         (st->st_mode & S_IWOTH) ? "others" : "its group", (unsigned) (st->st_mode & 07777));
                return buf;
        }
        return NULL;
}

/*
 * The file system fd is on, entered from another one: can its owners and
 * modes be believed? A FUSE server reports them itself, so a user's FUSE
 * mount (fusermount3, with user_allow_other in /etc/fuse.conf, so root may
 * read it) can call every file root's and 0755. Only one root mounted is
 * believed: user_id=0 in its super options (fusermount3 writes the mounting
 * user's there), or none (virtiofs, mounted by root alone). NULL if it
 * passes. fstatfs() is asked of FUSE too, but only of a file system a
 * lookup just answered: it adds no server to wait for.
 */
static const char *mount_refusal(int fd, char buf[static 64]) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_fs *fs;
        struct statfs sfs;
        uint64_t id;
        char *value = NULL;
        size_t n = 0;
        int r;

        if (fstatfs(fd, &sfs) < 0) {
                snprintf(buf, 64, "on a file system that cannot say what it is (%s)", strerror(errno));
                return buf;
        }
        if (sfs.f_type != FUSE_SUPER_MAGIC)
                return NULL;
        r = path_get_mnt_id(fd, "", &id);
        if (r >= 0)
                r = mount_table_read(0, &tb);
        fs = r >= 0 ? mount_table_find_id(tb, (int) id) : NULL;
        if (!fs) {
                snprintf(buf, 64, "on a FUSE file system whose mount cannot be found");
                return buf;
        }
        r = mnt_optstr_get_option(mnt_fs_get_fs_options(fs), "user_id", &value, &n);
        if (r == 1 || (r == 0 && n == 1 && value[0] == '0'))
                return NULL;   /* no user_id (virtiofs), or root's */
        if (r < 0 || n > 20)
                snprintf(buf, 64, "on a FUSE file system with a user_id= that cannot be read");
        else
                snprintf(buf, 64, "on a FUSE file system mounted by uid %.*s", (int) n, value);
        return buf;
}

typedef struct Walk {
        int fds[PATH_MAX / 2];   /* fds[0]: "/", fds[n - 1]: where we are */
        size_t n;
        char where[PATH_MAX];    /* the path of fds[n - 1], for reasons */
        char via[PATH_MAX];      /* the last symlink followed, "" if none */
} Walk;

static void walk_done(Walk *w) {
        for (size_t i = 0; i < w->n; i++)
                safe_close(w->fds[i]);
        w->n = 0;
}

/* via: the last symlink followed, "" if none. */
static int refuse_via(const char *via, const char *path, const char *why, char **ret_reason) {
        if (via[0])
                (void) asprintf_safe(ret_reason, "'%s' (reached through the symlink '%s') is %s; whoever can "
                                     "write there could change what is mounted", path, via, why);
        else
                (void) asprintf_safe(ret_reason, "'%s' is %s; whoever can write there could change what is "
                                     "mounted", path, why);
        return 0;
}

static int refuse(Walk *w, const char *path, const char *why, char **ret_reason) {
        return refuse_via(w->via, path, why, ret_reason);
}

static void walk_up(Walk *w, bool to_root) {
        while (w->n > 1) {
                char *slash = strrchr(w->where, '/');

                safe_close(w->fds[--w->n]);
                if (slash)
                        *(slash == w->where ? slash + 1 : slash) = 0;
                if (!to_root)
                        break;
        }
}

/* The path of entry c of where the walk is. */
static void walk_entry_path(const Walk *w, const char *c, char out[static PATH_MAX]) {
        snprintf(out, PATH_MAX, "%s%s%s", w->where, streq(w->where, "/") ? "" : "/", c);
}

/* Enter directory entry c (checked as a directory on the way). */
static int walk_down(Walk *w, int fd, const char *c) {
        size_t l = strlen(w->where);

        if (w->n >= ELEMENTSOF(w->fds) || l + strlen(c) + 2 > sizeof(w->where)) {
                safe_close(fd);
                return -ENAMETOOLONG;
        }
        snprintf(w->where + l, sizeof(w->where) - l, "%s%s", l > 1 ? "/" : "", c);
        w->fds[w->n++] = fd;
        return 0;
}

/* The end of a walk at st (path): what kind says, then the entry's own rule. */
static const char *end_refusal(const struct stat *st, TrustKind kind, char buf[static 64]) {
        if (kind == TRUST_FILE ? !S_ISREG(st->st_mode) : !S_ISDIR(st->st_mode))
                return kind == TRUST_FILE ? "not a regular file" : "not a directory";
        return trust_refusal(st, false, buf);
}

/*
 * The walk of trust_check_path(). With fill, a walk that passed and took no
 * symlink, ".", ".." or "//" leaves its last directory in fill: every
 * component down to it was checked on the way, and only root can change
 * that now.
 */
static int walk_path(const char *path, TrustKind kind, struct stat *ret_st, char **ret_resolved, char **ret_reason,
                     TrustCache *fill) {
        _cleanup_(walk_done) Walk w = { .where = "/" };
        _cleanup_free_ char *todo = strdup(path);
        unsigned links = 0;
        bool others_add;
        const char *rest, *why;
        struct stat st;
        dev_t dev;
        char buf[64];
        int fd, r;

        if (!todo)
                return -ENOMEM;
        if (path[0] != '/')
                return -EINVAL;
        fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        w.fds[w.n++] = fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        dev = st.st_dev;
        why = mount_refusal(fd, buf);
        if (why)
                return refuse(&w, "/", why, ret_reason);

        for (rest = todo; ; ) {
                char c[NAME_MAX + 1], target[PATH_MAX], *next;
                size_t n;
                ssize_t k;

                rest += strspn(rest, "/");
                if (!*rest)
                        break;
                /* What we are in is a directory on the way: it must keep others out. */
                if (trust_refusal(&st, true, buf))
                        return refuse(&w, w.where, buf, ret_reason);

                n = strcspn(rest, "/");
                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(c, rest, n);
                c[n] = 0;
                rest += n;
                if (streq(c, "."))
                        continue;
                if (streq(c, "..")) {
                        walk_up(&w, false);
                        if (fstat(w.fds[w.n - 1], &st) < 0)
                                return -errno;
                        continue;
                }

                /* Passed as on the way: writable by others only if sticky. */
                others_add = st.st_mode & (S_IWGRP | S_IWOTH);
                dev = st.st_dev;
                fd = openat(w.fds[w.n - 1], c, O_PATH | O_NOFOLLOW | O_CLOEXEC);
                if (fd < 0)
                        return -errno;
                if (fstat(fd, &st) < 0) {
                        r = -errno;
                        safe_close(fd);
                        return r;
                }
                /* Another file system: are the owners it reports its own? */
                why = st.st_dev != dev ? mount_refusal(fd, buf) : NULL;
                if (why) {
                        char entry[PATH_MAX];

                        safe_close(fd);
                        walk_entry_path(&w, c, entry);
                        return refuse(&w, entry, why, ret_reason);
                }
                if (!S_ISLNK(st.st_mode)) {
                        if (!S_ISDIR(st.st_mode) && *rest) {
                                safe_close(fd);
                                return -ENOTDIR;
                        }
                        r = walk_down(&w, fd, c);
                        if (r < 0)
                                return r;
                        continue;
                }

                /* A symlink: it lives in a directory checked above. Where others may add
                 * names (a sticky directory, as /tmp) whoever owns it could swap it for a
                 * link to any image of root's, as the kernel's protected_symlinks knows
                 * (tuck reads links itself, so it is not asked): there only root's is
                 * followed. Elsewhere only root can replace it. Then its target. */
                if (others_add && st.st_uid != 0) {
                        char link[PATH_MAX];

                        safe_close(fd);
                        walk_entry_path(&w, c, link);
                        snprintf(buf, sizeof(buf), "owned by uid %u, in a directory others can add to",
                                 (unsigned) st.st_uid);
                        return refuse(&w, link, buf, ret_reason);
                }
                k = readlinkat(fd, "", target, sizeof(target) - 1);
                r = k < 0 ? -errno : 0;
                safe_close(fd);
                if (r < 0)
                        return r;
                if (++links > TRUST_MAX_SYMLINKS)
                        return -ELOOP;
                target[k] = 0;
                walk_entry_path(&w, c, w.via);
                if (target[0] == '/')
                        walk_up(&w, true);
                if (fstat(w.fds[w.n - 1], &st) < 0)
                        return -errno;
                next = strjoin(target, rest);   /* rest is "" or starts with '/' */
                if (!next)
                        return -ENOMEM;
                free(todo);
                rest = todo = next;
        }

        /* The end of the walk: what kind says. */
        why = end_refusal(&st, kind, buf);
        if (why)
                return refuse(&w, w.where, why, ret_reason);
        if (ret_resolved && !(*ret_resolved = strdup(w.where)))
                return -ENOMEM;
        if (ret_st)
                *ret_st = st;
        if (fill && !w.via[0] && w.n > 2 && streq(w.where, path)) {
                char *dir = strndup(path, strrchr(path, '/') - path);

                if (dir) {
                        trust_cache_done(fill);
                        fill->dir = dir;
                        fill->fd = TAKE_FD(w.fds[w.n - 2]);
                        fill->dev = dev;   /* the last step was from that directory */
                }
        }
        return 1;
}

int trust_check_path(const char *path, TrustKind kind, struct stat *ret_st, char **ret_resolved, char **ret_reason) {
        return walk_path(path, kind, ret_st, ret_resolved, ret_reason, NULL);
}

void trust_cache_done(TrustCache *cache) {
        free(cache->dir);
        cache->dir = NULL;
        cache->fd = safe_close(cache->fd);
}

/* One entry's name: no "/", not "." or "..", not empty. */
static bool name_is_plain(const char *name) {
        return name[0] && !strchr(name, '/') && !streq(name, ".") && !streq(name, "..") &&
               strlen(name) <= NAME_MAX;
}

int trust_check_path_cached(TrustCache *cache, const char *path, TrustKind kind, struct stat *ret_st,
                            char **ret_resolved, char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;
        const char *name = cache->dir ? startswith(path, cache->dir) : NULL;
        struct stat st;
        char buf[64];
        const char *why;

        /* Only a name right in the cached directory; anything else is walked in full. */
        if (!name || name[0] != '/' || !name_is_plain(++name))
                return walk_path(path, kind, ret_st, ret_resolved, ret_reason, cache);
        /* A symlink's target is walked from "/"; so is a name the cached directory no longer
         * gives (it may have been replaced meanwhile): the full walk finds what is there now.
         * And one on another file system (a mount on the name): the full walk asks whose. */
        fd = openat(cache->fd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0 || S_ISLNK(st.st_mode) || st.st_dev != cache->dev) {
                if (fd < 0)
                        trust_cache_done(cache);
                return walk_path(path, kind, ret_st, ret_resolved, ret_reason, cache);
        }
        why = end_refusal(&st, kind, buf);
        if (why)
                return refuse_via("", path, why, ret_reason);
        if (ret_resolved && !(*ret_resolved = strdup(path)))
                return -ENOMEM;
        if (ret_st)
                *ret_st = st;
        return 1;
}

static char *tree_refused;
static size_t tree_root_len;

static int tree_check_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        char buf[64];
        const char *why = trust_refusal(st, false, buf);

        /* Sticky directories inside an image (a /usr/tmp) are what the image means them to be. */
        if (why && S_ISDIR(st->st_mode) && (st->st_mode & S_ISVTX) && st->st_uid == 0)
                why = NULL;
        if (!why)
                return 0;
        (void) asprintf_safe(&tree_refused, "'%s' in the directory image is %s; whoever can write it could "
                             "change what is mounted", strlen(path) > tree_root_len ? path + tree_root_len : "/",
                             why);
        return 1;
}

int trust_check_tree(const char *path, char **ret_reason) {
        int r;

        tree_refused = NULL;
        tree_root_len = strlen(path);
        r = nftw(path, tree_check_one, 16, FTW_PHYS);
        if (r < 0)
                return -errno;
        if (r == 0)
                return 1;
        if (ret_reason)
                *ret_reason = tree_refused;
        else
                free(tree_refused);
        tree_refused = NULL;
        return 0;
}
