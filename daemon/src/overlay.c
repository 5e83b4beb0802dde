/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "log.h"
#include "loop.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "overlay.h"
#include "swap.h"
#include "util.h"

/* The image file, if it is still the one image_check_trust() walked to. */
static int open_checked(const Image *i, char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = image_open_file(i->resolved);
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (i->checked_ino != 0 && (st.st_dev != i->checked_dev || st.st_ino != i->checked_ino)) {
                (void) asprintf_safe(ret_reason, "'%s' was replaced while being inspected", i->resolved);
                return -ESTALE;
        }
        return TAKE_FD(fd);
}

/* A loop device of the image's hash tree: the sidecar file, or the DDI's verity partition. */
static int attach_hash_tree(const Image *i, int image_fd, char **ret_node) {
        _cleanup_close_ int fd = -EBADF;

        if (!i->verity.hash_file)
                return loop_attach(image_fd, i->verity.hash_offset, i->verity.hash_size, ret_node);
        fd = open(i->verity.hash_file, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return loop_attach(fd, 0, 0, ret_node);
}

/*
 * The dm-verity device over the data loop device: verified in full and
 * activated (or shared with the same image mounted elsewhere). The loop
 * devices stay while the device holds them; their autoclear frees them
 * when it goes.
 */
static int setup_verity(Image *i, int image_fd, const char *data_node, VerityDevice *ret, char **ret_reason) {
        _cleanup_free_ char *hash_node = NULL;
        _cleanup_close_ int hash_loop = -EBADF;
        int r;

        hash_loop = attach_hash_tree(i, image_fd, &hash_node);
        if (hash_loop < 0) {
                (void) asprintf_safe(ret_reason, "cannot attach the hash tree: %s", strerror(-hash_loop));
                return hash_loop;
        }
        r = verity_activate(&i->verity, data_node, hash_node, ret, ret_reason);
        if (r == 0)
                return -EBADMSG;
        if (r < 0)
                return r;
        i->kernel_sig = ret->kernel_sig;
        return 0;
}

static int mount_raw_detached(Image *i, uint64_t attr, int *ret_fd, char **ret_loop, char **ret_reason) {
        _cleanup_close_ int file = -EBADF, loop = -EBADF, fs = -EBADF;
        _cleanup_(verity_device_done) VerityDevice dm = {};
        _cleanup_free_ char *node = NULL;
        const char *fstype = i->fstype ?: (i->type == IMAGE_TYPE_EROFS ? "erofs" : "squashfs"), *source;
        bool verity = i->protection != IMAGE_PROTECTION_UNPROTECTED;
        int mnt = -EBADF, r;

        file = open_checked(i, ret_reason);
        if (file < 0)
                return file;
        /* A DDI's partition by offset and size; a bare image whole. */
        loop = loop_attach(file, i->fs_offset, i->type == IMAGE_TYPE_GPT ? i->fs_size : 0, &node);
        if (loop < 0)
                return loop;
        source = node;
        if (verity) {
                r = setup_verity(i, file, node, &dm, ret_reason);
                if (r < 0)
                        return r;
                source = dm.node;
        }

        fs = fsopen(fstype, FSOPEN_CLOEXEC);
        if (fs < 0)
                r = -errno;
        else if (fsconfig(fs, FSCONFIG_SET_STRING, "source", source, 0) < 0 ||
                 fsconfig(fs, FSCONFIG_SET_FLAG, "ro", NULL, 0) < 0 ||
                 fsconfig(fs, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                r = -errno;
        else if ((mnt = fsmount(fs, FSMOUNT_CLOEXEC, (unsigned) attr)) < 0)
                r = -errno;
        else
                r = 0;
        /* Mounted or not: the device goes with its last user (now, if there is none). */
        if (verity && !dm.shared)
                (void) verity_release(dm.name);
        if (r < 0)
                return r;

        /* The file system holds the devices now; autoclear frees the loop device when they go. */
        *ret_fd = mnt;
        *ret_loop = TAKE_PTR(node);
        return 0;
}

static int mount_dir_detached(const Image *i, uint64_t attr, int *ret_fd, char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;
        struct mount_attr a = {
                .attr_set = attr,
                .propagation = MS_PRIVATE,
        };
        struct stat st;

        fd = open_tree(AT_FDCWD, i->resolved, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fd < 0)
                return -errno;
        /* What is cloned must be the directory the trust check walked, as for a file. */
        if (fstat(fd, &st) < 0)
                return -errno;
        if (i->checked_ino != 0 && (st.st_dev != i->checked_dev || st.st_ino != i->checked_ino)) {
                (void) asprintf_safe(ret_reason, "'%s' was replaced while being inspected", i->resolved);
                return -ESTALE;
        }
        if (mount_setattr(fd, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                return -errno;
        *ret_fd = TAKE_FD(fd);
        return 0;
}

int image_mount_detached(Image *i, int *ret_fd, char **ret_loop, char **ret_reason) {
        uint64_t attr = image_class_info[i->class].mount_attr;

        *ret_loop = NULL;
        switch (i->type) {
        case IMAGE_TYPE_DIRECTORY:
                return mount_dir_detached(i, attr, ret_fd, ret_reason);
        case IMAGE_TYPE_SQUASHFS:
        case IMAGE_TYPE_EROFS:
        case IMAGE_TYPE_GPT:
                return mount_raw_detached(i, attr, ret_fd, ret_loop, ret_reason);
        case IMAGE_TYPE_UNSUPPORTED:
        case _IMAGE_TYPE_MAX:
                break;
        }
        return -EMEDIUMTYPE;
}

/* overlayfs's OVL_MAX_STACK (fs/overlayfs/params.h): lower layers of one overlay. */
#define OVERLAY_MAX_LOWER 500

int overlay_options(char * const *lowers, char **ret) {
        _cleanup_free_ char *joined = strv_join(lowers, ":"), *options = NULL;
        long page = sysconf(_SC_PAGESIZE);

        if (!joined)
                return -ENOMEM;
        if (strv_length(lowers) > OVERLAY_MAX_LOWER)
                return -E2BIG;
        options = strjoin("lowerdir=", joined);
        if (!options)
                return -ENOMEM;
        /* mount(2) copies at most one page of data, NUL included. */
        if ((long) strlen(options) >= page)
                return -E2BIG;
        *ret = TAKE_PTR(options);
        return 0;
}

static unsigned long ms_flags_from_attr(uint64_t attr) {
        return (attr & MOUNT_ATTR_RDONLY ? MS_RDONLY : 0) | (attr & MOUNT_ATTR_NOSUID ? MS_NOSUID : 0) |
               (attr & MOUNT_ATTR_NODEV ? MS_NODEV : 0) | (attr & MOUNT_ATTR_NOEXEC ? MS_NOEXEC : 0);
}

/* ---------------------------------------------------------------- whiteouts */

static int dir_find_whiteout(int fd, const char *path, unsigned depth, char **ret_path) {
        _cleanup_closedir_ DIR *d = NULL;
        char v[2];

        if (depth > 256)
                return -ELOOP;
        /* Opaque: it hides the same directory in every layer below. */
        if (fgetxattr(fd, "trusted.overlay.opaque", v, sizeof(v)) == 1 && v[0] == 'y') {
                *ret_path = strdup(path);
                return *ret_path ? 1 : -ENOMEM;
        }
        d = fdopendir(fd);
        if (!d) {
                safe_close(fd);
                return -errno;
        }
        for (struct dirent *de; (de = readdir_no_dot(d)); ) {
                _cleanup_free_ char *p = path_join(path, de->d_name);
                struct stat st;
                int child, r;

                if (!p)
                        return -ENOMEM;
                if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        return -errno;
                if (S_ISCHR(st.st_mode) && st.st_rdev == makedev(0, 0)) {
                        *ret_path = TAKE_PTR(p);
                        return 1;
                }
                if (!S_ISDIR(st.st_mode))
                        continue;
                child = openat(dirfd(d), de->d_name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
                if (child < 0)
                        return -errno;
                r = dir_find_whiteout(child, p, depth + 1, ret_path);
                if (r != 0)
                        return r;
        }
        return 0;
}

int tree_find_whiteout(int dir_fd, char **ret_path) {
        int fd = openat(dir_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);

        if (fd < 0)
                return -errno;
        *ret_path = NULL;
        return dir_find_whiteout(fd, "/", 0, ret_path);
}

/* ---------------------------------------------------------------- the metadata layer */

static int write_at(int dir_fd, const char *name, const char *contents) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        size_t n = strlen(contents);

        if (fd < 0)
                return -errno;
        if (write(fd, contents, n) != (ssize_t) n)
                return -EIO;
        return 0;
}

/*
 * A tmpfs of its own at @where: /.systemd-sysext/{extensions,dev} (see
 * overlay.h), written before the overlay is mounted: a layer is never
 * changed under a mounted overlay (overlayfs.rst, "Changes to underlying
 * filesystems"). Only the staging namespace ever sees it.
 */
static int metadata_layer_mount(const OverlaySpec *spec, const char *where) {
        const ImageClassInfo *info = &image_class_info[spec->class];
        _cleanup_close_ int root = -EBADF, dir = -EBADF;
        _cleanup_free_ char *list = NULL, *text = NULL;
        int r;

        if (mkdir(where, 0700) < 0 && errno != EEXIST)
                return -errno;
        if (mount("tuck-metadata", where, "tmpfs", MS_NODEV | MS_NOSUID | MS_NOEXEC, "mode=0755,size=64k") < 0)
                return -errno;
        root = open(where, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (root < 0)
                return -errno;
        if (mkdirat(root, info->metadata_dir, 0755) < 0)
                return -errno;
        dir = openat(root, info->metadata_dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dir < 0)
                return -errno;
        list = strv_join(spec->extensions, "\n");
        text = list ? strjoin(list, "\n") : NULL;
        if (!text)
                return -ENOMEM;
        r = write_at(dir, info->metadata_list, text);
        if (r >= 0)
                r = write_at(dir, "dev", OVERLAY_METADATA_DEV "\n");
        return r;
}

/* ---------------------------------------------------------------- nesting */

/* A layer that goes into a group must not need to hide anything below its group. */
static int layer_check_nestable(const OverlaySpec *spec, const char *rel, const char *image, size_t n,
                                char **ret_error) {
        _cleanup_close_ int fd = open(rel, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *path = NULL;
        int r;

        if (fd < 0)
                return -errno;
        r = tree_find_whiteout(fd, &path);
        if (r > 0) {
                (void) asprintf_safe(ret_error, "image '%s' carries a whiteout or opaque directory (%s%s): with "
                                     "%zu layers, more than one overlay takes, layers are nested, and then it "
                                     "could not hide what the layers below it have; refusing", image,
                                     streq(spec->hierarchy, "/") ? "" : spec->hierarchy, path, n);
                return -EMEDIUMTYPE;
        }
        if (r < 0)
                (void) asprintf_safe(ret_error, "cannot look for whiteouts in image '%s': %s", image, strerror(-r));
        return r;
}

/* How many of @l, from @from on, fit in one overlay (options in a page, at most 500). */
static size_t group_size(char * const *l, size_t from, size_t n) {
        long page = sysconf(_SC_PAGESIZE);
        size_t len = strlen("lowerdir="), k = 0;

        while (from + k < n && k < OVERLAY_MAX_LOWER && len + strlen(l[from + k]) + 1 < (size_t) page) {
                len += strlen(l[from + k]) + 1;
                k++;
        }
        return k;
}

/*
 * The lower layers of the top overlay: the metadata layer, then the
 * extension layers (or, if they do not fit, overlays of groups of them,
 * mounted at o/<hid>+<k>, each added to @groups as it is mounted: the
 * caller detaches them), then the base.
 */
static int plan_lowers(const OverlaySpec *spec, const char *meta, char ***ret, char ***groups, char **ret_error) {
        _cleanup_strv_free_ char **all = NULL, **top = NULL;
        size_t n = strv_length(spec->lowers), n_ext = n - 1;
        _cleanup_free_ char *options = NULL;
        int r;

        if (strv_extend(&all, meta) < 0)
                return -ENOMEM;
        STRV_FOREACH(l, spec->lowers)
                if (strv_extend(&all, *l) < 0)
                        return -ENOMEM;
        r = overlay_options(all, &options);
        if (r != -E2BIG) {
                *ret = TAKE_PTR(all);
                return r;
        }

        if (strv_extend(&top, meta) < 0)
                return -ENOMEM;
        for (size_t i = 0, k = 1; i < n_ext; k++) {
                size_t m = group_size(spec->lowers, i, n_ext);
                _cleanup_free_ char *where = NULL, *group_options = NULL;
                _cleanup_strv_free_ char **members = NULL;

                /* A group of one is no overlay (overlayfs wants two lower layers): it goes as it is. */
                if (m < 2) {
                        if (strv_extend(&top, spec->lowers[i++]) < 0)
                                return -ENOMEM;
                        continue;
                }
                for (size_t j = i; j < i + m; j++) {
                        r = layer_check_nestable(spec, spec->lowers[j], spec->layer_images[j], n_ext, ret_error);
                        if (r < 0)
                                return r;
                        if (strv_extend(&members, spec->lowers[j]) < 0)
                                return -ENOMEM;
                }
                if (asprintf_safe(&where, "o/%s+%zu", spec->hid, k) < 0)
                        return -ENOMEM;
                r = overlay_options(members, &group_options);
                if (r < 0)
                        return r;
                if (mkdir(where, 0700) < 0 && errno != EEXIST)
                        return -errno;
                r = strv_extend(groups, where);
                if (r < 0)
                        return r;
                if (mount(spec->source, where, "overlay", MS_RDONLY, group_options) < 0) {
                        r = -errno;
                        (void) asprintf_safe(ret_error, "overlayfs refused a group of %zu layers (%s): %s", m,
                                             where, strerror(-r));
                        return r;
                }
                if (strv_extend(&top, where) < 0)
                        return -ENOMEM;
                i += m;
        }
        if (strv_extend(&top, spec->lowers[n_ext]) < 0)
                return -ENOMEM;
        r = overlay_options(top, &options);
        if (r == -E2BIG)
                (void) asprintf_safe(ret_error, "%zu layers do not fit in two levels of overlays", n_ext);
        if (r < 0)
                return r;
        *ret = TAKE_PTR(top);
        return 0;
}

static void detach_all(Staging *s, char * const *l) {
        STRV_FOREACH(p, l)
                (void) staging_detach(s, *p);
}

int overlay_assemble(Staging *s, const OverlaySpec *spec, char **ret_error) {
        _cleanup_free_ char *where = path_join("o", spec->hid), *meta = NULL, *options = NULL;
        _cleanup_strv_free_ char **lowers = NULL, **groups = NULL;
        _cleanup_close_ int tree = -EBADF;
        struct mount_attr a = {
                .attr_set = spec->attr,
                .propagation = MS_PRIVATE,
        };
        int r;

        if (!where || asprintf_safe(&meta, "o/%s+meta", spec->hid) < 0)
                return -ENOMEM;
        (void) staging_detach(s, where);   /* left over by a killed refresh? */
        (void) staging_detach(s, meta);

        r = metadata_layer_mount(spec, meta);
        if (r < 0) {
                (void) asprintf_safe(ret_error, "cannot make the metadata layer: %s", strerror(-r));
                goto fail;
        }
        r = plan_lowers(spec, meta, &lowers, &groups, ret_error);
        if (r >= 0)
                r = overlay_options(lowers, &options);
        if (r < 0)
                goto fail;
        if (mkdir(where, 0700) < 0) {
                r = -errno;
                goto fail;
        }
        if (mount(spec->source, where, "overlay", ms_flags_from_attr(spec->attr), options) < 0) {
                r = -errno;
                (void) asprintf_safe(ret_error, "overlayfs refused %zu layers%s: %s", strv_length(spec->lowers),
                                     strv_length(groups) > 0 ? " (nested)" : "", strerror(-r));
                goto fail;
        }
        /* The overlay holds private clones of its layers: the staged ones can go. */
        (void) staging_detach(s, meta);
        detach_all(s, groups);
        tree = open_tree(AT_FDCWD, where, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (tree < 0) {
                r = -errno;
                (void) asprintf_safe(ret_error, "cannot clone the assembled overlay: %s", strerror(-r));
                goto fail;
        }
        /* Only the root (a nested group of layers below keeps its own). */
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0) {
                r = -errno;
                (void) asprintf_safe(ret_error, "cannot set attributes on the new overlay: %s", strerror(-r));
                goto fail;
        }
        (void) staging_detach(s, where);
        return TAKE_FD(tree);

fail:
        (void) staging_detach(s, where);
        (void) staging_detach(s, meta);
        detach_all(s, groups);
        return r;
}
