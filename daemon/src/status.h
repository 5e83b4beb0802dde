/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * status and list: what is merged where, which namespaces do not see it, and
 * which images were found and why each is (not) usable. Both are structures
 * the caller prints as text or JSON (tuckctl status/list, tuckd).
 */

#include <json-c/json.h>
#include <stdio.h>

#include "image.h"
#include "nsscan.h"
#include "state.h"
#include "tuck.h"

typedef struct ImageList {
        Image **images;
        size_t n_images;
        Generation *generations;     /* per hierarchy, to mark active images */
        size_t n_generations;
} ImageList;

/* Discovers and inspects (mounting .raw images detached) every image. On failure *ret_error says why. */
int tuck_list(TuckContext *c, const TuckOptions *o, ImageList **ret, char **ret_error);
ImageList *image_list_free(ImageList *l);
void image_list_print(const ImageList *l, FILE *f);
json_object *image_list_to_json(const ImageList *l);

typedef struct HierarchyStatus {
        const TuckHierarchy *hierarchy;
        Generation generation;       /* number 0: never merged since boot */
        char *record_error;          /* its record cannot be used: why (then generation is empty) */
        bool on_top;                 /* our overlay is the top mount here */
        uint64_t attr;               /* flags of the top mount here now */
        NamespaceView *views;        /* every namespace of the root (nsscan.h) */
        size_t n_views;
} HierarchyStatus;

typedef struct Status {
        HierarchyStatus *hierarchies;
        size_t n_hierarchies;
        int beneath;                 /* MOVE_MOUNT_BENEATH: 1 yes, 0 no, <0 unknown */
        int staging_mounts;          /* mounts in the staging namespace, <0 if there is none */
} Status;

int tuck_status(TuckContext *c, Status **ret);
/* Is an extension held back somewhere (or a record unusable)? Then `tuckctl status` exits 3. */
bool status_degraded(const Status *s);
Status *status_free(Status *s);
void status_print(const Status *s, FILE *f);
json_object *status_to_json(const Status *s);
