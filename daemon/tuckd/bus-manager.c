/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * org.tuck1.Manager on /org/tuck1, name org.tuck1 on the system bus.
 * docs/org.tuck1.Manager.5 is its reference. Mutating methods are for root
 * only, checked twice: by the bus policy (units/org.tuck1.conf) and here, by
 * the caller's effective uid as the bus reports it, so a permissive or
 * broken policy still cannot let anyone else swap /usr.
 */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "util.h"

/*
 * Root only. *ret_via (if not NULL) says who called, for the decisions a call
 * records in versions.json: "D-Bus RefreshEx (uid 0, pid 1234, tuckctl)".
 */
static int check_caller_is_root(sd_bus_message *msg, const char *method, char **ret_via, sd_bus_error *error) {
        _cleanup_(sd_bus_creds_unrefp) sd_bus_creds *creds = NULL;
        const char *comm = NULL;
        pid_t pid = 0;
        uid_t euid;
        int r;

        r = sd_bus_query_sender_creds(msg, SD_BUS_CREDS_EUID | SD_BUS_CREDS_PID | SD_BUS_CREDS_COMM, &creds);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Failed to query the caller's credentials: %m");
        r = sd_bus_creds_get_euid(creds, &euid);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Failed to get the caller's uid: %m");
        if (euid != 0) {
                const char *fields[] = { "TUCK_METHOD", method, NULL };

                log_event(MESSAGE_ID_REFUSED, LOG_WARNING, fields,
                          "%s refused: caller %s has uid %u, only root may change extensions.",
                          method, sd_bus_message_get_sender(msg) ?: "?", (unsigned) euid);
                return sd_bus_error_setf(error, SD_BUS_ERROR_ACCESS_DENIED,
                                         "Only root may call %s (caller uid %u).", method, (unsigned) euid);
        }
        if (!ret_via)
                return 0;
        (void) sd_bus_creds_get_pid(creds, &pid);
        (void) sd_bus_creds_get_comm(creds, &comm);
        if (asprintf(ret_via, "D-Bus %s (uid %u, pid %d, %s)", method, (unsigned) euid, (int) pid,
                     comm ?: sd_bus_message_get_sender(msg) ?: "?") < 0)
                return -ENOMEM;
        return 0;
}

/* Runs the verb as asked and replies "changed", or the error tuckctl exits with. */
static int run_verb(sd_bus_message *msg, Manager *m, EngineVerb verb, const EngineRequest *req, const char *method,
                    sd_bus_error *error) {
        _cleanup_free_ char *reason = NULL;
        char trigger[64];
        int r;

        snprintf(trigger, sizeof trigger, "D-Bus %s", method);
        r = manager_run(m, verb, req, trigger, &reason);
        if (r < 0)
                return sd_bus_error_setf(error, tuck_bus_error_name(r), "%s refused: %s",
                                         method, reason ?: strerror(-r));
        return sd_bus_reply_method_return(msg, "b", r > 0);
}

static int method_verb(sd_bus_message *msg, Manager *m, EngineVerb verb, const char *method, sd_bus_error *error) {
        _cleanup_free_ char *via = NULL;
        uint64_t flags;
        int r;

        r = check_caller_is_root(msg, method, &via, error);
        if (r < 0)
                return r;

        r = sd_bus_message_read(msg, "t", &flags);
        if (r < 0)
                return r;
        if (flags & ~_TUCK_BUS_FLAGS_ALL)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS,
                                         "Unknown flags 0x%llx for %s.",
                                         (unsigned long long) (flags & ~_TUCK_BUS_FLAGS_ALL), method);

        return run_verb(msg, m, verb, &(EngineRequest) { .flags = flags, .via = via }, method, error);
}

static void request_done(EngineRequest *req) {
        strv_free(req->allow_downgrade);
        strv_free(req->remove);
}

/* An "as" option: extension names, each checked. */
static int read_names(sd_bus_message *msg, const char *key, char ***names, sd_bus_error *error) {
        char **l = NULL;
        int r;

        r = sd_bus_message_read_strv(msg, &l);
        if (r < 0)
                return r;
        STRV_FOREACH(n, l)
                if (!engine_name_is_valid(*n)) {
                        r = sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "'%s' in option '%s' is not an "
                                              "extension name.", *n, key);
                        strv_free(l);
                        return r;
                }
        STRV_FOREACH(n, l)
                if (strv_extend(names, *n) < 0) {
                        strv_free(l);
                        return -ENOMEM;
                }
        strv_free(l);
        return 0;
}

/* One entry of the options dict of MergeEx, RefreshEx and UnmergeEx (org.tuck1.Manager(5)). */
static int read_option(sd_bus_message *msg, EngineRequest *req, char **command, sd_bus_error *error) {
        const char *key;
        int r, b;

        r = sd_bus_message_read(msg, "s", &key);
        if (r < 0)
                return r;
        if (streq(key, "flags")) {
                r = sd_bus_message_read(msg, "v", "t", &req->flags);
                if (r >= 0 && (req->flags & ~_TUCK_BUS_FLAGS_ALL))
                        return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown flags 0x%llx.",
                                                 (unsigned long long) (req->flags & ~_TUCK_BUS_FLAGS_ALL));
        } else if (streq(key, "allow-downgrade")) {
                r = sd_bus_message_read(msg, "v", "b", &b);
                if (r >= 0 && b)
                        req->flags |= TUCK_BUS_FLAG_ALLOW_DOWNGRADE;
        } else if (streq(key, "allow-downgrade-names") || streq(key, "remove")) {
                r = sd_bus_message_enter_container(msg, 'v', "as");
                if (r >= 0)
                        r = read_names(msg, key, streq(key, "remove") ? &req->remove : &req->allow_downgrade, error);
                if (r >= 0)
                        r = sd_bus_message_exit_container(msg);
        } else if (streq(key, "command")) {
                const char *c;

                r = sd_bus_message_read(msg, "v", "s", &c);
                if (r >= 0 && free_and_strdup(command, c) < 0)
                        r = -ENOMEM;
        } else
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Unknown option '%s'.", key);
        return r;
}

static int method_verb_ex(sd_bus_message *msg, Manager *m, EngineVerb verb, const char *method, sd_bus_error *error) {
        _cleanup_(request_done) EngineRequest req = {};
        _cleanup_free_ char *via = NULL, *command = NULL, *both = NULL;
        int r;

        r = check_caller_is_root(msg, method, &via, error);
        if (r < 0)
                return r;
        r = sd_bus_message_enter_container(msg, 'a', "{sv}");
        if (r < 0)
                return r;
        while ((r = sd_bus_message_enter_container(msg, 'e', "sv")) > 0) {
                r = read_option(msg, &req, &command, error);
                if (r < 0)
                        return r;
                r = sd_bus_message_exit_container(msg);
                if (r < 0)
                        return r;
        }
        if (r < 0)
                return r;
        r = sd_bus_message_exit_container(msg);
        if (r < 0)
                return r;
        /* The caller's words ("tuckctl refresh --allow-downgrade=foo") and who the bus says it is. */
        if (command && asprintf(&both, "%s, through %s", command, via) < 0)
                return -ENOMEM;
        req.via = both ?: via;
        return run_verb(msg, m, verb, &req, method, error);
}

static int method_merge_ex(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_verb_ex(msg, userdata, ENGINE_MERGE, "MergeEx", error);
}

static int method_refresh_ex(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_verb_ex(msg, userdata, ENGINE_REFRESH, "RefreshEx", error);
}

static int method_unmerge_ex(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_verb_ex(msg, userdata, ENGINE_UNMERGE, "UnmergeEx", error);
}

static int method_merge(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_verb(msg, userdata, ENGINE_MERGE, "Merge", error);
}

static int method_refresh(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_verb(msg, userdata, ENGINE_REFRESH, "Refresh", error);
}

static int method_unmerge(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_verb(msg, userdata, ENGINE_UNMERGE, "Unmerge", error);
}

/* Anyone may ask: answered from what tuckd keeps (manager_status_json()), never a scan per call. */
static int method_json(sd_bus_message *msg, Manager *m,
                       int (*get)(Manager *, const char **, const char **), const char *method,
                       sd_bus_error *error) {
        const char *json = NULL, *reason = NULL;
        int r;

        r = get(m, &json, &reason);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "%s failed: %s", method, reason ?: strerror(-r));
        return sd_bus_reply_method_return(msg, "s", strempty(json));
}

static int method_status(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_json(msg, userdata, manager_status_json, "Status", error);
}

static int method_list(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        return method_json(msg, userdata, manager_list_json, "List", error);
}

/* Two small files, no namespace scanned: read for each call. */
static int method_versions(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_free_ char *json = NULL, *reason = NULL;
        Manager *m = userdata;
        int r;

        r = engine_versions_json(m->engine, &json, &reason);
        if (r < 0)
                return sd_bus_error_set_errnof(error, r, "Versions failed: %s", reason ?: strerror(-r));
        return sd_bus_reply_method_return(msg, "s", json);
}

static int method_forget(sd_bus_message *msg, void *userdata, sd_bus_error *error) {
        _cleanup_strv_free_ char **names = NULL;
        _cleanup_free_ char *message = NULL, *via = NULL;
        Manager *m = userdata;
        int r;

        r = check_caller_is_root(msg, "Forget", &via, error);
        if (r < 0)
                return r;
        r = read_names(msg, "names", &names, error);
        if (r < 0)
                return r;
        if (strv_length(names) == 0)
                return sd_bus_error_setf(error, SD_BUS_ERROR_INVALID_ARGS, "Forget needs at least one name.");
        r = engine_forget(m->engine, names, &message);
        if (r < 0)
                return sd_bus_error_setf(error, TUCK_BUS_ERROR_FAILED, "Forget refused: %s",
                                         message ?: strerror(-r));
        log_info("%s: %s", via, strempty(message));
        /* What was forgotten is no longer protected: the next refresh may drop it, and no longer holds it. */
        manager_emit_held_back(m);
        return sd_bus_reply_method_return(msg, "s", strempty(message));
}

static int property_get_generations(sd_bus *bus, const char *path, const char *interface,
                                    const char *property, sd_bus_message *reply, void *userdata,
                                    sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "{st}");
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_hierarchies; i++) {
                r = sd_bus_message_append(reply, "{st}", m->hierarchies[i].path,
                                          m->hierarchies[i].current.generation);
                if (r < 0)
                        return r;
        }
        return sd_bus_message_close_container(reply);
}

static int property_get_degraded(sd_bus *bus, const char *path, const char *interface,
                                 const char *property, sd_bus_message *reply, void *userdata,
                                 sd_bus_error *error) {
        return sd_bus_message_append(reply, "b", manager_degraded(userdata));
}

static int property_get_held_back(sd_bus *bus, const char *path, const char *interface,
                                  const char *property, sd_bus_message *reply, void *userdata,
                                  sd_bus_error *error) {
        Manager *m = userdata;
        int r;

        r = sd_bus_message_open_container(reply, 'a', "(sssssss)");
        if (r < 0)
                return r;
        for (size_t i = 0; i < m->n_hierarchies; i++)
                for (size_t k = 0; k < m->hierarchies[i].n_held; k++) {
                        const EngineHold *h = &m->hierarchies[i].held[k];

                        r = sd_bus_message_append(reply, "(sssssss)", m->hierarchies[i].path, h->extension,
                                                  h->reason, h->active_version, h->refused_version, h->override,
                                                  h->message);
                        if (r < 0)
                                return r;
                }
        return sd_bus_message_close_container(reply);
}

static int property_get_policy(sd_bus *bus, const char *path, const char *interface,
                               const char *property, sd_bus_message *reply, void *userdata,
                               sd_bus_error *error) {
        Manager *m = userdata;

        return sd_bus_message_append(reply, "s", stale_policy_to_string(m->config.stale_policy));
}

static int property_get_version(sd_bus *bus, const char *path, const char *interface,
                                const char *property, sd_bus_message *reply, void *userdata,
                                sd_bus_error *error) {
        return sd_bus_message_append(reply, "s", PROJECT_VERSION);
}

static const sd_bus_vtable manager_vtable[] = {
        SD_BUS_VTABLE_START(0),

        SD_BUS_PROPERTY("Version", "s", property_get_version, 0, SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Root", "s", NULL, offsetof(Manager, root), SD_BUS_VTABLE_PROPERTY_CONST),
        SD_BUS_PROPERTY("Generations", "a{st}", property_get_generations, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("StalePolicy", "s", property_get_policy, 0, 0),
        SD_BUS_PROPERTY("QuietPeriodUSec", "t", NULL, offsetof(Manager, config.quiet_usec), 0),
        SD_BUS_PROPERTY("RefreshCount", "t", NULL, offsetof(Manager, refresh_count),
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("HealCount", "t", NULL, offsetof(Manager, heal_count),
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("Degraded", "b", property_get_degraded, 0, SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),
        SD_BUS_PROPERTY("HeldBack", "a(sssssss)", property_get_held_back, 0,
                        SD_BUS_VTABLE_PROPERTY_EMITS_CHANGE),

        SD_BUS_METHOD_WITH_ARGS("Merge",
                                SD_BUS_ARGS("t", flags),
                                SD_BUS_RESULT("b", changed),
                                method_merge, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Refresh",
                                SD_BUS_ARGS("t", flags),
                                SD_BUS_RESULT("b", changed),
                                method_refresh, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Unmerge",
                                SD_BUS_ARGS("t", flags),
                                SD_BUS_RESULT("b", changed),
                                method_unmerge, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("MergeEx",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("b", changed),
                                method_merge_ex, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("RefreshEx",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("b", changed),
                                method_refresh_ex, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("UnmergeEx",
                                SD_BUS_ARGS("a{sv}", options),
                                SD_BUS_RESULT("b", changed),
                                method_unmerge_ex, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Versions",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", versions_json),
                                method_versions, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Forget",
                                SD_BUS_ARGS("as", names),
                                SD_BUS_RESULT("s", message),
                                method_forget, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("Status",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", status_json),
                                method_status, SD_BUS_VTABLE_UNPRIVILEGED),
        SD_BUS_METHOD_WITH_ARGS("List",
                                SD_BUS_NO_ARGS,
                                SD_BUS_RESULT("s", images_json),
                                method_list, SD_BUS_VTABLE_UNPRIVILEGED),

        SD_BUS_SIGNAL_WITH_ARGS("GenerationChanged",
                                SD_BUS_ARGS("s", hierarchy, "t", old_generation, "t", new_generation),
                                0),
        SD_BUS_SIGNAL_WITH_ARGS("NamespaceStale",
                                SD_BUS_ARGS("s", hierarchy, "u", pid, "s", comm, "s", unit,
                                            "s", machine, "s", action, "s", outcome),
                                0),

        SD_BUS_VTABLE_END,
};

int manager_emit_generation_changed(Manager *m, const char *hierarchy, uint64_t old_gen, uint64_t new_gen) {
        if (!m->bus)
                return 0;
        (void) sd_bus_emit_properties_changed(m->bus, TUCK_BUS_PATH, TUCK_BUS_INTERFACE,
                                              "Generations", NULL);
        return sd_bus_emit_signal(m->bus, TUCK_BUS_PATH, TUCK_BUS_INTERFACE, "GenerationChanged",
                                  "stt", hierarchy, old_gen, new_gen);
}

void manager_emit_counters(Manager *m) {
        if (m->bus)
                (void) sd_bus_emit_properties_changed(m->bus, TUCK_BUS_PATH, TUCK_BUS_INTERFACE,
                                                      "Generations", "RefreshCount", "HealCount", "Degraded",
                                                      NULL);
}

void manager_emit_held_back(Manager *m) {
        if (m->bus)
                (void) sd_bus_emit_properties_changed(m->bus, TUCK_BUS_PATH, TUCK_BUS_INTERFACE,
                                                      "Degraded", "HeldBack", NULL);
}

int manager_emit_namespace(Manager *m, const char *hierarchy, const HealReport *r, const char *outcome) {
        _cleanup_free_ char *comm = NULL, *unit = NULL, *machine = NULL;

        if (!m->bus)
                return 0;
        /* Escaped as in the journal: whoever prints a signal gets one line per name. */
        comm = name_escape(r->view.comm);
        unit = name_escape(r->view.unit);
        machine = name_escape(r->view.machine);
        return sd_bus_emit_signal(m->bus, TUCK_BUS_PATH, TUCK_BUS_INTERFACE, "NamespaceStale",
                                  "sussss" "s", hierarchy, (uint32_t) r->view.pid, strempty(comm),
                                  strempty(unit), strempty(machine),
                                  heal_action_to_string(r->action), outcome);
}

static int on_bus_retry(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        int r;

        r = manager_connect_bus(m);
        if (r < 0)
                return sd_event_exit(m->event, r);
        return 0;
}

static int schedule_bus_retry(Manager *m) {
        uint64_t now;
        int r;

        r = sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return r;
        if (!m->bus_retry) {
                r = sd_event_add_time(m->event, &m->bus_retry, CLOCK_MONOTONIC, now + USEC_PER_SEC, 0,
                                      on_bus_retry, m);
                if (r < 0)
                        return r;
        } else
                (void) sd_event_source_set_time(m->bus_retry, now + USEC_PER_SEC);
        return sd_event_source_set_enabled(m->bus_retry, SD_EVENT_ONESHOT);
}

static int on_disconnected(sd_bus_message *msg, void *userdata, sd_bus_error *ret_error) {
        Manager *m = userdata;

        log_warning("Lost the system bus, reconnecting.");
        m->bus = sd_bus_flush_close_unref(m->bus);
        (void) schedule_bus_retry(m);
        return 0;
}

/*
 * tuckd starts before sysinit.target, when the system bus may not be up yet:
 * mounts come first, the API joins when the bus does (retried every second,
 * and after a bus restart).
 */
int manager_connect_bus(Manager *m) {
        int r;

        if (m->bus)
                return 0;

        r = sd_bus_open_system(&m->bus);
        if (r < 0) {
                log_debug_errno(r, "System bus not available yet, retrying: %m");
                return schedule_bus_retry(m);
        }
        (void) sd_bus_set_description(m->bus, "tuckd");

        r = sd_bus_add_object_vtable(m->bus, NULL, TUCK_BUS_PATH, TUCK_BUS_INTERFACE, manager_vtable, m);
        if (r < 0)
                return log_error_errno(r, "Failed to register %s: %m", TUCK_BUS_PATH);

        r = sd_bus_match_signal_async(m->bus, NULL, "org.freedesktop.DBus.Local", NULL,
                                      "org.freedesktop.DBus.Local", "Disconnected",
                                      on_disconnected, NULL, m);
        if (r < 0)
                return log_error_errno(r, "Failed to watch for bus disconnection: %m");

        /* Synchronously: READY=1 follows, and a unit ordered after us may call us then. If
         * another tuckd owns the name (or the policy forbids it), we exit: two daemons must
         * never swap the same hierarchies. */
        r = sd_bus_request_name(m->bus, TUCK_BUS_NAME, 0);
        if (r < 0)
                return log_error_errno(r, "Failed to acquire the bus name %s: %m", TUCK_BUS_NAME);
        log_info("Acquired %s on the system bus.", TUCK_BUS_NAME);

        r = sd_bus_attach_event(m->bus, m->event, SD_EVENT_PRIORITY_NORMAL);
        if (r < 0)
                return log_error_errno(r, "Failed to attach the bus to the event loop: %m");
        return 0;
}
