/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <linux/magic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/vfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "layer.h"
#include "util.h"

/* The overlayfs xattrs that change what a lower layer shows, in both namespaces. */
static const char * const overlay_prefixes[] = { "trusted.overlay.", "user.overlay." };

/* Has fd overlay xattr name ("opaque"), in either namespace? Its value (cut to 7 bytes) in value. */
static bool overlay_xattr(int fd, const char *name, char value[static 8]) {
        for (size_t i = 0; i < ELEMENTSOF(overlay_prefixes); i++) {
                char key[64];
                ssize_t n;

                snprintf(key, sizeof(key), "%s%s", overlay_prefixes[i], name);
                n = fgetxattr(fd, key, value, 7);
                if (n >= 0 || errno == ERANGE) {
                        value[n >= 0 ? n : 7] = 0;
                        return true;
                }
        }
        return false;
}

static const char *what_is(const struct stat *st) {
        if (S_ISCHR(st->st_mode) && major(st->st_rdev) == 0 && minor(st->st_rdev) == 0)
                return "a whiteout (character device 0/0)";
        if (S_ISLNK(st->st_mode))
                return "a symlink";
        if (S_ISDIR(st->st_mode))
                return "a directory";
        if (S_ISREG(st->st_mode))
                return "a file";
        return "a special file";
}

/*
 * Could fd carry an overlay xattr at all? One flistxattr() answers for the
 * six lookups (three names, two namespaces) of nearly every directory: the
 * list shows what fgetxattr() could read, trusted.* only to CAP_SYS_ADMIN in
 * both. A list that does not fit, or cannot be had, is "maybe". ENOTSUP
 * means "none" only on squashfs and erofs, which refuse getting as they
 * refuse listing when built without xattrs (as images mostly are); FUSE
 * answers ENOTSUP to a list its server does not implement while getting
 * still works, and overlayfs only ever gets.
 */
static bool may_have_overlay_xattrs(int fd) {
        char list[1024 + 1];
        struct statfs sf;
        ssize_t n;

        n = flistxattr(fd, list, sizeof(list) - 1);
        if (n < 0)
                return errno != ENOTSUP || fstatfs(fd, &sf) < 0 ||
                        ((uint32_t) sf.f_type != SQUASHFS_MAGIC && (uint32_t) sf.f_type != EROFS_SUPER_MAGIC_V1);
        list[n] = 0;   /* the last name ends in its own NUL; this only bounds a broken one */
        for (const char *k = list; k < list + n; k += strnlen(k, list + n - k) + 1)
                for (size_t i = 0; i < ELEMENTSOF(overlay_prefixes); i++)
                        if (startswith(k, overlay_prefixes[i]))
                                return true;
        return false;
}

/* A directory (entry, open at fd) that overlayfs would not merge as it is: opaque, redirected. */
static int check_dir_xattrs(int fd, const char *entry, const char *protected, char **ret_reason) {
        char value[8];

        if (!may_have_overlay_xattrs(fd))
                return 1;
        if (overlay_xattr(fd, "opaque", value) && streq(value, "y"))
                return refuse_with(ret_reason, "ships /%s as an opaque directory (overlay.opaque=y), which would "
                                   "hide the host's /%s", entry, protected);
        if (overlay_xattr(fd, "redirect", value) || overlay_xattr(fd, "metacopy", value))
                return refuse_with(ret_reason, "ships /%s with an overlay redirect or metacopy xattr, which would "
                                   "make overlayfs show something else than the host's /%s", entry, protected);
        return 1;
}

/*
 * One entry on the way to the protected path: absent (1, *ret_fd -EBADF), a
 * plain merged directory (1, *ret_fd open on it), or something that hides
 * what is beneath (0). entry is its path in the image, name its last part.
 */
static int check_entry(int dir_fd, const char *name, const char *entry, const char *protected, LayerRule rule,
                       int *ret_fd, char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;
        char value[8];
        struct stat st;
        int r;

        *ret_fd = -EBADF;
        if (fstatat(dir_fd, name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return errno == ENOENT ? 1 : -errno;

        if (rule == LAYER_ABSENT || !S_ISDIR(st.st_mode)) {
                const char *what = what_is(&st);

                if (S_ISREG(st.st_mode) && (fd = openat(dir_fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK |
                                                        O_CLOEXEC | O_NOCTTY)) >= 0 &&
                    overlay_xattr(fd, "whiteout", value))
                        what = "a whiteout (overlay.whiteout xattr)";
                if (rule == LAYER_ABSENT)
                        (void) asprintf_safe(ret_reason, "ships /%s as %s, which would replace or hide the host's",
                                             entry, what);
                else
                        (void) asprintf_safe(ret_reason, "ships /%s as %s, which would hide the host's /%s", entry,
                                             what, protected);
                return 0;
        }

        fd = openat(dir_fd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        r = check_dir_xattrs(fd, entry, protected, ret_reason);
        if (r > 0)
                *ret_fd = TAKE_FD(fd);
        return r;
}

/*
 * Walks path from *dir_fd, the directory its first `from` bytes name (0: the
 * tree), checking every entry on the way. On return *dir_fd is the deepest
 * directory on the way that passed and *dir_len the length of its name in
 * path (0: the tree), for the next path to go on from.
 */
static int walk(int *dir_fd, size_t *dir_len, const char *path, size_t from, LayerRule rule, char **ret_reason) {
        _cleanup_free_ char *copy = strdup(path);

        if (!copy)
                return -ENOMEM;
        /* Every directory on the way must merge; the last entry follows the rule. */
        for (char *c = copy + from, *slash; c; c = slash) {
                int fd, r;

                slash = strchr(c, '/');
                if (slash)
                        *slash = 0;
                /* copy is the path up to this entry while its '/' is cut. */
                r = check_entry(*dir_fd, c, copy, path, slash ? LAYER_MERGED_DIR : rule, &fd, ret_reason);
                if (r <= 0)
                        return r;
                if (fd < 0)
                        return 1;   /* absent: nothing below it either */
                if (!slash) {
                        safe_close(fd);   /* the entry itself, a merged directory: nothing to walk on to */
                        return 1;
                }
                safe_close(*dir_fd);
                *dir_fd = fd;
                *dir_len = slash - copy;
                *slash++ = '/';
        }
        return 1;
}

int layer_check_paths(int tree_fd, const LayerPath *paths, size_t n, char **ret_reason) {
        _cleanup_close_ int dir_fd = -EBADF;
        size_t dir_len = 0;

        for (size_t i = 0; i < n; i++) {
                const char *p = paths[i].path;
                int r;

                /* Go on from the last walk's deepest directory if this path is below it, else from the top. */
                if (dir_fd < 0 || !(dir_len == 0 || (strncmp(p, paths[i - 1].path, dir_len) == 0 && p[dir_len] == '/'))) {
                        safe_close(dir_fd);
                        dir_fd = fcntl(tree_fd, F_DUPFD_CLOEXEC, 3);
                        if (dir_fd < 0)
                                return -errno;
                        dir_len = 0;
                }
                r = walk(&dir_fd, &dir_len, p, dir_len ? dir_len + 1 : 0, paths[i].rule, ret_reason);
                if (r <= 0)
                        return r;
        }
        return 1;
}

int layer_check(int tree_fd, const char *path, LayerRule rule, char **ret_reason) {
        return layer_check_paths(tree_fd, &(const LayerPath) { path, rule }, 1, ret_reason);
}

int layer_check_root(int tree_fd, const char *as, const char *protected, char **ret_reason) {
        _cleanup_close_ int fd = openat(tree_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        return check_dir_xattrs(fd, as, protected, ret_reason);
}
