/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "mount-api.h"
#include "mountinfo.h"
#include "state.h"
#include "util.h"

#define STATE_FILE_MAX (16 * 1024 * 1024)

static char *strdup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

void layer_done(Layer *l) {
        free(l->name);
        free(l->extension);
        free(l->version);
        free(l->image);
        free(l->fingerprint);
        *l = (Layer) {};
}

int layer_copy(Layer *dst, const Layer *src) {
        *dst = (Layer) {
                .name = strdup(src->name),
                .extension = strdup(src->extension),
                .version = strdup_or_null(src->version),
                .image = strdup_or_null(src->image),
                .fingerprint = strdup(src->fingerprint),
        };
        if (!dst->name || !dst->extension || !dst->fingerprint || (src->version && !dst->version) ||
            (src->image && !dst->image)) {
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

int json_save(const char *path, json_object *o) {
        const char *text = json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        _cleanup_free_ char *with_newline = strjoin(text, "\n");

        if (!with_newline)
                return -ENOMEM;
        return write_file_atomic(path, with_newline, 0644);
}

int json_load(const char *path, json_object **ret) {
        _cleanup_free_ char *text = NULL;
        json_object *o;
        int r;

        r = read_full_file_at(AT_FDCWD, path, STATE_FILE_MAX, &text);
        if (r < 0)
                return r;
        o = json_tokener_parse(text);
        if (!o || !json_object_is_type(o, json_type_object)) {
                json_object_put(o);
                return -EBADMSG;
        }
        *ret = o;
        return 0;
}

/* json-c helpers that tolerate missing keys. */
static const char *jstr(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
                ? json_object_get_string(v) : NULL;
}

static uint64_t juint(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) ? (uint64_t) json_object_get_uint64(v) : 0;
}

static bool jbool(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_get_boolean(v);
}

static int jadd_str(json_object *o, const char *key, const char *value) {
        return json_object_object_add(o, key, value ? json_object_new_string(value) : NULL);
}

static dev_t parse_devnum(const char *s) {
        unsigned ma, mi;

        if (!s || sscanf(s, "%u:%u", &ma, &mi) != 2)
                return 0;
        return makedev(ma, mi);
}

static int jadd_dev(json_object *o, const char *key, dev_t d) {
        _cleanup_free_ char *s = format_devnum(d);

        return s ? jadd_str(o, key, s) : -ENOMEM;
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
        jadd_str(o, "hierarchy", g->hierarchy);
        jadd_str(o, "class", image_class_to_string(g->class));
        json_object_object_add(o, "merged", json_object_new_boolean(g->merged));
        json_object_object_add(o, "generation", json_object_new_uint64(g->number));
        json_object_object_add(o, "since_usec", json_object_new_uint64(g->since_usec));
        jadd_dev(o, "overlay_dev", g->overlay_dev);
        json_object_object_add(o, "overlay_mount_id", json_object_new_uint64(g->overlay_mnt_id));
        jadd_dev(o, "base_dev", g->base_dev);
        jadd_str(o, "flags", mount_attr_to_string(g->attr, buf, sizeof(buf)));
        json_object_object_add(o, "attr", json_object_new_uint64(g->attr));
        json_object_object_add(o, "window", json_object_new_boolean(g->window));
        for (size_t i = 0; i < g->n_layers; i++) {
                json_object *l = json_object_new_object();

                jadd_str(l, "name", g->layers[i].name);
                jadd_str(l, "extension", g->layers[i].extension);
                jadd_str(l, "version", g->layers[i].version);
                jadd_str(l, "image", g->layers[i].image);
                jadd_str(l, "fingerprint", g->layers[i].fingerprint);
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
        return o;
}

int generation_from_json(json_object *o, Generation *ret) {
        Generation g = {};
        json_object *a;

        g.hierarchy = strdup_or_null(jstr(o, "hierarchy"));
        g.class = image_class_from_string(jstr(o, "class"));
        if (!g.hierarchy || g.class < 0)
                goto bad;
        g.merged = jbool(o, "merged");
        g.number = juint(o, "generation");
        g.since_usec = juint(o, "since_usec");
        g.overlay_dev = parse_devnum(jstr(o, "overlay_dev"));
        g.overlay_mnt_id = juint(o, "overlay_mount_id");
        g.base_dev = parse_devnum(jstr(o, "base_dev"));
        g.attr = juint(o, "attr");
        g.window = jbool(o, "window");

        if (json_object_object_get_ex(o, "layers", &a) && json_object_is_type(a, json_type_array)) {
                size_t n = json_object_array_length(a);

                g.layers = calloc(n ?: 1, sizeof(Layer));
                if (!g.layers)
                        goto bad;
                for (size_t i = 0; i < n; i++) {
                        json_object *l = json_object_array_get_idx(a, i);
                        Layer *x = &g.layers[g.n_layers++];

                        x->name = strdup_or_null(jstr(l, "name"));
                        x->extension = strdup_or_null(jstr(l, "extension"));
                        x->version = strdup_or_null(jstr(l, "version"));
                        x->image = strdup_or_null(jstr(l, "image"));
                        x->fingerprint = strdup_or_null(jstr(l, "fingerprint"));
                        if (!x->name || !x->extension || !x->fingerprint)
                                goto bad;
                }
        }
        if (json_object_object_get_ex(o, "history", &a) && json_object_is_type(a, json_type_array)) {
                size_t n = json_object_array_length(a);

                g.history = calloc(n ?: 1, sizeof(PastOverlay));
                if (!g.history)
                        goto bad;
                for (size_t i = 0; i < n && i < GENERATION_HISTORY_MAX; i++) {
                        json_object *h = json_object_array_get_idx(a, i);

                        g.history[g.n_history++] = (PastOverlay) {
                                .number = juint(h, "generation"),
                                .dev = parse_devnum(jstr(h, "overlay_dev")),
                        };
                }
        }
        *ret = g;
        return 0;
bad:
        generation_done(&g);
        return -EBADMSG;
}

static char *generation_path(const char *run_dir, const char *hierarchy) {
        _cleanup_free_ char *id = hierarchy_id(hierarchy), *file = NULL;

        if (!id || !(file = strjoin(id, ".json")))
                return NULL;
        return path_join(run_dir, "generations", file);
}

int generation_load(const char *run_dir, const char *hierarchy, Generation *ret) {
        _cleanup_free_ char *path = generation_path(run_dir, hierarchy);
        json_object *o;
        int r;

        if (!path)
                return -ENOMEM;
        r = json_load(path, &o);
        if (r < 0)
                return r;
        r = generation_from_json(o, ret);
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

int staging_table_load(const char *run_dir, StagingTable *ret) {
        _cleanup_free_ char *path = path_join(run_dir, "staging.json");
        StagingTable t = { .next_id = 1 };
        json_object *o, *a;
        int r;

        if (!path)
                return -ENOMEM;
        r = json_load(path, &o);
        if (r == -ENOENT) {
                *ret = t;
                return 0;
        }
        if (r < 0)
                return r;
        t.ns_ino = juint(o, "namespace_inode");
        t.next_id = (unsigned) juint(o, "next_id") ?: 1;
        if (json_object_object_get_ex(o, "images", &a) && json_object_is_type(a, json_type_array)) {
                size_t n = json_object_array_length(a);

                t.images = calloc(n ?: 1, sizeof(StagedImage));
                if (!t.images) {
                        json_object_put(o);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < n; i++) {
                        json_object *x = json_object_array_get_idx(a, i);
                        StagedImage *s = &t.images[t.n_images++];

                        s->id = (unsigned) juint(x, "id");
                        s->class = image_class_from_string(jstr(x, "class"));
                        s->path = strdup_or_null(jstr(x, "path"));
                        s->fingerprint = strdup_or_null(jstr(x, "fingerprint"));
                        s->loop = strdup_or_null(jstr(x, "loop"));
                        if (!s->path || !s->fingerprint || s->class < 0) {
                                json_object_put(o);
                                staging_table_done(&t);
                                return -EBADMSG;
                        }
                }
        }
        json_object_put(o);
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
                jadd_str(x, "class", image_class_to_string(t->images[i].class));
                jadd_str(x, "path", t->images[i].path);
                jadd_str(x, "fingerprint", t->images[i].fingerprint);
                jadd_str(x, "loop", t->images[i].loop);
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
                      const char *loop, unsigned *ret_id) {
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

/*
 * Each class's marks are an object of strings. Anything else is corrupt:
 * json-c aborts adding a mark to a class that is not an object, and a mark
 * that is not a string would read as none, the floor silently gone.
 */
static bool versions_valid(json_object *v) {
        for (ImageClass c = 0; c < _IMAGE_CLASS_MAX; c++) {
                json_object *cls;

                if (!json_object_object_get_ex(v, image_class_to_string(c), &cls))
                        continue;
                if (!json_object_is_type(cls, json_type_object))
                        return false;
                json_object_object_foreach(cls, extension, mark) {
                        (void) extension;
                        if (!json_object_is_type(mark, json_type_string))
                                return false;
                }
        }
        return true;
}

int versions_load(const char *state_dir, json_object **ret) {
        _cleanup_free_ char *path = path_join(state_dir, "versions.json");
        json_object *v;
        int r;

        if (!path)
                return -ENOMEM;
        r = json_load(path, &v);
        if (r == -ENOENT) {
                *ret = json_object_new_object();
                return *ret ? 0 : -ENOMEM;
        }
        if (r < 0)
                return r;
        if (!versions_valid(v)) {
                json_object_put(v);
                return -EBADMSG;
        }
        *ret = v;
        return 0;
}

int versions_save(const char *state_dir, json_object *v) {
        _cleanup_free_ char *path = path_join(state_dir, "versions.json");
        int r;

        if (!path)
                return -ENOMEM;
        r = mkdir_p(state_dir, 0755);
        if (r < 0)
                return r;
        return json_save(path, v);
}

const char *versions_get(json_object *v, ImageClass c, const char *extension) {
        json_object *cls;

        if (!json_object_object_get_ex(v, image_class_to_string(c), &cls))
                return NULL;
        return jstr(cls, extension);
}

int versions_set(json_object *v, ImageClass c, const char *extension, const char *version) {
        json_object *cls;

        if (!json_object_object_get_ex(v, image_class_to_string(c), &cls)) {
                cls = json_object_new_object();
                if (!cls)
                        return -ENOMEM;
                json_object_object_add(v, image_class_to_string(c), cls);
        }
        return json_object_object_add(cls, extension, json_object_new_string(version)) < 0 ? -ENOMEM : 0;
}
