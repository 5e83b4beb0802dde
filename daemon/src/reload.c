/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdlib.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "config.h"
#include "env-file.h"
#include "image.h"
#include "log.h"
#include "reload.h"
#include "util.h"

#define SYSTEMD_BUS_NAME "org.freedesktop.systemd1"
#define SYSTEMD_BUS_PATH "/org/freedesktop/systemd1"
#define SYSTEMD_BUS_MANAGER "org.freedesktop.systemd1.Manager"

void manager_request_done(ManagerRequest *m) {
        strv_free(m->asked_by);
        strv_free(m->restart);
        strv_free(m->reload_or_restart);
        *m = (ManagerRequest) {};
}

bool unit_name_is_valid(const char *s) {
        static const char * const types[] = {
                "service", "socket", "target", "device", "mount", "automount",
                "swap", "timer", "path", "slice", "scope",
        };
        const char *dot, *at;
        bool typed = false;

        if (isempty(s) || strlen(s) >= 256)
                return false;
        dot = strrchr(s, '.');
        if (!dot || dot == s)
                return false;
        for (size_t i = 0; i < ELEMENTSOF(types); i++)
                typed = typed || streq(dot + 1, types[i]);
        if (!typed)
                return false;
        /* systemd's unit name characters: [a-zA-Z0-9:_.\-] and one '@' with an instance after it. */
        for (const char *p = s; p < dot; p++)
                if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:_.-\\@", *p))
                        return false;
        at = strchr(s, '@');
        if (!at)
                return true;
        return at != s && at + 1 < dot && !strchr(at + 1, '@');
}

/* Unique, sorted: the order systemd acts in does not depend on the order of the images. */
static int strv_extend_unique(char ***l, const char *s) {
        int r;

        if (strv_contains(*l, s))
                return 0;
        r = strv_extend(l, s);
        if (r < 0)
                return r;
        strv_sort(*l);
        return 1;
}

static int parse_units(const char *field, const char *value, const char *extension, char ***ret) {
        _cleanup_strv_free_ char **words = strv_split(value, WHITESPACE);

        if (!words)
                return -ENOMEM;
        STRV_FOREACH(w, words) {
                if (!unit_name_is_valid(*w)) {
                        log_warning("Extension '%s': invalid unit name '%s' in %s=, ignoring.", extension, *w, field);
                        continue;
                }
                if (strv_extend_unique(ret, *w) < 0)
                        return -ENOMEM;
        }
        return 0;
}

int layer_set_manager_fields(Layer *l, char * const *release) {
        const char *v;
        int b, r;

        v = env_pairs_get(release, "EXTENSION_RELOAD_MANAGER");
        if (!isempty(v)) {
                b = config_parse_boolean(v);
                if (b < 0)
                        log_warning("Extension '%s': EXTENSION_RELOAD_MANAGER=%s is not a boolean, ignoring.",
                                    l->name, v);
                l->reload_manager = b > 0;
        }
        v = env_pairs_get(release, "EXTENSION_RESTART_UNITS");
        if (!isempty(v) && (r = parse_units("EXTENSION_RESTART_UNITS", v, l->name, &l->restart_units)) < 0)
                return r;
        v = env_pairs_get(release, "EXTENSION_RELOAD_OR_RESTART_UNITS");
        if (!isempty(v) && (r = parse_units("EXTENSION_RELOAD_OR_RESTART_UNITS", v, l->name,
                                            &l->reload_or_restart_units)) < 0)
                return r;
        return 0;
}

/* What one layer asks (it entered, changed or left). */
static int add_layer(ManagerRequest *m, const Layer *l) {
        if (!l->reload_manager && strv_length(l->restart_units) == 0 && strv_length(l->reload_or_restart_units) == 0)
                return 0;
        m->reload = true;
        if (strv_extend_unique(&m->asked_by, l->name) < 0)
                return -ENOMEM;
        STRV_FOREACH(u, l->restart_units)
                if (strv_extend_unique(&m->restart, *u) < 0)
                        return -ENOMEM;
        STRV_FOREACH(u, l->reload_or_restart_units)
                if (strv_extend_unique(&m->reload_or_restart, *u) < 0)
                        return -ENOMEM;
        return 0;
}

/* A unit in both lists is only restarted. */
static void prune_reload_or_restart(ManagerRequest *m) {
        size_t k = 0;

        for (size_t i = 0; m->reload_or_restart && m->reload_or_restart[i]; i++)
                if (strv_contains(m->restart, m->reload_or_restart[i]))
                        free(m->reload_or_restart[i]);
                else
                        m->reload_or_restart[k++] = m->reload_or_restart[i];
        if (m->reload_or_restart)
                m->reload_or_restart[k] = NULL;
}

static const Layer *find_layer(const Generation *g, const char *name) {
        for (size_t i = 0; g && g->merged && i < g->n_layers; i++)
                if (streq(g->layers[i].name, name))
                        return &g->layers[i];
        return NULL;
}

int manager_request_add_swap(ManagerRequest *m, const Generation *old, const Generation *new,
                             char * const *preserved) {
        int r;

        for (size_t i = 0; i < new->n_layers; i++) {
                const Layer *l = &new->layers[i], *was = find_layer(old, l->name);

                /* Restarts follow the content: the same file mounted another way (dm-verity
                 * sidecars added or removed) holds the same files. */
                if (was ? image_fingerprint_same_file(was->fingerprint, l->fingerprint) :
                    strv_contains(preserved, l->name))
                        continue;
                r = add_layer(m, l);
                if (r < 0)
                        return r;
        }
        for (size_t i = 0; old && old->merged && i < old->n_layers; i++)
                if (!find_layer(new, old->layers[i].name)) {
                        r = add_layer(m, &old->layers[i]);
                        if (r < 0)
                                return r;
                }
        prune_reload_or_restart(m);
        return 0;
}

int manager_request_add_all(ManagerRequest *m, const Generation *g) {
        for (size_t i = 0; g->merged && i < g->n_layers; i++) {
                int r = add_layer(m, &g->layers[i]);

                if (r < 0)
                        return r;
        }
        prune_reload_or_restart(m);
        return 0;
}

/*
 * As root PID 1's own socket, as systemctl connects: it is there at boot,
 * before dbus.socket (a refresh by tuckd's start or systemd-sysext.service).
 * $DBUS_SYSTEM_BUS_ADDRESS (tests), another user, or no such socket: the
 * system bus.
 */
static int manager_bus_open(sd_bus **ret) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        if (getenv("DBUS_SYSTEM_BUS_ADDRESS") || geteuid() != 0 || access("/run/systemd/private", F_OK) < 0)
                return sd_bus_open_system(ret);
        r = sd_bus_new(&bus);
        if (r >= 0)
                r = sd_bus_set_address(bus, "unix:path=/run/systemd/private");
        if (r >= 0)
                r = sd_bus_start(bus);
        if (r < 0)
                return sd_bus_open_system(ret);
        *ret = TAKE_PTR(bus);
        return 0;
}

static int failed(ManagerReport *rep, const char *what, const sd_bus_error *e, int r) {
        char *s;

        if (asprintf_safe(&s, "%s: %s", what, e && e->message ? e->message : strerror(-r)) < 0)
                return -ENOMEM;
        log_warning("Service manager: %s", s);
        return strv_consume(&rep->failed, s);
}

/*
 * Reload answers once the manager has reloaded, so the units below are known
 * by then. That can take longer than sd-bus's default 25 s (seen: a loaded
 * VM under TCG); systemctl waits 6 min. Two, within tuckd's watchdog (3 min):
 * the refresh waits here in tuckd's event loop.
 */
#define RELOAD_TIMEOUT_USEC (UINT64_C(120) * 1000000)

static int daemon_reload(sd_bus *bus, ManagerReport *rep) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_message_new_method_call(bus, &m, SYSTEMD_BUS_NAME, SYSTEMD_BUS_PATH, SYSTEMD_BUS_MANAGER, "Reload");
        if (r >= 0)
                r = sd_bus_call(bus, m, RELOAD_TIMEOUT_USEC, &error, NULL);
        if (r < 0)
                (void) failed(rep, "daemon-reload", &error, r);
        else
                rep->reloaded = true;
        sd_bus_error_free(&error);
        return r;
}

/* RestartUnit or ReloadOrRestartUnit; a unit that is gone (its extension left) is stopped. */
static void unit_job(sd_bus *bus, const char *method, const char *unit, char ***done, ManagerReport *rep) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_call_method(bus, SYSTEMD_BUS_NAME, SYSTEMD_BUS_PATH, SYSTEMD_BUS_MANAGER, method, &error,
                               &reply, "ss", unit, "replace");
        if (r < 0 && sd_bus_error_has_names(&error, "org.freedesktop.systemd1.NoSuchUnit",
                                            "org.freedesktop.systemd1.LoadFailed")) {
                sd_bus_error_free(&error);
                reply = sd_bus_message_unref(reply);
                method = "StopUnit";
                done = &rep->stopped;
                r = sd_bus_call_method(bus, SYSTEMD_BUS_NAME, SYSTEMD_BUS_PATH, SYSTEMD_BUS_MANAGER, method,
                                       &error, &reply, "ss", unit, "replace");
        }
        if (r < 0)
                (void) failed(rep, unit, &error, r);
        else
                (void) strv_extend(done, unit);
        sd_bus_error_free(&error);
}

void manager_request_execute(const ManagerRequest *m, ManagerReport *rep) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        int r;

        if (!m->reload)
                return;
        r = manager_bus_open(&bus);
        if (r < 0) {
                (void) failed(rep, "cannot connect to the service manager", NULL, r);
                return;
        }
        /* A reload that did not answer in time may still be under way: the manager takes the
         * jobs below after it. Any other failure: the units may be unknown, ask for nothing. */
        r = daemon_reload(bus, rep);
        if (r < 0 && r != -ETIMEDOUT)
                return;
        STRV_FOREACH(u, m->restart)
                unit_job(bus, "RestartUnit", *u, &rep->restarted, rep);
        STRV_FOREACH(u, m->reload_or_restart)
                unit_job(bus, "ReloadOrRestartUnit", *u, &rep->reloaded_or_restarted, rep);
}
