/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <sys/stat.h>

#include "image-class.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "observe.h"
#include "util.h"

bool mount_is_overlay_of(struct libmnt_fs *fs, const char *source) {
        return streq_ptr(mnt_fs_get_fstype(fs), "overlay") && streq_ptr(mnt_fs_get_source(fs), source);
}

/* Whose is the mount on top of the hierarchy (st_dev dev, mount ID id, table entry top)? */
TopKind classify_top(struct libmnt_table *tb, struct libmnt_fs *top, const TuckHierarchy *h,
                     const Generation *g, dev_t dev, uint64_t id) {
        const char *fstype = mnt_fs_get_fstype(top), *source = mnt_fs_get_source(top);
        int left = mnt_table_get_nents(tb);

        if (g && g->merged && g->overlay_dev == dev && g->overlay_mnt_id == id)
                return TOP_OURS;
        /* One of our overlays below something else? Then someone stacked on it: hands off
         * (merged over, it would be buried and leak). Ours is told by its source, never by the
         * recorded mount ID alone: once our recorded top is gone the kernel hands its ID to the
         * next mount made (lowest free first), which is not ours to guard; and a mount stacked
         * on ours may carry it. At most one step per table entry: parents that loop end the
         * walk instead of hanging it. */
        for (struct libmnt_fs *fs = mount_table_find_id(tb, mnt_fs_get_parent_id(top)); fs && left-- > 0;
             fs = mount_table_find_id(tb, mnt_fs_get_parent_id(fs))) {
                if (!streq_ptr(mnt_fs_get_target(fs), h->full))
                        break;
                if (mount_is_overlay_of(fs, image_class_info[h->class].overlay_source))
                        return TOP_OTHER;
        }
        if (!streq_ptr(fstype, "overlay"))
                return TOP_BASE;
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (streq_ptr(source, image_class_info[k].foreign_source))
                        return TOP_SYSTEMD;
        /* Ours, but not the recorded one: a refresh was killed between its swap
         * and its record. Replace it the same way as systemd's (beneath, base
         * peeled out); taken for the base, it would be stacked on and leak. */
        if (streq_ptr(source, image_class_info[h->class].overlay_source))
                return TOP_LOST;
        return TOP_BASE;
}

/* What sits on top of a hierarchy now. */
int observe_live(const TuckHierarchy *h, const Generation *g, LiveState *ret) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_fs *top;
        struct stat st;
        uint64_t id;
        int r;

        *ret = (LiveState) { .top = TOP_BASE };
        r = mount_table_read(0, &tb);
        if (r < 0)
                return r;
        if (stat(h->full, &st) < 0)
                return -errno;
        r = path_get_mnt_id(AT_FDCWD, h->full, &id);
        if (r < 0)
                return r;
        r = path_get_mount_attr(AT_FDCWD, h->full, &ret->attr);
        if (r < 0)
                return r;
        ret->top_mnt_id = id;
        ret->top_dev = st.st_dev;

        top = mount_table_find_id(tb, (int) id);
        if (!top || !streq_ptr(mnt_fs_get_target(top), h->full))
                return 0;   /* not a mount point: the base, part of its parent */
        (void) asprintf_safe(&ret->description, "%s '%s' (mount %" PRIu64 ")", strna(mnt_fs_get_fstype(top)),
                             strna(mnt_fs_get_source(top)), id);
        ret->top = classify_top(tb, top, h, g, st.st_dev, id);
        return 0;
}

int observe_foreign_extensions(const TuckHierarchy *h, char ***ret) {
        const ImageClassInfo *info = &image_class_info[h->class];
        _cleanup_free_ char *p = path_join(h->full, info->metadata_dir, info->metadata_list), *text = NULL;
        int r;

        if (!p)
                return -ENOMEM;
        r = read_full_file_at(AT_FDCWD, p, 1024 * 1024, &text);
        if (r < 0)
                return r;
        *ret = strv_split(text, "\n");
        return *ret ? 0 : -ENOMEM;
}
