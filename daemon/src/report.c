/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

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
        }
        free(r->hierarchies);
        strv_free(r->warnings);
        free(r->message);
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
        int k;

        r->error = error;
        free(r->message);
        va_start(ap, fmt);
        k = vasprintf(&r->message, fmt, ap);
        va_end(ap);
        if (k < 0)
                r->message = NULL;
        return error;
}

int hierarchy_report_set(HierarchyReport *h, Outcome o, int error, const char *fmt, ...) {
        va_list ap;
        int k = 0;

        h->outcome = o;
        h->error = error;
        free(h->message);
        h->message = NULL;
        if (fmt) {
                va_start(ap, fmt);
                k = vasprintf(&h->message, fmt, ap);
                va_end(ap);
        }
        if (k < 0)
                h->message = NULL;
        return error;
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
                        fprintf(f, "  %s %s\n", h->layers[k - 1].name, h->layers[k - 1].version ?: "(unversioned)");
        }
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
                json_object_array_add(a, x);
        }
        json_object_object_add(o, "hierarchies", a);
        return o;
}
