/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The result of a merge, refresh or unmerge: per hierarchy what happened and
 * why, plus warnings (images skipped and why). Printed as text by tuckctl,
 * as JSON by tuckctl --json and tuckd.
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "heal.h"
#include "image-class.h"
#include "state.h"
#include "versions.h"

typedef enum Outcome {
        OUTCOME_NOTHING,     /* nothing merged, nothing to merge */
        OUTCOME_UNCHANGED,   /* inputs unchanged: no-op */
        OUTCOME_MERGED,
        OUTCOME_REFRESHED,
        OUTCOME_TAKEN_OVER,  /* replaced systemd-sysext's overlay */
        OUTCOME_UNMERGED,
        OUTCOME_REFUSED,     /* policy or state: old generation kept */
        OUTCOME_FAILED,      /* an error before the swap: old generation kept */
        _OUTCOME_MAX,
} Outcome;

typedef struct HierarchyReport {
        char *hierarchy;
        ImageClass class;
        Outcome outcome;
        int error;                   /* negative errno for REFUSED/FAILED */
        char *message;
        uint64_t old_generation;
        uint64_t new_generation;
        Layer *layers;               /* the generation now in place, bottom to top */
        size_t n_layers;
        bool window;                 /* the swap opened a window (--allow-window) */
        Hold *held;                  /* extensions held back (the rest went ahead) */
        size_t n_held;
        HealReport *namespaces;      /* namespaces that did not follow, and what became of them */
        size_t n_namespaces;
        unsigned pinned;             /* namespaces pinned so the swap could not loosen them */
} HierarchyReport;

/* What the service manager was asked after the swaps (reload.h). */
typedef struct ManagerReport {
        char **asked_by;             /* extensions that changed and ask for a reload or restarts */
        char *skipped;               /* why nothing was asked (--no-reload, ...), or NULL */
        bool reloaded;               /* daemon-reload done */
        char **restarted;            /* RestartUnit() */
        char **reloaded_or_restarted;/* ReloadOrRestartUnit() */
        char **stopped;              /* StopUnit(): the unit was gone */
        char **failed;               /* "foo.service: why", "daemon-reload: why" */
} ManagerReport;

typedef struct Report {
        const char *verb;
        HierarchyReport *hierarchies;
        size_t n_hierarchies;
        char **warnings;             /* images skipped, and other things to know */
        int error;                   /* a failure before any hierarchy was looked at */
        char *message;
        ManagerReport manager;
} Report;

const char *outcome_to_string(Outcome o);

Report *report_new(const char *verb);
Report *report_free(Report *r);
DEFINE_TRIVIAL_CLEANUP_FUNC(Report *, report_free);
#define _cleanup_report_ _cleanup_(report_freep)

HierarchyReport *report_add(Report *r, const char *hierarchy, ImageClass c);
int report_warn(Report *r, const char *fmt, ...) _printf_(2, 3);
int report_set_error(Report *r, int error, const char *fmt, ...) _printf_(3, 4);
int hierarchy_report_set(HierarchyReport *h, Outcome o, int error, const char *fmt, ...) _printf_(4, 5);
/* The layers of the generation in place (none if it is not merged). */
int hierarchy_report_set_layers(HierarchyReport *h, const Generation *g);

/* <0: the first error; >0 something changed; 0 nothing changed. */
int report_result(const Report *r);
/* What a failed operation tells its caller, whether tuckctl ran it or tuckd:
 * -EBUSY (the lock, --no-block), -EOPNOTSUPP (a hierarchy needed
 * MOVE_MOUNT_BENEATH), -EPERM (a hierarchy refused by policy), -EIO for any
 * other failure; 0 if nothing failed. */
int report_error(const Report *r);
bool report_changed(const Report *r);

void report_print(const Report *r, FILE *f);
json_object *report_to_json(const Report *r);
