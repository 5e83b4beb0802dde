/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <systemd/sd-bus.h>
#include <systemd/sd-event.h>

#include "engine.h"
#include "heal.h"
#include "tuck-bus.h"
#include "tuckd-conf.h"


typedef struct Hierarchy {
        const char *path;
        EngineGeneration current;
        EngineHold *held;               /* held back now, as its record says */
        size_t n_held;
        bool logged;                    /* this run's change is logged already */
} Hierarchy;

/* An answer to Status or List, kept (tuckd(8) "STATUS AND LIST"). */
typedef struct JsonCache {
        char *json;
        char *error;                    /* why it could not be made */
        int result;
        uint64_t usec;                  /* CLOCK_MONOTONIC when made; 0: none */
} JsonCache;

/* Status is made again when asked for if older than this; List after every verb. */
#define STATUS_CACHE_USEC (5 * USEC_PER_SEC)

typedef struct Manager {
        sd_event *event;
        sd_bus *bus;
        sd_event_source *refresh_timer;
        sd_event_source **watches;
        sd_event_source *rewatch;
        sd_event_source *bus_retry;
        size_t n_watches;

        char *root;
        char *config_path;
        DaemonConfig config;
        Engine *engine;

        Hierarchy *hierarchies;
        size_t n_hierarchies;

        EngineVerb running_verb;        /* while manager_run() runs */
        const char *running_trigger;

        uint64_t burst_start_usec;      /* first change of the pending burst, 0 = none */
        uint64_t refresh_count;         /* verbs run (merge/refresh/unmerge), any outcome */
        uint64_t swap_count;            /* of those, how many changed a generation */
        uint64_t heal_count;            /* namespaces healed */
        char *failure;                  /* why the last verb failed (not a hold), for STATUS= */

        JsonCache status, list;

        uint64_t watchdog_usec;         /* WATCHDOG_USEC=, 0: no watchdog */
        uint64_t watchdog_last;         /* when we last said WATCHDOG=1 ourselves */
} Manager;

int manager_new(const char *root, const char *config_path, Manager **ret);
Manager *manager_free(Manager *m);

int manager_start(Manager *m);                  /* recover, adopt, watch, bus */
int manager_reload(Manager *m);                 /* SIGHUP: re-read config, re-watch, refresh */

/*
 * Run a verb now: snapshot namespaces, run it, heal or report, log, signal.
 * @ret_error gets the reason of a failure (owned).
 */
int manager_run(Manager *m, EngineVerb verb, const EngineRequest *req, const char *trigger, char **ret_error);

/* Degraded: an extension is held back somewhere, or the last verb failed. */
bool manager_degraded(const Manager *m);

/* A change in an image directory: refresh after the quiet period. */
void manager_schedule_refresh(Manager *m, const char *why);

void manager_notify_status(Manager *m);

/*
 * Status and List as JSON, for any caller: no lock, no mount, no scan per
 * call. Status is made at most every STATUS_CACHE_USEC (and after a verb);
 * List is made after every verb, by root's refresh, and answered from there.
 */
int manager_status_json(Manager *m, const char **ret_json, const char **ret_error);
int manager_list_json(Manager *m, const char **ret_json, const char **ret_error);

/* While a verb waits on other namespaces: WATCHDOG=1, at most every quarter of the interval. */
void manager_keepalive(void *userdata);

/* watch.c */
int manager_watch_images(Manager *m);
void manager_unwatch_images(Manager *m);
/* 1 if an image file is open for writing (path in *ret_path), else 0. */
int manager_images_busy(Manager *m, char **ret_path);

/* bus-manager.c */
int manager_connect_bus(Manager *m);
int manager_emit_generation_changed(Manager *m, const char *hierarchy, uint64_t old_gen, uint64_t new_gen);
int manager_emit_namespace(Manager *m, const char *hierarchy, const HealReport *r, const char *outcome);
/* PropertiesChanged for the properties every verb and heal may change. */
void manager_emit_counters(Manager *m);
/* PropertiesChanged for Degraded and HeldBack. */
void manager_emit_held_back(Manager *m);

/* log-journal.c: one structured journal entry per event, plus the readable line. */
void log_event(const char *message_id, int priority, const char *fields[], const char *format, ...)
        __attribute__((format(printf, 4, 5)));
void log_setup_journal(void);

#define MESSAGE_ID_MERGED    "e33a64a37fdd4ed08461ec5fc4eab05a"
#define MESSAGE_ID_REFRESHED "422132a242a0458bba8d9dc325bf0e2f"
#define MESSAGE_ID_REFUSED   "a5c9fd731e88490fbc12620ea801653d"
#define MESSAGE_ID_HEALED    "e31ca6970a1d42cdb02b12431d3ab01e"
#define MESSAGE_ID_STALE     "5caeb1603632417eb7da23c50dbef12a"
#define MESSAGE_ID_UNMERGED  "51afd983890a42cea6d171ad651bd37a"
#define MESSAGE_ID_HELD_BACK "cc103ed6317642e082c5c2967f86e900"

static inline void manager_freep(Manager **m) {
        manager_free(*m);
}
