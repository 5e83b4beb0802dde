/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * libtuck's public API: what tuckctl's verbs and tuckd's D-Bus methods call.
 * Each verb is one plain function that takes a context and options and
 * returns a structured report the caller prints as text or JSON.
 *
 *   TuckContext *c;
 *   tuck_context_new("/", NULL, &c, &error);
 *   Report *report;
 *   r = tuck_refresh(c, &(TuckOptions) { .always_refresh = true }, &report);
 *   report_print(report, stdout);
 *
 * Return values: <0 failure (some hierarchy failed or was refused; the report
 * says which and why, and those hierarchies still have their previous
 * generation), 0 nothing changed, >0 something changed.
 *
 * Callers must be single-threaded (the staging namespace is entered with
 * setns()) and root.
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "image-class.h"
#include "report.h"
#include "state.h"

typedef struct TuckContext TuckContext;

typedef struct TuckHierarchy {
        char *path;          /* "/usr": as configured (canonical), without the root prefix */
        char *full;          /* where it is mounted here: root prefix applied, symlinks
                              * resolved inside the root (/opt -> var/opt) */
        char *id;            /* "usr": file and directory name form */
        ImageClass class;
} TuckHierarchy;

/* Called around each swap (tuckd heals namespaces with these). */
typedef struct TuckSwapEvent {
        const TuckHierarchy *hierarchy;
        uint64_t generation;     /* the new generation's number */
        dev_t old_dev;           /* st_dev of the top being replaced (0 on first merge) */
        dev_t new_dev;           /* st_dev of the new overlay */
        uint64_t attr;           /* MOUNT_ATTR_* of the new overlay */
        int fd;                  /* before: the detached new tree; after: O_PATH fd of the new top */
        bool window;             /* the swap opened a window (--allow-window) */
} TuckSwapEvent;

typedef struct TuckHooks {
        /* Before the swap; a negative return aborts this hierarchy's swap (nothing changed). */
        int (*before_swap)(const TuckSwapEvent *e, void *userdata);
        /* After the swap and the generation record. */
        void (*after_swap)(const TuckSwapEvent *e, void *userdata);
        /* Often (at least every 100 ms) while a scan or a heal waits on someone else's
         * namespace, within the run's budget: tuckd feeds its watchdog here. */
        void (*keepalive)(void *userdata);
        void *userdata;
} TuckHooks;

typedef struct TuckOptions {
        unsigned classes;        /* 1 << IMAGE_SYSEXT | 1 << IMAGE_CONFEXT; 0 means both */
        bool always_refresh;     /* refresh even if inputs are unchanged (--always-refresh) */
        bool ignore_release;     /* --force: merge extensions whose release file does not
                                  * match the host (ID, VERSION_ID, *_LEVEL, ARCHITECTURE, SCOPE) */
        bool no_reload;          /* --no-reload: no manager reload, no unit restarts */
        bool allow_downgrade;    /* older versions and unrequested removals, every extension */
        char **allow_downgrade_names;   /* the same for these extensions only */
        bool allow_window;       /* without MOVE_MOUNT_BENEATH: unmount, then mount */
        bool no_block;           /* fail with -EBUSY instead of waiting for the lock */
        char **remove;           /* extensions whose removal is requested */
        const StalePolicy *stale_policy;   /* NULL: tuck.conf's StalePolicy= */
        const TuckHooks *hooks;
        /* Who asks, recorded with each decision (versions.json): "tuckctl refresh --allow-downgrade=foo". */
        const char *via;
} TuckOptions;

/* root: "/" on a real host or a prefix (tests); config: NULL for <root>/etc/tuck/tuck.conf. */
int tuck_context_new(const char *root, const char *config, TuckContext **ret, char **ret_error);
TuckContext *tuck_context_free(TuckContext *c);
/*
 * Re-read tuck.conf's policy (StalePolicy=, RestartUnits=, [Policy], [Scan],
 * ImagePolicy=)
 * into @c; search directories and hierarchies stay as they were. On failure
 * @c is unchanged.
 */
int tuck_context_reload_policy(TuckContext *c, char **ret_error);
/* What every wait on other namespaces calls when no TuckHooks.keepalive is given (status, list). */
void tuck_context_set_keepalive(TuckContext *c, void (*keepalive)(void *userdata), void *userdata);

const char *tuck_context_root(const TuckContext *c);
const char *tuck_context_run_dir(const TuckContext *c);       /* <root>/run/tuck */
const char *tuck_context_state_dir(const TuckContext *c);     /* <root>/var/lib/tuck */
size_t tuck_context_hierarchies(const TuckContext *c, const TuckHierarchy **ret);
/* Every search directory of every class, root prefix applied (to watch). */
char * const *tuck_context_image_dirs(const TuckContext *c);

int tuck_merge(TuckContext *c, const TuckOptions *o, Report **ret);
int tuck_refresh(TuckContext *c, const TuckOptions *o, Report **ret);
int tuck_unmerge(TuckContext *c, const TuckOptions *o, Report **ret);

/* The current generation record of a hierarchy (-ENOENT: never merged since boot). */
int tuck_generation(TuckContext *c, const TuckHierarchy *h, Generation *ret);

/* The lock every operation holds: flock() on /run/tuck/lock. */
int tuck_lock(TuckContext *c, bool block);
void tuck_unlock(TuckContext *c);

/* Does the kernel have MOVE_MOUNT_BENEATH? (probed once per process) */
int tuck_beneath_supported(TuckContext *c);

/* Mounts in the staging namespace (-ENOENT: none exists yet). Does not create it. */
int tuck_staging_mounts(TuckContext *c);

/*
 * After a crash: unmount staged overlays left half-assembled and images no
 * generation uses. Takes the lock.
 */
int tuck_recover(TuckContext *c);
