/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>

#include "mountinfo.h"
#include "report.h"
#include "util.h"

static const char * const outcome_table[_OUTCOME_MAX] = {
        [OUTCOME_NOTHING] = "nothing",
        [OUTCOME_UNCHANGED] = "unchanged",
        [OUTCOME_MERGED] = "merged",
        [OUTCOME_REFRESHED] = "refreshed",
        [OUTCOME_TAKEN_OVER] = "taken-over",
        [OUTCOME_UNMERGED] = "unmerged",
        [OUTCOME_REFUSED] = "refused",
        [OUTCOME_FAILED] = "failed",
};

const char *outcome_to_string(Outcome o) {
        return o < _OUTCOME_MAX ? outcome_table[o] : NULL;
}

Report *report_new(const char *verb) {
        Report *r = calloc(1, sizeof(Report));

        if (r)
                r->verb = verb;
        return r;
}

Report *report_free(Report *r) {
        if (!r)
                return NULL;
        for (size_t i = 0; i < r->n_hierarchies; i++) {
                HierarchyReport *h = &r->hierarchies[i];

                free(h->hierarchy);
                free(h->message);
                for (size_t k = 0; k < h->n_layers; k++)
                        layer_done(&h->layers[k]);
                free(h->layers);
                holds_free(h->held, h->n_held);
                heal_reports_free(h->namespaces, h->n_namespaces);
        }
        free(r->hierarchies);
        strv_free(r->warnings);
        free(r->message);
        strv_free(r->manager.asked_by);
        free(r->manager.skipped);
        strv_free(r->manager.restarted);
        strv_free(r->manager.reloaded_or_restarted);
        strv_free(r->manager.stopped);
        strv_free(r->manager.failed);
        free(r);
        return NULL;
}

HierarchyReport *report_add(Report *r, const char *hierarchy, ImageClass c) {
        HierarchyReport *a = realloc(r->hierarchies, sizeof(HierarchyReport) * (r->n_hierarchies + 1));

        if (!a)
                return NULL;
        r->hierarchies = a;
        a[r->n_hierarchies] = (HierarchyReport) { .hierarchy = strdup(hierarchy), .class = c };
        if (!a[r->n_hierarchies].hierarchy)
                return NULL;
        return &a[r->n_hierarchies++];
}

int report_warn(Report *r, const char *fmt, ...) {
        va_list ap;
        char *s;
        int k;

        va_start(ap, fmt);
        k = vasprintf(&s, fmt, ap);
        va_end(ap);
        if (k < 0)
                return -ENOMEM;
        return strv_consume(&r->warnings, s);
}

int report_set_error(Report *r, int error, const char *fmt, ...) {
        va_list ap;

        r->error = error;
        va_start(ap, fmt);
        (void) free_and_vasprintf(&r->message, fmt, ap);
        va_end(ap);
        return error;
}

int hierarchy_report_set(HierarchyReport *h, Outcome o, int error, const char *fmt, ...) {
        va_list ap;

        h->outcome = o;
        h->error = error;
        free(h->message);
        h->message = NULL;
        if (fmt) {
                va_start(ap, fmt);
                (void) free_and_vasprintf(&h->message, fmt, ap);
                va_end(ap);
        }
        return error;
}

int hierarchy_report_set_layers(HierarchyReport *h, const Generation *g) {
        if (!g || !g->merged || g->n_layers == 0)
                return 0;
        h->layers = calloc(g->n_layers, sizeof(Layer));
        if (!h->layers)
                return -ENOMEM;
        for (size_t i = 0; i < g->n_layers; i++) {
                int r = layer_copy(&h->layers[i], &g->layers[i]);

                if (r < 0)
                        return r;
                h->n_layers++;
        }
        return 0;
}

bool report_changed(const Report *r) {
        for (size_t i = 0; i < r->n_hierarchies; i++)
                switch (r->hierarchies[i].outcome) {
                case OUTCOME_MERGED:
                case OUTCOME_REFRESHED:
                case OUTCOME_TAKEN_OVER:
                case OUTCOME_UNMERGED:
                        return true;
                case OUTCOME_NOTHING:
                case OUTCOME_UNCHANGED:
                case OUTCOME_REFUSED:
                case OUTCOME_FAILED:
                case _OUTCOME_MAX:
                        break;
                }
        return false;
}

int report_result(const Report *r) {
        if (r->error < 0)
                return r->error;
        for (size_t i = 0; i < r->n_hierarchies; i++)
                if (r->hierarchies[i].error < 0)
                        return r->hierarchies[i].error;
        return report_changed(r) ? 1 : 0;
}

int report_error(const Report *r) {
        bool feature = false, policy = false;
        int first;

        if (r->error == -EBUSY)
                return -EBUSY;
        for (size_t i = 0; i < r->n_hierarchies; i++) {
                feature = feature || r->hierarchies[i].error == -EOPNOTSUPP;
                policy = policy || r->hierarchies[i].error == -EPERM;
        }
        if (feature)
                return -EOPNOTSUPP;
        if (policy)
                return -EPERM;
        first = report_result(r);
        /* Any other failure, whatever its errno (a hierarchy's EBUSY is not the lock). */
        return first < 0 ? -EIO : 0;
}

/* "/usr: container web (pid 42, systemd) did not follow (swap, wants ro,nodev): healed" */
static void print_namespace(const HierarchyReport *h, const HealReport *n, FILE *f) {
        /* Names are someone else's: escaped, so each namespace stays one line. */
        _cleanup_free_ char *who = namespace_view_who(&n->view), *comm = name_escape(n->view.comm);
        char want[32];

        /* Of a view that could not be read, no flags are known; a wish on record (one is only
         * recorded beyond the host's flags, so never none) is what it wants. */
        fprintf(f, "%s: %s (pid %d, %s) did not follow (%s, wants %s): %s\n", h->hierarchy, strna(who),
                (int) n->view.pid, strna(comm), heal_action_to_string(n->action),
                n->view.error < 0 && n->want_attr == 0 ? "unknown" :
                mount_attr_to_string(n->want_attr, want, sizeof(want)), strna(n->outcome));
}

static json_object *namespace_to_json(const HealReport *n) {
        json_object *o = json_object_new_object();
        char buf[32];

        json_object_object_add(o, "namespace", json_object_new_uint64(n->view.ns_ino));
        json_object_object_add(o, "pid", json_object_new_int(n->view.pid));
        json_object_object_add(o, "comm", json_object_new_string(n->view.comm));
        json_object_object_add(o, "unit", n->view.unit ? json_object_new_string(n->view.unit) : NULL);
        json_object_object_add(o, "user_unit", n->view.user_unit ? json_object_new_string(n->view.user_unit) : NULL);
        json_object_object_add(o, "machine", n->view.machine ? json_object_new_string(n->view.machine) : NULL);
        json_object_object_add(o, "action", json_object_new_string(heal_action_to_string(n->action)));
        json_object_object_add(o, "flags", json_object_new_string(mount_attr_to_string(n->view.attr, buf, sizeof(buf))));
        json_object_object_add(o, "wants", json_object_new_string(mount_attr_to_string(n->want_attr, buf, sizeof(buf))));
        json_object_object_add(o, "healed", json_object_new_boolean(n->result == 0));
        /* The namespace's own mounts below its top that a swap carried onto the new tree. */
        json_object_object_add(o, "carried", json_object_new_int((int) n->carried));
        json_object_object_add(o, "outcome", n->outcome ? json_object_new_string(n->outcome) : NULL);
        return o;
}

/* "manager: daemon-reload (asked by foo); restarted a.service; ..." */
static void print_manager(const ManagerReport *m, FILE *f) {
        static const struct {
                const char *what;
                size_t offset;
        } lists[] = {
                { "restarted",            offsetof(ManagerReport, restarted) },
                { "reloaded or restarted", offsetof(ManagerReport, reloaded_or_restarted) },
                { "stopped (gone)",       offsetof(ManagerReport, stopped) },
                { "FAILED",               offsetof(ManagerReport, failed) },
        };
        _cleanup_free_ char *who = strv_join(m->asked_by, ", ");

        if (strv_length(m->asked_by) == 0)
                return;
        if (m->skipped) {
                fprintf(f, "manager: not asked (%s), though %s ask%s for it\n", m->skipped, strna(who),
                        strv_length(m->asked_by) == 1 ? "s" : "");
                return;
        }
        fprintf(f, "manager: %s (asked by %s)\n", m->reloaded ? "daemon-reload" : "no daemon-reload", strna(who));
        for (size_t i = 0; i < ELEMENTSOF(lists); i++) {
                char * const *l = *(char ***) ((const char *) m + lists[i].offset);
                _cleanup_free_ char *joined = strv_join(l, ", ");

                if (strv_length(l) > 0)
                        fprintf(f, "manager: %s %s\n", lists[i].what, strna(joined));
        }
}

static json_object *strv_to_json(char * const *l) {
        json_object *a = json_object_new_array();

        STRV_FOREACH(s, l)
                json_object_array_add(a, json_object_new_string(*s));
        return a;
}

static json_object *manager_to_json(const ManagerReport *m) {
        json_object *o = json_object_new_object();

        json_object_object_add(o, "asked_by", strv_to_json(m->asked_by));
        json_object_object_add(o, "skipped", m->skipped ? json_object_new_string(m->skipped) : NULL);
        json_object_object_add(o, "reloaded", json_object_new_boolean(m->reloaded));
        json_object_object_add(o, "restarted", strv_to_json(m->restarted));
        json_object_object_add(o, "reloaded_or_restarted", strv_to_json(m->reloaded_or_restarted));
        json_object_object_add(o, "stopped", strv_to_json(m->stopped));
        json_object_object_add(o, "failed", strv_to_json(m->failed));
        return o;
}

/* Is @l a layer kept because its extension is held back? */
static bool layer_is_held(const HierarchyReport *h, const Layer *l) {
        for (size_t k = 0; k < h->n_held; k++)
                if (h->held[k].kept && streq(h->held[k].extension, l->extension))
                        return true;
        return false;
}

void report_print(const Report *r, FILE *f) {
        STRV_FOREACH(w, r->warnings)
                fprintf(f, "warning: %s\n", *w);
        if (r->message)
                fprintf(f, "%s: %s\n", r->error < 0 ? "error" : "note", r->message);
        for (size_t i = 0; i < r->n_hierarchies; i++) {
                const HierarchyReport *h = &r->hierarchies[i];

                fprintf(f, "%s: %s", h->hierarchy, outcome_to_string(h->outcome));
                if (h->new_generation > 0 && h->new_generation != h->old_generation)
                        fprintf(f, ", generation %" PRIu64 " -> %" PRIu64, h->old_generation, h->new_generation);
                else if (h->old_generation > 0)
                        fprintf(f, ", generation %" PRIu64, h->old_generation);
                if (h->message)
                        fprintf(f, ": %s", h->message);
                fputc('\n', f);
                if (h->window)
                        fprintf(f, "%s: WARNING: this swap opened a window: every namespace saw the bare base "
                                "between unmount and mount (--allow-window)\n", h->hierarchy);
                for (size_t k = h->n_layers; k > 0; k--)
                        fprintf(f, "  %s %s%s\n", h->layers[k - 1].name, h->layers[k - 1].version ?: "(unversioned)",
                                layer_is_held(h, &h->layers[k - 1]) ? " (held back)" : "");
                for (size_t k = 0; k < h->n_held; k++) {
                        _cleanup_free_ char *d = hold_describe(&h->held[k], h->hierarchy);

                        fprintf(f, "%s: held back: %s\n", h->hierarchy, strna(d));
                }
                for (size_t k = 0; k < h->n_namespaces; k++)
                        print_namespace(h, &h->namespaces[k], f);
        }
        print_manager(&r->manager, f);
}

json_object *report_to_json(const Report *r) {
        json_object *o = json_object_new_object(), *a = json_object_new_array(), *w = json_object_new_array();

        json_object_object_add(o, "verb", json_object_new_string(r->verb));
        json_object_object_add(o, "result", json_object_new_int(report_result(r)));
        if (r->message)
                json_object_object_add(o, "message", json_object_new_string(r->message));
        STRV_FOREACH(s, r->warnings)
                json_object_array_add(w, json_object_new_string(*s));
        json_object_object_add(o, "warnings", w);
        for (size_t i = 0; i < r->n_hierarchies; i++) {
                const HierarchyReport *h = &r->hierarchies[i];
                json_object *x = json_object_new_object(), *layers = json_object_new_array();

                json_object_object_add(x, "hierarchy", json_object_new_string(h->hierarchy));
                json_object_object_add(x, "class", json_object_new_string(image_class_to_string(h->class)));
                json_object_object_add(x, "outcome", json_object_new_string(outcome_to_string(h->outcome)));
                json_object_object_add(x, "error", json_object_new_int(h->error));
                if (h->message)
                        json_object_object_add(x, "message", json_object_new_string(h->message));
                json_object_object_add(x, "old_generation", json_object_new_uint64(h->old_generation));
                json_object_object_add(x, "new_generation", json_object_new_uint64(h->new_generation));
                json_object_object_add(x, "window", json_object_new_boolean(h->window));
                for (size_t k = 0; k < h->n_layers; k++) {
                        json_object *l = json_object_new_object();

                        json_object_object_add(l, "name", json_object_new_string(h->layers[k].name));
                        if (h->layers[k].version)
                                json_object_object_add(l, "version", json_object_new_string(h->layers[k].version));
                        json_object_array_add(layers, l);
                }
                json_object_object_add(x, "layers", layers);
                json_object *held = json_object_new_array();

                for (size_t k = 0; k < h->n_held; k++) {
                        json_object *y = hold_to_json(&h->held[k]);
                        _cleanup_free_ char *d = hold_describe(&h->held[k], h->hierarchy);

                        json_object_object_add(y, "message", d ? json_object_new_string(d) : NULL);
                        json_object_array_add(held, y);
                }
                json_object_object_add(x, "held_back", held);
                json_object *ns = json_object_new_array();

                for (size_t k = 0; k < h->n_namespaces; k++)
                        json_object_array_add(ns, namespace_to_json(&h->namespaces[k]));
                json_object_object_add(x, "namespaces", ns);
                json_object_object_add(x, "pinned", json_object_new_int((int) h->pinned));
                json_object_array_add(a, x);
        }
        json_object_object_add(o, "hierarchies", a);
        json_object_object_add(o, "manager", manager_to_json(&r->manager));
        return o;
}
