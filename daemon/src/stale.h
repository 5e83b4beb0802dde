/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Step 7 of the refresh (DESIGN.md): the mount namespaces that did not
 * follow a swap, and what tuck.conf's StalePolicy= says to do with them:
 * heal (enter the namespace and do the same beneath swap there, keeping its
 * flags), report, or restart the unit that owns it. It is part of the
 * refresh itself, so `tuckctl refresh` working without tuckd and tuckd's
 * Refresh do the same: refresh.c takes a snapshot before each swap (and
 * pins namespaces the swap would loosen), handles the namespaces after it,
 * and once more for every merged hierarchy that did not change, which picks
 * up what a killed run or StalePolicy=report left behind.
 *
 * A namespace counts as behind when its top at the hierarchy is one of our
 * overlays of an earlier generation (by st_dev, from the generation record).
 * An overlay nobody holds any more frees its device number, and the kernel
 * hands it to the next anonymous mount (a service's TemporaryFileSystem=, a
 * container's own overlay): so a view on such a device must also be an
 * overlay by the name we (or systemd-sysext, taken over) mount them with,
 * or it is not ours and is left alone (nsscan.c checks; tuckctl-heal.sh
 * forges the collision). When tuck takes systemd-sysext's
 * overlay over, namespaces may show any of systemd-sysext's earlier ones
 * (its refresh leaves containers behind too): then every namespace is
 * looked at, and one on an overlay of systemd-sysext's is behind.
 *
 * What a namespace wants (its flags before any swap loosened them) is kept
 * in /run/tuck/namespaces/<hierarchy>.json, so a namespace loosened while
 * the policy was report gets its flags back once it is heal, whichever of
 * tuckctl and tuckd runs then:
 *
 *   { "<mnt ns inode>": { "attr": MOUNT_ATTR_*, "pid": PID, "start_time": TICKS }, ... }
 *
 * The inode number alone does not name a namespace across runs: once a
 * namespace is gone the kernel hands its number to the next one made
 * (proc_alloc_inum(), lowest free first), so a restarted service could be
 * given the nosuid of the namespace that had its number before, or lose
 * its own. Each entry therefore names a witness, a process that was in the
 * namespace when the entry was written, by pid and start time
 * (/proc/PID/stat field 22, clock ticks since boot; a reused pid has
 * another). An entry applies only while its witness still runs, with that
 * start time, in a namespace of that inode; otherwise it is dropped and the
 * namespace keeps the flags it has now (logged at debug level). Entries of
 * the older form, "<mnt ns inode>": MOUNT_ATTR_*, have no witness and are
 * dropped the same way. The same check applies to the snapshot taken
 * before a swap.
 */

#include <json-c/json.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "config.h"
#include "heal.h"
#include "state.h"

typedef struct StaleHierarchy {
        const char *root;            /* tuck's root prefix ("/" on a host) */
        const char *path;            /* the hierarchy, root prefix applied */
        const char *run_dir;         /* <root>/run/tuck: the namespaces' wishes */
        const char *id;              /* file-name form of the hierarchy */
        ImageClass class;
        StalePolicy policy;
        char * const *restart_units; /* RestartUnits=: the only units StalePolicy=restart restarts */
        bool foreign;                /* the swap takes systemd-sysext's overlay over: any
                                      * namespace still on one of its overlays is behind */
        const Generation *generation;  /* the record now in place (stale_handle(): the no-op skip) */
        ScanBudget *budget;          /* the run's (nsscan.h) */
} StaleHierarchy;

/* What was seen before a swap. */
typedef struct StaleSnapshot {
        NamespaceView *views;
        NsWant *wants;               /* what each of @views wants, with its witness */
        uint64_t *pins;              /* each view's pin (its mount ID there), 0: none */
        size_t n_views;
        int pinned;                  /* namespaces pinned so the swap cannot loosen them */
        NsFollowers followers;       /* those that followed, for the scan after the swap (nsscan.h) */
} StaleSnapshot;

void stale_snapshot_done(StaleSnapshot *s);

/*
 * The st_devs of our overlays of a hierarchy that namespaces may still
 * show: the record's overlay and its history, and @replaced (the top a swap
 * replaces, which may be systemd-sysext's). At most @max.
 */
size_t stale_ours(const Generation *g, dev_t replaced, dev_t *devs, size_t max);

/*
 * Before a swap whose new overlay gets @new_attr: every namespace that sees
 * one of @ours, with the flags it wants; under heal, those the swap would
 * loosen are pinned (heal_pin_loosenable()).
 */
int stale_before_swap(const StaleHierarchy *h, const dev_t *ours, size_t n_ours, uint64_t new_attr,
                      StaleSnapshot *ret);

/* The swap did not happen after all: the pins stale_before_swap() made go again. */
void stale_unpin(const StaleHierarchy *h, StaleSnapshot *s);

/*
 * After a swap (@before from stale_before_swap()), or without one (@before
 * NULL): the namespaces that show one of @ours but not the hierarchy's top
 * now, or lost flags, handled by the policy. Every one is returned, with its
 * outcome in words; healed ones have result 0. The followers of @before are
 * taken over (its descriptors are spent).
 */
int stale_handle(const StaleHierarchy *h, const dev_t *ours, size_t n_ours, StaleSnapshot *before,
                 HealReport **ret, size_t *ret_n);

/*
 * StalePolicy=restart: may the unit owning @v be restarted? Only a system
 * service named in @allowed (RestartUnits=) whose process is no user's: a
 * process below user@UID.service belongs to that user's manager, whatever
 * its unit is called there. 1 yes, 0 no with *ret_reason (static text)
 * saying why not.
 */
int stale_restart_allowed(const NamespaceView *v, char * const *allowed, const char **ret_reason);

/*
 * The no-op skip. A hierarchy whose last complete scan (after the swap that
 * made generation @g, or a later one) left no namespace behind need not be
 * scanned again while @g is still in place with the same top: a namespace
 * falls behind only when a swap leaves it on the old overlay, or when it is
 * made as a copy of one that is behind, and there was none. Recorded in
 * <run_dir>/namespaces/<id>.clean as { "generation": N, "dev": D, "mnt_id": M,
 * "wishes": W, "ours": O }: with the wishes file as that scan left it and the
 * devices it looked for (@ours) by checksum, since both are its inputs too.
 */
bool stale_scan_needed(const StaleHierarchy *h, const Generation *g, dev_t top_dev, uint64_t top_mnt_id,
                       const dev_t *ours, size_t n_ours);

/* ---- what namespaces want (see above); pure but for ns_witness_read() and ns_witness_check() */

/* Entries of a wishes file, both forms; the older form without a witness. -EBADMSG if not one. */
int ns_wants_from_json(json_object *o, NsWant **ret, size_t *ret_n);
/* The wishes file's object: entries without a witness are left out (they could not be confirmed). */
json_object *ns_wants_to_json(const NsWant *w, size_t n);

/* Is @w's witness still a process in the namespace of inode @w->ns_ino, started at @w->start_time? */
typedef bool (*NsWitnessCheck)(const NsWant *w, void *userdata);

/*
 * Keep the entries of @w whose witness @check confirms, in order, and drop
 * the others (and those without one). Returns how many are kept.
 */
size_t ns_wants_confirm(NsWant *w, size_t n, NsWitnessCheck check, void *userdata);

/* The flags recorded for namespace @ns_ino in @w (confirmed), 0 if none. */
uint64_t ns_wanted(const NsWant *w, size_t n, uint64_t ns_ino);

/* The start time of a process, field 22 of its /proc/PID/stat text @stat. -EBADMSG if malformed. */
int proc_stat_start_time(const char *stat, uint64_t *ret);

/* PID's mount namespace inode and start time, both read from the one process (-ESRCH: gone). */
int ns_witness_read(pid_t pid, uint64_t *ret_ns_ino, uint64_t *ret_start_time);

/* The NsWitnessCheck of a real machine, through /proc. */
bool ns_witness_check(const NsWant *w, void *userdata);
