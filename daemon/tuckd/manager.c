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

Manager *manager_free(Manager *m) {
        if (!m)
                return NULL;
        manager_unwatch_images(m);
        sd_event_source_disable_unref(m->refresh_timer);
        sd_event_source_disable_unref(m->rewatch);
        sd_event_source_disable_unref(m->bus_retry);
        sd_bus_flush_close_unref(m->bus);
        sd_event_unref(m->event);
        for (size_t i = 0; i < m->n_hierarchies; i++) {
                ns_views_free(m->hierarchies[i].before, m->hierarchies[i].n_before);
                free(m->hierarchies[i].flags);
        }
        free(m->hierarchies);
        engine_free(m->engine);
        free(m->root);
        free(m->config_path);
        free(m);
        return NULL;
}

void manager_notify_status(Manager *m) {
        char status[512], *p = status;

        for (size_t i = 0; i < m->n_hierarchies; i++) {
                const Hierarchy *h = m->hierarchies + i;

                if (h->current.generation > 0)
                        p += snprintf(p, status + sizeof status - p, "%s%s generation %" PRIu64,
                                      p == status ? "" : ", ", h->path, h->current.generation);
                else
                        p += snprintf(p, status + sizeof status - p, "%s%s not merged",
                                      p == status ? "" : ", ", h->path);
                if (p >= status + sizeof status)
                        break;
        }
        (void) sd_notifyf(false, "STATUS=%s", status);
}

/* Read every hierarchy's generation; return how many changed (and emit for them). */
static int manager_adopt_generations(Manager *m, bool emit) {
        int changed = 0;

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

                /* Remember the overlay it replaced: namespaces may still show it. */
                if (h->current.generation > 0) {
                        if (h->n_stale_devs == STALE_DEVS_MAX)
                                memmove(h->stale_devs, h->stale_devs + 1, --h->n_stale_devs * sizeof(dev_t));
                        h->stale_devs[h->n_stale_devs++] = h->current.dev;
                }
                if (emit)
                        (void) manager_emit_generation_changed(m, h->path, h->current.generation, g.generation);
                h->current = g;
                changed++;
        }
        return changed;
}

/* Overlays of @h that namespaces may still show: the one being replaced,
 * libtuck's history of earlier ones, and those this tuckd saw replaced. */
static size_t hierarchy_old_devs(Manager *m, size_t i, dev_t replaced, dev_t *devs, size_t max) {
        const Hierarchy *h = m->hierarchies + i;
        size_t n = 0;

        if (replaced != 0)
                devs[n++] = replaced;
        n += engine_past_devs(m->engine, i, devs + n, max - n);
        for (size_t k = 0; k < h->n_stale_devs && n < max; k++)
                devs[n++] = h->stale_devs[k];
        return n;
}

#define OLD_DEVS_MAX (2 * STALE_DEVS_MAX + 64 + 1)

/*
 * Merge what we remember of each namespace's flags into the snapshot (a
 * namespace loosened while StalePolicy=report keeps its old wish), and
 * remember the snapshot: namespaces no longer seen are forgotten.
 */
static void hierarchy_remember_flags(Hierarchy *h) {
        NsFlags *n = calloc(h->n_before ?: 1, sizeof *n);

        if (!n)
                return;
        for (size_t i = 0; i < h->n_before; i++) {
                for (size_t k = 0; k < h->n_flags; k++)
                        if (h->flags[k].ns_ino == h->before[i].ns_ino)
                                h->before[i].attr |= h->flags[k].attr;
                n[i] = (NsFlags) { .ns_ino = h->before[i].ns_ino, .attr = h->before[i].attr };
        }
        free(h->flags);
        h->flags = n;
        h->n_flags = h->n_before;
}

/* Before a swap: who sees our overlays now, and pin the ones a swap would loosen. */
static void on_before_swap(const EngineSwap *s, void *userdata) {
        Manager *m = userdata;
        Hierarchy *h = m->hierarchies + s->hierarchy;
        dev_t devs[OLD_DEVS_MAX];
        size_t n = hierarchy_old_devs(m, s->hierarchy, s->old_dev, devs, ELEMENTSOF(devs));
        int r;

        ns_views_free(h->before, h->n_before);
        h->before = NULL;
        h->n_before = 0;
        if (n == 0)
                return;         /* first merge: nobody can be on an older overlay */

        r = heal_snapshot(m->root, h->path, devs, n, &h->before, &h->n_before);
        if (r < 0) {
                log_warning_errno(r, "Failed to scan mount namespaces for '%s': %m", h->path);
                return;
        }
        hierarchy_remember_flags(h);
        if (m->config.stale_policy == STALE_POLICY_HEAL && h->n_before > 0) {
                r = heal_pin_loosenable(h->before, h->n_before, s->attr);
                if (r > 0)
                        log_info("%s: pinned %d namespace(s) so the swap cannot loosen their flags.",
                                 h->path, r);
        }
}

static void log_namespace(Manager *m, const Hierarchy *h, uint64_t generation, const HealReport *r,
                          const char *outcome) {
        char pid[16], want[32], now[32];
        const char *who = r->view.machine ? "container" : r->view.unit ? "unit" : "process";
        const char *name = r->view.machine ?: r->view.unit ?: r->view.comm;
        const char *fields[] = {
                "TUCK_HIERARCHY", h->path,
                "TUCK_PID", pid,
                "TUCK_COMM", r->view.comm,
                "TUCK_UNIT", r->view.unit ?: "",
                "TUCK_MACHINE", r->view.machine ?: "",
                "TUCK_ACTION", heal_action_to_string(r->action),
                "TUCK_FLAGS", mount_attr_to_string(r->want_attr, want, 32),
                "TUCK_OUTCOME", outcome,
                NULL,
        };

        snprintf(pid, sizeof pid, "%d", (int) r->view.pid);
        log_event(r->result == 0 ? MESSAGE_ID_HEALED : MESSAGE_ID_STALE,
                  r->result < 0 ? 3 /* LOG_ERR */ : r->result == 0 ? 6 /* LOG_INFO */ : 4 /* LOG_WARNING */,
                  fields,
                  "%s: %s %s (pid %d, %s) did not follow generation %" PRIu64 " (%s, flags %s now %s): %s",
                  h->path, who, name, (int) r->view.pid, r->view.comm, generation,
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
        EngineVerb v = m->running_verb;

        /* A refresh of a hierarchy that was not merged is its first merge, and
         * one that ends with nothing merged an unmerge. */
        if (new_gen == 0)
                v = ENGINE_UNMERGE;
        else if (old_gen == 0)
                v = ENGINE_MERGE;
        else
                v = ENGINE_REFRESH;

        snprintf(old, sizeof old, "%" PRIu64, old_gen);
        snprintf(new, sizeof new, "%" PRIu64, new_gen);
        log_event(engine_verb_message_id[v], 6, fields, "%s: %s, generation %" PRIu64 " -> %" PRIu64 " (%s).",
                  h->path, engine_verb_past[v], old_gen, new_gen, m->running_trigger);
        h->logged = true;
}

/* Find namespaces that do not show @h's current top (open at @fd) or lost
 * flags, and apply the policy. @before: the snapshot taken before a swap. */
static void hierarchy_handle_stale(Manager *m, size_t idx, uint64_t generation, dev_t replaced, int fd) {
        Hierarchy *h = m->hierarchies + idx;
        _cleanup_strv_free_ char **restarted = NULL;
        HealReport *reports = NULL;
        dev_t devs[OLD_DEVS_MAX];
        size_t n = 0, n_devs;
        bool heal = m->config.stale_policy == STALE_POLICY_HEAL;
        int r;

        n_devs = hierarchy_old_devs(m, idx, replaced, devs, ELEMENTSOF(devs));
        r = heal_after_swap(m->root, h->path, fd, devs, n_devs, h->before, h->n_before, heal, &reports, &n);
        ns_views_free(h->before, h->n_before);
        h->before = NULL;
        h->n_before = 0;
        if (r < 0) {
                log_warning_errno(r, "Failed to look for namespaces that did not follow '%s': %m", h->path);
                return;
        }

        for (size_t i = 0; i < n; i++) {
                HealReport *rep = reports + i;
                char outcome[128];

                if (rep->result == 0) {
                        snprintf(outcome, sizeof outcome, "healed");
                        m->heal_count++;
                } else if (rep->result < 0)
                        snprintf(outcome, sizeof outcome, "heal failed: %s", strerror(-rep->result));
                else if (m->config.stale_policy == STALE_POLICY_RESTART) {
                        if (!rep->view.unit)
                                snprintf(outcome, sizeof outcome, "not restarted: no unit");
                        else if (strv_contains(restarted, rep->view.unit))
                                snprintf(outcome, sizeof outcome, "restart of %s requested", rep->view.unit);
                        else {
                                (void) strv_extend(&restarted, rep->view.unit);
                                r = manager_restart_unit(m, rep->view.unit);
                                if (r < 0)
                                        snprintf(outcome, sizeof outcome, "restart of %s failed: %s",
                                                 rep->view.unit, strerror(-r));
                                else
                                        snprintf(outcome, sizeof outcome, "restart of %s requested", rep->view.unit);
                        }
                } else
                        snprintf(outcome, sizeof outcome, "reported");
                log_namespace(m, h, generation, rep, outcome);
        }
        heal_reports_free(reports, n);
}

/* After a swap: log it, then the namespaces that did not follow. */
static void on_after_swap(const EngineSwap *s, void *userdata) {
        Manager *m = userdata;

        log_generation(m, m->hierarchies + s->hierarchy, m->hierarchies[s->hierarchy].current.generation,
                       s->generation);
        if (s->fd >= 0)
                hierarchy_handle_stale(m, s->hierarchy, s->generation, s->old_dev, s->fd);
}

/*
 * Without a swap: bring every namespace that is behind (or lost flags) onto
 * the current generation now. At start-up this picks up what a killed tuckd
 * left stale; on reload what StalePolicy=report left behind.
 */
void manager_heal_now(Manager *m, const char *trigger) {
        for (size_t i = 0; i < m->n_hierarchies; i++) {
                Hierarchy *h = m->hierarchies + i;
                _cleanup_close_ int fd = -EBADF;
                dev_t devs[OLD_DEVS_MAX];
                size_t n;
                int r;

                if (h->current.generation == 0)
                        continue;
                fd = open(h->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0)
                        continue;

                n = hierarchy_old_devs(m, i, h->current.dev, devs, ELEMENTSOF(devs));
                ns_views_free(h->before, h->n_before);
                h->before = NULL;
                h->n_before = 0;
                r = heal_snapshot(m->root, h->path, devs, n, &h->before, &h->n_before);
                if (r < 0)
                        continue;
                hierarchy_remember_flags(h);
                m->running_trigger = trigger;
                hierarchy_handle_stale(m, i, h->current.generation, 0, fd);
        }
}

int manager_run(Manager *m, EngineVerb verb, uint64_t flags, const char *trigger, char **ret_error) {
        _cleanup_free_ char *error = NULL;
        uint64_t old_gen[m->n_hierarchies ?: 1];
        int r, changed;

        m->refresh_count++;
        m->running_verb = verb;
        m->running_trigger = trigger;
        (void) sd_notifyf(false, "STATUS=%s (%s)...", engine_verb_to_string(verb), trigger);

        for (size_t i = 0; i < m->n_hierarchies; i++) {
                old_gen[i] = m->hierarchies[i].current.generation;
                m->hierarchies[i].logged = false;
        }

        r = engine_run(m->engine, verb, flags,
                       &(EngineHooks) {
                               .before_swap = on_before_swap,
                               .after_swap = on_after_swap,
                               .userdata = m,
                       },
                       &error);

        /* Whatever the verb said, the mount table is the truth. */
        changed = manager_adopt_generations(m, true);
        if (changed > 0)
                m->swap_count++;

        /* Swaps were logged by on_after_swap(); log the rest (unmerge). */
        for (size_t i = 0; i < m->n_hierarchies; i++)
                if (m->hierarchies[i].current.generation != old_gen[i] && !m->hierarchies[i].logged)
                        log_generation(m, m->hierarchies + i, old_gen[i], m->hierarchies[i].current.generation);

        if (r < 0) {
                const char *fields[] = {
                        "TUCK_VERB", engine_verb_to_string(verb),
                        "TUCK_TRIGGER", trigger,
                        "TUCK_REASON", error ?: strerror(-r),
                        NULL,
                };

                log_event(MESSAGE_ID_REFUSED, 3, fields, "%s refused (%s): %s",
                          engine_verb_to_string(verb), trigger, error ?: strerror(-r));
        } else if (changed == 0)
                log_info("%s (%s): nothing to do.", engine_verb_to_string(verb), trigger);

        manager_notify_status(m);
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
        (void) manager_run(m, ENGINE_REFRESH, 0, "image directory changed", NULL);
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
                r = sd_event_add_time(m->event, &m->refresh_timer, CLOCK_MONOTONIC, deadline, 0,
                                      on_refresh_timer, m);
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

        (void) manager_adopt_generations(m, false);
        for (size_t i = 0; i < m->n_hierarchies; i++)
                log_info("Adopted '%s' at generation %" PRIu64 ".",
                         m->hierarchies[i].path, m->hierarchies[i].current.generation);

        /* Like systemd-sysext.service at boot: merge what is there, or pick up
         * what changed while we were not running. A refusal is logged and
         * tuckd keeps running: the next image drop may fix it. Then catch up
         * with namespaces a killed predecessor left behind. */
        (void) manager_run(m, ENGINE_REFRESH, 0, "startup", NULL);
        manager_heal_now(m, "startup");

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
        else
                m->config = c;

        manager_unwatch_images(m);
        if (m->config.watch)
                (void) manager_watch_images(m);

        manager_heal_now(m, "reload");
        return manager_run(m, ENGINE_REFRESH, 0, "reload", NULL);
}
