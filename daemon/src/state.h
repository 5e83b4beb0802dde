/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What tuck remembers, as JSON files:
 *
 *   /run/tuck/generations/<hierarchy>.json   one per hierarchy: the current
 *       generation (number, layers with versions, since when, the overlay's
 *       identity) and the overlays it replaced. tuckd and the namespace scan
 *       read it. Lost on reboot, like the mounts it describes.
 *   /run/tuck/staging.json   which image is mounted where in the staging
 *       namespace, so unchanged images keep their mounts across refreshes.
 *   /var/lib/tuck/versions.json   each extension's version floor, the
 *       decision behind it and where it is protected from removal; survives
 *       reboots (versions.h).
 *
 * A file that cannot be read or has the wrong shape is an error that names
 * it and says what is wrong (the *_load() functions fill ret_error); every
 * one is written temp + fsync + rename + fsync(dir).
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "image-class.h"
#include "json-util.h"
#include "macro.h"
#include "versions.h"

typedef struct Layer {
        char *name;          /* image name */
        char *extension;     /* identity for versions */
        char *version;       /* NULL: unversioned */
        char *image;         /* path it was activated from */
        char *fingerprint;
        /* What its release file asks of the service manager when it enters, changes or
         * leaves (reload.h): kept so a removal knows what the image said. */
        bool reload_manager;             /* EXTENSION_RELOAD_MANAGER=1 */
        char **restart_units;            /* EXTENSION_RESTART_UNITS= */
        char **reload_or_restart_units;  /* EXTENSION_RELOAD_OR_RESTART_UNITS= */
} Layer;

#define GENERATION_HISTORY_MAX 64

typedef struct PastOverlay {
        uint64_t number;
        dev_t dev;
} PastOverlay;

typedef struct Generation {
        char *hierarchy;     /* "/usr", without the root prefix */
        ImageClass class;
        bool merged;         /* false after unmerge: the number still counts on */
        uint64_t number;
        uint64_t since_usec; /* CLOCK_REALTIME */
        dev_t overlay_dev;   /* st_dev of the overlay: the same in every namespace */
        uint64_t overlay_mnt_id;   /* its mount ID in the namespace that made it */
        dev_t base_dev;      /* st_dev of the base hierarchy below it */
        uint64_t attr;       /* MOUNT_ATTR_* set on the overlay */
        bool window;         /* installed with --allow-window (unmount, then mount) */
        Layer *layers;       /* bottom to top */
        size_t n_layers;
        PastOverlay *history;    /* older overlays, newest first */
        size_t n_history;
        Hold *held;          /* extensions held back in this hierarchy now */
        size_t n_held;
} Generation;

void layer_done(Layer *l);
/* A deep copy; -ENOMEM leaves *dst done. */
int layer_copy(Layer *dst, const Layer *src);
void generation_done(Generation *g);
Generation *generation_free(Generation *g);
DEFINE_TRIVIAL_CLEANUP_FUNC(Generation *, generation_free);

/*
 * The history once @old is replaced or unmounted: its own overlay (if
 * merged) first, then its history, at most GENERATION_HISTORY_MAX (the
 * oldest go).
 */
int generation_history_after(const Generation *old, PastOverlay **ret, size_t *ret_n);

/* File-name form of a hierarchy: "/usr/local" -> "usr-local". */
char *hierarchy_id(const char *hierarchy);

json_object *generation_to_json(const Generation *g);
int generation_from_json(json_object *o, Generation *ret, char **ret_error);
/* <run_dir>/generations/<id>.json */
char *generation_path(const char *run_dir, const char *hierarchy);
/* -ENOENT if the hierarchy was never merged since boot; other errors say why in *ret_error. */
int generation_load(const char *run_dir, const char *hierarchy, Generation *ret, char **ret_error);
int generation_save(const char *run_dir, const Generation *g);

/* Images mounted in the staging namespace. */
typedef struct StagedImage {
        unsigned id;         /* mounted at i/<id> */
        ImageClass class;
        char *path;
        char *fingerprint;
        char *loop;          /* "/dev/loopN" or NULL for directories */
        bool usr_root;       /* a DDI's usr partition: its root is /usr itself, not the image's / */
        bool used;           /* transient: referenced by a current generation */
} StagedImage;

typedef struct StagingTable {
        uint64_t ns_ino;     /* the staging namespace this table describes */
        unsigned next_id;
        StagedImage *images;
        size_t n_images;
} StagingTable;

void staging_table_done(StagingTable *t);
/* None is an empty table; a bad one is an error with the reason in *ret_error. */
int staging_table_load(const char *run_dir, StagingTable *ret, char **ret_error);
int staging_table_save(const char *run_dir, const StagingTable *t);
StagedImage *staging_table_find(StagingTable *t, ImageClass c, const char *fingerprint);
int staging_table_add(StagingTable *t, ImageClass c, const char *path, const char *fingerprint,
                      const char *loop, bool usr_root, unsigned *ret_id);
void staging_table_remove(StagingTable *t, unsigned id);
