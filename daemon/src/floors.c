/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdlib.h>

#include "context.h"
#include "floors.h"
#include "json-util.h"
#include "run.h"
#include "util.h"

VersionsView *versions_view_free(VersionsView *v) {
        if (!v)
                return NULL;
        free(v->path);
        versions_done(&v->versions);
        for (size_t i = 0; v->generations && i < v->n_hierarchies; i++)
                generation_done(&v->generations[i]);
        free(v->generations);
        free(v);
        return NULL;
}

DEFINE_TRIVIAL_CLEANUP_FUNC(VersionsView *, versions_view_free);

static int load_versions_file(TuckContext *c, Versions *ret, char **ret_error) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = versions_load(c->state_dir, ret, &error);
        if (r < 0 && r != -ENOMEM)
                (void) asprintf_safe(ret_error, "cannot use %s/versions.json: %s", c->state_dir,
                                     error ?: strerror(-r));
        return r;
}

int tuck_versions(TuckContext *c, const TuckOptions *o, VersionsView **ret, char **ret_error) {
        _cleanup_(versions_view_freep) VersionsView *v = calloc(1, sizeof(VersionsView));
        int r;

        if (!v)
                return -ENOMEM;
        v->path = path_join(c->state_dir, "versions.json");
        v->generations = calloc(c->n_hierarchies ?: 1, sizeof(Generation));
        if (!v->path || !v->generations)
                return -ENOMEM;
        v->hierarchies = c->hierarchies;
        v->n_hierarchies = c->n_hierarchies;
        r = load_versions_file(c, &v->versions, ret_error);
        if (r < 0)
                return r;
        for (size_t i = 0; i < c->n_hierarchies; i++) {
                if (o && !class_selected(o, c->hierarchies[i].class))
                        continue;
                /* A record that cannot be read shows nothing active there (status says why). */
                r = generation_load(c->run_dir, c->hierarchies[i].path, &v->generations[i], NULL);
                if (r == -ENOMEM)
                        return r;
                if (r < 0)
                        v->generations[i] = (Generation) {};
        }
        /* Only the selected classes. */
        for (size_t i = 0; o && i < v->versions.n_entries; )
                if (!class_selected(o, v->versions.entries[i].class))
                        (void) versions_forget(&v->versions, v->versions.entries[i].class,
                                               v->versions.entries[i].extension);
                else
                        i++;
        *ret = TAKE_PTR(v);
        return 0;
}

/* Each row: an extension with a floor entry, or one active without (forgotten while active). */
typedef struct Row {
        ImageClass class;
        const char *extension;
        const VersionEntry *entry;   /* NULL: none */
} Row;

static int compare_rows(const void *a, const void *b) {
        const Row *x = a, *y = b;

        return x->class != y->class ? (int) x->class - (int) y->class : strcmp(x->extension, y->extension);
}

static bool has_row(const Row *rows, size_t n, ImageClass c, const char *extension) {
        for (size_t i = 0; i < n; i++)
                if (rows[i].class == c && streq(rows[i].extension, extension))
                        return true;
        return false;
}

static Row *view_rows(const VersionsView *v, size_t *ret_n) {
        size_t max = v->versions.n_entries, n = 0;
        Row *rows;

        for (size_t i = 0; i < v->n_hierarchies; i++)
                max += v->generations[i].n_layers + v->generations[i].n_held;
        rows = calloc(max ?: 1, sizeof(Row));
        if (!rows)
                return NULL;
        for (size_t i = 0; i < v->versions.n_entries; i++)
                rows[n++] = (Row) { v->versions.entries[i].class, v->versions.entries[i].extension,
                                    &v->versions.entries[i] };
        for (size_t i = 0; i < v->n_hierarchies; i++) {
                const Generation *g = &v->generations[i];

                for (size_t k = 0; g->merged && k < g->n_layers; k++)
                        if (!has_row(rows, n, g->class, g->layers[k].extension))
                                rows[n++] = (Row) { g->class, g->layers[k].extension, NULL };
        }
        qsort(rows, n, sizeof(Row), compare_rows);
        *ret_n = n;
        return rows;
}

/* The version active in hierarchy i for the row, or NULL if it is not active there. */
static const Layer *active_in(const VersionsView *v, size_t i, const Row *row) {
        const Generation *g = &v->generations[i];

        if (!g->merged || g->class != row->class)
                return NULL;
        for (size_t k = 0; k < g->n_layers; k++)
                if (streq(g->layers[k].extension, row->extension))
                        return &g->layers[k];
        return NULL;
}

static const Hold *held_in(const VersionsView *v, size_t i, const Row *row) {
        const Generation *g = &v->generations[i];

        if (g->class != row->class)
                return NULL;
        for (size_t k = 0; k < g->n_held; k++)
                if (streq(g->held[k].extension, row->extension))
                        return &g->held[k];
        return NULL;
}

/* "1.0" if one version is active everywhere it is, else "1.0 (/usr), 2.0 (/opt)", or "-". */
static char *active_text(const VersionsView *v, const Row *row) {
        _cleanup_strv_free_ char **each = calloc(1, sizeof(char *));
        const char *first = NULL;
        bool same = true;
        size_t n = 0;

        if (!each)
                return NULL;
        for (size_t i = 0; i < v->n_hierarchies; i++) {
                const Layer *l = active_in(v, i, row);
                const char *ver;

                if (!l)
                        continue;
                ver = l->version ?: "(unversioned)";
                if (n++ == 0)
                        first = ver;
                same = same && streq(first, ver);
                if (strv_consume(&each, strjoin(ver, " (", v->hierarchies[i].path, ")")) < 0)
                        return NULL;
        }
        if (n == 0)
                return strdup("-");
        return same ? strdup(first) : strv_join(each, ", ");
}

void versions_view_print(const VersionsView *v, FILE *f) {
        _cleanup_free_ Row *rows = NULL;
        size_t n = 0;

        rows = view_rows(v, &n);
        if (!rows)
                return;
        if (n == 0) {
                fprintf(f, "No version floors recorded (%s).\n", v->path);
                return;
        }
        fprintf(f, "%-8s %-20s %-12s %-12s %s\n", "CLASS", "EXTENSION", "FLOOR", "ACTIVE", "DECISION");
        for (size_t r = 0; r < n; r++) {
                const Row *row = &rows[r];
                _cleanup_free_ char *active = active_text(v, row),
                                    *decision = row->entry ? decision_describe(&row->entry->decision) : NULL;

                fprintf(f, "%-8s %-20s %-12s %-12s %s\n", image_class_to_string(row->class), row->extension,
                        row->entry && row->entry->floor ? row->entry->floor : "-", strna(active),
                        row->entry ? strna(decision) : "no floor recorded (forgotten): the next refresh sets one");
                for (size_t i = 0; i < v->n_hierarchies; i++) {
                        const Hold *h = held_in(v, i, row);
                        _cleanup_free_ char *d = h ? hold_describe(h, v->hierarchies[i].path) : NULL;

                        if (h)
                                fprintf(f, "         %s: held back: %s\n", v->hierarchies[i].path, strna(d));
                        else if (row->entry && strv_contains(row->entry->protected_in, v->hierarchies[i].path) &&
                                 !active_in(v, i, row))
                                fprintf(f, "         %s: protected, not active (--remove=%s lets it go, "
                                        "forget %s retires it)\n", v->hierarchies[i].path, row->extension,
                                        row->extension);
                }
        }
}

json_object *versions_view_to_json(const VersionsView *v) {
        _cleanup_free_ Row *rows = NULL;
        json_object *o = json_object_new_object(), *a = json_object_new_array();
        size_t n = 0;

        rows = view_rows(v, &n);
        if (!o || !a || !rows) {
                json_object_put(o);
                json_object_put(a);
                return NULL;
        }
        json_add_string(o, "file", v->path);
        for (size_t r = 0; r < n; r++) {
                const Row *row = &rows[r];
                json_object *x = json_object_new_object(), *active = json_object_new_object(),
                            *prot = json_object_new_array(), *held = json_object_new_array();

                json_add_string(x, "class", image_class_to_string(row->class));
                json_add_string(x, "extension", row->extension);
                json_add_string(x, "floor", row->entry ? row->entry->floor : NULL);
                json_object_object_add(x, "decision", row->entry ? decision_to_json(&row->entry->decision) : NULL);
                STRV_FOREACH(p, row->entry ? row->entry->protected_in : NULL)
                        json_object_array_add(prot, json_object_new_string(*p));
                json_object_object_add(x, "protected_in", prot);
                for (size_t i = 0; i < v->n_hierarchies; i++) {
                        const Layer *l = active_in(v, i, row);
                        const Hold *h = held_in(v, i, row);

                        if (l)
                                json_add_string(active, v->hierarchies[i].path, l->version);
                        if (h) {
                                json_object *y = hold_to_json(h);

                                json_add_string(y, "hierarchy", v->hierarchies[i].path);
                                json_object_array_add(held, y);
                        }
                }
                json_object_object_add(x, "active", active);
                json_object_object_add(x, "held_back", held);
                json_object_array_add(a, x);
        }
        json_object_object_add(o, "extensions", a);
        return o;
}

int tuck_forget(TuckContext *c, const TuckOptions *o, char * const *names, char **ret_message) {
        _cleanup_(versions_done) Versions v = {};
        _cleanup_strv_free_ char **said = calloc(1, sizeof(char *));
        int r;

        if (!said)
                return -ENOMEM;
        r = tuck_lock(c, !(o && o->no_block));
        if (r < 0) {
                (void) asprintf_safe(ret_message, "cannot take %s/lock: %s", c->run_dir, strerror(-r));
                return r;
        }
        r = load_versions_file(c, &v, ret_message);
        STRV_FOREACH(name, names) {
                bool found = false;

                for (ImageClass k = 0; r >= 0 && k < _IMAGE_CLASS_MAX; k++) {
                        _cleanup_free_ char *where = NULL;
                        const VersionEntry *e = versions_find(&v, k, *name);

                        if (!e || (o && !class_selected(o, k)))
                                continue;
                        for (size_t i = 0; i < c->n_hierarchies; i++) {
                                Generation g = {};

                                if (c->hierarchies[i].class != k ||
                                    generation_load(c->run_dir, c->hierarchies[i].path, &g, NULL) < 0)
                                        continue;
                                for (size_t l = 0; g.merged && l < g.n_layers; l++)
                                        if (streq(g.layers[l].extension, *name) &&
                                            strv_consume(&said, strjoin("note: '", *name, "' is still active in ",
                                                                        c->hierarchies[i].path, ": the next "
                                                                        "refresh records its floor again")) < 0)
                                                r = -ENOMEM;
                                generation_done(&g);
                        }
                        _cleanup_free_ char *prot = strv_join(e->protected_in, ", ");

                        if (r >= 0 && (!prot || asprintf_safe(&where, "forgot %s '%s': floor %s, protected in %s",
                                                              image_class_to_string(k), *name, e->floor ?: "none",
                                                              isempty(prot) ? "no hierarchy" : prot) < 0 ||
                                       strv_consume(&said, TAKE_PTR(where)) < 0))
                                r = -ENOMEM;
                        if (r >= 0)
                                r = versions_forget(&v, k, *name);
                        found = true;
                }
                if (r >= 0 && !found) {
                        free(*ret_message);
                        *ret_message = NULL;
                        (void) asprintf_safe(ret_message, "no floor recorded for '%s' in %s/versions.json; nothing "
                                             "forgotten", *name, c->state_dir);
                        r = -ENOENT;
                }
        }
        if (r >= 0)
                r = versions_save(c->state_dir, &v);
        tuck_unlock(c);
        if (r >= 0) {
                free(*ret_message);
                *ret_message = strv_join(said, "\n");
        } else if (!*ret_message)
                (void) asprintf_safe(ret_message, "cannot write %s/versions.json: %s", c->state_dir, strerror(-r));
        return r;
}
