/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The plan: what a merge, refresh or unmerge will do to each hierarchy,
 * decided from the images found, the current generations, what is mounted on
 * top of each hierarchy now, the version high-water marks and the options.
 * plan_build() makes no system calls: it can be printed, and unit-tested
 * without privileges.
 *
 * Policy, per hierarchy:
 *   - every valid image of the class that carries the hierarchy is a layer,
 *     ordered by strverscmp_improved() of its name (last = top);
 *   - an invalid image is reported and left out, the rest go ahead;
 *   - anti-downgrade: a layer older than its extension's high-water mark, or
 *     without a version while one is recorded, is refused; an extension in
 *     the current generation that would be dropped (its image gone or now
 *     invalid) is refused unless its removal was requested (--remove=NAME);
 *     --allow-downgrade permits both. A refused hierarchy keeps its current
 *     generation; the other hierarchies go ahead.
 *   - unchanged inputs (same layers, same image fingerprints, our overlay
 *     still on top) are a no-op unless --always-refresh.
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "image.h"
#include "state.h"

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

typedef struct HierarchyPlan {
        char *hierarchy;     /* "/usr" (no root prefix) */
        ImageClass class;
        PlanAction action;
        int error;           /* for PLAN_REFUSE: -EPERM (policy), -EBUSY, ... */
        char *reason;
        Image **layers;      /* borrowed, bottom to top */
        size_t n_layers;
        const Generation *current;   /* borrowed, NULL if never merged */
        LiveState live;
} HierarchyPlan;

typedef struct PlanHierarchyInput {
        const char *hierarchy;
        ImageClass class;
        const Generation *current;
        LiveState live;
} PlanHierarchyInput;

typedef struct PlanInput {
        TuckVerb verb;
        Image * const *images;       /* discovered and validated, all classes */
        size_t n_images;
        const PlanHierarchyInput *hierarchies;
        size_t n_hierarchies;
        json_object *versions;       /* high-water marks */
        bool always_refresh;         /* refresh even if unchanged */
        bool allow_downgrade;
        char * const *remove;        /* extensions whose removal was requested */
} PlanInput;

typedef struct Plan {
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

/* Do these layers equal the generation's (names, fingerprints, order)? */
bool layers_unchanged(Image * const *layers, size_t n, const Generation *g);
