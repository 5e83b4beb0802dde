/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "mount-api.h"
#include "mountinfo.h"
#include "state.h"
#include "util.h"

static char *strdup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

void layer_done(Layer *l) {
        free(l->name);
        free(l->extension);
        free(l->version);
        free(l->image);
        free(l->fingerprint);
        strv_free(l->restart_units);
        strv_free(l->reload_or_restart_units);
        *l = (Layer) {};
}

int layer_copy(Layer *dst, const Layer *src) {
        *dst = (Layer) {
                .name = strdup(src->name),
                .extension = strdup(src->extension),
                .version = strdup_or_null(src->version),
                .image = strdup_or_null(src->image),
                .fingerprint = strdup(src->fingerprint),
                .reload_manager = src->reload_manager,
                .restart_units = src->restart_units ? strv_copy(src->restart_units) : NULL,
                .reload_or_restart_units = src->reload_or_restart_units ? strv_copy(src->reload_or_restart_units) : NULL,
        };
        if (!dst->name || !dst->extension || !dst->fingerprint || (src->version && !dst->version) ||
            (src->image && !dst->image) || (src->restart_units && !dst->restart_units) ||
            (src->reload_or_restart_units && !dst->reload_or_restart_units)) {
                layer_done(dst);
                return -ENOMEM;
        }
        return 0;
}

void generation_done(Generation *g) {
        free(g->hierarchy);
        for (size_t i = 0; i < g->n_layers; i++)
                layer_done(&g->layers[i]);
        free(g->layers);
        free(g->history);
        holds_free(g->held, g->n_held);
        *g = (Generation) {};
}

Generation *generation_free(Generation *g) {
        if (g) {
                generation_done(g);
                free(g);
        }
        return NULL;
}

int generation_history_after(const Generation *old, PastOverlay **ret, size_t *ret_n) {
        PastOverlay *h = calloc(GENERATION_HISTORY_MAX, sizeof(PastOverlay));
        size_t n = 0;

        if (!h)
                return -ENOMEM;
        if (old->merged)
                h[n++] = (PastOverlay) { .number = old->number, .dev = old->overlay_dev };
        for (size_t i = 0; i < old->n_history && n < GENERATION_HISTORY_MAX; i++)
                h[n++] = old->history[i];
        *ret = h;
        *ret_n = n;
        return 0;
}

char *hierarchy_id(const char *hierarchy) {
        char *s = strdup(hierarchy + strspn(hierarchy, "/"));

        if (!s)
                return NULL;
        for (char *p = s; *p; p++)
                if (*p == '/')
                        *p = '-';
                else if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_.", *p))
                        *p = '_';
        return s;
}

/* "MAJOR:MINOR"; a missing one is 0. */
static int member_devnum(json_object *o, const char *key, dev_t *ret, char **ret_error) {
        const char *s = NULL;
        unsigned ma, mi;
        char end;
        int r;

        r = json_member_string(o, key, &s, ret_error);
        if (r < 0 || !s)
                return r;
        if (sscanf(s, "%u:%u%c", &ma, &mi, &end) != 2) {
                (void) asprintf_safe(ret_error, "%s: '%s' is not a device number (MAJOR:MINOR)", key, s);
                return -EBADMSG;
        }
        *ret = makedev(ma, mi);
        return 0;
}

/* A list of strings, left out when empty (older records have none). */
static void jadd_strv(json_object *o, const char *key, char * const *l) {
        json_object *a;

        if (strv_length(l) == 0)
                return;
        a = json_object_new_array();
        STRV_FOREACH(s, l)
                json_object_array_add(a, json_object_new_string(*s));
        json_object_object_add(o, key, a);
}
static int jadd_dev(json_object *o, const char *key, dev_t d) {
        _cleanup_free_ char *s = format_devnum(d);

        return s ? json_add_string(o, key, s) : -ENOMEM;
}

json_object *generation_to_json(const Generation *g) {
        json_object *o = json_object_new_object(), *layers = json_object_new_array(), *hist = json_object_new_array();
        char buf[32];

        if (!o || !layers || !hist) {
                json_object_put(o);
                json_object_put(layers);
                json_object_put(hist);
                return NULL;
        }
        json_add_string(o, "hierarchy", g->hierarchy);
        json_add_string(o, "class", image_class_to_string(g->class));
        json_object_object_add(o, "merged", json_object_new_boolean(g->merged));
        json_object_object_add(o, "generation", json_object_new_uint64(g->number));
        json_object_object_add(o, "since_usec", json_object_new_uint64(g->since_usec));
        jadd_dev(o, "overlay_dev", g->overlay_dev);
        json_object_object_add(o, "overlay_mount_id", json_object_new_uint64(g->overlay_mnt_id));
        jadd_dev(o, "base_dev", g->base_dev);
        json_add_string(o, "flags", mount_attr_to_string(g->attr, buf, sizeof(buf)));
        json_object_object_add(o, "attr", json_object_new_uint64(g->attr));
        json_object_object_add(o, "window", json_object_new_boolean(g->window));
        for (size_t i = 0; i < g->n_layers; i++) {
                json_object *l = json_object_new_object();

                json_add_string(l, "name", g->layers[i].name);
                json_add_string(l, "extension", g->layers[i].extension);
                json_add_string(l, "version", g->layers[i].version);
                json_add_string(l, "image", g->layers[i].image);
                json_add_string(l, "fingerprint", g->layers[i].fingerprint);
                if (g->layers[i].reload_manager)
                        json_object_object_add(l, "reload_manager", json_object_new_boolean(true));
                jadd_strv(l, "restart_units", g->layers[i].restart_units);
                jadd_strv(l, "reload_or_restart_units", g->layers[i].reload_or_restart_units);
                json_object_array_add(layers, l);
        }
        json_object_object_add(o, "layers", layers);
        for (size_t i = 0; i < g->n_history; i++) {
                json_object *h = json_object_new_object();

                json_object_object_add(h, "generation", json_object_new_uint64(g->history[i].number));
                jadd_dev(h, "overlay_dev", g->history[i].dev);
                json_object_array_add(hist, h);
        }
        json_object_object_add(o, "history", hist);
        if (g->n_held > 0) {
                json_object *held = json_object_new_array();

                for (size_t i = 0; held && i < g->n_held; i++)
                        json_object_array_add(held, hold_to_json(&g->held[i]));
                json_object_object_add(o, "held_back", held);
        }
        return o;
}

/* The members of a layer; required ones are name, extension and fingerprint. */
static int layer_from_json(json_object *l, Layer *x, char **ret_error) {
        int r;
        struct {
                const char *key;
                char **field;
                bool required;
        } fields[] = {
                { "name", &x->name, true },
                { "extension", &x->extension, true },
                { "version", &x->version, false },
                { "image", &x->image, false },
                { "fingerprint", &x->fingerprint, true },
        };

        if (!json_object_is_type(l, json_type_object)) {
                (void) asprintf_safe(ret_error, "%s, expected an object", json_type_description(l));
                return -EBADMSG;
        }
        for (size_t i = 0; i < ELEMENTSOF(fields); i++) {
                const char *v = NULL;

                r = json_member_string(l, fields[i].key, &v, ret_error);
                if (r < 0)
                        return r;
                if (!v && fields[i].required) {
                        (void) asprintf_safe(ret_error, "%s: missing", fields[i].key);
                        return -EBADMSG;
                }
                if (free_and_strdup(fields[i].field, v) < 0)
                        return -ENOMEM;
        }
        r = json_member_bool(l, "reload_manager", &x->reload_manager, ret_error);
        if (r >= 0)
                r = json_member_strv(l, "restart_units", &x->restart_units, ret_error);
        if (r >= 0)
                r = json_member_strv(l, "reload_or_restart_units", &x->reload_or_restart_units, ret_error);
        return r < 0 ? r : 0;
}

static int past_from_json(json_object *h, PastOverlay *ret, char **ret_error) {
        int r;

        if (!json_object_is_type(h, json_type_object)) {
                (void) asprintf_safe(ret_error, "%s, expected an object", json_type_description(h));
                return -EBADMSG;
        }
        r = json_member_uint64(h, "generation", &ret->number, ret_error);
        if (r >= 0)
                r = member_devnum(h, "overlay_dev", &ret->dev, ret_error);
        return r;
}

/* The array @key of @o, each element through @parse into @n slots of @size bytes at *@ret. */
static int array_from_json(json_object *o, const char *key, size_t size, size_t max,
                           int (*parse)(json_object *x, void *slot, char **ret_error),
                           void **ret, size_t *ret_n, char **ret_error) {
        json_object *a;
        uint8_t *p;
        size_t n;
        int r;

        r = json_member(o, key, json_type_array, &a, ret_error);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        n = json_object_array_length(a);
        if (n > max) {
                (void) asprintf_safe(ret_error, "%s: %zu entries, at most %zu expected", key, n, max);
                return -EBADMSG;
        }
        p = calloc(n ?: 1, size);
        if (!p)
                return -ENOMEM;
        *ret = p;
        for (size_t i = 0; i < n; i++) {
                r = parse(json_object_array_get_idx(a, i), p + i * size, ret_error);
                (*ret_n)++;
                if (r < 0) {
                        char where[64];

                        snprintf(where, sizeof(where), "%s[%zu]", key, i);
                        (void) json_error_prefix(ret_error, where);
                        return r;
                }
        }
        return 0;
}

static int parse_layer(json_object *x, void *slot, char **ret_error) {
        return layer_from_json(x, slot, ret_error);
}

static int parse_past(json_object *x, void *slot, char **ret_error) {
        return past_from_json(x, slot, ret_error);
}

static int parse_hold(json_object *x, void *slot, char **ret_error) {
        return hold_from_json(x, slot, ret_error);
}

/* Far more than a hierarchy ever has: the cap keeps a hostile record from eating memory. */
#define LAYERS_MAX 4096

int generation_from_json(json_object *o, Generation *ret, char **ret_error) {
        Generation g = {};
        const char *hierarchy = NULL, *class = NULL;
        int r;

        r = json_member_string(o, "hierarchy", &hierarchy, ret_error);
        if (r >= 0)
                r = json_member_string(o, "class", &class, ret_error);
        if (r >= 0 && (!hierarchy || image_class_from_string(class) < 0)) {
                (void) asprintf_safe(ret_error, "%s", !hierarchy ? "hierarchy: missing" :
                                     "class: missing, or not sysext or confext");
                r = -EBADMSG;
        }
        if (r < 0)
                return r;
        g.class = image_class_from_string(class);
        g.hierarchy = strdup(hierarchy);
        if (!g.hierarchy)
                return -ENOMEM;
        r = json_member_bool(o, "merged", &g.merged, ret_error);
        if (r >= 0)
                r = json_member_uint64(o, "generation", &g.number, ret_error);
        if (r >= 0)
                r = json_member_uint64(o, "since_usec", &g.since_usec, ret_error);
        if (r >= 0)
                r = member_devnum(o, "overlay_dev", &g.overlay_dev, ret_error);
        if (r >= 0)
                r = json_member_uint64(o, "overlay_mount_id", &g.overlay_mnt_id, ret_error);
        if (r >= 0)
                r = member_devnum(o, "base_dev", &g.base_dev, ret_error);
        if (r >= 0)
                r = json_member_uint64(o, "attr", &g.attr, ret_error);
        if (r >= 0)
                r = json_member_bool(o, "window", &g.window, ret_error);
        if (r >= 0)
                r = array_from_json(o, "layers", sizeof(Layer), LAYERS_MAX, parse_layer, (void **) &g.layers,
                                    &g.n_layers, ret_error);
        if (r >= 0)
                r = array_from_json(o, "history", sizeof(PastOverlay), GENERATION_HISTORY_MAX, parse_past,
                                    (void **) &g.history, &g.n_history, ret_error);
        if (r >= 0)
                r = array_from_json(o, "held_back", sizeof(Hold), LAYERS_MAX, parse_hold, (void **) &g.held,
                                    &g.n_held, ret_error);
        if (r < 0) {
                generation_done(&g);
                return r;
        }
        *ret = g;
        return 0;
}

char *generation_path(const char *run_dir, const char *hierarchy) {
        _cleanup_free_ char *id = hierarchy_id(hierarchy), *file = NULL;

        if (!id || !(file = strjoin(id, ".json")))
                return NULL;
        return path_join(run_dir, "generations", file);
}

int generation_load(const char *run_dir, const char *hierarchy, Generation *ret, char **ret_error) {
        _cleanup_free_ char *path = generation_path(run_dir, hierarchy), *ignored = NULL;
        json_object *o;
        int r;

        if (!path)
                return -ENOMEM;
        r = json_parse_file(path, &o, ret_error ?: &ignored);
        if (r < 0)
                return r;
        r = generation_from_json(o, ret, ret_error ?: &ignored);
        json_object_put(o);
        return r;
}

int generation_save(const char *run_dir, const Generation *g) {
        _cleanup_free_ char *path = generation_path(run_dir, g->hierarchy), *dir = NULL;
        json_object *o;
        int r;

        dir = path_join(run_dir, "generations");
        if (!path || !dir)
                return -ENOMEM;
        r = mkdir_p(dir, 0755);
        if (r < 0)
                return r;
        o = generation_to_json(g);
        if (!o)
                return -ENOMEM;
        r = json_save(path, o);
        json_object_put(o);
        return r;
}

void staging_table_done(StagingTable *t) {
        for (size_t i = 0; i < t->n_images; i++) {
                free(t->images[i].path);
                free(t->images[i].fingerprint);
                free(t->images[i].loop);
        }
        free(t->images);
        *t = (StagingTable) {};
}

static int staged_from_json(json_object *x, void *slot, char **ret_error) {
        StagedImage *s = slot;
        const char *class = NULL, *path = NULL, *fingerprint = NULL, *loop = NULL;
        bool usr_root = false;
        uint64_t id = 0;
        int r;

        if (!json_object_is_type(x, json_type_object)) {
                (void) asprintf_safe(ret_error, "%s, expected an object", json_type_description(x));
                return -EBADMSG;
        }
        r = json_member_uint64(x, "id", &id, ret_error);
        if (r >= 0)
                r = json_member_string(x, "class", &class, ret_error);
        if (r >= 0)
                r = json_member_string(x, "path", &path, ret_error);
        if (r >= 0)
                r = json_member_string(x, "fingerprint", &fingerprint, ret_error);
        if (r >= 0)
                r = json_member_string(x, "loop", &loop, ret_error);
        if (r >= 0)
                r = json_member_bool(x, "usr_root", &usr_root, ret_error);
        if (r < 0)
                return r;
        if (id == 0 || id > UINT_MAX || image_class_from_string(class) < 0 || !path || !fingerprint) {
                (void) asprintf_safe(ret_error, "%s", id == 0 || id > UINT_MAX ? "id: missing or out of range" :
                                     !path ? "path: missing" : !fingerprint ? "fingerprint: missing" :
                                     "class: missing, or not sysext or confext");
                return -EBADMSG;
        }
        *s = (StagedImage) {
                .id = (unsigned) id,
                .class = image_class_from_string(class),
                .path = strdup(path),
                .fingerprint = strdup(fingerprint),
                .loop = strdup_or_null(loop),
                .usr_root = usr_root,
        };
        return s->path && s->fingerprint && (!loop || s->loop) ? 0 : -ENOMEM;
}

int staging_table_load(const char *run_dir, StagingTable *ret, char **ret_error) {
        _cleanup_free_ char *path = path_join(run_dir, "staging.json");
        StagingTable t = { .next_id = 1 };
        uint64_t next_id = 1;
        json_object *o;
        int r;

        if (!path)
                return -ENOMEM;
        r = json_parse_file(path, &o, ret_error);
        if (r == -ENOENT) {
                *ret = t;
                return 0;
        }
        if (r < 0)
                return r;
        r = json_member_uint64(o, "namespace_inode", &t.ns_ino, ret_error);
        if (r >= 0)
                r = json_member_uint64(o, "next_id", &next_id, ret_error);
        if (r >= 0 && (next_id == 0 || next_id > UINT_MAX)) {
                (void) asprintf_safe(ret_error, "next_id: %" PRIu64 " is out of range", next_id);
                r = -EBADMSG;
        }
        t.next_id = (unsigned) next_id;
        if (r >= 0)
                r = array_from_json(o, "images", sizeof(StagedImage), LAYERS_MAX, staged_from_json,
                                    (void **) &t.images, &t.n_images, ret_error);
        /* An ID at or above next_id would be handed out twice. */
        for (size_t i = 0; r >= 0 && i < t.n_images; i++)
                if (t.images[i].id >= t.next_id) {
                        (void) asprintf_safe(ret_error, "images[%zu].id: %u is not below next_id %u", i,
                                             t.images[i].id, t.next_id);
                        r = -EBADMSG;
                }
        json_object_put(o);
        if (r < 0) {
                staging_table_done(&t);
                return r;
        }
        *ret = t;
        return 0;
}

int staging_table_save(const char *run_dir, const StagingTable *t) {
        _cleanup_free_ char *path = path_join(run_dir, "staging.json");
        json_object *o = json_object_new_object(), *a = json_object_new_array();
        int r;

        if (!path || !o || !a) {
                json_object_put(o);
                json_object_put(a);
                return -ENOMEM;
        }
        json_object_object_add(o, "namespace_inode", json_object_new_uint64(t->ns_ino));
        json_object_object_add(o, "next_id", json_object_new_uint64(t->next_id));
        for (size_t i = 0; i < t->n_images; i++) {
                json_object *x = json_object_new_object();

                json_object_object_add(x, "id", json_object_new_uint64(t->images[i].id));
                json_add_string(x, "class", image_class_to_string(t->images[i].class));
                json_add_string(x, "path", t->images[i].path);
                json_add_string(x, "fingerprint", t->images[i].fingerprint);
                json_add_string(x, "loop", t->images[i].loop);
                if (t->images[i].usr_root)
                        json_object_object_add(x, "usr_root", json_object_new_boolean(true));
                json_object_array_add(a, x);
        }
        json_object_object_add(o, "images", a);
        r = json_save(path, o);
        json_object_put(o);
        return r;
}

StagedImage *staging_table_find(StagingTable *t, ImageClass c, const char *fingerprint) {
        for (size_t i = 0; i < t->n_images; i++)
                if (t->images[i].class == c && streq(t->images[i].fingerprint, fingerprint))
                        return &t->images[i];
        return NULL;
}

int staging_table_add(StagingTable *t, ImageClass c, const char *path, const char *fingerprint,
                      const char *loop, bool usr_root, unsigned *ret_id) {
        StagedImage *a = realloc(t->images, sizeof(StagedImage) * (t->n_images + 1));

        if (!a)
                return -ENOMEM;
        t->images = a;
        a[t->n_images] = (StagedImage) {
                .id = t->next_id,
                .class = c,
                .path = strdup(path),
                .fingerprint = strdup(fingerprint),
                .loop = strdup_or_null(loop),
                .usr_root = usr_root,
        };
        if (!a[t->n_images].path || !a[t->n_images].fingerprint)
                return -ENOMEM;
        t->n_images++;
        *ret_id = t->next_id++;
        return 0;
}

void staging_table_remove(StagingTable *t, unsigned id) {
        for (size_t i = 0; i < t->n_images; i++)
                if (t->images[i].id == id) {
                        free(t->images[i].path);
                        free(t->images[i].fingerprint);
                        free(t->images[i].loop);
                        memmove(&t->images[i], &t->images[i + 1], sizeof(StagedImage) * (t->n_images - i - 1));
                        t->n_images--;
                        return;
                }
}
