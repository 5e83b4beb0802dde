/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What a view shows, against a generation record; and how a namespace's
 * names (comm, unit, container) are printed: escaped.
 */

#include <inttypes.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "nsscan.h"
#include "tap.h"
#include "util.h"

/* Generation 5 on 0:50, earlier overlays 0:49 (4) and 0:47 (3), the base 0:40. */
static void test_classify(void) {
        PastOverlay history[] = { { 4, makedev(0, 49) }, { 3, makedev(0, 47) } };
        Generation merged = {
                .merged = true, .number = 5, .overlay_dev = makedev(0, 50), .base_dev = makedev(0, 40),
                .history = history, .n_history = ELEMENTSOF(history),
        }, unmerged = merged;
        static const struct {
                bool merged;
                unsigned minor;
                NsViewState state;
                uint64_t generation;
        } views[] = {
                { true,  50, NS_VIEW_CURRENT, 5 },
                { true,  49, NS_VIEW_STALE,   4 },
                { true,  47, NS_VIEW_STALE,   3 },
                { true,  40, NS_VIEW_BASE,    0 },
                { true,  33, NS_VIEW_FOREIGN, 0 },
                /* After an unmerge the last overlay is not current any more. */
                { false, 50, NS_VIEW_FOREIGN, 0 },
                { false, 40, NS_VIEW_BASE,    0 },
        };

        unmerged.merged = false;
        for (size_t i = 0; i < ELEMENTSOF(views); i++) {
                NamespaceView v = NAMESPACE_VIEW_NULL;

                v.dev = makedev(0, views[i].minor);
                v.generation = 99;

                namespace_view_classify(&v, views[i].merged ? &merged : &unmerged);
                tap_ok(v.state == views[i].state && v.generation == views[i].generation,
                       "0:%u against generation 5 (%s): %s %" PRIu64, views[i].minor,
                       views[i].merged ? "merged" : "unmerged", ns_view_state_to_string(v.state), v.generation);
        }

        NamespaceView v = NAMESPACE_VIEW_NULL;

        v.dev = makedev(0, 50);
        namespace_view_classify(&v, NULL);
        tap_ok(v.state == NS_VIEW_FOREIGN, "never merged: everything is foreign");
}

/* Names someone else chose reach one line of text, never two. */
static void test_escape(void) {
        static const struct {
                const char *in, *out;
        } cases[] = {
                { "nginx.service", "nginx.service" },
                { "evil\nMESSAGE_ID=5caeb1603632417eb7da23c50dbef12a", "evil\\x0aMESSAGE_ID=5caeb1603632417eb7da23c50dbef12a" },
                { "tab\there", "tab\\x09here" },
                { "foo\\x0abar.service", "foo\\x5cx0abar.service" },
                { "\x1b[31mred", "\\x1b[31mred" },
                { "caf\xc3\xa9", "caf\\xc3\\xa9" },
                { "", "" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *e = name_escape(cases[i].in);

                tap_streq(e, cases[i].out, "escape case %zu", i);
        }
        tap_ok(name_escape(NULL) == NULL, "escape NULL");
}

/* Who a view is, escaped. */
static void test_who(void) {
        NamespaceView v = NAMESPACE_VIEW_NULL;
        char *who;

        strcpy(v.comm, "a\nb");
        who = namespace_view_who(&v);
        tap_streq(who, "process a\\x0ab", "a process: its comm, escaped");
        free(who);
        v.unit = (char *) "user@1000.service";
        v.user_unit = (char *) "systemd-reboot.service";
        v.owner_uid = 1000;
        who = namespace_view_who(&v);
        tap_streq(who, "unit systemd-reboot.service of user 1000", "a user's unit says whose");
        free(who);
        v.user_unit = NULL;
        v.owner_uid = UID_INVALID;
        v.machine = (char *) "web\x01";
        who = namespace_view_who(&v);
        tap_streq(who, "container web\\x01", "a container, escaped");
        free(who);
}

int main(void) {
        test_classify();
        test_escape();
        test_who();
        tap_streq(ns_view_state_to_string(NS_VIEW_STALE), "stale", "state names");
        return tap_done();
}
