/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The boundary between tuckd and libtuck's refresh logic: the same plain
 * functions tuckctl's verbs call, wrapped in the few shapes the daemon needs.
 * engine.c is the only tuckd file that knows libtuck's core API.
 */

#include <stdint.h>
#include <sys/types.h>

typedef struct Engine Engine;

typedef enum EngineVerb {
        ENGINE_MERGE,
        ENGINE_REFRESH,
        ENGINE_UNMERGE,
        _ENGINE_VERB_MAX,
} EngineVerb;

/* Flags of the D-Bus methods and tuckctl options alike. */
#define ENGINE_FORCE           (UINT64_C(1) << 0)       /* --force: refresh even if unchanged */
#define ENGINE_ALLOW_DOWNGRADE (UINT64_C(1) << 1)       /* --allow-downgrade */
#define _ENGINE_FLAGS_ALL      (ENGINE_FORCE | ENGINE_ALLOW_DOWNGRADE)

/* One hierarchy's current generation as the host sees it. */
typedef struct EngineGeneration {
        uint64_t generation;    /* 0: nothing merged (the base) */
        dev_t dev;              /* st_dev at the hierarchy: the overlay's, or the base's */
} EngineGeneration;

const char *engine_verb_to_string(EngineVerb v);

/* @root: "/" on a real host, a prefix for tests; @config: tuck.conf path. */
int engine_new(const char *root, const char *config, Engine **ret);
Engine *engine_free(Engine *e);

/* Hierarchy paths (root prefix applied), stable for the engine's life. */
size_t engine_hierarchies(Engine *e, const char *const **ret);

/* Image directories to watch (root prefix applied). */
size_t engine_image_dirs(Engine *e, const char *const **ret);

int engine_generation(Engine *e, size_t hierarchy, EngineGeneration *ret);

/*
 * Overlays of @hierarchy that earlier generations used (newest first), which
 * namespaces left behind may still show. Returns how many were stored.
 */
size_t engine_past_devs(Engine *e, size_t hierarchy, dev_t *devs, size_t max);

/* One hierarchy's swap, as the hooks see it. */
typedef struct EngineSwap {
        size_t hierarchy;       /* index into engine_hierarchies() */
        const char *path;       /* with the root prefix */
        uint64_t generation;    /* the new one */
        dev_t old_dev;          /* the top being replaced (0: first merge) */
        dev_t new_dev;
        uint64_t attr;          /* MOUNT_ATTR_* of the new overlay */
        int fd;                 /* after: O_PATH fd of the new top */
} EngineSwap;

typedef struct EngineHooks {
        void (*before_swap)(const EngineSwap *s, void *userdata);
        void (*after_swap)(const EngineSwap *s, void *userdata);
        void *userdata;
} EngineHooks;

/*
 * Run a verb on every hierarchy, calling @hooks around each swap. Returns >0
 * if something changed, 0 if nothing needed doing, <0 if a hierarchy failed
 * or was refused (others may have changed), with the reasons in @ret_error
 * (owned; free() it).
 */
int engine_run(Engine *e, EngineVerb verb, uint64_t flags, const EngineHooks *hooks, char **ret_error);

/* tuckctl status --json / list --json, as one string each. */
int engine_status_json(Engine *e, char **ret);
int engine_list_json(Engine *e, char **ret);

/* On start: adopt what is mounted, clean staging a killed refresh left. */
int engine_recover(Engine *e);
