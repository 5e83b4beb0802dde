/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>

#include "plan.h"
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

static int collect_layers(const PlanInput *in, HierarchyPlan *h) {
        for (size_t i = 0; i < in->n_images; i++) {
                Image *img = in->images[i];
                Image **a;

                if (img->class != h->class || img->state != IMAGE_CANDIDATE || !img->valid ||
                    !image_carries(img, h->hierarchy))
                        continue;
                a = realloc(h->layers, sizeof(Image *) * (h->n_layers + 1));
                if (!a)
                        return -ENOMEM;
                h->layers = a;
                h->layers[h->n_layers++] = img;
        }
        images_sort(h->layers, h->n_layers);
        return 0;
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

static const Image *find_layer(const HierarchyPlan *h, const char *extension) {
        for (size_t i = 0; i < h->n_layers; i++)
                if (streq_ptr(h->layers[i]->extension, extension))
                        return h->layers[i];
        return NULL;
}

/* Anti-downgrade, part 1: no layer older than what was ever active. */
static int check_versions(const PlanInput *in, HierarchyPlan *h) {
        for (size_t i = 0; i < h->n_layers; i++) {
                const Image *img = h->layers[i];
                const char *hw = versions_get(in->versions, h->class, img->extension);

                if (!hw || in->allow_downgrade)
                        continue;
                if (!img->version)
                        return refuse(h, -EPERM, "extension '%s' has no version (image '%s'), but version %s was "
                                      "active before: cannot prove it is not a downgrade; refusing (use "
                                      "--allow-downgrade to override)", img->extension, img->path, hw);
                if (strverscmp_improved(img->version, hw) < 0)
                        return refuse(h, -EPERM, "extension '%s' would be downgraded from %s to %s (image '%s'); "
                                      "refusing (use --allow-downgrade to override)", img->extension, hw,
                                      img->version, img->path);
        }
        return 0;
}

/* Anti-downgrade, part 2: nothing active disappears unless asked for. */
static int check_removals(const PlanInput *in, HierarchyPlan *h) {
        const Generation *g = h->current;

        if (!g || !g->merged || h->live.top != TOP_OURS)
                return 0;
        for (size_t i = 0; i < g->n_layers; i++) {
                const Layer *l = &g->layers[i];
                const Image *img;

                if (find_layer(h, l->extension) || in->allow_downgrade || strv_contains(in->remove, l->extension))
                        continue;
                img = find_image(in, h->class, l->extension);
                if (img && img->inspected && !img->valid)
                        return refuse(h, -EPERM, "extension '%s' (active, version %s) would be dropped: its image "
                                      "'%s' is not valid: %s; refusing (use --remove=%s or --allow-downgrade)",
                                      l->extension, strna(l->version), img->path, strna(img->reason),
                                      l->extension);
                if (img && img->state == IMAGE_CANDIDATE && img->valid)
                        return refuse(h, -EPERM, "extension '%s' (active, version %s) would be dropped: its image "
                                      "'%s' no longer carries %s; refusing (use --remove=%s or --allow-downgrade)",
                                      l->extension, strna(l->version), img->path, h->hierarchy,
                                      l->extension);
                return refuse(h, -EPERM, "extension '%s' (active, version %s) would be dropped: its image is "
                              "gone (was '%s'); refusing (use --remove=%s or --allow-downgrade)",
                              l->extension, strna(l->version), strna(l->image), l->extension);
        }
        return 0;
}

bool layers_unchanged(Image * const *layers, size_t n, const Generation *g) {
        if (!g || !g->merged || g->n_layers != n)
                return false;
        for (size_t i = 0; i < n; i++)
                if (!streq(layers[i]->name, g->layers[i].name) ||
                    !streq_ptr(layers[i]->fingerprint, g->layers[i].fingerprint))
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

static int plan_merge_or_refresh(const PlanInput *in, HierarchyPlan *h) {
        int r;

        r = collect_layers(in, h);
        if (r < 0)
                return r;

        if (h->live.top == TOP_OTHER)
                return refuse(h, -EBUSY, "something is mounted on top of our overlay at %s (%s); refusing to "
                              "swap beneath it", h->hierarchy, strna(h->live.description));
        if (in->verb == VERB_MERGE && h->live.top == TOP_OURS)
                return refuse(h, -EALREADY, "already merged (generation %" PRIu64 "); use refresh",
                              h->current ? h->current->number : 0);

        r = check_versions(in, h);
        if (r < 0 || h->action == PLAN_REFUSE)
                return r;
        r = check_removals(in, h);
        if (r < 0 || h->action == PLAN_REFUSE)
                return r;

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
                r = in->verb == VERB_UNMERGE ? plan_unmerge(h) : plan_merge_or_refresh(in, h);
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
                free(p->hierarchies[i].layers);
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
                        fprintf(f, "  layer %zu: %s %s\n", k, h->layers[k - 1]->name,
                                h->layers[k - 1]->version ?: "(unversioned)");
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

                        json_object_object_add(l, "name", json_object_new_string(h->layers[k]->name));
                        if (h->layers[k]->version)
                                json_object_object_add(l, "version", json_object_new_string(h->layers[k]->version));
                        json_object_array_add(layers, l);
                }
                json_object_object_add(o, "layers", layers);
                json_object_array_add(a, o);
        }
        return a;
}
