/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * A mount table from fixture mountinfo text, for the table-driven tests of
 * what reads mount tables (observe.c, carry.c): NULL if it does not parse.
 */

#include <libmount.h>
#include <stdio.h>
#include <string.h>

static inline struct libmnt_table *fixture_mount_table(const char *mountinfo) {
        struct libmnt_table *tb = mnt_new_table();
        FILE *f = fmemopen((void *) mountinfo, strlen(mountinfo), "r");

        if (!tb || !f || mnt_table_parse_stream(tb, f, "fixture") < 0) {
                mnt_unref_table(tb);
                tb = NULL;
        }
        if (f)
                fclose(f);
        return tb;
}
