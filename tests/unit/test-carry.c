/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What a swap carries from below a top mount (carry.c carry_plan()),
 * table-driven over fixture mountinfo: the places where mounts sit on the
 * top and how many mounts hang below it, for a service's sandbox, a stack,
 * a covered mount, a first merge (the top is the root file system, only
 * what is below the hierarchy counts), and the refusals: an unbindable
 * mount, a table whose parents loop (read while mounts came and went).
 */

#include <errno.h>
#include <stdio.h>
#include <string.h>

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

int main(void) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                test_case(&cases[i]);
        test_long_loop();
        return tap_done();
}
