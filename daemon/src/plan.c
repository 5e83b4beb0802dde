/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

#include "plan.h"
#include "reload.h"
#include "util.h"
#include "version.h"

static const char * const plan_action_table[_PLAN_ACTION_MAX] = {
        [PLAN_NOTHING] = "nothing",
        [PLAN_KEEP] = "keep",
        [PLAN_MERGE] = "merge",
        [PLAN_REFRESH] = "refresh",
        [PLAN_TAKEOVER] = "take-over",
        [PLAN_UNMERGE] = "unmerge",
        [PLAN_REFUSE] = "refuse",
};

static const char * const top_kind_table[_TOP_KIND_MAX] = {
        [TOP_BASE] = "base",
        [TOP_OURS] = "tuck",
        [TOP_SYSTEMD] = "systemd-sysext",
        [TOP_LOST] = "tuck, unrecorded",
        [TOP_OTHER] = "other",
};

static const char * const verb_table[_VERB_MAX] = {
        [VERB_MERGE] = "merge",
        [VERB_REFRESH] = "refresh",
        [VERB_UNMERGE] = "unmerge",
};

const char *plan_action_to_string(PlanAction a) {
        return a < _PLAN_ACTION_MAX ? plan_action_table[a] : NULL;
}

const char *top_kind_to_string(TopKind k) {
        return k < _TOP_KIND_MAX ? top_kind_table[k] : NULL;
}

const char *verb_to_string(TuckVerb v) {
        return v < _VERB_MAX ? verb_table[v] : NULL;
}

static int refuse(HierarchyPlan *h, int error, const char *fmt, ...) _printf_(3, 4);
static int refuse(HierarchyPlan *h, int error, const char *fmt, ...) {
        va_list ap;
        int r;

        h->action = PLAN_REFUSE;
        h->error = error;
        va_start(ap, fmt);
        r = free_and_vasprintf(&h->reason, fmt, ap);
        va_end(ap);
        return r;
}

static int set_reason(HierarchyPlan *h, const char *fmt, ...) _printf_(2, 3);
static int set_reason(HierarchyPlan *h, const char *fmt, ...) {
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = free_and_vasprintf(&h->reason, fmt, ap);
        va_end(ap);
        return r;
}

static bool image_carries(const Image *i, const char *hierarchy) {
        return strv_contains(i->hierarchies, hierarchy);
}

const char *plan_layer_name(const PlanLayer *l) {
        return l->image ? l->image->name : l->kept->name;
}

const char *plan_layer_extension(const PlanLayer *l) {
        return l->image ? l->image->extension : l->kept->extension;
}

const char *plan_layer_version(const PlanLayer *l) {
        return l->image ? l->image->version : l->kept->version;
}

const char *plan_layer_fingerprint(const PlanLayer *l) {
        return l->image ? l->image->fingerprint : l->kept->fingerprint;
}

int plan_layer_to_layer(const PlanLayer *l, Layer *ret) {
        int r;

        if (l->kept)
                return layer_copy(ret, l->kept);
        r = layer_copy(ret, &(const Layer) {
                .name = l->image->name,
                .extension = l->image->extension,
                .version = l->image->version,
                .image = l->image->path,
                .fingerprint = l->image->fingerprint,
        });
        /* What its release file asks of the service manager (reload.h), kept for when it leaves. */
        if (r >= 0)
                r = layer_set_manager_fields(ret, l->image->release);
        if (r < 0)
                layer_done(ret);
        return r;
}

static int add_layer(HierarchyPlan *h, PlanLayer l) {
        PlanLayer *a = realloc(h->layers, sizeof(PlanLayer) * (h->n_layers + 1));

        if (!a)
                return -ENOMEM;
        h->layers = a;
        h->layers[h->n_layers++] = l;
        return 0;
}

static int compare_layers(const void *a, const void *b) {
        return strverscmp_improved(plan_layer_name(a), plan_layer_name(b));
}

static bool has_layer_of(const HierarchyPlan *h, const char *extension) {
        for (size_t i = 0; i < h->n_layers; i++)
                if (streq_ptr(plan_layer_extension(&h->layers[i]), extension))
                        return true;
        return false;
}

/* The current generation, if its layers can be kept: our recorded overlay is on top. */
static const Generation *keepable(const PlanHierarchyInput *hin) {
        const Generation *g = hin->current;

        return g && g->merged && hin->live.top == TOP_OURS ? g : NULL;
}

/* Held back: @extension's layers of the current generation that are still staged stay. */
static int keep_current(const PlanHierarchyInput *hin, HierarchyPlan *h, const char *extension,
                        const char **ret_version) {
        const Generation *g = keepable(hin);
        bool kept = false;
        int r;

        for (size_t k = 0; g && k < g->n_layers; k++) {
                if (!streq(g->layers[k].extension, extension) || !hin->staged || !hin->staged[k])
                        continue;
                /* A copy: the current generation is replaced by the swap, the plan is read after it. */
                Layer *copy = calloc(1, sizeof(Layer));

                if (!copy)
                        return -ENOMEM;
                r = layer_copy(copy, &g->layers[k]);
                if (r >= 0)
                        r = add_layer(h, (PlanLayer) { .kept = copy });
                if (r < 0) {
                        layer_done(copy);
                        free(copy);
                        return r;
                }
                if (!kept)
                        *ret_version = g->layers[k].version;
                kept = true;
        }
        return kept;
}

static bool allowed(const PlanInput *in, const char *extension) {
        return in->allow_downgrade || strv_contains(in->allow_downgrade_names, extension);
}

/* The candidate image of this name, valid or not (for a better message). */
static const Image *find_image(const PlanInput *in, ImageClass c, const char *extension) {
        for (size_t i = 0; i < in->n_images; i++) {
                const Image *img = in->images[i];

                if (img->class == c && img->state == IMAGE_CANDIDATE &&
                    (streq_ptr(img->extension, extension) || streq(img->name, extension)))
                        return img;
        }
        return NULL;
}

/* The image the current generation had for @extension (for "its image is gone (was ...)"). */
static const char *current_image(const PlanHierarchyInput *hin, const char *extension) {
        for (size_t k = 0; hin->current && k < hin->current->n_layers; k++)
                if (streq(hin->current->layers[k].extension, extension))
                        return hin->current->layers[k].image;
        return NULL;
}

static bool has_hold(const HierarchyPlan *h, const char *extension) {
        for (size_t i = 0; i < h->n_held; i++)
                if (streq(h->held[i].extension, extension))
                        return true;
        return false;
}

/* One hold per extension; its current layers stay unless another image of it goes in. */
static int add_hold(HierarchyPlan *h, const PlanInput *in, const PlanHierarchyInput *hin, HoldReason reason,
                    const char *extension, const char *refused_version, const char *image, const char *detail) {
        const char *active = NULL;
        Hold *a, x;
        int kept = 0;

        if (has_hold(h, extension))
                return 0;
        if (!has_layer_of(h, extension))
                kept = keep_current(hin, h, extension, &active);
        if (kept < 0)
                return kept;
        a = realloc(h->held, sizeof(Hold) * (h->n_held + 1));
        if (!a)
                return -ENOMEM;
        h->held = a;
        x = (Hold) {
                .extension = strdup(extension),
                .reason = reason,
                .floor = versions_floor(in->versions, h->class, extension) ?
                         strdup(versions_floor(in->versions, h->class, extension)) : NULL,
                .active_version = active ? strdup(active) : NULL,
                .refused_version = refused_version ? strdup(refused_version) : NULL,
                .image = image ? strdup(image) : NULL,
                .detail = detail ? strdup(detail) : NULL,
                .kept = kept > 0,
        };
        (void) asprintf_safe(&x.override, "%s%s", reason == HOLD_DOWNGRADE || reason == HOLD_UNVERSIONED ?
                             "--allow-downgrade=" : "--remove=", extension);
        if (!x.extension || !x.override || (active && !x.active_version) || (refused_version && !x.refused_version) ||
            (image && !x.image) || (detail && !x.detail)) {
                hold_done(&x);
                return -ENOMEM;
        }
        h->held[h->n_held++] = x;
        return 0;
}

/* Anti-downgrade, part 1: is @img below its extension's floor? The reason, or -1. */
static int below_floor(const PlanInput *in, const Image *img) {
        const char *floor = versions_floor(in->versions, img->class, img->extension);

        if (!floor)
                return -1;
        if (!img->version)
                return HOLD_UNVERSIONED;
        return strverscmp_improved(img->version, floor) < 0 ? HOLD_DOWNGRADE : -1;
}

/* Every valid image carrying the hierarchy is a layer, unless its version is refused: then held back. */
static int collect_layers(const PlanInput *in, const PlanHierarchyInput *hin, HierarchyPlan *h,
                          char ***ret_refused) {
        _cleanup_strv_free_ char **refused = calloc(1, sizeof(char *));
        int r;

        if (!refused)
                return -ENOMEM;
        for (size_t i = 0; i < in->n_images; i++) {
                const Image *img = in->images[i];
                int reason;

                if (img->class != h->class || img->state != IMAGE_CANDIDATE || !img->valid ||
                    !image_carries(img, h->hierarchy))
                        continue;
                reason = below_floor(in, img);
                if (reason >= 0 && !allowed(in, img->extension)) {
                        if (strv_extend(&refused, img->extension) < 0)
                                return -ENOMEM;
                        continue;
                }
                if (reason >= 0 && !strv_contains(h->allowed, img->extension) &&
                    strv_extend(&h->allowed, img->extension) < 0)
                        return -ENOMEM;
                r = add_layer(h, (PlanLayer) { .image = img });
                if (r < 0)
                        return r;
        }
        /* Held back, each extension on its own, once its other images (if any) are known. */
        for (size_t i = 0; i < in->n_images; i++) {
                const Image *img = in->images[i];
                int reason;

                if (img->class != h->class || img->state != IMAGE_CANDIDATE || !img->valid ||
                    !image_carries(img, h->hierarchy) || !strv_contains(refused, img->extension))
                        continue;
                reason = below_floor(in, img);
                r = add_hold(h, in, hin, reason, img->extension, img->version, img->path, NULL);
                if (r < 0)
                        return r;
        }
        *ret_refused = TAKE_PTR(refused);
        return 0;
}

/* Is @extension one this hierarchy must not lose unasked? */
static bool protected_here(const PlanInput *in, const PlanHierarchyInput *hin, const HierarchyPlan *h,
                           const char *extension) {
        if (versions_protected(in->versions, h->class, extension, h->hierarchy, in->boot_id))
                return true;
        /* A format-1 versions.json recorded no protection: the current generation is what was active. */
        if (!in->versions->legacy || !keepable(hin))
                return false;
        for (size_t k = 0; k < hin->current->n_layers; k++)
                if (streq(hin->current->layers[k].extension, extension))
                        return true;
        return false;
}

/* Anti-downgrade, part 2: nothing protected here disappears unless asked for; otherwise held back. */
static int check_removal(const PlanInput *in, const PlanHierarchyInput *hin, HierarchyPlan *h,
                         char * const *refused, const char *extension) {
        const Image *img;

        if (has_layer_of(h, extension) || strv_contains(refused, extension) ||
            strv_contains(h->removed, extension) || !protected_here(in, hin, h, extension))
                return 0;
        if (strv_contains(in->remove, extension) || allowed(in, extension))
                return strv_extend(&h->removed, extension);

        img = find_image(in, h->class, extension);
        if (img && img->inspected && !img->valid)
                return add_hold(h, in, hin, HOLD_INVALID, extension, img->version, img->path, img->reason);
        if (img && img->state == IMAGE_CANDIDATE && img->valid)
                return add_hold(h, in, hin, HOLD_NOT_CARRIED, extension, NULL, img->path, NULL);
        return add_hold(h, in, hin, HOLD_GONE, extension, NULL, current_image(hin, extension), NULL);
}

static int check_removals(const PlanInput *in, const PlanHierarchyInput *hin, HierarchyPlan *h,
                          char * const *refused) {
        const Generation *g = keepable(hin);
        int r;

        for (size_t i = 0; i < in->versions->n_entries; i++) {
                const VersionEntry *e = &in->versions->entries[i];

                if (e->class != h->class)
                        continue;
                r = check_removal(in, hin, h, refused, e->extension);
                if (r < 0)
                        return r;
        }
        for (size_t k = 0; g && k < g->n_layers; k++) {
                r = check_removal(in, hin, h, refused, g->layers[k].extension);
                if (r < 0)
                        return r;
        }
        return 0;
}

bool layers_unchanged(const PlanLayer *layers, size_t n, const Generation *g) {
        if (!g || !g->merged || g->n_layers != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(plan_layer_name(&layers[i]), g->layers[i].name) ||
                    !streq_ptr(plan_layer_fingerprint(&layers[i]), g->layers[i].fingerprint))
                        return false;
        return true;
}

static int plan_unmerge(HierarchyPlan *h) {
        switch (h->live.top) {
        case TOP_OURS:
        case TOP_LOST:
                h->action = PLAN_UNMERGE;
                return 0;
        case TOP_BASE:
                h->action = PLAN_NOTHING;
                return set_reason(h, "not merged");
        case TOP_SYSTEMD:
                h->action = PLAN_NOTHING;
                return set_reason(h, "systemd-sysext's overlay is on top, not ours: left alone "
                                  "(use systemd-sysext unmerge)");
        case TOP_OTHER:
        case _TOP_KIND_MAX:
                break;
        }
        return refuse(h, -EBUSY, "something is mounted on top of our overlay at %s (%s); refusing to unmount it",
                      h->hierarchy, strna(h->live.description));
}

static Hold *held_out(const HierarchyPlan *h, const char *extension) {
        for (size_t i = 0; i < h->n_held; i++)
                if (!h->held[i].kept && streq(h->held[i].extension, extension))
                        return &h->held[i];
        return NULL;
}

/*
 * A held-back extension that is not staged any more cannot be put into a new
 * overlay, but the overlay in place still has it. If nothing else differs
 * from the current generation, keeping that overlay keeps it too, rather
 * than swapping it out for nothing. Then those holds are kept after all.
 */
static bool held_out_only(const PlanHierarchyInput *hin, HierarchyPlan *h) {
        const Generation *g = keepable(hin);
        size_t k = 0, out = 0;

        if (!g)
                return false;
        for (size_t i = 0; i < g->n_layers; i++) {
                if (held_out(h, g->layers[i].extension)) {
                        out++;
                        continue;
                }
                if (k >= h->n_layers || !streq(plan_layer_name(&h->layers[k]), g->layers[i].name) ||
                    !streq_ptr(plan_layer_fingerprint(&h->layers[k]), g->layers[i].fingerprint))
                        return false;
                k++;
        }
        if (out == 0 || k != h->n_layers)
                return false;
        for (size_t i = 0; i < g->n_layers; i++) {
                Hold *x = held_out(h, g->layers[i].extension);

                if (!x)
                        continue;
                x->kept = true;
                if (free_and_strdup(&x->active_version, g->layers[i].version) < 0)
                        return false;
        }
        return true;
}

static int plan_merge_or_refresh(const PlanInput *in, const PlanHierarchyInput *hin, HierarchyPlan *h) {
        _cleanup_strv_free_ char **refused = NULL;
        int r;

        if (h->live.top == TOP_OTHER)
                return refuse(h, -EBUSY, "something is mounted on top of our overlay at %s (%s); refusing to "
                              "swap beneath it", h->hierarchy, strna(h->live.description));
        if (in->verb == VERB_MERGE && h->live.top == TOP_OURS)
                return refuse(h, -EALREADY, "already merged (generation %" PRIu64 "); use refresh",
                              h->current ? h->current->number : 0);

        r = collect_layers(in, hin, h, &refused);
        if (r < 0)
                return r;
        r = check_removals(in, hin, h, refused);
        if (r < 0)
                return r;
        if (h->n_layers > 1)
                qsort(h->layers, h->n_layers, sizeof(PlanLayer), compare_layers);

        if (!in->always_refresh && held_out_only(hin, h)) {
                h->action = PLAN_KEEP;
                return set_reason(h, "nothing changed but what is held back; the overlay in place keeps it");
        }

        if (h->n_layers == 0) {
                if (h->live.top == TOP_OURS || h->live.top == TOP_LOST) {
                        h->action = PLAN_UNMERGE;
                        return set_reason(h, "no extensions left");
                }
                h->action = PLAN_NOTHING;
                return set_reason(h, h->live.top == TOP_SYSTEMD ? "no extensions for tuck; systemd-sysext's "
                                  "overlay left alone" : "no extensions");
        }

        switch (h->live.top) {
        case TOP_BASE:
                h->action = PLAN_MERGE;
                break;
        case TOP_SYSTEMD:
        case TOP_LOST:
                h->action = PLAN_TAKEOVER;
                break;
        case TOP_OURS:
                if (!in->always_refresh && layers_unchanged(h->layers, h->n_layers, h->current)) {
                        h->action = PLAN_KEEP;
                        return set_reason(h, "inputs unchanged (use --always-refresh to refresh anyway)");
                }
                h->action = PLAN_REFRESH;
                break;
        case TOP_OTHER:
        case _TOP_KIND_MAX:
                return -EINVAL;
        }
        return 0;
}

int plan_build(const PlanInput *in, Plan *ret) {
        Plan p = {};
        int r = 0;

        static const Versions no_versions = {};
        PlanInput input = *in;

        /* No versions.json yet is no floors. */
        if (!input.versions)
                input.versions = &no_versions;
        in = &input;
        p.verb = in->verb;
        p.boot_id = in->boot_id;
        p.hierarchies = calloc(in->n_hierarchies ?: 1, sizeof(HierarchyPlan));
        if (!p.hierarchies)
                return -ENOMEM;

        for (size_t i = 0; i < in->n_hierarchies; i++) {
                HierarchyPlan *h = &p.hierarchies[p.n_hierarchies++];

                h->hierarchy = strdup(in->hierarchies[i].hierarchy);
                h->class = in->hierarchies[i].class;
                h->current = in->hierarchies[i].current;
                h->live = in->hierarchies[i].live;
                h->live.description = in->hierarchies[i].live.description ?
                        strdup(in->hierarchies[i].live.description) : NULL;
                if (!h->hierarchy) {
                        r = -ENOMEM;
                        break;
                }
                r = in->verb == VERB_UNMERGE ? plan_unmerge(h) : plan_merge_or_refresh(in, &in->hierarchies[i], h);
                if (r < 0)
                        break;
        }
        if (r < 0) {
                plan_done(&p);
                return r;
        }
        *ret = p;
        return 0;
}

void plan_done(Plan *p) {
        for (size_t i = 0; i < p->n_hierarchies; i++) {
                free(p->hierarchies[i].hierarchy);
                free(p->hierarchies[i].reason);
                for (size_t k = 0; k < p->hierarchies[i].n_layers; k++)
                        if (p->hierarchies[i].layers[k].kept) {
                                layer_done(p->hierarchies[i].layers[k].kept);
                                free(p->hierarchies[i].layers[k].kept);
                        }
                free(p->hierarchies[i].layers);
                holds_free(p->hierarchies[i].held, p->hierarchies[i].n_held);
                strv_free(p->hierarchies[i].allowed);
                strv_free(p->hierarchies[i].removed);
                free(p->hierarchies[i].live.description);
        }
        free(p->hierarchies);
        *p = (Plan) {};
}

void plan_print(const Plan *p, FILE *f) {
        for (size_t i = 0; i < p->n_hierarchies; i++) {
                const HierarchyPlan *h = &p->hierarchies[i];

                fprintf(f, "%s (%s): %s, top is %s", h->hierarchy, image_class_to_string(h->class),
                        plan_action_to_string(h->action), top_kind_to_string(h->live.top));
                if (h->reason)
                        fprintf(f, " — %s", h->reason);
                fputc('\n', f);
                for (size_t k = h->n_layers; k > 0; k--)
                        fprintf(f, "  layer %zu: %s %s%s\n", k, plan_layer_name(&h->layers[k - 1]),
                                plan_layer_version(&h->layers[k - 1]) ?: "(unversioned)",
                                h->layers[k - 1].kept ? " (kept: held back)" : "");
                for (size_t k = 0; k < h->n_held; k++) {
                        _cleanup_free_ char *d = hold_describe(&h->held[k], h->hierarchy);

                        fprintf(f, "  held back: %s\n", strna(d));
                }
        }
}

json_object *plan_to_json(const Plan *p) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < p->n_hierarchies; i++) {
                const HierarchyPlan *h = &p->hierarchies[i];
                json_object *o = json_object_new_object(), *layers = json_object_new_array();

                json_object_object_add(o, "hierarchy", json_object_new_string(h->hierarchy));
                json_object_object_add(o, "class", json_object_new_string(image_class_to_string(h->class)));
                json_object_object_add(o, "action", json_object_new_string(plan_action_to_string(h->action)));
                json_object_object_add(o, "top", json_object_new_string(top_kind_to_string(h->live.top)));
                if (h->reason)
                        json_object_object_add(o, "reason", json_object_new_string(h->reason));
                for (size_t k = 0; k < h->n_layers; k++) {
                        json_object *l = json_object_new_object();

                        json_object_object_add(l, "name", json_object_new_string(plan_layer_name(&h->layers[k])));
                        if (plan_layer_version(&h->layers[k]))
                                json_object_object_add(l, "version",
                                                       json_object_new_string(plan_layer_version(&h->layers[k])));
                        json_object_object_add(l, "kept", json_object_new_boolean(h->layers[k].kept != NULL));
                        json_object_array_add(layers, l);
                }
                json_object_object_add(o, "layers", layers);
                json_object *held = json_object_new_array();

                for (size_t k = 0; k < h->n_held; k++)
                        json_object_array_add(held, hold_to_json(&h->held[k]));
                json_object_object_add(o, "held_back", held);
                json_object_array_add(a, o);
        }
        return a;
}

bool plan_activates(const HierarchyPlan *h) {
        switch (h->action) {
        case PLAN_KEEP:
        case PLAN_MERGE:
        case PLAN_REFRESH:
        case PLAN_TAKEOVER:
                return true;
        case PLAN_NOTHING:
        case PLAN_UNMERGE:
        case PLAN_REFUSE:
        case _PLAN_ACTION_MAX:
                break;
        }
        return false;
}

/* Does @img live in a runtime search directory (below /run), gone at every boot? */
static bool image_is_runtime(const Image *img) {
        const char *rest = img->search_dir ? startswith(img->search_dir, "/run") : NULL;

        return rest && (*rest == '/' || *rest == 0);
}

/* One hierarchy done as planned: its floors follow its layers, its requested removals unprotect. */
static int hierarchy_versions_after(const HierarchyPlan *h, Versions *v, uint64_t when_usec, const char *via,
                                    const char *boot_id) {
        int r;

        if (h->action == PLAN_REFUSE)
                return 0;
        for (size_t i = 0; plan_activates(h) && i < h->n_layers; i++) {
                const PlanLayer *l = &h->layers[i];
                const char *extension = plan_layer_extension(l), *version = plan_layer_version(l);

                const char *floor = versions_floor(v, h->class, extension);

                /* Below the floor (as it is now: another hierarchy may have moved it already). */
                if (l->image && strv_contains(h->allowed, extension) && floor &&
                    (!version || strverscmp_improved(version, floor) < 0)) {
                        r = versions_allow(v, h->class, extension, version, when_usec, via);
                        if (r < 0)
                                return r;
                }
                r = versions_activate(v, h->class, extension, h->hierarchy, version, when_usec, via);
                /* A kept (held back) layer keeps what its image was. */
                if (r >= 0 && l->image)
                        r = versions_set_runtime_boot(v, h->class, extension,
                                                      image_is_runtime(l->image) ? boot_id : NULL);
                if (r < 0)
                        return r;
        }
        STRV_FOREACH(x, h->removed) {
                r = versions_unprotect(v, h->class, *x, h->hierarchy);
                if (r < 0)
                        return r;
        }
        return 0;
}

int plan_versions_after(const Plan *p, const Versions *old, const bool *done, uint64_t when_usec,
                        const char *via, Versions *ret) {
        Versions v;
        int r;

        r = versions_copy(&v, old);
        if (r < 0)
                return r;
        /* Written as format 2 from now on: what this run activates is protected. */
        v.legacy = p->verb == VERB_UNMERGE && old->legacy;
        for (size_t i = 0; p->verb != VERB_UNMERGE && i < p->n_hierarchies; i++) {
                if (done && !done[i])
                        continue;
                r = hierarchy_versions_after(&p->hierarchies[i], &v, when_usec, via, p->boot_id);
                if (r < 0) {
                        versions_done(&v);
                        return r;
                }
        }
        *ret = v;
        return 0;
}
