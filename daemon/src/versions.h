/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Version floors and the decisions behind them (DESIGN.md "Versions:
 * floors, holds and rollbacks"), kept in /var/lib/tuck/versions.json:
 *
 *   {
 *     "format": 2,
 *     "sysext": {
 *       "foo": {
 *         "floor": "1.0",
 *         "decision": { "kind": "downgrade-allowed", "version": "1.0",
 *                       "previous_floor": "2.0", "when_usec": 1796...,
 *                       "via": "tuckctl refresh --allow-downgrade=foo" },
 *         "protected_in": [ "/usr" ],
 *         "runtime_boot": "6f3c…"
 *       }
 *     },
 *     "confext": { ... }
 *   }
 *
 * The floor of an extension is the oldest version that may be activated
 * without a new decision: the highest version ever activated, or the older
 * one an operator allowed since (--allow-downgrade[=NAME]); a newer version
 * activated later raises it again and the decision is spent. protected_in
 * lists the hierarchies the extension is active in: its image may not leave
 * them unless asked (--remove=NAME), across reboots; runtime_boot, when
 * the image last activated lived in a runtime search directory (below
 * /run, gone at every boot by definition), is the kernel's boot ID of that
 * boot, and the protection holds in that boot only. `tuckctl forget`
 * drops the entry. The format-1 file ({"sysext": {"foo": "1.2"}}) is read
 * as floors without decisions or protection.
 *
 * Everything here is pure data: the plan (plan.c) decides, refresh.c saves
 * (before the swap the new state allows).
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>

#include "image-class.h"
#include "macro.h"

typedef enum DecisionKind {
        DECISION_ACTIVATED,          /* the floor is a version activated */
        DECISION_DOWNGRADE_ALLOWED,  /* an operator accepted an older version */
        _DECISION_KIND_MAX,
        _DECISION_KIND_INVALID = -EINVAL,
} DecisionKind;

typedef struct Decision {
        DecisionKind kind;
        char *version;               /* the version decided on (NULL: unversioned) */
        char *previous_floor;        /* downgrade-allowed: the floor it replaced */
        uint64_t when_usec;          /* CLOCK_REALTIME; 0: not known (format 1) */
        char *via;                   /* "tuckctl refresh --allow-downgrade=foo", "D-Bus RefreshEx ..." */
} Decision;

typedef struct VersionEntry {
        ImageClass class;
        char *extension;
        char *floor;                 /* NULL: no floor (only unversioned images so far, or allowed) */
        Decision decision;
        char **protected_in;         /* hierarchies it is active in (removal protection) */
        char *runtime_boot;          /* its image is a runtime one (/run): protected in this boot only */
} VersionEntry;

typedef struct Versions {
        VersionEntry *entries;
        size_t n_entries;
        bool legacy;                 /* read from a format-1 file: no protection recorded yet */
} Versions;

const char *decision_kind_to_string(DecisionKind k);
DecisionKind decision_kind_from_string(const char *s);

void versions_done(Versions *v);
int versions_copy(Versions *dst, const Versions *src);
bool versions_equal(const Versions *a, const Versions *b);

VersionEntry *versions_find(const Versions *v, ImageClass c, const char *extension);
/* The floor of an extension, NULL if it has none. */
const char *versions_floor(const Versions *v, ImageClass c, const char *extension);
/* Protected in @hierarchy in the boot @boot_id (NULL: whatever the boot)? */
bool versions_protected(const Versions *v, ImageClass c, const char *extension, const char *hierarchy,
                        const char *boot_id);

/* The hierarchy runs @version of @extension: the floor rises to it if it is higher; protected there. */
int versions_activate(Versions *v, ImageClass c, const char *extension, const char *hierarchy,
                      const char *version, uint64_t when_usec, const char *via);
/* Its image, last activated, is a runtime one of boot @boot_id (NULL: a persistent one). */
int versions_set_runtime_boot(Versions *v, ImageClass c, const char *extension, const char *boot_id);
/* The operator accepted @version (NULL: unversioned) below the floor: the floor goes down to it. */
int versions_allow(Versions *v, ImageClass c, const char *extension, const char *version,
                   uint64_t when_usec, const char *via);
/* The extension left @hierarchy on request: no longer protected there (the floor stays). */
int versions_unprotect(Versions *v, ImageClass c, const char *extension, const char *hierarchy);
/* Drops the extension's floor and protection. -ENOENT if there is none. */
int versions_forget(Versions *v, ImageClass c, const char *extension);

json_object *versions_to_json(const Versions *v);
/* -EBADMSG with *ret_error ("sysext.foo.floor: a number, expected a string") for a bad shape. */
int versions_from_json(json_object *o, Versions *ret, char **ret_error);
json_object *decision_to_json(const Decision *d);

/* <state_dir>/versions.json; none is an empty set. Errors name what is wrong, not the file. */
int versions_load(const char *state_dir, Versions *ret, char **ret_error);
/* Written temp + fsync + rename + fsync(dir): the old file or the new, never a mix. */
int versions_save(const char *state_dir, const Versions *v);

/*
 * An extension held back: the plan refused its image (a downgrade, an
 * unversioned image over a floor) or the image of an extension that is
 * protected in the hierarchy is gone, invalid or no longer carries it. It
 * keeps its current layer if that is still staged, and stays out otherwise;
 * every other extension of the hierarchy goes ahead. Recorded in the
 * generation record, so `tuckctl status`, tuckd's STATUS= and its HeldBack
 * property say so until it is resolved.
 */
typedef enum HoldReason {
        HOLD_DOWNGRADE,              /* the image's version is below the floor */
        HOLD_UNVERSIONED,            /* the image has no version, and there is a floor */
        HOLD_INVALID,                /* the image of a protected extension is not valid */
        HOLD_GONE,                   /* the image of a protected extension is gone */
        HOLD_NOT_CARRIED,            /* its image no longer carries the hierarchy */
        _HOLD_REASON_MAX,
        _HOLD_REASON_INVALID = -EINVAL,
} HoldReason;

typedef struct Hold {
        char *extension;
        HoldReason reason;
        char *floor;                 /* the floor at the time */
        char *active_version;        /* the version that stays (kept), or NULL */
        char *refused_version;       /* the version refused (downgrade), or NULL */
        char *image;                 /* the image refused, or the one that was active */
        char *detail;                /* why the image is not valid */
        bool kept;                   /* its current layer stays in the hierarchy */
        char *override;              /* "--allow-downgrade=foo", "--remove=foo" */
} Hold;

const char *hold_reason_to_string(HoldReason r);
HoldReason hold_reason_from_string(const char *s);
void hold_done(Hold *h);
void holds_free(Hold *h, size_t n);
int holds_copy(const Hold *src, size_t n, Hold **ret);
bool holds_equal(const Hold *a, size_t n_a, const Hold *b, size_t n_b);
/* "downgrade 2.0 → 1.0 not allowed", "image gone" */
char *hold_summary(const Hold *h, const char *hierarchy);
/* "foo held back (downgrade 2.0 → 1.0 not allowed)": for STATUS= and `tuckctl status`. */
char *hold_headline(const Hold *h, const char *hierarchy);
/* The whole sentence: what is refused, what stays, the override. */
char *hold_describe(const Hold *h, const char *hierarchy);
json_object *hold_to_json(const Hold *h);
int hold_from_json(json_object *o, Hold *ret, char **ret_error);

/* "downgrade from 2.0 allowed 2026-12-04 01:20:33 UTC (tuckctl refresh --allow-downgrade=foo)" */
char *decision_describe(const Decision *d);
