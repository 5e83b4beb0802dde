/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Who a namespace belongs to, from a cgroup path: systemd unit and nspawn machine. */

#include <stdlib.h>

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

int main(void) {
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
