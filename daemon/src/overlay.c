/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
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

static int mount_dir_detached(const Image *i, uint64_t attr, int *ret_fd) {
        _cleanup_close_ int fd = -EBADF;
        struct mount_attr a = {
                .attr_set = attr,
                .propagation = MS_PRIVATE,
        };

        fd = open_tree(AT_FDCWD, i->resolved, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (fd < 0)
                return -errno;
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
                return mount_dir_detached(i, attr, ret_fd);
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

int overlay_options(char * const *lowers, char **ret) {
        _cleanup_free_ char *joined = strv_join(lowers, ":"), *options = NULL;
        long page = sysconf(_SC_PAGESIZE);

        if (!joined)
                return -ENOMEM;
        options = strjoin("lowerdir=", joined);
        if (!options)
                return -ENOMEM;
        /* mount(2) copies at most one page of data, NUL included. */
        if ((long) strlen(options) >= page)
                return -E2BIG;
        *ret = TAKE_PTR(options);
        return 0;
}

void submounts_free(Submount *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(s[i].relative);
                safe_close(s[i].fd);
        }
        free(s);
}

/* A recursive clone of the mount at path, private while it waits in the staging namespace. */
static int submount_clone_one(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0)
                return -errno;
        /* Attached beneath a shared parent, the new tree gets fresh peer groups and
         * propagates to the slaves like any new mount. */
        r = mount_make_private(fd, true);
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

int submounts_clone(const char *path, Submount **ret, size_t *ret_n, char **ret_error) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        _cleanup_strv_free_ char **rels = NULL;
        Submount *s;
        size_t n = 0;
        uint64_t id;
        int r;

        r = mount_table_read(0, &tb);
        if (r < 0)
                return r;
        r = path_get_mnt_id(AT_FDCWD, path, &id);
        if (r < 0)
                return r;
        r = mount_table_submounts(tb, (int) id, path, &rels);
        if (r < 0)
                return r;
        s = calloc(strv_length(rels) ?: 1, sizeof(Submount));
        if (!s)
                return -ENOMEM;
        STRV_FOREACH(rel, rels) {
                _cleanup_free_ char *p = path_join(path, *rel);
                Submount *m = &s[n++];

                *m = (Submount) { .relative = strdup(*rel), .fd = -EBADF };
                if (!p || !m->relative) {
                        r = -ENOMEM;
                        break;
                }
                r = m->fd = submount_clone_one(p);
                if (r < 0) {
                        (void) asprintf_safe(ret_error, "cannot clone nested mount '%s': %s", p, strerror(-r));
                        break;
                }
        }
        if (r < 0) {
                submounts_free(s, n);
                return r;
        }
        *ret = s;
        *ret_n = n;
        return 0;
}

static unsigned long ms_flags_from_attr(uint64_t attr) {
        return (attr & MOUNT_ATTR_RDONLY ? MS_RDONLY : 0) | (attr & MOUNT_ATTR_NOSUID ? MS_NOSUID : 0) |
               (attr & MOUNT_ATTR_NODEV ? MS_NODEV : 0) | (attr & MOUNT_ATTR_NOEXEC ? MS_NOEXEC : 0);
}

static int attach_submounts(const OverlaySpec *spec, const char *where, char **ret_error) {
        for (size_t i = 0; i < spec->n_submounts; i++) {
                _cleanup_free_ char *target = path_join(where, spec->submounts[i].relative);
                struct stat st;

                if (!target)
                        return -ENOMEM;
                /* The mount point must exist in the new tree: we never create directories in it. */
                if (stat(target, &st) < 0) {
                        int r = -errno;

                        (void) asprintf_safe(ret_error, "nested mount '%s' has no mount point in the new generation "
                                             "(%s)", spec->submounts[i].relative, strerror(-r));
                        return r;
                }
                if (move_mount(spec->submounts[i].fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH) < 0) {
                        int r = -errno;

                        (void) asprintf_safe(ret_error, "cannot re-attach nested mount '%s': %s",
                                             spec->submounts[i].relative, strerror(-r));
                        return r;
                }
        }
        return 0;
}

int overlay_assemble(Staging *s, const OverlaySpec *spec, char **ret_error) {
        _cleanup_free_ char *where = path_join("o", spec->hid), *options = NULL;
        _cleanup_close_ int tree = -EBADF;
        struct mount_attr a = {
                .attr_set = spec->attr,
                .propagation = MS_PRIVATE,
        };
        int r;

        if (!where)
                return -ENOMEM;
        r = overlay_options(spec->lowers, &options);
        if (r == -E2BIG)
                (void) asprintf_safe(ret_error, "%zu layers do not fit in one page of mount options",
                                     strv_length(spec->lowers));
        if (r < 0)
                return r;

        (void) staging_detach(s, where);   /* left over by a killed refresh? */
        if (mkdir(where, 0700) < 0)
                return -errno;

        if (mount(spec->source, where, "overlay", ms_flags_from_attr(spec->attr), options) < 0) {
                r = -errno;
                (void) asprintf_safe(ret_error, "overlayfs refused %zu layers: %s", strv_length(spec->lowers),
                                     strerror(-r));
                goto fail;
        }
        r = attach_submounts(spec, where, ret_error);
        if (r < 0)
                goto fail;

        tree = open_tree(AT_FDCWD, where, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (tree < 0) {
                r = -errno;
                (void) asprintf_safe(ret_error, "cannot clone the assembled overlay: %s", strerror(-r));
                goto fail;
        }
        /* Only the root: re-attached submounts keep their own flags. */
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0) {
                r = -errno;
                (void) asprintf_safe(ret_error, "cannot set attributes on the new overlay: %s", strerror(-r));
                goto fail;
        }
        (void) staging_detach(s, where);
        return TAKE_FD(tree);

fail:
        (void) staging_detach(s, where);
        return r;
}
