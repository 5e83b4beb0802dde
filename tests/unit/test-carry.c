/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What a swap carries from below a top mount (carry.c carry_plan()),
 * table-driven over fixture mountinfo: the places where mounts sit on the
 * top and how many mounts hang below it, for a service's sandbox, a stack,
 * a covered mount, a first merge (the top is the root file system, only
 * what is below the hierarchy counts), and the refusals: an unbindable
 * mount, a table whose parents loop (read while mounts came and went).
 * And carry_find_halfway(): the tree of a swap stopped halfway, beneath the
 * top, is recognized only where finishing it keeps everything the top has.
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/sysmacros.h>

#include "carry.h"
#include "fixture-mountinfo.h"
#include "mountinfo.h"
#include "tap.h"
#include "util.h"

#define ROOT "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n"
#define TOP "20 1 0:50 / /usr ro,nodev master:3 - overlay tuck-sysext ro,lowerdir=i/1/usr:b/usr\n"

typedef struct Case {
        const char *name;
        const char *mountinfo;
        int top_id;
        const char *path;
        int r;
        const char *places;      /* joined by ' ' */
        unsigned n_mounts;
} Case;

static const Case cases[] = {
        { "nothing below", ROOT TOP, 20, "/usr", 0, "", 0 },
        { "a service's sandbox: inaccessible node, tmpfs, rw bind",
          ROOT TOP
          "30 20 0:60 /inaccessible/dir /usr/share/secret ro,nosuid,nodev,noexec - tmpfs tmpfs rw\n"
          "31 20 0:61 / /usr/lib/scratch rw,nodev - tmpfs tmpfs rw\n"
          "32 20 8:1 /srv/data /usr/local/data rw - ext4 /dev/sda1 rw\n",
          20, "/usr", 0, "lib/scratch local/data share/secret", 3 },
        { "what sits inside a carried mount comes along with it",
          ROOT TOP
          "30 20 0:60 / /usr/lib/app rw - tmpfs tmpfs rw\n"
          "31 30 0:61 / /usr/lib/app/sub ro,noexec - tmpfs tmpfs rw\n",
          20, "/usr", 0, "lib/app", 2 },
        { "a stack at one place is one place, every mount of it counted",
          ROOT TOP
          "30 20 0:60 / /usr/lib/app rw - tmpfs tmpfs rw\n"
          "31 30 0:60 / /usr/lib/app ro - tmpfs tmpfs rw\n",
          20, "/usr", 0, "lib/app", 2 },
        { "a mount covered by a later one at a place above it",
          ROOT TOP
          "30 20 0:60 / /usr/share/secret ro - tmpfs tmpfs rw\n"
          "31 20 0:61 / /usr/share rw - tmpfs tmpfs rw\n",
          20, "/usr", 0, "share share/secret", 2 },
        { "a first merge: the top is /, only what is below /usr counts",
          ROOT
          "30 1 0:60 / /usr/lib/app rw - tmpfs tmpfs rw\n"
          "31 1 0:61 / /home rw - tmpfs tmpfs rw\n"
          "32 31 0:62 / /home/x rw - tmpfs tmpfs rw\n"
          "33 1 0:63 / /usrx rw - tmpfs tmpfs rw\n",
          1, "/usr", 0, "lib/app", 1 },
        { "a topper on the hierarchy itself is not below it",
          ROOT TOP "25 20 0:50 / /usr ro - overlay tuck-sysext ro\n", 20, "/usr", 0, "", 0 },
        { "an unbindable mount is refused",
          ROOT TOP
          "30 20 0:60 / /usr/lib/app rw - tmpfs tmpfs rw\n"
          "31 30 0:61 / /usr/lib/app/sub rw unbindable - tmpfs tmpfs rw\n",
          20, "/usr", -EPERM, NULL, 0 },
        { "parents that loop are refused",
          ROOT TOP
          "30 31 0:60 / /usr/lib/a rw - tmpfs tmpfs rw\n"
          "31 30 0:61 / /usr/lib/a/b rw - tmpfs tmpfs rw\n"
          "32 20 0:62 / /usr/lib/c rw - tmpfs tmpfs rw\n"
          "33 34 0:63 / /usr/lib/c/d rw - tmpfs tmpfs rw\n"
          "34 33 0:64 / /usr/lib/c/d/e rw - tmpfs tmpfs rw\n",
          20, "/usr", -ELOOP, NULL, 0 },
};

static void test_case(const Case *c) {
        struct libmnt_table *tb = fixture_mount_table(c->mountinfo);
        _cleanup_strv_free_ char **places = NULL;
        _cleanup_free_ char *error = NULL, *joined = NULL;
        unsigned n = 0;
        int r;

        if (!tap_ok(tb, "%s: the fixture parses", c->name))
                return;
        r = carry_plan(tb, c->top_id, c->path, &places, &n, &error);
        mnt_unref_table(tb);
        if (!tap_ok(r == c->r, "%s: %s", c->name, c->r == 0 ? "planned" : strerror(-c->r))) {
                tap_diag("r=%d error=%s", r, tap_str(error));
                return;
        }
        if (r < 0) {
                if (c->r == -EPERM)
                        tap_ok(error && strstr(error, "unbindable"), "%s: says why (%s)", c->name, tap_str(error));
                return;
        }
        joined = strv_join(places, " ");
        tap_streq(joined, c->places, "%s: the places", c->name);
        tap_ok(n == c->n_mounts, "%s: %u mounts below the top (got %u)", c->name, c->n_mounts, n);
}

/* A chain deeper than the table can be: a loop among many (fuzz-sized) is still -ELOOP, fast. */
static void test_long_loop(void) {
        _cleanup_free_ char *text = NULL;
        _cleanup_strv_free_ char **places = NULL;
        struct libmnt_table *tb;
        size_t k = 0, size = 4096 * 96;
        unsigned n = 0;
        int r;

        text = malloc(size);
        if (!tap_ok(text, "long chain: memory"))
                return;
        k += snprintf(text + k, size - k, ROOT TOP);
        /* 40..4039: each the parent of the next; the first sits on 4039, a loop of 4000. */
        for (int id = 40; id < 4040; id++)
                k += snprintf(text + k, size - k, "%d %d 0:60 / /usr/l%d rw - tmpfs tmpfs rw\n", id,
                              id == 40 ? 4039 : id - 1, id);
        tb = fixture_mount_table(text);
        if (!tap_ok(tb, "long chain: the fixture parses"))
                return;
        r = carry_plan(tb, 20, "/usr", &places, &n, NULL);
        tap_ok(r == -ELOOP, "a loop of 4000 parents is -ELOOP (got %d)", r);
        mnt_unref_table(tb);
}

/* A service's stale top (50, a bind of the old overlay) with its sandbox, over the host's copy (20). */
#define STALE "40 20 0:50 / /usr ro,nosuid,nodev master:3 - overlay tuck-sysext ro\n" \
              "41 40 0:60 /inaccessible/dir /usr/share/secret ro,nosuid,nodev,noexec - tmpfs tmpfs rw\n" \
              "42 40 0:61 / /usr/lib/scratch rw,nodev - tmpfs tmpfs rw\n"
/* The heal's tree (30, the new overlay 0:51) beneath it, the sandbox carried onto it. */
#define TREE "30 20 0:51 / /usr ro,nosuid,nodev shared:9 - overlay tuck-sysext ro\n"
#define TREE_SANDBOX "31 30 0:60 /inaccessible/dir /usr/share/secret ro,nosuid,nodev,noexec - tmpfs tmpfs rw\n" \
                     "32 30 0:61 / /usr/lib/scratch rw,nodev - tmpfs tmpfs rw\n"
#define ABOVE_TREE "40 30 0:50 / /usr ro,nosuid,nodev master:3 - overlay tuck-sysext ro\n" \
                   "41 40 0:60 /inaccessible/dir /usr/share/secret ro,nosuid,nodev,noexec - tmpfs tmpfs rw\n" \
                   "42 40 0:61 / /usr/lib/scratch rw,nodev - tmpfs tmpfs rw\n"

typedef struct HalfwayCase {
        const char *name;
        const char *mountinfo;
        int r;                  /* 1: mount 30 is the tree, finishing keeps n_kept */
        unsigned n_kept;
} HalfwayCase;

static const HalfwayCase halfway_cases[] = {
        { "the tree beneath, the sandbox on it", ROOT TOP TREE TREE_SANDBOX ABOVE_TREE, 1, 2 },
        { "the tree with the host's own mounts too", ROOT TOP TREE TREE_SANDBOX
          "33 30 0:62 / /usr/local rw - tmpfs tmpfs rw\n" ABOVE_TREE, 1, 2 },
        { "no tree: the top sits on the host's copy", ROOT TOP STALE, 0, 0 },
        { "the host's copy under the top, received by propagation (master)",
          ROOT TOP "30 20 0:51 / /usr ro,nodev master:4 - overlay tuck-sysext ro\n" TREE_SANDBOX ABOVE_TREE, 0, 0 },
        { "a tree of another file system than the new one",
          ROOT TOP "30 20 0:52 / /usr ro,nosuid,nodev - overlay tuck-sysext ro\n" TREE_SANDBOX ABOVE_TREE, 0, 0 },
        { "a tree without one of the top's mounts",
          ROOT TOP TREE "31 30 0:60 /inaccessible/dir /usr/share/secret ro,nosuid,nodev,noexec - tmpfs tmpfs rw\n"
          ABOVE_TREE, 0, 0 },
        { "a tree where a hidden path is open",
          ROOT TOP TREE "31 30 0:60 /inaccessible/dir /usr/share/secret rw,nosuid,nodev,noexec - tmpfs tmpfs rw\n"
          "32 30 0:61 / /usr/lib/scratch rw,nodev - tmpfs tmpfs rw\n" ABOVE_TREE, 0, 0 },
        { "the top on a directory of the new tree, not on its root",
          ROOT TOP TREE "40 30 0:50 / /usr/lib ro - overlay tuck-sysext ro\n", 0, 0 },
        { "parents that loop below the top",
          ROOT TOP TREE TREE_SANDBOX ABOVE_TREE
          "43 44 0:63 / /usr/lib/c/d rw - tmpfs tmpfs rw\n"
          "44 43 0:64 / /usr/lib/c/d/e rw - tmpfs tmpfs rw\n", -ELOOP, 0 },
};

static void test_halfway(const HalfwayCase *c) {
        struct libmnt_table *tb = fixture_mount_table(c->mountinfo);
        unsigned kept = 0;
        uint64_t attr = 0;
        int r, id = 0;

        if (!tap_ok(tb, "halfway, %s: the fixture parses", c->name))
                return;
        r = carry_find_halfway(tb, 40, makedev(0, 51), &id, &kept, &attr);
        mnt_unref_table(tb);
        if (!tap_ok(r == c->r, "halfway, %s: %s", c->name, c->r == 1 ? "finish it" : c->r == 0 ? "not a tree of ours"
                    : strerror(-c->r)))
                tap_diag("r=%d", r);
        if (r == 1 && c->r == 1)
                tap_ok(id == 30 && kept == c->n_kept && attr == (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NODEV),
                       "halfway, %s: mount 30, ro,nosuid,nodev, %u kept (got %d, %s, %u)", c->name, c->n_kept, id,
                       mount_attr_to_string(attr, (char[32]) {}, 32), kept);
}

int main(void) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                test_case(&cases[i]);
        test_long_loop();
        for (size_t i = 0; i < ELEMENTSOF(halfway_cases); i++)
                test_halfway(&halfway_cases[i]);
        return tap_done();
}
