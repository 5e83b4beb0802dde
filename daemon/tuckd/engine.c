/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tuckd's view of libtuck (tuck.h): see engine.h. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine.h"
#include "floors.h"
#include "log.h"
#include "macro.h"
#include "status.h"
#include "tuck.h"
#include "util.h"

struct Engine {
        TuckContext *ctx;
        const TuckHierarchy *hierarchies;
        size_t n_hierarchies;
        const char **paths;
        size_t n_dirs;

        /* For the duration of engine_run(). */
        const EngineHooks *hooks;
};

static const char *const engine_verb_table[_ENGINE_VERB_MAX] = {
        [ENGINE_MERGE] = "merge",
        [ENGINE_REFRESH] = "refresh",
        [ENGINE_UNMERGE] = "unmerge",
};

const char *engine_verb_to_string(EngineVerb v) {
        return v >= 0 && v < _ENGINE_VERB_MAX ? engine_verb_table[v] : NULL;
}

int engine_new(const char *root, const char *config, Engine **ret) {
        _cleanup_free_ char *error = NULL;
        Engine *e;
        int r;

        e = calloc(1, sizeof *e);
        if (!e)
                return -ENOMEM;
        r = tuck_context_new(root, config, &e->ctx, &error);
        if (r < 0) {
                log_error("Failed to set up libtuck: %s", error ?: strerror(-r));
                free(e);
                return r;
        }
        e->n_hierarchies = tuck_context_hierarchies(e->ctx, &e->hierarchies);
        e->paths = calloc(e->n_hierarchies ?: 1, sizeof *e->paths);
        if (!e->paths) {
                engine_free(e);
                return -ENOMEM;
        }
        for (size_t i = 0; i < e->n_hierarchies; i++)
                e->paths[i] = e->hierarchies[i].full;
        *ret = e;
        return 0;
}

Engine *engine_free(Engine *e) {
        if (!e)
                return NULL;
        tuck_context_free(e->ctx);
        free(e->paths);
        free(e);
        return NULL;
}

size_t engine_hierarchies(Engine *e, const char *const **ret) {
        *ret = e->paths;
        return e->n_hierarchies;
}

size_t engine_image_dirs(Engine *e, const char *const **ret) {
        char * const *dirs = tuck_context_image_dirs(e->ctx);

        *ret = (const char *const *) dirs;
        return strv_length(dirs);
}

int engine_generation(Engine *e, size_t hierarchy, EngineGeneration *ret) {
        Generation g = {};
        struct stat st;
        int r;

        if (stat(e->paths[hierarchy], &st) < 0)
                return -errno;
        r = tuck_generation(e->ctx, &e->hierarchies[hierarchy], &g);
        if (r < 0 && r != -ENOENT)
                return r;
        *ret = (EngineGeneration) {
                .generation = r >= 0 && g.merged ? g.number : 0,
                .dev = st.st_dev,
        };
        if (r >= 0)
                generation_done(&g);
        return 0;
}

bool engine_name_is_valid(const char *name) {
        return image_name_is_valid(name);
}

void engine_holds_free(EngineHold *h, size_t n) {
        for (size_t i = 0; h && i < n; i++) {
                free(h[i].extension);
                free(h[i].reason);
                free(h[i].active_version);
                free(h[i].refused_version);
                free(h[i].override);
                free(h[i].headline);
                free(h[i].message);
        }
        free(h);
}

static int hold_flatten(const Hold *h, const char *hierarchy, EngineHold *ret) {
        *ret = (EngineHold) {
                .extension = strdup(h->extension),
                .reason = strdup(strna(hold_reason_to_string(h->reason))),
                .active_version = strdup(h->kept ? h->active_version ?: "(unversioned)" : ""),
                .refused_version = strdup(strempty(h->refused_version)),
                .override = strdup(strempty(h->override)),
                .headline = hold_headline(h, hierarchy),
                .message = hold_describe(h, hierarchy),
        };
        return ret->extension && ret->reason && ret->active_version && ret->refused_version && ret->override &&
               ret->headline && ret->message ? 0 : -ENOMEM;
}

static int holds_flatten(const Hold *held, size_t n, const char *hierarchy, EngineHold **ret, size_t *ret_n) {
        EngineHold *a = calloc(n ?: 1, sizeof(EngineHold));

        if (!a)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (hold_flatten(&held[i], hierarchy, &a[i]) < 0) {
                        engine_holds_free(a, i + 1);
                        return -ENOMEM;
                }
        *ret = a;
        *ret_n = n;
        return 0;
}

int engine_held_back(Engine *e, size_t hierarchy, EngineHold **ret, size_t *ret_n) {
        Generation g = {};
        int r;

        *ret = NULL;
        *ret_n = 0;
        r = tuck_generation(e->ctx, &e->hierarchies[hierarchy], &g);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        r = g.n_held > 0 ? holds_flatten(g.held, g.n_held, e->hierarchies[hierarchy].path, ret, ret_n) : 0;
        generation_done(&g);
        return r;
}

static size_t hierarchy_index(Engine *e, const TuckHierarchy *h) {
        for (size_t i = 0; i < e->n_hierarchies; i++)
                if (&e->hierarchies[i] == h || streq(e->hierarchies[i].path, h->path))
                        return i;
        return SIZE_MAX;
}

static EngineSwap swap_from_event(Engine *e, const TuckSwapEvent *ev) {
        size_t i = hierarchy_index(e, ev->hierarchy);

        return (EngineSwap) {
                .hierarchy = i,
                .path = ev->hierarchy->full,
                .generation = ev->generation,
                .old_dev = ev->old_dev,
                .new_dev = ev->new_dev,
                .attr = ev->attr,
                .fd = ev->fd,
        };
}

static int hook_before(const TuckSwapEvent *ev, void *userdata) {
        Engine *e = userdata;
        EngineSwap s = swap_from_event(e, ev);

        if (e->hooks && e->hooks->before_swap && s.hierarchy != SIZE_MAX)
                e->hooks->before_swap(&s, e->hooks->userdata);
        return 0;       /* healing never blocks the host's swap */
}

static void hook_keepalive(void *userdata) {
        Engine *e = userdata;

        if (e->hooks && e->hooks->keepalive)
                e->hooks->keepalive(e->hooks->userdata);
}

static void hook_after(const TuckSwapEvent *ev, void *userdata) {
        Engine *e = userdata;
        EngineSwap s = swap_from_event(e, ev);

        if (e->hooks && e->hooks->after_swap && s.hierarchy != SIZE_MAX)
                e->hooks->after_swap(&s, e->hooks->userdata);
}

/* "usr: why; etc: why" from the hierarchies that were refused or failed. */
static char *report_reasons(const Report *r) {
        _cleanup_strv_free_ char **l = NULL;

        if (r->message)
                (void) strv_extend(&l, r->message);
        for (size_t i = 0; i < r->n_hierarchies; i++) {
                const HierarchyReport *h = r->hierarchies + i;
                char *s;

                for (size_t k = 0; k < h->n_held; k++) {
                        _cleanup_free_ char *d = hold_describe(&h->held[k], h->hierarchy);

                        if (asprintf_safe(&s, "%s: held back: %s", h->hierarchy, strna(d)) >= 0)
                                (void) strv_consume(&l, s);
                }
                if (h->outcome != OUTCOME_REFUSED && h->outcome != OUTCOME_FAILED)
                        continue;
                if (asprintf_safe(&s, "%s: %s", h->hierarchy, h->message ?: strerror(-h->error)) >= 0)
                        (void) strv_consume(&l, s);
        }
        return l ? strv_join(l, "; ") : NULL;
}

/* The extensions the verb held back, to tuckd's hook (the journal). */
static void report_held(Engine *e, const Report *report, const EngineHooks *hooks) {
        for (size_t i = 0; hooks && hooks->held_back && i < report->n_hierarchies; i++) {
                const HierarchyReport *h = &report->hierarchies[i];

                for (size_t k = 0; k < e->n_hierarchies; k++) {
                        EngineHold *held = NULL;
                        size_t n = 0;

                        if (!streq(e->hierarchies[k].path, h->hierarchy) ||
                            holds_flatten(h->held, h->n_held, h->hierarchy, &held, &n) < 0)
                                continue;
                        for (size_t j = 0; j < n; j++)
                                hooks->held_back(k, &held[j], hooks->userdata);
                        engine_holds_free(held, n);
                }
        }
}

/* The namespaces libtuck found behind, in the report, to tuckd's hook. */
static void report_namespaces(Engine *e, const Report *report, const EngineHooks *hooks) {
        for (size_t i = 0; hooks && hooks->namespace && i < report->n_hierarchies; i++) {
                const HierarchyReport *h = &report->hierarchies[i];
                size_t idx = SIZE_MAX;

                for (size_t k = 0; k < e->n_hierarchies; k++)
                        if (streq(e->hierarchies[k].path, h->hierarchy))
                                idx = k;
                if (idx == SIZE_MAX)
                        continue;
                if (h->pinned > 0)
                        log_info("%s: pinned %u namespace(s) so the swap could not loosen their flags.",
                                 e->paths[idx], h->pinned);
                for (size_t k = 0; k < h->n_namespaces; k++)
                        hooks->namespace(idx, h->new_generation ?: h->old_generation, &h->namespaces[k],
                                         hooks->userdata);
        }
}

/* A failure that leaves the host behind what it should run (see engine_run()). */
static bool report_failed(const Report *r) {
        if (r->error < 0)
                return true;
        for (size_t i = 0; i < r->n_hierarchies; i++) {
                const HierarchyReport *h = &r->hierarchies[i];

                if (h->outcome == OUTCOME_FAILED || (h->outcome == OUTCOME_REFUSED && h->error != -EALREADY))
                        return true;
        }
        return false;
}

int engine_run(Engine *e, EngineVerb verb, const EngineRequest *req, StalePolicy policy, const EngineHooks *hooks,
               char **ret_error, bool *ret_failed) {
        static int (*const verbs[_ENGINE_VERB_MAX])(TuckContext *, const TuckOptions *, Report **) = {
                [ENGINE_MERGE] = tuck_merge,
                [ENGINE_REFRESH] = tuck_refresh,
                [ENGINE_UNMERGE] = tuck_unmerge,
        };
        _cleanup_report_ Report *report = NULL;
        TuckHooks th = {
                .before_swap = hook_before,
                .after_swap = hook_after,
                .keepalive = hook_keepalive,
                .userdata = e,
        };
        TuckOptions o = {
                .classes = (req->flags & TUCK_BUS_FLAG_SYSEXT ? 1u << IMAGE_SYSEXT : 0) |
                           (req->flags & TUCK_BUS_FLAG_CONFEXT ? 1u << IMAGE_CONFEXT : 0),
                .always_refresh = req->flags & TUCK_BUS_FLAG_ALWAYS_REFRESH,
                .ignore_release = req->flags & TUCK_BUS_FLAG_IGNORE_RELEASE,
                .no_reload = req->flags & TUCK_BUS_FLAG_NO_RELOAD,
                .allow_downgrade = req->flags & TUCK_BUS_FLAG_ALLOW_DOWNGRADE,
                .allow_downgrade_names = req->allow_downgrade,
                .remove = req->remove,
                .stale_policy = &policy,
                .hooks = &th,
                .via = req->via ?: "tuckd",
        };
        int r;

        e->hooks = hooks;
        r = verbs[verb](e->ctx, &o, &report);
        e->hooks = NULL;

        if (ret_error)
                *ret_error = report ? report_reasons(report) : NULL;
        if (ret_failed)
                *ret_failed = report ? report_failed(report) : r < 0;
        for (size_t i = 0; report && i < strv_length(report->warnings); i++)
                log_warning("%s", report->warnings[i]);
        if (report) {
                report_held(e, report, hooks);
                report_namespaces(e, report, hooks);
        }
        /* The same verdict tuckctl draws from the report when it runs alone. */
        if (r < 0 && report)
                r = report_error(report) ?: r;
        return r;
}

/* The same rendering as tuckctl --json. */
static int json_to_string(json_object *o, char **ret) {
        char *s;

        if (!o)
                return -ENOMEM;
        s = strdup(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        if (!s)
                return -ENOMEM;
        *ret = s;
        return 0;
}

int engine_status_json(Engine *e, char **ret, char **ret_error) {
        Status *s = NULL;
        int r;

        r = tuck_status(e->ctx, NULL, &s);
        if (r < 0)
                return r;
        r = json_to_string(status_to_json(s), ret);
        status_free(s);
        return r;
}

int engine_list_json(Engine *e, char **ret, char **ret_error) {
        ImageList *l = NULL;
        int r;

        /* Never wait for another's lock here: tuckd's loop must not stop for a tuckctl. */
        r = tuck_list(e->ctx, &(TuckOptions) { .no_block = true }, &l, ret_error);
        if (r < 0)
                return r;
        r = json_to_string(image_list_to_json(l), ret);
        image_list_free(l);
        return r;
}

int engine_versions_json(Engine *e, char **ret, char **ret_error) {
        VersionsView *v = NULL;
        int r;

        r = tuck_versions(e->ctx, NULL, &v, ret_error);
        if (r < 0)
                return r;
        r = json_to_string(versions_view_to_json(v), ret);
        versions_view_free(v);
        return r;
}

int engine_forget(Engine *e, char * const *names, char **ret_message) {
        return tuck_forget(e->ctx, NULL, names, ret_message);
}

void engine_set_keepalive(Engine *e, void (*keepalive)(void *userdata), void *userdata) {
        tuck_context_set_keepalive(e->ctx, keepalive, userdata);
}

int engine_probe(Engine *e) {
        return tuck_beneath_supported(e->ctx);
}

int engine_reload(Engine *e) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = tuck_context_reload_policy(e->ctx, &error);
        if (r < 0)
                log_warning("Keeping libtuck's previous policy: %s", error ?: strerror(-r));
        return r;
}

int engine_recover(Engine *e) {
        return tuck_recover(e->ctx);
}
