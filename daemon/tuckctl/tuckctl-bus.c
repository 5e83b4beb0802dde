/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-bus.h>

#include "log.h"
#include "macro.h"
#include "tuck-bus.h"
#include "tuckctl-bus.h"
#include "util.h"

/* tuckd's errors keep their meaning: tuckctl exits as if it had run the
 * operation itself (Failed maps to EIO, exit status 1). */
static const sd_bus_error_map tuckd_errors[] = {
        SD_BUS_ERROR_MAP(TUCK_BUS_ERROR_REFUSED, EPERM),
        SD_BUS_ERROR_MAP(TUCK_BUS_ERROR_NOT_SUPPORTED, EOPNOTSUPP),
        SD_BUS_ERROR_MAP(TUCK_BUS_ERROR_BUSY, EBUSY),
        SD_BUS_ERROR_MAP(TUCK_BUS_ERROR_FAILED, EIO),
        SD_BUS_ERROR_MAP_END,
};

/* A refresh of many images can take a while; the default 25 s is too short. */
#define TUCKCTL_BUS_TIMEOUT_USEC (UINT64_C(5) * 60 * 1000000)

int tuckctl_bus_available(const char *root) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *their_root = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        r = sd_bus_open_system(&bus);
        if (r < 0)
                return r == -ENOENT || r == -ECONNREFUSED ? 0 : r;
        /* No owner (tuckd not running) answers ServiceUnknown/NameHasNoOwner:
         * no bus activation file is installed, so asking never starts it. */
        r = sd_bus_get_property_string(bus, TUCK_BUS_NAME, TUCK_BUS_PATH, TUCK_BUS_INTERFACE,
                                       "Root", &error, &their_root);
        if (r < 0) {
                bool absent = sd_bus_error_has_names(&error, SD_BUS_ERROR_SERVICE_UNKNOWN,
                                                     SD_BUS_ERROR_NAME_HAS_NO_OWNER);
                sd_bus_error_free(&error);
                return absent ? 0 : r;
        }
        /* A tuckd for another tree (a test's --root) is not ours to use. */
        return streq(their_root, root ?: "/");
}

/* Calls @method on tuckd over a new connection returned in @ret_bus (the reply's). */
static int call(sd_bus **ret_bus, const char *method, sd_bus_message **ret_reply, const char *types, ...) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        va_list ap;
        int r;

        (void) sd_bus_error_add_map(tuckd_errors);
        r = sd_bus_open_system(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus: %m");
        r = sd_bus_message_new_method_call(bus, &m, TUCK_BUS_NAME, TUCK_BUS_PATH,
                                           TUCK_BUS_INTERFACE, method);
        if (r < 0)
                return log_error_errno(r, "Failed to build the %s call: %m", method);
        if (types) {
                va_start(ap, types);
                r = sd_bus_message_appendv(m, types, ap);
                va_end(ap);
                if (r < 0)
                        return log_error_errno(r, "Failed to build the %s call: %m", method);
        }
        r = sd_bus_call(bus, m, TUCKCTL_BUS_TIMEOUT_USEC, &error, ret_reply);
        if (r < 0) {
                log_error("tuckd: %s", error.message ?: strerror(-r));
                sd_bus_error_free(&error);
                return r;
        }
        *ret_bus = TAKE_PTR(bus);
        return 0;
}

/* One {sv} entry of type "as". */
static int append_names(sd_bus_message *m, const char *key, char * const *names) {
        int r;

        if (strv_length(names) == 0)
                return 0;
        r = sd_bus_message_open_container(m, 'e', "sv");
        if (r >= 0)
                r = sd_bus_message_append(m, "s", key);
        if (r >= 0)
                r = sd_bus_message_open_container(m, 'v', "as");
        if (r >= 0)
                r = sd_bus_message_append_strv(m, (char **) names);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

/* The options dict of MergeEx, RefreshEx, UnmergeEx (org.tuck1.Manager(5)). */
static int append_options(sd_bus_message *m, const TuckOptions *o) {
        uint64_t flags = 0;
        int r;

        if (o->always_refresh)
                flags |= TUCK_BUS_FLAG_ALWAYS_REFRESH;
        if (o->ignore_release)
                flags |= TUCK_BUS_FLAG_IGNORE_RELEASE;
        if (o->no_reload)
                flags |= TUCK_BUS_FLAG_NO_RELOAD;
        if (o->allow_downgrade)
                flags |= TUCK_BUS_FLAG_ALLOW_DOWNGRADE;
        if (o->classes & (1u << IMAGE_SYSEXT))
                flags |= TUCK_BUS_FLAG_SYSEXT;
        if (o->classes & (1u << IMAGE_CONFEXT))
                flags |= TUCK_BUS_FLAG_CONFEXT;
        r = sd_bus_message_open_container(m, 'a', "{sv}");
        if (r >= 0)
                r = sd_bus_message_append(m, "{sv}", "flags", "t", flags);
        if (r >= 0)
                r = append_names(m, "allow-downgrade-names", o->allow_downgrade_names);
        if (r >= 0)
                r = append_names(m, "remove", o->remove);
        if (r >= 0 && o->via)
                r = sd_bus_message_append(m, "{sv}", "command", "s", o->via);
        if (r >= 0)
                r = sd_bus_message_close_container(m);
        return r;
}

int tuckctl_bus_run(const char *verb, const TuckOptions *o, bool quiet) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL, *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        static const struct {
                const char *verb, *method;
        } table[] = {
                { "merge",   "MergeEx"   },
                { "refresh", "RefreshEx" },
                { "unmerge", "UnmergeEx" },
        };
        const char *method = NULL;
        int changed, r;

        for (size_t i = 0; i < ELEMENTSOF(table); i++)
                if (streq(verb, table[i].verb))
                        method = table[i].method;
        if (!method)
                return log_error_errno(EINVAL, "'%s' cannot be run through tuckd.", verb);

        (void) sd_bus_error_add_map(tuckd_errors);
        r = sd_bus_open_system(&bus);
        if (r < 0)
                return log_error_errno(r, "Failed to connect to the system bus: %m");
        r = sd_bus_message_new_method_call(bus, &m, TUCK_BUS_NAME, TUCK_BUS_PATH, TUCK_BUS_INTERFACE, method);
        if (r >= 0)
                r = append_options(m, o);
        if (r < 0)
                return log_error_errno(r, "Failed to build the %s call: %m", method);
        r = sd_bus_call(bus, m, TUCKCTL_BUS_TIMEOUT_USEC, &error, &reply);
        if (r < 0) {
                log_error("tuckd: %s", error.message ?: strerror(-r));
                sd_bus_error_free(&error);
                return r;
        }
        r = sd_bus_message_read(reply, "b", &changed);
        if (r < 0)
                return log_error_errno(r, "Failed to read tuckd's reply to %s: %m", method);
        if (!quiet)
                printf("%s (through tuckd): %s\n", verb, changed ? "done" : "nothing to do");
        return changed ? 1 : 0;
}

int tuckctl_bus_json(const char *method) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        const char *json;
        int r;

        r = call(&bus, method, &reply, NULL);
        if (r < 0)
                return r;
        r = sd_bus_message_read(reply, "s", &json);
        if (r < 0)
                return log_error_errno(r, "Failed to read tuckd's reply to %s: %m", method);
        fputs(json, stdout);
        if (!*json || json[strlen(json) - 1] != '\n')
                putchar('\n');
        return 0;
}

int tuckctl_bus_try(const char *verb, const char *root, const TuckOptions *o, bool json, bool quiet,
                    bool *ret_handled) {
        int r;

        *ret_handled = false;
        if (json || o->allow_window)
                return 0;
        if (!streq(verb, "merge") && !streq(verb, "refresh") && !streq(verb, "unmerge"))
                return 0;
        /* Hierarchies of our own choosing are not tuckd's. */
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (getenv(image_class_info[k].hierarchies_env))
                        return 0;
        r = tuckctl_bus_available(root);
        if (r <= 0) {
                if (r < 0)
                        log_debug_errno(r, "Cannot ask the system bus for tuckd, working directly: %m");
                return 0;
        }

        *ret_handled = true;
        return tuckctl_bus_run(verb, o, quiet);
}
