/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>

#include "mount-api.h"
#include "mountinfo.h"
#include "util.h"

int mount_table_read(pid_t pid, struct libmnt_table **ret) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        char path[64];
        int r;

        if (pid > 0)
                snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int) pid);
        else
                snprintf(path, sizeof(path), "/proc/self/mountinfo");

        tb = mnt_new_table();
        if (!tb)
                return -ENOMEM;
        r = mnt_table_parse_file(tb, path);
        if (r < 0)
                return r == -1 ? -EIO : r;
        *ret = TAKE_PTR(tb);
        return 0;
}

int mount_table_read_at(int proc_fd, struct libmnt_table **ret) {
        _cleanup_mnt_table_ struct libmnt_table *tb = mnt_new_table();
        _cleanup_close_ int fd = -EBADF;
        FILE *f;
        int r;

        if (!tb)
                return -ENOMEM;
        fd = RET_NERRNO(openat(proc_fd, proc_fd >= 0 ? "self/mountinfo" : "/proc/self/mountinfo",
                               O_RDONLY | O_CLOEXEC));
        if (fd < 0)
                return fd;
        f = fdopen(fd, "re");
        if (!f)
                return -errno;
        fd = -EBADF;    /* the stream's now */
        r = mnt_table_parse_stream(tb, f, "mountinfo");
        fclose(f);
        if (r < 0)
                return r == -1 ? -EIO : r;
        *ret = TAKE_PTR(tb);
        return 0;
}

struct libmnt_fs *mount_table_find_id(struct libmnt_table *tb, int id) {
        struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
        struct libmnt_fs *fs, *found = NULL;

        if (!it)
                return NULL;
        while (mnt_table_next_fs(tb, it, &fs) == 0)
                if (mnt_fs_get_id(fs) == id) {
                        found = fs;
                        break;
                }
        mnt_free_iter(it);
        return found;
}

struct libmnt_fs *mount_table_find_top(struct libmnt_table *tb, const char *target) {
        struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
        struct libmnt_fs *fs, *top = NULL;

        if (!it)
                return NULL;
        /*
         * Stacked mounts at one mount point each sit on the one below: walk
         * up from any of them until no mount at target has it as its parent.
         * (Table order is not stack order after a beneath mount.)
         */
        while (mnt_table_next_fs(tb, it, &fs) == 0)
                if (streq_ptr(mnt_fs_get_target(fs), target)) {
                        top = fs;
                        break;
                }
        /* No stack is taller than the table: parents that loop end the walk instead of
         * hanging it. The kernel writes no such table, but a table is no snapshot (read
         * while mounts come and go, with IDs handed out again), and a fixture says anything. */
        for (int left = mnt_table_get_nents(tb); top && left > 0; left--) {
                struct libmnt_fs *above = NULL;

                mnt_reset_iter(it, MNT_ITER_FORWARD);
                while (mnt_table_next_fs(tb, it, &fs) == 0)
                        if (mnt_fs_get_parent_id(fs) == mnt_fs_get_id(top) &&
                            streq_ptr(mnt_fs_get_target(fs), target) && fs != top) {
                                above = fs;
                                break;
                        }
                if (!above)
                        break;
                top = above;
        }
        mnt_free_iter(it);
        return top;
}

int path_get_mnt_id(int dir_fd, const char *path, uint64_t *ret) {
        struct statx sx;

        if (statx(dir_fd, path, AT_NO_AUTOMOUNT | (isempty(path) ? AT_EMPTY_PATH : 0), STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        *ret = sx.stx_mnt_id;
        return 0;
}

int path_get_mount_attr(int dir_fd, const char *path, uint64_t *ret) {
        _cleanup_close_ int fd = -EBADF;

        if (isempty(path))
                return fd_get_mount_attr(dir_fd, ret);
        fd = openat(dir_fd, path, O_PATH | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return fd_get_mount_attr(fd, ret);
}

int fd_get_mount_attr(int fd, uint64_t *ret) {
        struct statvfs sv;
        uint64_t a = 0;

        if (fstatvfs(fd, &sv) < 0)
                return -errno;
        if (sv.f_flag & ST_RDONLY)
                a |= MOUNT_ATTR_RDONLY;
        if (sv.f_flag & ST_NOSUID)
                a |= MOUNT_ATTR_NOSUID;
        if (sv.f_flag & ST_NODEV)
                a |= MOUNT_ATTR_NODEV;
        if (sv.f_flag & ST_NOEXEC)
                a |= MOUNT_ATTR_NOEXEC;
        *ret = a;
        return 0;
}

int fd_get_mount(int fd, uint64_t *ret_mnt_id, dev_t *ret_dev, uint64_t *ret_attr) {
        struct statx sx;
        int r;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        r = path_get_mount_attr(fd, "", ret_attr);
        if (r < 0)
                return r;
        *ret_mnt_id = sx.stx_mnt_id;
        *ret_dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        return 0;
}

uint64_t mount_attr_from_options(const char *opts) {
        _cleanup_strv_free_ char **l = strv_split(strempty(opts), ",");
        uint64_t a = 0;

        STRV_FOREACH(o, l) {
                if (streq(*o, "ro"))
                        a |= MOUNT_ATTR_RDONLY;
                else if (streq(*o, "nosuid"))
                        a |= MOUNT_ATTR_NOSUID;
                else if (streq(*o, "nodev"))
                        a |= MOUNT_ATTR_NODEV;
                else if (streq(*o, "noexec"))
                        a |= MOUNT_ATTR_NOEXEC;
        }
        return a;
}

const char *mount_attr_to_string(uint64_t attr, char *buf, size_t size) {
        snprintf(buf, size, "%s%s%s%s",
                 attr & MOUNT_ATTR_RDONLY ? "ro" : "rw",
                 attr & MOUNT_ATTR_NOSUID ? ",nosuid" : "",
                 attr & MOUNT_ATTR_NODEV ? ",nodev" : "",
                 attr & MOUNT_ATTR_NOEXEC ? ",noexec" : "");
        return buf;
}

int mount_table_submounts(struct libmnt_table *tb, int top_id, const char *target, char ***ret_relative) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        struct libmnt_iter *it = mnt_new_iter(MNT_ITER_FORWARD);
        struct libmnt_fs *fs;
        int r = 0;

        if (!l || !it) {
                mnt_free_iter(it);
                return -ENOMEM;
        }
        while (mnt_table_next_fs(tb, it, &fs) == 0) {
                const char *t = mnt_fs_get_target(fs), *rel;

                if (mnt_fs_get_parent_id(fs) != top_id || !t)
                        continue;
                rel = streq(target, "/") ? t + 1 : startswith(t, target);
                if (!rel || (*rel != '/' && !streq(target, "/")))
                        continue;   /* stacked on top of the hierarchy itself, not below it */
                rel += strspn(rel, "/");   /* relative: "/usr//lib" is "lib", never "/lib" */
                if (*rel == 0)
                        continue;
                /* One entry per mount point: a stack there comes along in the recursive clone. */
                if (strv_contains(l, rel))
                        continue;
                r = strv_extend(&l, rel);
                if (r < 0)
                        break;
        }
        mnt_free_iter(it);
        if (r < 0)
                return r;
        strv_sort(l);
        *ret_relative = TAKE_PTR(l);
        return 0;
}

char *format_devnum(dev_t d) {
        char *s = NULL;

        (void) asprintf_safe(&s, "%u:%u", major(d), minor(d));
        return s;
}
