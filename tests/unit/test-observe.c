/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Whose is the mount on top of a hierarchy (observe.c classify_top()),
 * table-driven over fixture mountinfo: our recorded overlay, one whose mount
 * ID was handed out again, one of ours without a record, systemd-sysext's,
 * something stacked on ours, and mounts that are none of these.
 */

#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "fixture-mountinfo.h"
#include "mountinfo.h"
#include "observe.h"
#include "tap.h"
#include "util.h"

#define ROOT "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
#define BASE "10 1 8:1 /usr /usr ro,relatime shared:2 - ext4 /dev/sda1 rw\n"

typedef struct Case {
        const char *name;
        const char *mountinfo;
        int top_id;              /* the top mount at /usr in the fixture */
        bool recorded;           /* a generation record: overlay 0:50, mount 20 */
        TopKind want;
} Case;

static const Case cases[] = {
        { "our recorded overlay",
          ROOT BASE "20 10 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n",
          20, true, TOP_OURS },
        { "our overlay, no record: a run killed after its swap",
          ROOT BASE "20 10 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n",
          20, false, TOP_LOST },
        { "recorded mount ID handed to another overlay of ours",
          ROOT BASE "20 10 0:51 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/2/usr:b/usr\n",
          20, true, TOP_LOST },
        { "recorded mount ID handed to someone's tmpfs",
          ROOT BASE "20 10 0:70 / /usr rw shared:9 - tmpfs tmpfs rw\n",
          20, true, TOP_BASE },
        { "systemd-sysext's overlay",
          ROOT BASE "30 10 0:60 / /usr ro,nodev shared:4 - overlay sysext ro,lowerdir=/run/systemd/sysext/x\n",
          30, false, TOP_SYSTEMD },
        { "systemd-sysext's overlay over our recorded one's place",
          ROOT BASE "30 10 0:60 / /usr ro,nodev shared:4 - overlay sysext ro,lowerdir=/run/systemd/sysext/x\n",
          30, true, TOP_SYSTEMD },
        { "a read-only bind stacked on our overlay",
          ROOT BASE
          "20 10 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n"
          "25 20 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n",
          25, true, TOP_OTHER },
        { "a tmpfs stacked on our overlay",
          ROOT BASE
          "20 10 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n"
          "26 20 0:70 / /usr rw shared:9 - tmpfs tmpfs rw\n",
          26, true, TOP_OTHER },
        { "a bind of something else stacked on our overlay",
          ROOT BASE
          "20 10 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n"
          "25 20 8:1 /tmp/foreign /usr rw shared:1 - ext4 /dev/sda1 rw\n",
          25, true, TOP_OTHER },
        { "a tmpfs stacked on our overlay, no record",
          ROOT BASE
          "20 10 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n"
          "26 20 0:70 / /usr rw shared:9 - tmpfs tmpfs rw\n",
          26, false, TOP_OTHER },
        { "a tmpfs on the base",
          ROOT BASE "26 10 0:70 / /usr rw shared:9 - tmpfs tmpfs rw\n",
          26, false, TOP_BASE },
        { "an overlay of someone else's",
          ROOT BASE "27 10 0:71 / /usr ro shared:9 - overlay composefs ro,lowerdir=/x\n",
          27, false, TOP_BASE },
        { "parents that loop end the walk (fuzz-mountinfo)",
          ROOT "21 22 0:70 / /usr rw shared:9 - tmpfs tmpfs rw\n" "22 21 0:71 / /usr rw shared:9 - tmpfs tmpfs rw\n",
          21, true, TOP_BASE },
        { "the confext source on /usr is not ours there",
          ROOT BASE "28 10 0:72 / /usr ro shared:9 - overlay tuck-confext ro,lowerdir=/x\n",
          28, false, TOP_BASE },
};

static void test_case(const Case *c) {
        const TuckHierarchy h = { .path = (char *) "/usr", .full = (char *) "/usr", .id = (char *) "usr",
                                  .class = IMAGE_SYSEXT };
        const Generation g = { .class = IMAGE_SYSEXT, .merged = true, .number = 3, .overlay_dev = makedev(0, 50),
                               .overlay_mnt_id = 20 };
        struct libmnt_table *tb = fixture_mount_table(c->mountinfo);
        struct libmnt_fs *top = tb ? mount_table_find_id(tb, c->top_id) : NULL;
        TopKind k;

        if (!tap_ok(top, "%s: the fixture parses", c->name)) {
                mnt_unref_table(tb);
                return;
        }
        k = classify_top(tb, top, &h, c->recorded ? &g : NULL, mnt_fs_get_devno(top), (uint64_t) c->top_id);
        tap_streq(top_kind_to_string(k), top_kind_to_string(c->want), "%s", c->name);
        mnt_unref_table(tb);
}

/* The top of a stack, found by walking up (mount_table_find_top()), on a stack and on a loop. */
static void test_find_top(void) {
        struct libmnt_table *tb = fixture_mount_table(ROOT BASE
                                        "20 10 0:50 / /usr ro,nodev shared:3 - overlay tuck-sysext ro,lowerdir=x\n"
                                        "25 20 0:70 / /usr rw shared:9 - tmpfs tmpfs rw\n");
        struct libmnt_fs *top = tb ? mount_table_find_top(tb, "/usr") : NULL;

        tap_ok(top && mnt_fs_get_id(top) == 25, "find_top: a tmpfs on our overlay on the base is the top");
        mnt_unref_table(tb);
        /* Found by fuzz-mountinfo: two mounts with one ID, each other's parent. */
        tb = fixture_mount_table("0 0 0:70 / /usr rw - tmpfs tmpfs rw\n" "0 0 0:71 / /usr rw - tmpfs tmpfs rw\n");
        top = tb ? mount_table_find_top(tb, "/usr") : NULL;
        tap_ok(top && streq_ptr(mnt_fs_get_target(top), "/usr"), "find_top: parents that loop end the walk");
        mnt_unref_table(tb);
}

int main(void) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                test_case(&cases[i]);
        test_find_top();
        return tap_done();
}
