/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A stand-in for systemd's manager on a private bus, for the StalePolicy=
 * restart test (PID 1 on the build machine is not systemd): owns
 * org.freedesktop.systemd1, answers RestartUnit(ss) with a job path and
 * appends "RestartUnit UNIT MODE" to the file named by argv[1].
 *
 * With a second argument FILE, the first call is recorded at once but
 * answered only once FILE exists: the caller waits there (stale-pidfd.sh
 * changes the world meanwhile).
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

static const char *record, *gate;
static unsigned job;

static int method_restart_unit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *unit, *mode;
        char path[64];
        FILE *f;
        int r;

        r = sd_bus_message_read(m, "ss", &unit, &mode);
        if (r < 0)
                return r;
        f = fopen(record, "ae");
        if (!f)
                return sd_bus_error_set_errno(error, errno);
        fprintf(f, "RestartUnit %s %s\n", unit, mode);
        fclose(f);
        while (gate && job == 0 && access(gate, F_OK) < 0)
                usleep(20000);
        snprintf(path, sizeof path, "/org/freedesktop/systemd1/job/%u", ++job);
        return sd_bus_reply_method_return(m, "o", path);
}

static const sd_bus_vtable vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("RestartUnit",
                                SD_BUS_ARGS("s", name, "s", mode),
                                SD_BUS_RESULT("o", job),
                                method_restart_unit, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_VTABLE_END,
};

int main(int argc, char *argv[]) {
        sd_bus *bus = NULL;
        int r;

        if (argc != 2 && argc != 3) {
                fprintf(stderr, "usage: %s RECORD-FILE [GATE-FILE]\n", argv[0]);
                return 2;
        }
        record = argv[1];
        gate = argc == 3 ? argv[2] : NULL;

        r = sd_bus_open_system(&bus);
        if (r >= 0)
                r = sd_bus_add_object_vtable(bus, NULL, "/org/freedesktop/systemd1",
                                             "org.freedesktop.systemd1.Manager", vtable, NULL);
        if (r >= 0)
                r = sd_bus_request_name(bus, "org.freedesktop.systemd1", 0);
        if (r < 0) {
                fprintf(stderr, "fake systemd: %s\n", strerror(-r));
                return 1;
        }
        for (;;) {
                r = sd_bus_process(bus, NULL);
                if (r < 0)
                        return 1;
                if (r == 0 && sd_bus_wait(bus, UINT64_MAX) < 0)
                        return 1;
        }
}
