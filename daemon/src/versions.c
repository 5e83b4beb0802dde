/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdlib.h>

#include "extension-release.h"
#include "json-util.h"
#include "util.h"
#include "version.h"
#include "versions.h"

#define VERSIONS_FORMAT 2

static const char * const decision_kind_table[_DECISION_KIND_MAX] = {
        [DECISION_ACTIVATED] = "activated",
        [DECISION_DOWNGRADE_ALLOWED] = "downgrade-allowed",
};

const char *decision_kind_to_string(DecisionKind k) {
        return k >= 0 && k < _DECISION_KIND_MAX ? decision_kind_table[k] : NULL;
}

DecisionKind decision_kind_from_string(const char *s) {
        for (DecisionKind k = 0; s && k < _DECISION_KIND_MAX; k++)
                if (streq(decision_kind_table[k], s))
                        return k;
        return _DECISION_KIND_INVALID;
}

static char *strdup_or_null(const char *s) {
        return s ? strdup(s) : NULL;
}

static void decision_done(Decision *d) {
        free(d->version);
        free(d->previous_floor);
        free(d->via);
        *d = (Decision) {};
}

static int decision_set(Decision *d, DecisionKind kind, const char *version, const char *previous,
                        uint64_t when_usec, const char *via) {
        Decision n = {
                .kind = kind,
                .version = strdup_or_null(version),
                .previous_floor = strdup_or_null(previous),
                .when_usec = when_usec,
                .via = strdup_or_null(via),
        };

        if ((version && !n.version) || (previous && !n.previous_floor) || (via && !n.via)) {
                decision_done(&n);
                return -ENOMEM;
        }
        decision_done(d);
        *d = n;
        return 0;
}

static void entry_done(VersionEntry *e) {
        free(e->extension);
        free(e->floor);
        decision_done(&e->decision);
        strv_free(e->protected_in);
        free(e->runtime_boot);
        *e = (VersionEntry) {};
}

void versions_done(Versions *v) {
        for (size_t i = 0; i < v->n_entries; i++)
                entry_done(&v->entries[i]);
        free(v->entries);
        *v = (Versions) {};
}

static int entry_copy(VersionEntry *dst, const VersionEntry *src) {
        *dst = (VersionEntry) {
                .class = src->class,
                .extension = strdup(src->extension),
                .floor = strdup_or_null(src->floor),
                .protected_in = strv_copy(src->protected_in),
                .runtime_boot = strdup_or_null(src->runtime_boot),
        };
        if (!dst->extension || (src->floor && !dst->floor) || !dst->protected_in ||
            (src->runtime_boot && !dst->runtime_boot) ||
            decision_set(&dst->decision, src->decision.kind, src->decision.version, src->decision.previous_floor,
                         src->decision.when_usec, src->decision.via) < 0) {
                entry_done(dst);
                return -ENOMEM;
        }
        return 0;
}

int versions_copy(Versions *dst, const Versions *src) {
        Versions v = { .legacy = src->legacy };

        v.entries = calloc(src->n_entries ?: 1, sizeof(VersionEntry));
        if (!v.entries)
                return -ENOMEM;
        for (size_t i = 0; i < src->n_entries; i++) {
                if (entry_copy(&v.entries[i], &src->entries[i]) < 0) {
                        versions_done(&v);
                        return -ENOMEM;
                }
                v.n_entries++;
        }
        *dst = v;
        return 0;
}

static bool strv_equal(char * const *a, char * const *b) {
        size_t n = strv_length(a);

        if (n != strv_length(b))
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(a[i], b[i]))
                        return false;
        return true;
}

static bool entry_equal(const VersionEntry *a, const VersionEntry *b) {
        return a->class == b->class && streq(a->extension, b->extension) && streq_ptr(a->floor, b->floor) &&
               a->decision.kind == b->decision.kind && streq_ptr(a->decision.version, b->decision.version) &&
               streq_ptr(a->decision.previous_floor, b->decision.previous_floor) &&
               a->decision.when_usec == b->decision.when_usec && streq_ptr(a->decision.via, b->decision.via) &&
               strv_equal(a->protected_in, b->protected_in) && streq_ptr(a->runtime_boot, b->runtime_boot);
}

bool versions_equal(const Versions *a, const Versions *b) {
        if (a->n_entries != b->n_entries || a->legacy != b->legacy)
                return false;
        for (size_t i = 0; i < a->n_entries; i++) {
                const VersionEntry *e = versions_find(b, a->entries[i].class, a->entries[i].extension);

                if (!e || !entry_equal(&a->entries[i], e))
                        return false;
        }
        return true;
}

VersionEntry *versions_find(const Versions *v, ImageClass c, const char *extension) {
        for (size_t i = 0; extension && i < v->n_entries; i++)
                if (v->entries[i].class == c && streq(v->entries[i].extension, extension))
                        return &v->entries[i];
        return NULL;
}

const char *versions_floor(const Versions *v, ImageClass c, const char *extension) {
        const VersionEntry *e = versions_find(v, c, extension);

        return e ? e->floor : NULL;
}

bool versions_protected(const Versions *v, ImageClass c, const char *extension, const char *hierarchy,
                        const char *boot_id) {
        const VersionEntry *e = versions_find(v, c, extension);

        if (!e || !strv_contains(e->protected_in, hierarchy))
                return false;
        /* A runtime image is gone at every boot, as /run is: that is no removal. */
        return !e->runtime_boot || !boot_id || streq(e->runtime_boot, boot_id);
}

int versions_set_runtime_boot(Versions *v, ImageClass c, const char *extension, const char *boot_id) {
        VersionEntry *e = versions_find(v, c, extension);

        if (!e)
                return -ENOENT;
        return free_and_strdup(&e->runtime_boot, boot_id);
}

/* The entry of @extension, added (no floor, no decision) if there is none. */
static int entry_get(Versions *v, ImageClass c, const char *extension, VersionEntry **ret) {
        VersionEntry *e = versions_find(v, c, extension), *a;

        if (e) {
                *ret = e;
                return 0;
        }
        a = realloc(v->entries, sizeof(VersionEntry) * (v->n_entries + 1));
        if (!a)
                return -ENOMEM;
        v->entries = a;
        e = &a[v->n_entries];
        *e = (VersionEntry) {
                .class = c,
                .extension = strdup(extension),
                .protected_in = calloc(1, sizeof(char *)),
        };
        if (!e->extension || !e->protected_in) {
                entry_done(e);
                return -ENOMEM;
        }
        v->n_entries++;
        *ret = e;
        return 0;
}

int versions_activate(Versions *v, ImageClass c, const char *extension, const char *hierarchy,
                      const char *version, uint64_t when_usec, const char *via) {
        VersionEntry *e;
        int r;

        r = entry_get(v, c, extension, &e);
        if (r < 0)
                return r;
        if (hierarchy && !strv_contains(e->protected_in, hierarchy)) {
                r = strv_extend(&e->protected_in, hierarchy);
                if (r < 0)
                        return r;
                strv_sort(e->protected_in);
        }
        /* Only a higher version moves the floor, and spends an earlier decision. */
        if (!version || (e->floor && strverscmp_improved(version, e->floor) <= 0))
                return 0;
        r = decision_set(&e->decision, DECISION_ACTIVATED, version, NULL, when_usec, via);
        if (r < 0)
                return r;
        return free_and_strdup(&e->floor, version);
}

int versions_allow(Versions *v, ImageClass c, const char *extension, const char *version,
                   uint64_t when_usec, const char *via) {
        _cleanup_free_ char *previous = NULL;
        VersionEntry *e;
        int r;

        r = entry_get(v, c, extension, &e);
        if (r < 0)
                return r;
        previous = TAKE_PTR(e->floor);
        r = decision_set(&e->decision, DECISION_DOWNGRADE_ALLOWED, version, previous, when_usec, via);
        if (r < 0) {
                e->floor = TAKE_PTR(previous);
                return r;
        }
        return free_and_strdup(&e->floor, version);
}

int versions_unprotect(Versions *v, ImageClass c, const char *extension, const char *hierarchy) {
        VersionEntry *e = versions_find(v, c, extension);
        size_t k = 0;

        if (!e)
                return 0;
        for (size_t i = 0; e->protected_in[i]; i++)
                if (streq(e->protected_in[i], hierarchy))
                        free(e->protected_in[i]);
                else
                        e->protected_in[k++] = e->protected_in[i];
        e->protected_in[k] = NULL;
        return 0;
}

int versions_forget(Versions *v, ImageClass c, const char *extension) {
        VersionEntry *e = versions_find(v, c, extension);
        size_t i;

        if (!e)
                return -ENOENT;
        i = (size_t) (e - v->entries);
        entry_done(e);
        memmove(&v->entries[i], &v->entries[i + 1], sizeof(VersionEntry) * (v->n_entries - i - 1));
        v->n_entries--;
        return 0;
}

json_object *decision_to_json(const Decision *d) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_add_string(o, "kind", decision_kind_to_string(d->kind));
        json_add_string(o, "version", d->version);
        if (d->kind == DECISION_DOWNGRADE_ALLOWED)
                json_add_string(o, "previous_floor", d->previous_floor);
        json_object_object_add(o, "when_usec", json_object_new_uint64(d->when_usec));
        json_add_string(o, "via", d->via);
        return o;
}

static int compare_entries(const void *a, const void *b) {
        const VersionEntry *x = a, *y = b;

        return x->class != y->class ? (int) x->class - (int) y->class : strcmp(x->extension, y->extension);
}

json_object *versions_to_json(const Versions *v) {
        json_object *o = json_object_new_object();
        _cleanup_free_ VersionEntry *sorted = NULL;

        if (!o)
                return NULL;
        sorted = calloc(v->n_entries ?: 1, sizeof(VersionEntry));
        if (!sorted) {
                json_object_put(o);
                return NULL;
        }
        /* A stable order, so a file that did not change in meaning does not change in bytes. */
        if (v->n_entries > 0) {
                memcpy(sorted, v->entries, sizeof(VersionEntry) * v->n_entries);
                qsort(sorted, v->n_entries, sizeof(VersionEntry), compare_entries);
        }

        json_object_object_add(o, "format", json_object_new_int(VERSIONS_FORMAT));
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                json_object *cls = json_object_new_object();

                for (size_t i = 0; cls && i < v->n_entries; i++) {
                        const VersionEntry *e = &sorted[i];
                        json_object *x, *p;

                        if (e->class != k)
                                continue;
                        x = json_object_new_object();
                        p = json_object_new_array();
                        json_add_string(x, "floor", e->floor);
                        json_object_object_add(x, "decision", decision_to_json(&e->decision));
                        STRV_FOREACH(h, e->protected_in)
                                json_object_array_add(p, json_object_new_string(*h));
                        json_object_object_add(x, "protected_in", p);
                        if (e->runtime_boot)
                                json_add_string(x, "runtime_boot", e->runtime_boot);
                        json_object_object_add(cls, e->extension, x);
                }
                json_object_object_add(o, image_class_to_string(k), cls);
        }
        return o;
}

static int decision_from_json(json_object *o, Decision *ret, char **ret_error) {
        const char *kind = NULL, *version = NULL, *previous = NULL, *via = NULL;
        uint64_t when = 0;
        DecisionKind k;
        int r;

        r = json_member_string(o, "kind", &kind, ret_error);
        if (r >= 0)
                r = json_member_string(o, "version", &version, ret_error);
        if (r >= 0)
                r = json_member_string(o, "previous_floor", &previous, ret_error);
        if (r >= 0)
                r = json_member_uint64(o, "when_usec", &when, ret_error);
        if (r >= 0)
                r = json_member_string(o, "via", &via, ret_error);
        if (r < 0)
                return r;
        k = decision_kind_from_string(kind);
        if (k < 0) {
                (void) asprintf_safe(ret_error, "kind: '%s' is not one of activated, downgrade-allowed", strna(kind));
                return -EBADMSG;
        }
        return decision_set(ret, k, version, previous, when, via);
}

/* One extension's entry: "floor"… (format 2) or a bare version string (format 1). */
static int entry_from_json(json_object *x, bool legacy, VersionEntry *e, char **ret_error) {
        json_object *d;
        const char *floor = NULL, *rb = NULL;
        int r;

        if (legacy) {
                if (!json_object_is_type(x, json_type_string)) {
                        (void) asprintf_safe(ret_error, "%s, expected a version string", json_type_description(x));
                        return -EBADMSG;
                }
                e->floor = strdup(json_object_get_string(x));
                return e->floor ? 0 : -ENOMEM;
        }
        if (!json_object_is_type(x, json_type_object)) {
                (void) asprintf_safe(ret_error, "%s, expected an object", json_type_description(x));
                return -EBADMSG;
        }
        r = json_member_string(x, "floor", &floor, ret_error);
        if (r < 0)
                return r;
        if (floor && !(e->floor = strdup(floor)))
                return -ENOMEM;
        r = json_member(x, "decision", json_type_object, &d, ret_error);
        if (r >= 0) {
                r = decision_from_json(d, &e->decision, ret_error);
                if (r < 0)
                        (void) json_error_prefix(ret_error, "decision");
        }
        if (r < 0 && r != -ENOENT)
                return r;
        strv_free(e->protected_in);
        e->protected_in = NULL;
        r = json_member_strv(x, "protected_in", &e->protected_in, ret_error);
        if (r < 0)
                return r;
        strv_sort(e->protected_in);
        r = json_member_string(x, "runtime_boot", &rb, ret_error);
        if (r < 0)
                return r;
        if (rb && !(e->runtime_boot = strdup(rb)))
                return -ENOMEM;
        return 0;
}

int versions_from_json(json_object *o, Versions *ret, char **ret_error) {
        Versions v = {};
        json_object *fmt;
        int r;

        r = json_member(o, "format", json_type_int, &fmt, ret_error);
        if (r == -ENOENT)
                v.legacy = true;       /* format 1: {"sysext": {"foo": "1.2"}} */
        else if (r < 0)
                return r;
        else if (json_object_get_int64(fmt) != VERSIONS_FORMAT) {
                (void) asprintf_safe(ret_error, "format: %" PRId64 " is not a format this tuck knows (%d)",
                                     json_object_get_int64(fmt), VERSIONS_FORMAT);
                return -EBADMSG;
        }

        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                const char *cname = image_class_to_string(k);
                json_object *cls;

                r = json_member(o, cname, json_type_object, &cls, ret_error);
                if (r == -ENOENT)
                        continue;
                if (r < 0)
                        goto fail;
                json_object_object_foreach(cls, name, x) {
                        VersionEntry *e;
                        _cleanup_free_ char *where = NULL;

                        if (!image_name_is_valid(name)) {
                                (void) asprintf_safe(ret_error, "%s: '%s' is not an extension name", cname, name);
                                r = -EBADMSG;
                                goto fail;
                        }
                        r = entry_get(&v, k, name, &e);
                        if (r >= 0)
                                r = entry_from_json(x, v.legacy, e, ret_error);
                        if (r < 0) {
                                if (asprintf_safe(&where, "%s.%s", cname, name) >= 0)
                                        (void) json_error_prefix(ret_error, where);
                                goto fail;
                        }
                }
        }
        *ret = v;
        return 0;
fail:
        versions_done(&v);
        return r;
}

int versions_load(const char *state_dir, Versions *ret, char **ret_error) {
        _cleanup_free_ char *path = path_join(state_dir, "versions.json");
        json_object *o = NULL;
        int r;

        if (!path)
                return -ENOMEM;
        r = json_parse_file(path, &o, ret_error);
        if (r == -ENOENT) {
                *ret = (Versions) {};
                return 0;
        }
        if (r < 0)
                return r;
        r = versions_from_json(o, ret, ret_error);
        json_object_put(o);
        return r;
}

int versions_save(const char *state_dir, const Versions *v) {
        _cleanup_free_ char *path = path_join(state_dir, "versions.json");
        json_object *o;
        int r;

        if (!path)
                return -ENOMEM;
        r = mkdir_p(state_dir, 0755);
        if (r < 0)
                return r;
        o = versions_to_json(v);
        if (!o)
                return -ENOMEM;
        r = json_save(path, o);
        json_object_put(o);
        return r;
}

char *decision_describe(const Decision *d) {
        _cleanup_free_ char *when = d->when_usec ? format_timestamp(d->when_usec) : NULL;
        char *s = NULL;

        if (d->kind == DECISION_DOWNGRADE_ALLOWED)
                (void) asprintf_safe(&s, "%s from %s allowed%s%s (%s)",
                                     d->version ? "downgrade" : "unversioned image",
                                     strna(d->previous_floor), when ? " " : "", strempty(when),
                                     d->via ?: "how: not recorded");
        else if (d->when_usec == 0 && !d->via)
                s = strdup("activated (before tuck recorded when)");
        else
                (void) asprintf_safe(&s, "activated%s%s (%s)", when ? " " : "", strempty(when),
                                     d->via ?: "how: not recorded");
        return s;
}

static const char * const hold_reason_table[_HOLD_REASON_MAX] = {
        [HOLD_DOWNGRADE] = "downgrade",
        [HOLD_UNVERSIONED] = "unversioned",
        [HOLD_INVALID] = "invalid",
        [HOLD_GONE] = "gone",
        [HOLD_NOT_CARRIED] = "not-carried",
};

const char *hold_reason_to_string(HoldReason r) {
        return r >= 0 && r < _HOLD_REASON_MAX ? hold_reason_table[r] : NULL;
}

HoldReason hold_reason_from_string(const char *s) {
        for (HoldReason r = 0; s && r < _HOLD_REASON_MAX; r++)
                if (streq(hold_reason_table[r], s))
                        return r;
        return _HOLD_REASON_INVALID;
}

void hold_done(Hold *h) {
        free(h->extension);
        free(h->floor);
        free(h->active_version);
        free(h->refused_version);
        free(h->image);
        free(h->detail);
        free(h->override);
        *h = (Hold) {};
}

void holds_free(Hold *h, size_t n) {
        for (size_t i = 0; i < n; i++)
                hold_done(&h[i]);
        free(h);
}

static int hold_copy(Hold *dst, const Hold *src) {
        *dst = (Hold) {
                .extension = strdup(src->extension),
                .reason = src->reason,
                .floor = strdup_or_null(src->floor),
                .active_version = strdup_or_null(src->active_version),
                .refused_version = strdup_or_null(src->refused_version),
                .image = strdup_or_null(src->image),
                .detail = strdup_or_null(src->detail),
                .kept = src->kept,
                .override = strdup_or_null(src->override),
        };
        if (!dst->extension || (src->floor && !dst->floor) || (src->active_version && !dst->active_version) ||
            (src->refused_version && !dst->refused_version) || (src->image && !dst->image) ||
            (src->detail && !dst->detail) || (src->override && !dst->override)) {
                hold_done(dst);
                return -ENOMEM;
        }
        return 0;
}

int holds_copy(const Hold *src, size_t n, Hold **ret) {
        Hold *h = calloc(n ?: 1, sizeof(Hold));

        if (!h)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (hold_copy(&h[i], &src[i]) < 0) {
                        holds_free(h, i);
                        return -ENOMEM;
                }
        *ret = h;
        return 0;
}

bool holds_equal(const Hold *a, size_t n_a, const Hold *b, size_t n_b) {
        if (n_a != n_b)
                return false;
        for (size_t i = 0; i < n_a; i++)
                if (!streq(a[i].extension, b[i].extension) || a[i].reason != b[i].reason ||
                    !streq_ptr(a[i].floor, b[i].floor) || !streq_ptr(a[i].active_version, b[i].active_version) ||
                    !streq_ptr(a[i].refused_version, b[i].refused_version) || !streq_ptr(a[i].image, b[i].image) ||
                    !streq_ptr(a[i].detail, b[i].detail) || a[i].kept != b[i].kept ||
                    !streq_ptr(a[i].override, b[i].override))
                        return false;
        return true;
}

char *hold_summary(const Hold *h, const char *hierarchy) {
        char *s = NULL;

        switch (h->reason) {
        case HOLD_DOWNGRADE:
                (void) asprintf_safe(&s, "downgrade %s → %s not allowed", strna(h->floor), strna(h->refused_version));
                break;
        case HOLD_UNVERSIONED:
                (void) asprintf_safe(&s, "unversioned image over floor %s not allowed", strna(h->floor));
                break;
        case HOLD_INVALID:
                s = strdup("image not valid");
                break;
        case HOLD_GONE:
                s = strdup("image gone");
                break;
        case HOLD_NOT_CARRIED:
                (void) asprintf_safe(&s, "image no longer carries %s", strna(hierarchy));
                break;
        case _HOLD_REASON_MAX:
        case _HOLD_REASON_INVALID:
                break;
        }
        return s;
}

char *hold_headline(const Hold *h, const char *hierarchy) {
        _cleanup_free_ char *summary = hold_summary(h, hierarchy);
        char *s = NULL;

        (void) asprintf_safe(&s, "%s held back (%s)", h->extension, strna(summary));
        return s;
}

char *hold_describe(const Hold *h, const char *hierarchy) {
        _cleanup_free_ char *what = NULL, *stays = NULL;
        char *s = NULL;

        switch (h->reason) {
        case HOLD_DOWNGRADE:
                (void) asprintf_safe(&what, "downgrade %s → %s not allowed (image '%s')", strna(h->floor),
                                     strna(h->refused_version), strna(h->image));
                break;
        case HOLD_UNVERSIONED:
                (void) asprintf_safe(&what, "its image '%s' has no version, but the floor is %s: it cannot be "
                                     "proved not to be a downgrade", strna(h->image), strna(h->floor));
                break;
        case HOLD_INVALID:
                (void) asprintf_safe(&what, "its image '%s' is not valid: %s", strna(h->image), strna(h->detail));
                break;
        case HOLD_GONE:
                (void) asprintf_safe(&what, "its image is gone%s%s%s", h->image ? " (was '" : "",
                                     strempty(h->image), h->image ? "')" : "");
                break;
        case HOLD_NOT_CARRIED:
                (void) asprintf_safe(&what, "its image '%s' no longer carries %s", strna(h->image), strna(hierarchy));
                break;
        case _HOLD_REASON_MAX:
        case _HOLD_REASON_INVALID:
                break;
        }
        if (h->kept)
                (void) asprintf_safe(&stays, "%s %s stays", h->extension, h->active_version ?: "(unversioned)");
        else
                (void) asprintf_safe(&stays, "%s stays out (no layer of it is staged to keep)", h->extension);
        (void) asprintf_safe(&s, "%s: %s; %s (use %s to %s)", h->extension, strna(what), strna(stays),
                             strna(h->override),
                             h->reason == HOLD_DOWNGRADE || h->reason == HOLD_UNVERSIONED ? "allow it" : "let it go");
        return s;
}

json_object *hold_to_json(const Hold *h) {
        json_object *o = json_object_new_object();

        if (!o)
                return NULL;
        json_add_string(o, "extension", h->extension);
        json_add_string(o, "reason", hold_reason_to_string(h->reason));
        json_add_string(o, "floor", h->floor);
        json_add_string(o, "active_version", h->active_version);
        json_add_string(o, "refused_version", h->refused_version);
        json_add_string(o, "image", h->image);
        json_add_string(o, "detail", h->detail);
        json_object_object_add(o, "kept", json_object_new_boolean(h->kept));
        json_add_string(o, "override", h->override);
        return o;
}

int hold_from_json(json_object *o, Hold *ret, char **ret_error) {
        const char *extension = NULL, *reason = NULL;
        Hold h = {};
        struct {
                const char *key;
                char **field;
        } strings[] = {
                { "floor", &h.floor },
                { "active_version", &h.active_version },
                { "refused_version", &h.refused_version },
                { "image", &h.image },
                { "detail", &h.detail },
                { "override", &h.override },
        };
        int r;

        if (!json_object_is_type(o, json_type_object)) {
                (void) asprintf_safe(ret_error, "%s, expected an object", json_type_description(o));
                return -EBADMSG;
        }
        r = json_member_string(o, "extension", &extension, ret_error);
        if (r >= 0)
                r = json_member_string(o, "reason", &reason, ret_error);
        if (r >= 0)
                r = json_member_bool(o, "kept", &h.kept, ret_error);
        if (r < 0)
                return r;
        h.reason = hold_reason_from_string(reason);
        if (!extension || h.reason < 0) {
                (void) asprintf_safe(ret_error, "%s", !extension ? "extension: missing" : "reason: not known");
                return -EBADMSG;
        }
        h.extension = strdup(extension);
        if (!h.extension)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(strings); i++) {
                const char *v = NULL;

                r = json_member_string(o, strings[i].key, &v, ret_error);
                if (r >= 0)
                        r = free_and_strdup(strings[i].field, v);
                if (r < 0) {
                        hold_done(&h);
                        return r;
                }
        }
        *ret = h;
        return 0;
}
