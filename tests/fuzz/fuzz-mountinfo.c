/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A mount table (/proc/PID/mountinfo text, parsed by libmount) and what tuck
 * decides from it: the top of the stack at a hierarchy
 * (mount_table_find_top()), whose that top is (observe.c classify_top(),
 * step 3 of every refresh), and the mounts a heal must carry along below it
 * (mount_table_submounts()). Mount points are named by whoever made them,
 * and a namespace's table is as long as its owner likes.
 *
 * classify_top() is asked with no generation record, and with a record
 * naming each mount at /usr in turn (ID and device), so every branch of the
 * walk down the stack is reached.
 */

#include <stdio.h>
#include <stdlib.h>

#include "fuzz.h"
#include "mountinfo.h"
#include "observe.h"
#include "util.h"

static void check_submounts(struct libmnt_table *tb, struct libmnt_fs *top, const char *target) {
        _cleanup_strv_free_ char **l = NULL;

        if (mount_table_submounts(tb, mnt_fs_get_id(top), target, &l) < 0)
                return;
        STRV_FOREACH(p, l) {
                fuzz_assert(**p != 0 && **p != '/');
                fuzz_assert(p == l || strcmp(p[-1], *p) < 0);   /* sorted, one per mount point */
        }
}

/* Is an overlay with our source below @top at the hierarchy (the walk bounded by the table's size)? */
static bool stacked_on_ours(struct libmnt_table *tb, struct libmnt_fs *top, const TuckHierarchy *h) {
        int left = mnt_table_get_nents(tb);

        for (struct libmnt_fs *fs = mount_table_find_id(tb, mnt_fs_get_parent_id(top));
             fs && left-- > 0 && streq_ptr(mnt_fs_get_target(fs), h->full);
             fs = mount_table_find_id(tb, mnt_fs_get_parent_id(fs)))
                if (mount_is_overlay_of(fs, image_class_info[h->class].overlay_source))
                        return true;
        return false;
}

static void check_top(struct libmnt_table *tb, const TuckHierarchy *h) {
        struct libmnt_iter *it;
        struct libmnt_fs *top, *fs;
        TopKind k;

        top = mount_table_find_top(tb, h->full);
        if (!top)
                return;
        fuzz_assert(streq_ptr(mnt_fs_get_target(top), h->full));
        check_submounts(tb, top, h->full);

        k = classify_top(tb, top, h, NULL, mnt_fs_get_devno(top), (uint64_t) mnt_fs_get_id(top));
        /* No record: never ours; stacked on ours exactly when an overlay of ours is below the top there. */
        fuzz_assert(k != TOP_OURS);
        fuzz_assert((k == TOP_OTHER) == stacked_on_ours(tb, top, h));

        it = mnt_new_iter(MNT_ITER_FORWARD);
        fuzz_assert(it);
        /* A record naming each of the first mounts at the hierarchy (more would only repeat). */
        for (unsigned tried = 0; tried < 16 && mnt_table_next_fs(tb, it, &fs) == 0; ) {
                Generation g = { .class = h->class, .merged = true, .overlay_dev = mnt_fs_get_devno(fs),
                                 .overlay_mnt_id = (uint64_t) mnt_fs_get_id(fs) };

                if (!streq_ptr(mnt_fs_get_target(fs), h->full))
                        continue;
                tried++;
                k = classify_top(tb, top, h, &g, mnt_fs_get_devno(top), (uint64_t) mnt_fs_get_id(top));
                fuzz_assert(k >= 0 && k < _TOP_KIND_MAX);
                fuzz_assert((k == TOP_OURS) == (fs == top || (mnt_fs_get_id(fs) == mnt_fs_get_id(top) &&
                                                              mnt_fs_get_devno(fs) == mnt_fs_get_devno(top))));
        }
        mnt_free_iter(it);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const TuckHierarchy hierarchies[] = {
                { .path = (char *) "/usr", .full = (char *) "/usr", .id = (char *) "usr", .class = IMAGE_SYSEXT },
                { .path = (char *) "/etc", .full = (char *) "/etc", .id = (char *) "etc", .class = IMAGE_CONFEXT },
        };
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        FILE *f;

        fuzz_setup();
        if (size == 0)
                return 0;
        tb = mnt_new_table();
        f = fmemopen((void *) data, size, "r");
        fuzz_assert(tb && f);
        if (mnt_table_parse_stream(tb, f, "fuzz") < 0) {
                fclose(f);
                return 0;
        }
        fclose(f);
        for (size_t i = 0; i < ELEMENTSOF(hierarchies); i++)
                check_top(tb, &hierarchies[i]);
        return 0;
}
