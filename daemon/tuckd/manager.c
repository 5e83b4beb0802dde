/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <systemd/sd-daemon.h>
#include <time.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "util.h"

/* How late the refresh after a quiet period may fire (manager_schedule_refresh()). */
#define REFRESH_TIMER_ACCURACY_USEC USEC_PER_MSEC

static const char *const engine_verb_past[_ENGINE_VERB_MAX] = {
        [ENGINE_MERGE] = "merged",
        [ENGINE_REFRESH] = "refreshed",
        [ENGINE_UNMERGE] = "unmerged",
};

static const char *const engine_verb_message_id[_ENGINE_VERB_MAX] = {
        [ENGINE_MERGE] = MESSAGE_ID_MERGED,
        [ENGINE_REFRESH] = MESSAGE_ID_REFRESHED,
        [ENGINE_UNMERGE] = MESSAGE_ID_UNMERGED,
};

int manager_new(const char *root, const char *config_path, Manager **ret) {
        _cleanup_(manager_freep) Manager *m = NULL;
        const char *const *paths;
        int r;

        m = calloc(1, sizeof *m);
        if (!m)
                return -ENOMEM;
        m->root = strdup(root);
        m->config_path = strdup(config_path);
        if (!m->root || !m->config_path)
                return -ENOMEM;

        r = daemon_config_load(m->config_path, &m->config);
        if (r < 0)
                return r;

        r = engine_new(m->root, m->config_path, &m->engine);
        if (r < 0)
                return r;
        engine_set_keepalive(m->engine, manager_keepalive, m);

        m->n_hierarchies = engine_hierarchies(m->engine, &paths);
        m->hierarchies = calloc(m->n_hierarchies ?: 1, sizeof *m->hierarchies);
        if (!m->hierarchies)
                return -ENOMEM;
        for (size_t i = 0; i < m->n_hierarchies; i++)
                m->hierarchies[i].path = paths[i];

        r = sd_event_default(&m->event);
        if (r < 0)
                return r;

        *ret = TAKE_PTR(m);
        return 0;
}

static void json_cache_done(JsonCache *c) {
        free(c->json);
        free(c->error);
        *c = (JsonCache) {};
}

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        json_cache_done(&m->status);
        json_cache_done(&m->list);
        manager_unwatch_images(m);
        sd_event_source_disable_unref(m->refresh_timer);
        sd_event_source_disable_unref(m->rewatch);
        sd_event_source_disable_unref(m->bus_retry);
        sd_bus_flush_close_unref(m->bus);
        sd_event_unref(m->event);
        for (size_t i = 0; m->hierarchies && i < m->n_hierarchies; i++)
                engine_holds_free(m->hierarchies[i].held, m->hierarchies[i].n_held);
        free(m->hierarchies);
        free(m->failure);
        engine_free(m->engine);
        free(m->root);
        free(m->config_path);
        free(m);
        return NULL;
}

bool manager_degraded(const Manager *m) {
        for (size_t i = 0; i < m->n_hierarchies; i++)
                if (m->hierarchies[i].n_held > 0)
                        return true;
        return m->failure != NULL;
}

/* "degraded: foo held back (downgrade 2.0 → 1.0 not allowed); " or the last failure, or "". */
static void format_degraded(const Manager *m, char *buf, size_t size) {
        const char *sep = "degraded: ";
        size_t n = 0;

        buf[0] = 0;
        for (size_t i = 0; i < m->n_hierarchies && n < size; i++)
                for (size_t k = 0; k < m->hierarchies[i].n_held && n < size; k++) {
                        n += snprintf(buf + n, size - n, "%s%s", sep, m->hierarchies[i].held[k].headline);
                        sep = ", ";
                }
        if (n == 0 && m->failure)
                n = snprintf(buf, size, "degraded: %s", m->failure);
        if (n > 0 && n < size)
                snprintf(buf + n, size - n, "; ");
}

void manager_notify_status(Manager *m) {
        char status[1024], *p = status;

        /* Never silent: what is held back (or failed) comes first, then the generations. */
        format_degraded(m, status, sizeof status / 2);
        p += strlen(status);
        for (size_t i = 0; i < m->n_hierarchies; i++) {
                const Hierarchy *h = m->hierarchies + i;

                const char *sep = i == 0 ? "" : ", ";

                if (h->current.generation > 0)
                        p += snprintf(p, status + sizeof status - p, "%s%s generation %" PRIu64, sep, h->path,
                                      h->current.generation);
                else
                        p += snprintf(p, status + sizeof status - p, "%s%s not merged", sep, h->path);
                if (p >= status + sizeof status)
                        break;
        }
        (void) sd_notifyf(false, "STATUS=%s", status);
}

/* What each hierarchy holds back now, from its record; emits if it changed. */
static void manager_adopt_held_back(Manager *m, bool emit) {
        bool changed = false;

        for (size_t i = 0; i < m->n_hierarchies; i++) {
                Hierarchy *h = m->hierarchies + i;
                EngineHold *held = NULL;
                size_t n = 0;
                int r;

                r = engine_held_back(m->engine, i, &held, &n);
                if (r < 0) {
                        log_warning_errno(r, "Failed to read what is held back in '%s': %m", h->path);
                        continue;
                }
                changed = changed || n != h->n_held;
                for (size_t k = 0; !changed && k < n; k++)
                        changed = !streq(held[k].message, h->held[k].message);
                engine_holds_free(h->held, h->n_held);
                h->held = held;
                h->n_held = n;
        }
        if (changed && emit)
                manager_emit_held_back(m);
}

/* Read every hierarchy's generation; return how many changed (and emit for them). */
static int manager_adopt_generations(Manager *m, bool emit) {
        int changed = 0;

        manager_adopt_held_back(m, emit);
        for (size_t i = 0; i < m->n_hierarchies; i++) {
                Hierarchy *h = m->hierarchies + i;
                EngineGeneration g;
                int r;

                r = engine_generation(m->engine, i, &g);
                if (r < 0) {
                        log_warning_errno(r, "Failed to read the generation of '%s': %m", h->path);
                        continue;
                }
                if (g.generation == h->current.generation && g.dev == h->current.dev)
                        continue;

                if (emit)
                        (void) manager_emit_generation_changed(m, h->path, h->current.generation, g.generation);
                h->current = g;
                changed++;
        }
        return changed;
}

static void log_namespace(Manager *m, const Hierarchy *h, uint64_t generation, const HealReport *r,
                          const char *outcome) {
        /* Names are someone else's (a comm is whatever the process set): escaped everywhere,
         * so a name with a newline cannot make a line or a journal field of its own. */
        _cleanup_free_ char *who = namespace_view_who(&r->view), *comm = name_escape(r->view.comm),
                *unit = name_escape(r->view.unit), *user_unit = name_escape(r->view.user_unit),
                *machine = name_escape(r->view.machine);
        char pid[16], want[32], now[32];
        const char *fields[] = {
                "TUCK_HIERARCHY", h->path,
                "TUCK_PID", pid,
                "TUCK_COMM", strempty(comm),
                "TUCK_UNIT", strempty(unit),
                "TUCK_USER_UNIT", strempty(user_unit),
                "TUCK_MACHINE", strempty(machine),
                "TUCK_ACTION", heal_action_to_string(r->action),
                "TUCK_FLAGS", mount_attr_to_string(r->want_attr, want, 32),
                "TUCK_OUTCOME", outcome,
                NULL,
        };

        snprintf(pid, sizeof pid, "%d", (int) r->view.pid);
        log_event(r->result == 0 ? MESSAGE_ID_HEALED : MESSAGE_ID_STALE,
                  r->result < 0 ? LOG_ERR : r->result == 0 ? LOG_INFO : LOG_WARNING,
                  fields,
                  "%s: %s (pid %d, %s) did not follow generation %" PRIu64 " (%s, flags %s now %s): %s",
                  h->path, strna(who), (int) r->view.pid, strna(comm), generation,
                  heal_action_to_string(r->action), want, mount_attr_to_string(r->view.attr, now, 32), outcome);
        (void) manager_emit_namespace(m, h->path, r, outcome);
}

static void log_generation(Manager *m, Hierarchy *h, uint64_t old_gen, uint64_t new_gen) {
        char old[24], new[24];
        const char *fields[] = {
                "TUCK_HIERARCHY", h->path,
                "TUCK_VERB", engine_verb_to_string(m->running_verb),
                "TUCK_TRIGGER", m->running_trigger,
                "TUCK_OLD_GENERATION", old,
                "TUCK_GENERATION", new,
                NULL,
        };
        EngineVerb v;

        /* Named by what happened, whatever verb ran: a refresh of a hierarchy
         * that was not merged is its first merge, one that ends with nothing
         * merged an unmerge. */
        if (new_gen == 0)
                v = ENGINE_UNMERGE;
        else if (old_gen == 0)
                v = ENGINE_MERGE;
        else
                v = ENGINE_REFRESH;

        snprintf(old, sizeof old, "%" PRIu64, old_gen);
        snprintf(new, sizeof new, "%" PRIu64, new_gen);
        log_event(engine_verb_message_id[v], LOG_INFO, fields, "%s: %s, generation %" PRIu64 " -> %" PRIu64 " (%s).",
                  h->path, engine_verb_past[v], old_gen, new_gen, m->running_trigger);
        h->logged = true;
}

/* After a swap: log it (the namespaces that did not follow come once the verb is done). */
static void on_after_swap(const EngineSwap *s, void *userdata) {
        Manager *m = userdata;

        log_generation(m, m->hierarchies + s->hierarchy, m->hierarchies[s->hierarchy].current.generation,
                       s->generation);
}

/* A namespace that did not follow, and what libtuck did with it (StalePolicy=). */
static void on_namespace(size_t hierarchy, uint64_t generation, const HealReport *r, void *userdata) {
        Manager *m = userdata;

        if (r->result == 0)
                m->heal_count++;
        log_namespace(m, m->hierarchies + hierarchy, generation, r, r->outcome ?: "unknown");
}

/* Each extension a verb held back: one journal entry, with both versions, the reason and the override. */
static void on_held_back(size_t hierarchy, const EngineHold *x, void *userdata) {
        Manager *m = userdata;
        const char *fields[] = {
                "TUCK_HIERARCHY", m->hierarchies[hierarchy].path,
                "TUCK_EXTENSION", x->extension,
                "TUCK_HOLD_REASON", x->reason,
                "TUCK_ACTIVE_VERSION", x->active_version,
                "TUCK_REFUSED_VERSION", x->refused_version,
                "TUCK_OVERRIDE", x->override,
                "TUCK_TRIGGER", m->running_trigger,
                NULL,
        };

        log_event(MESSAGE_ID_HELD_BACK, LOG_WARNING, fields, "%s: held back: %s", m->hierarchies[hierarchy].path,
                  x->message);
}

void manager_keepalive(void *userdata) {
        Manager *m = userdata;
        uint64_t now;

        if (m->watchdog_usec == 0)
                return;
        now = now_usec(CLOCK_MONOTONIC);
        if (now - m->watchdog_last < m->watchdog_usec / 4)
                return;
        m->watchdog_last = now;
        (void) sd_notify(false, "WATCHDOG=1");
}

static void json_cache_make(JsonCache *c, int (*make)(Engine *, char **, char **), Engine *e) {
        JsonCache n = {};

        n.result = make(e, &n.json, &n.error);
        n.usec = now_usec(CLOCK_MONOTONIC);
        /* Someone else's refresh holds the lock: the last answer stands until ours. */
        if (n.result == -EBUSY && c->usec != 0) {
                json_cache_done(&n);
                return;
        }
        json_cache_done(c);
        *c = n;
}

static int json_cache_get(const JsonCache *c, const char **ret_json, const char **ret_error) {
        *ret_json = c->json;
        *ret_error = c->error;
        return c->result < 0 ? c->result : 0;
}

int manager_status_json(Manager *m, const char **ret_json, const char **ret_error) {
        /* However often anyone asks: one scan of the namespaces per STATUS_CACHE_USEC. */
        if (m->status.usec == 0 || now_usec(CLOCK_MONOTONIC) - m->status.usec >= STATUS_CACHE_USEC) {
                uint64_t start = now_usec(CLOCK_MONOTONIC);

                json_cache_make(&m->status, engine_status_json, m->engine);
                log_debug("Status made again (every namespace scanned) in %" PRIu64 " ms.",
                          (now_usec(CLOCK_MONOTONIC) - start) / USEC_PER_MSEC);
        }
        return json_cache_get(&m->status, ret_json, ret_error);
}

int manager_list_json(Manager *m, const char **ret_json, const char **ret_error) {
        /* Made after every verb (manager_run()): an unprivileged List never mounts an image. */
        if (m->list.usec == 0)
                json_cache_make(&m->list, engine_list_json, m->engine);
        return json_cache_get(&m->list, ret_json, ret_error);
}

static void log_refused(EngineVerb verb, const char *trigger, const char *reason) {
        const char *fields[] = {
                "TUCK_VERB", engine_verb_to_string(verb),
                "TUCK_TRIGGER", trigger,
                "TUCK_REASON", reason,
                NULL,
        };

        log_event(MESSAGE_ID_REFUSED, LOG_ERR, fields, "%s refused (%s): %s", engine_verb_to_string(verb), trigger,
                  reason);
}

int manager_run(Manager *m, EngineVerb verb, const EngineRequest *req, const char *trigger, char **ret_error) {
        _cleanup_free_ char *error = NULL;
        uint64_t old_gen[m->n_hierarchies ?: 1];
        bool failed = false;
        int r, changed;

        m->refresh_count++;
        m->running_verb = verb;
        m->running_trigger = trigger;
        (void) sd_notifyf(false, "STATUS=%s (%s)...", engine_verb_to_string(verb), trigger);

        for (size_t i = 0; i < m->n_hierarchies; i++) {
                old_gen[i] = m->hierarchies[i].current.generation;
                m->hierarchies[i].logged = false;
        }

        r = engine_run(m->engine, verb, req ?: &(EngineRequest) { .via = trigger }, m->config.stale_policy,
                       &(EngineHooks) {
                               .after_swap = on_after_swap,
                               .namespace = on_namespace,
                               .held_back = on_held_back,
                               .keepalive = manager_keepalive,
                               .userdata = m,
                       },
                       &error, &failed);

        /* What Status and List answer from now on: what this verb left. */
        json_cache_done(&m->status);
        json_cache_make(&m->list, engine_list_json, m->engine);

        /* Whatever the verb said, the mount table is the truth. */
        changed = manager_adopt_generations(m, true);
        if (changed > 0)
                m->swap_count++;

        /* Swaps were logged by on_after_swap(); log the rest (unmerge). */
        for (size_t i = 0; i < m->n_hierarchies; i++)
                if (m->hierarchies[i].current.generation != old_gen[i] && !m->hierarchies[i].logged)
                        log_generation(m, m->hierarchies + i, old_gen[i], m->hierarchies[i].current.generation);

        if (r < 0)
                log_refused(verb, trigger, error ?: strerror(-r));
        else if (changed == 0)
                log_info("%s (%s): nothing to do.", engine_verb_to_string(verb), trigger);

        /* A failure other than holds (those are in the records) or a call made at the wrong time
         * (Merge when merged) leaves the host degraded until a verb succeeds. */
        free(m->failure);
        m->failure = NULL;
        if (r < 0 && failed)
                (void) asprintf_safe(&m->failure, "%s failed: %s", engine_verb_to_string(verb),
                                     error ?: strerror(-r));

        manager_notify_status(m);
        /* Whatever triggered it (a call, a directory change, a reload): RefreshCount changed. */
        manager_emit_counters(m);
        if (ret_error)
                *ret_error = TAKE_PTR(error);
        return r < 0 ? r : changed;
}

static int on_refresh_timer(sd_event_source *s, uint64_t usec, void *userdata) {
        Manager *m = userdata;
        _cleanup_free_ char *busy = NULL;

        /* Never activate an image someone is still writing in place. */
        if (manager_images_busy(m, &busy) > 0) {
                log_info("'%s' is still open for writing, refreshing when it is closed.", strna(busy));
                m->burst_start_usec = 0;
                manager_schedule_refresh(m, "image still being written");
                return 0;
        }

        m->burst_start_usec = 0;
        (void) manager_run(m, ENGINE_REFRESH, NULL, "image directory changed", NULL);
        return 0;
}

void manager_schedule_refresh(Manager *m, const char *why) {
        uint64_t now, deadline;
        int r;

        r = sd_event_now(m->event, CLOCK_MONOTONIC, &now);
        if (r < 0)
                return;
        if (m->burst_start_usec == 0)
                m->burst_start_usec = now;

        /* Debounce: the quiet period restarts with each change, but a directory
         * that never settles is refreshed MaxDelaySec after its first change. */
        deadline = now + m->config.quiet_usec;
        if (deadline > m->burst_start_usec + m->config.max_delay_usec)
                deadline = m->burst_start_usec + m->config.max_delay_usec;

        log_debug("Change in image directories (%s), refresh at +%" PRIu64 " ms.", why, (deadline - now) / 1000);

        if (!m->refresh_timer) {
                /* Accuracy 0 would be sd-event's default, 250 ms of slack on top of
                 * the operator's quiet period (measured: drops took effect 36 to
                 * 255 ms after it). The timer fires once per burst of changes, so
                 * coalescing it saves no wake-ups worth the delay. */
                r = sd_event_add_time(m->event, &m->refresh_timer, CLOCK_MONOTONIC, deadline,
                                      REFRESH_TIMER_ACCURACY_USEC, on_refresh_timer, m);
                if (r < 0) {
                        log_error_errno(r, "Failed to arm the refresh timer: %m");
                        return;
                }
                (void) sd_event_source_set_description(m->refresh_timer, "refresh-timer");
        } else
                (void) sd_event_source_set_time(m->refresh_timer, deadline);
        (void) sd_event_source_set_enabled(m->refresh_timer, SD_EVENT_ONESHOT);
}

int manager_start(Manager *m) {
        int r;

        /* Best effort: a failure here is logged, and the start-up refresh
         * below says whether the state is usable. tuckd stays up to report. */
        r = engine_recover(m->engine);
        if (r < 0)
                log_error_errno(r, "Failed to recover the state of a previous run: %m");
        /* Now, once: Status reports it and must not mount anything when asked. */
        (void) engine_probe(m->engine);
        (void) sd_watchdog_enabled(false, &m->watchdog_usec);

        (void) manager_adopt_generations(m, false);
        for (size_t i = 0; i < m->n_hierarchies; i++)
                log_info("Adopted '%s' at generation %" PRIu64 ".",
                         m->hierarchies[i].path, m->hierarchies[i].current.generation);

        /* Like systemd-sysext.service at boot: merge what is there, or pick up
         * what changed while we were not running. Everything that may be
         * merged is: an extension whose version or removal is refused is held
         * back alone (libtuck), and that is a degraded state, said in STATUS=,
         * the journal and the Degraded and HeldBack properties, never silent;
         * tuckd keeps running (READY=1 follows) and the next image drop or an
         * operator's decision may resolve it. The refresh also catches up with
         * namespaces a killed predecessor left behind. */
        r = manager_run(m, ENGINE_REFRESH, NULL, "startup", NULL);
        if (r < 0 && manager_degraded(m))
                log_warning("Start-up refresh: degraded, the rest is merged (tuckctl status says what and why).");

        if (m->config.watch) {
                r = manager_watch_images(m);
                if (r < 0)
                        return r;
        }

        r = manager_connect_bus(m);
        if (r < 0)
                return r;

        return 0;
}

int manager_reload(Manager *m) {
        DaemonConfig c;
        int r;

        r = daemon_config_load(m->config_path, &c);
        if (r < 0)
                log_warning("Keeping the previous configuration: '%s' is invalid.", m->config_path);
        else {
                m->config = c;
                (void) engine_reload(m->engine);
        }

        manager_unwatch_images(m);
        if (m->config.watch)
                (void) manager_watch_images(m);

        /* The refresh also heals what StalePolicy=report left behind, if it is heal now. */
        return manager_run(m, ENGINE_REFRESH, NULL, "reload", NULL);
}
