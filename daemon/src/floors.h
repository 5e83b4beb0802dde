/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * `tuckctl versions` and `tuckctl forget` (and tuckd's Versions and Forget):
 * each extension's version floor, the decision behind it, where it is
 * protected from removal, and what is active and held back now; and the one
 * deliberate way to retire an extension's floor.
 */

#include <json-c/json.h>
#include <stdio.h>

#include "state.h"
#include "tuck.h"
#include "versions.h"

typedef struct VersionsView {
        char *path;                  /* <state_dir>/versions.json */
        Versions versions;
        const TuckHierarchy *hierarchies;
        Generation *generations;     /* parallel to hierarchies; empty if none or unusable */
        size_t n_hierarchies;
} VersionsView;

/* Reads versions.json and the generation records. A bad versions.json is an error (in *ret_error). */
int tuck_versions(TuckContext *c, const TuckOptions *o, VersionsView **ret, char **ret_error);
VersionsView *versions_view_free(VersionsView *v);
void versions_view_print(const VersionsView *v, FILE *f);
json_object *versions_view_to_json(const VersionsView *v);

/*
 * Retires extensions: their floors and removal protection go (versions.json,
 * under the lock). -ENOENT if one has no entry (nothing is changed then).
 * *ret_message says what was forgotten, and what is still active.
 */
int tuck_forget(TuckContext *c, const TuckOptions *o, char * const *names, char **ret_message);
