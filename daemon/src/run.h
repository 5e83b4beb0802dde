/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * One run of merge, refresh, unmerge, recover or list: the state its steps
 * share. The steps are in refresh.c (the recipe), crash recovery in
 * recover.c; the observation of what is on top of a hierarchy, which needs
 * none of this, in observe.c. libtuck-internal.
 */

#include <json-c/json.h>
#include <stdbool.h>

#include "context.h"
#include "extension-release.h"
#include "image.h"
#include "plan.h"
#include "reload.h"
#include "report.h"
#include "staging.h"
#include "state.h"
#include "versions.h"

typedef struct Inspected {
        int mount_fd;        /* a new image, mounted detached, not yet staged */
        char *loop;
        unsigned staged_id;  /* already in the staging namespace at i/<id> */
} Inspected;

typedef struct Run {
        TuckContext *c;
        const TuckOptions *o;
        TuckVerb verb;
        Report *report;
        HostRelease host;
        Staging staging;
        StagingTable table;
        TrustCache trust;            /* the images' directories, walked once a run (trust.h) */
        Versions versions;           /* the floors as read (merge and refresh) */
        Versions written;            /* the floors in versions.json now */
        int floors_unsaved;          /* <0: the floors this run allows could not be written */
        Image **images;
        size_t n_images;
        Inspected *inspected;        /* parallel to images */
        Generation *generations;     /* parallel to c->hierarchies; number 0 if none */
        char **record_errors;        /* parallel to c->hierarchies: why its record is unusable */
        PlanHierarchyInput *inputs;
        size_t n_inputs;
        size_t *input_index;         /* input -> index in c->hierarchies */
        bool **staged;               /* per input: which current layers are still staged */
        Plan plan;
        bool listing;                /* tuck_list(): look, never change the staging namespace */
        int beneath;                 /* -1: not probed yet */
        ManagerRequest manager;      /* what the swaps ask of the service manager */
        ScanBudget budget;           /* every scan and heal of the run (nsscan.h) */
} Run;

Run run_new(TuckContext *c, TuckVerb verb, const TuckOptions *o, Report *report);
/* Frees what the run holds and releases the lock. */
void run_done(Run *run);
bool class_selected(const TuckOptions *o, ImageClass k);

/* 0. prepare: the lock, the staging namespace and its table, what is recorded. */
int run_prepare(Run *run);
/* 3. observe: each selected hierarchy's generation record and what is on top now. */
int run_observe(Run *run);
/* 6. collect: unmount staged images that no merged generation uses. */
int run_collect(Run *run);

/* recover.c: finish the swaps a killed run left half done (0. prepare, and tuck_recover()). */
int run_finish_interrupted_swaps(Run *run);
