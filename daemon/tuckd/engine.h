/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The boundary between tuckd and libtuck's refresh logic: the same plain
 * functions tuckctl's verbs call, wrapped in the few shapes the daemon needs.
 * engine.c is the only tuckd file that knows libtuck's core API.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "heal.h"
#include "tuck-bus.h"

typedef struct Engine Engine;

typedef enum EngineVerb {
        ENGINE_MERGE,
        ENGINE_REFRESH,
        ENGINE_UNMERGE,
        _ENGINE_VERB_MAX,
} EngineVerb;

/* What a verb is asked to do, by a D-Bus call or tuckd itself. */
typedef struct EngineRequest {
        uint64_t flags;         /* TUCK_BUS_FLAG_* (tuck-bus.h), the D-Bus methods' and tuckctl's options alike */
        char **allow_downgrade; /* --allow-downgrade=NAME: these extensions may go down or away */
        char **remove;          /* --remove=NAME */
        const char *via;        /* who asked, recorded with each decision ("D-Bus RefreshEx, uid 0, ...") */
} EngineRequest;

/* An extension held back in a hierarchy (libtuck's Hold, flattened to strings for the bus). */
typedef struct EngineHold {
        char *extension;
        char *reason;           /* "downgrade", "unversioned", "invalid", "gone", "not-carried" */
        char *active_version;   /* what stays ("" if it stays out) */
        char *refused_version;  /* "" if none */
        char *override;         /* "--allow-downgrade=foo", "--remove=foo" */
        char *headline;         /* "foo held back (downgrade 2.0 → 1.0 not allowed)" */
        char *message;          /* the whole sentence */
} EngineHold;

void engine_holds_free(EngineHold *h, size_t n);
/* An extension name as libtuck accepts it ([A-Za-z0-9._-], not starting with '.'). */
bool engine_name_is_valid(const char *name);

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
/* What is held back in the hierarchy now, as its record says (none: 0). */
int engine_held_back(Engine *e, size_t hierarchy, EngineHold **ret, size_t *ret_n);

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
        /* Once the verb is done: each namespace that did not follow, and what became of it. */
        void (*namespace)(size_t hierarchy, uint64_t generation, const HealReport *r, void *userdata);
        /* Once the verb is done: each extension it held back. */
        void (*held_back)(size_t hierarchy, const EngineHold *h, void *userdata);
        /* Often, while a scan or heal waits on other namespaces (TuckHooks.keepalive). */
        void (*keepalive)(void *userdata);
        void *userdata;
} EngineHooks;

/*
 * Run a verb on every hierarchy, calling @hooks around each swap, with
 * @policy for the namespaces that do not follow (libtuck does what it says,
 * as for tuckctl). Returns >0 if something changed, 0 if nothing needed
 * doing, <0 if a hierarchy failed or was refused (others may have changed),
 * with the reasons in @ret_error (owned; free() it). *@ret_failed: something
 * failed or was refused that leaves the host behind (not a hold, those are
 * in the records; not a verb asked at the wrong time, Merge when merged).
 */
int engine_run(Engine *e, EngineVerb verb, const EngineRequest *req, StalePolicy policy, const EngineHooks *hooks,
               char **ret_error, bool *ret_failed);

/* tuckctl status --json / list --json / versions --json, as one string each; on failure maybe a reason (owned). */
int engine_status_json(Engine *e, char **ret, char **ret_error);
int engine_list_json(Engine *e, char **ret, char **ret_error);
int engine_versions_json(Engine *e, char **ret, char **ret_error);

/* tuckctl forget NAME...: *ret_message says what was forgotten, or why not. */
int engine_forget(Engine *e, char * const *names, char **ret_message);

/* SIGHUP: tuck.conf's policy again (AllowDowngrade=, StalePolicy=, RestartUnits=, [Scan]); not the directories. */
int engine_reload(Engine *e);

/* Called while any scan waits (Status too), whatever the verb's hooks say. */
void engine_set_keepalive(Engine *e, void (*keepalive)(void *userdata), void *userdata);

/* Does the kernel have MOVE_MOUNT_BENEATH? Probed once (a scratch namespace), then remembered. */
int engine_probe(Engine *e);

/* On start: adopt what is mounted, clean staging a killed refresh left. */
int engine_recover(Engine *e);
