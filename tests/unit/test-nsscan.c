/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Who a namespace belongs to, from a cgroup path: systemd unit and nspawn
 * machine; and what a view shows, against a generation record.
 */

#include <inttypes.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "nsscan.h"
#include "tap.h"
#include "util.h"

static const struct {
        const char *path, *unit, *machine;
} cases[] = {
        { "/system.slice/nginx.service", "nginx.service", NULL },
        { "/system.slice/system-getty.slice/getty@tty1.service", "getty@tty1.service", NULL },
        { "/user.slice/user-1000.slice/session-3.scope", "session-3.scope", NULL },
        { "/machine.slice/machine-web\\x2d1.scope/payload/system.slice/nginx.service", "machine-web\\x2d1.scope", "web-1" },
        { "/machine.slice/systemd-nspawn@db.service/payload/init.scope", "systemd-nspawn@db.service", "db" },
        { "/machine.slice/systemd-nspawn@db.service/supervisor", "systemd-nspawn@db.service", "db" },
        { "/", NULL, NULL },
        { "/init.scope", "init.scope", NULL },
        { "/some/plain/cgroup", NULL, NULL },
};

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
                NamespaceView v = { .dev = makedev(0, views[i].minor), .generation = 99 };

                namespace_view_classify(&v, views[i].merged ? &merged : &unmerged);
                tap_ok(v.state == views[i].state && v.generation == views[i].generation,
                       "0:%u against generation 5 (%s): %s %" PRIu64, views[i].minor,
                       views[i].merged ? "merged" : "unmerged", ns_view_state_to_string(v.state), v.generation);
        }

        NamespaceView v = { .dev = makedev(0, 50) };
        namespace_view_classify(&v, NULL);
        tap_ok(v.state == NS_VIEW_FOREIGN, "never merged: everything is foreign");
}

int main(void) {
        test_classify();
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *unit = NULL, *machine = NULL;
                int r = cgroup_path_identify(cases[i].path, &unit, &machine);

                tap_ok(r == 0, "'%s' parses", cases[i].path);
                tap_streq(unit, cases[i].unit, "'%s': unit", cases[i].path);
                tap_streq(machine, cases[i].machine, "'%s': machine", cases[i].path);
        }
        tap_streq(ns_view_state_to_string(NS_VIEW_STALE), "stale", "state names");
        return tap_done();
}
