/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A stand-in for systemd's manager on a private bus (PID 1 on the build
 * machine is not systemd): owns org.freedesktop.systemd1 and answers what
 * tuck asks of it, appending one line per call to the file named by
 * argv[1]: "Reload", "RestartUnit UNIT MODE", "ReloadOrRestartUnit UNIT
 * MODE", "StopUnit UNIT MODE". Units named in $FAKE_SYSTEMD_GONE (space
 * separated) are gone: restarting them answers NoSuchUnit, as systemd does
 * for a unit whose file went with its extension.
 *
 * With a second argument FILE, the first unit call is recorded at once but
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

static int append(const char *line, sd_bus_error *error) {
        FILE *f = fopen(record, "ae");

        if (!f)
                return sd_bus_error_set_errno(error, errno);
        fprintf(f, "%s\n", line);
        fclose(f);
        return 0;
}

static int gone(const char *unit) {
        const char *l = getenv("FAKE_SYSTEMD_GONE");
        size_t n = strlen(unit);

        for (const char *p = l; p && (p = strstr(p, unit)); p += n)
                if ((p == l || p[-1] == ' ') && (p[n] == 0 || p[n] == ' '))
                        return 1;
        return 0;
}

static int method_unit(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        const char *method = sd_bus_message_get_member(m), *unit, *mode;
        char line[512], path[64];
        int r;

        r = sd_bus_message_read(m, "ss", &unit, &mode);
        if (r < 0)
                return r;
        snprintf(line, sizeof line, "%s %s %s", method, unit, mode);
        r = append(line, error);
        if (r < 0)
                return r;
        while (gate && job == 0 && access(gate, F_OK) < 0)
                usleep(20000);
        if (strcmp(method, "StopUnit") != 0 && gone(unit))
                return sd_bus_error_setf(error, "org.freedesktop.systemd1.NoSuchUnit", "Unit %s not found.", unit);
        snprintf(path, sizeof path, "/org/freedesktop/systemd1/job/%u", ++job);
        return sd_bus_reply_method_return(m, "o", path);
}

static int method_reload(sd_bus_message *m, void *userdata, sd_bus_error *error) {
        int r = append("Reload", error);

        if (r < 0)
                return r;
        return sd_bus_reply_method_return(m, NULL);
}

static const sd_bus_vtable vtable[] = {
        SD_BUS_VTABLE_START(0),
        SD_BUS_METHOD_WITH_ARGS("RestartUnit", SD_BUS_ARGS("s", name, "s", mode), SD_BUS_RESULT("o", job),
                                method_unit, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("ReloadOrRestartUnit", SD_BUS_ARGS("s", name, "s", mode), SD_BUS_RESULT("o", job),
                                method_unit, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("StopUnit", SD_BUS_ARGS("s", name, "s", mode), SD_BUS_RESULT("o", job),
                                method_unit, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD("Reload", NULL, NULL, method_reload, SD_BUS_VTABLE_UNPRIVILEGED),
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
