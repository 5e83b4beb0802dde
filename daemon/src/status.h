/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * status and list: what is merged where, which namespaces do not see it, and
 * which images were found and why each is (not) usable. Both are structures
 * the caller prints as text or JSON (tuckctl status/list, tuckd).
 */

#include <json-c/json.h>
#include <stdbool.h>
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
        bool inspected;              /* images were mounted and validated (root only) */
} ImageList;

/*
 * Discovers every image of the classes @o selects. As root, inspects each
 * (mounting .raw images detached, under the lock); otherwise reads what is
 * recorded only: no lock, nothing mounted, an image known by its generation
 * record if it is active. On failure *ret_error says why.
 */
int tuck_list(TuckContext *c, const TuckOptions *o, ImageList **ret, char **ret_error);
ImageList *image_list_free(ImageList *l);
/* tuck's text; @legend: the column header. */
void image_list_print(const ImageList *l, bool legend, FILE *f);
/* systemd-sysext's table: NAME TYPE PATH TIME. */
void image_list_print_table(const ImageList *l, bool legend, FILE *f);
/* systemd-sysext's shape: [{"name","type":"raw"|"directory","path","time"}, ...] plus tuck's keys. */
json_object *image_list_to_json(const ImageList *l);

typedef struct HierarchyStatus {
        const TuckHierarchy *hierarchy;
        Generation generation;       /* number 0: never merged since boot */
        char *record_error;          /* its record cannot be used: why (then generation is empty) */
        bool on_top;                 /* our overlay is the top mount here */
        uint64_t attr;               /* flags of the top mount here now */
        char **foreign;              /* systemd-sysext's overlay on top: the extensions its metadata lists */
        uint64_t foreign_since_usec;
        bool scanned;                /* namespaces were scanned (root only) */
        NamespaceView *views;        /* every namespace of the root (nsscan.h) */
        size_t n_views;
} HierarchyStatus;

typedef struct Status {
        HierarchyStatus *hierarchies;    /* those of the selected classes that exist, sorted by path */
        size_t n_hierarchies;
        int beneath;                 /* MOVE_MOUNT_BENEATH: 1 yes, 0 no, <0 unknown (or not root) */
        int staging_mounts;          /* mounts in the staging namespace, <0 if there is none (or not root) */
        bool privileged;             /* root: probed, counted and scanned; else what is recorded only */
} Status;

/* Never takes the lock; as non-root never mounts, probes or scans namespaces either. */
int tuck_status(TuckContext *c, const TuckOptions *o, Status **ret);
/* Is an extension held back somewhere (or a record unusable)? Then `tuckctl status` exits 3. */
bool status_degraded(const Status *s);
Status *status_free(Status *s);
/* tuck's text. */
void status_print(const Status *s, FILE *f);
/* systemd-sysext's table: HIERARCHY EXTENSIONS SINCE. */
void status_print_table(const Status *s, bool legend, FILE *f);
/* systemd-sysext's shape: [{"hierarchy","extensions": [...] | "none","since"}, ...] plus tuck's keys. */
json_object *status_to_json(const Status *s);
