/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The plan: what a merge, refresh or unmerge will do to each hierarchy,
 * decided from the images found, the current generations, what is mounted on
 * top of each hierarchy now, the version floors (versions.h) and the
 * options. plan_build() makes no system calls: it can be printed, and
 * unit-tested without privileges.
 *
 * Policy, per hierarchy:
 *   - every valid image of the class that carries the hierarchy is a layer,
 *     ordered by strverscmp_improved() of its name (last = top);
 *   - an invalid image is reported and left out, the rest go ahead;
 *   - anti-downgrade, per extension: an image older than its extension's
 *     floor, or without a version while there is a floor, is refused, and
 *     so is the loss of an extension protected in the hierarchy (its image
 *     gone, invalid, or no longer carrying it) unless its removal was
 *     requested (--remove=NAME). A refused extension is *held back alone*:
 *     its layer of the current generation stays if it is still staged (the
 *     staged mount of the image that was active, whatever the file on disk
 *     holds now), and it stays out otherwise; every other extension of the
 *     hierarchy goes ahead in the same swap. --allow-downgrade permits it for
 *     all extensions, --allow-downgrade=NAME for one; what was allowed is in
 *     the plan, for the floors to follow (plan_versions_after());
 *   - unchanged inputs (same layers, same image fingerprints, our overlay
 *     still on top) are a no-op unless --always-refresh;
 *   - something else on top of our overlay refuses the hierarchy; the
 *     others go ahead.
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "image.h"
#include "state.h"
#include "versions.h"

typedef enum TuckVerb {
        VERB_MERGE,
        VERB_REFRESH,
        VERB_UNMERGE,
        _VERB_MAX,
} TuckVerb;

/* What is mounted on top of a hierarchy now. */
typedef enum TopKind {
        TOP_BASE,            /* no overlay of ours or systemd's: the base itself */
        TOP_OURS,            /* our current generation's overlay */
        TOP_SYSTEMD,         /* systemd-sysext/confext's overlay (we take it over) */
        TOP_LOST,            /* an overlay of ours without a record (a run killed after
                              * its swap): replaced like systemd's, unmerged like ours */
        TOP_OTHER,           /* something else sits on our overlay: we do not touch it */
        _TOP_KIND_MAX,
} TopKind;

typedef struct LiveState {
        TopKind top;
        uint64_t top_mnt_id;
        dev_t top_dev;
        uint64_t attr;       /* MOUNT_ATTR_* of the top now (never loosened) */
        char *description;   /* "overlay 'sysext' (mount 123)" for messages */
} LiveState;

typedef enum PlanAction {
        PLAN_NOTHING,        /* nothing merged and nothing to merge */
        PLAN_KEEP,           /* inputs unchanged */
        PLAN_MERGE,          /* first merge: attach on top of the base */
        PLAN_REFRESH,        /* beneath swap under our overlay */
        PLAN_TAKEOVER,       /* beneath swap under systemd-sysext's overlay */
        PLAN_UNMERGE,        /* unmount our overlay */
        PLAN_REFUSE,
        _PLAN_ACTION_MAX,
} PlanAction;

/* A layer of the new generation: an image found now, or a layer of the current one kept. */
typedef struct PlanLayer {
        const Image *image;          /* borrowed; NULL for a kept layer */
        Layer *kept;                 /* a copy of the current generation's layer: held back */
} PlanLayer;

const char *plan_layer_name(const PlanLayer *l);
const char *plan_layer_extension(const PlanLayer *l);
const char *plan_layer_version(const PlanLayer *l);
const char *plan_layer_fingerprint(const PlanLayer *l);
/* The layer as a generation record has it (a deep copy). */
int plan_layer_to_layer(const PlanLayer *l, Layer *ret);

typedef struct HierarchyPlan {
        char *hierarchy;     /* "/usr" (no root prefix) */
        ImageClass class;
        PlanAction action;
        int error;           /* for PLAN_REFUSE: -EPERM (policy), -EBUSY, ... */
        char *reason;
        PlanLayer *layers;   /* bottom to top */
        size_t n_layers;
        Hold *held;          /* extensions held back */
        size_t n_held;
        char **allowed;      /* extensions activated below their floor, as allowed */
        char **removed;      /* protected extensions that leave, as requested or allowed */
        const Generation *current;   /* borrowed, NULL if never merged (stale once swapped) */
        LiveState live;
} HierarchyPlan;

typedef struct PlanHierarchyInput {
        const char *hierarchy;
        ImageClass class;
        const Generation *current;
        const bool *staged;          /* parallel to current->layers: its image is still staged */
        LiveState live;
} PlanHierarchyInput;

typedef struct PlanInput {
        TuckVerb verb;
        Image * const *images;       /* discovered and validated, all classes */
        size_t n_images;
        const PlanHierarchyInput *hierarchies;
        size_t n_hierarchies;
        const Versions *versions;    /* floors and protection */
        bool always_refresh;         /* refresh even if unchanged */
        bool allow_downgrade;        /* every extension (and unrequested removals) */
        char * const *allow_downgrade_names;   /* these extensions only */
        char * const *remove;        /* extensions whose removal was requested */
        const char *boot_id;         /* the kernel's boot ID: a runtime image's protection is this boot's */
} PlanInput;

typedef struct Plan {
        TuckVerb verb;
        const char *boot_id;         /* the input's (not owned) */
        HierarchyPlan *hierarchies;
        size_t n_hierarchies;
} Plan;

const char *plan_action_to_string(PlanAction a);
const char *top_kind_to_string(TopKind k);
const char *verb_to_string(TuckVerb v);

int plan_build(const PlanInput *in, Plan *ret);
void plan_done(Plan *p);
void plan_print(const Plan *p, FILE *f);
json_object *plan_to_json(const Plan *p);

/* Does this hierarchy's plan put layers in place (swap or keep)? */
bool plan_activates(const HierarchyPlan *h);

/*
 * The floors and protection once the hierarchies marked in @done (parallel
 * to p->hierarchies; NULL: every one) are done as planned: each layer in
 * place is activated (a higher version raises its floor), each one allowed
 * below its floor records the decision (@when_usec, @via), each requested
 * removal drops the protection. An unmerge changes nothing.
 */
int plan_versions_after(const Plan *p, const Versions *old, const bool *done, uint64_t when_usec,
                        const char *via, Versions *ret);

/* Do these layers equal the generation's (names, fingerprints, order)? */
bool layers_unchanged(const PlanLayer *layers, size_t n, const Generation *g);
