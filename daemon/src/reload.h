/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * After the swap: what the service manager is asked to do, as
 * systemd-sysext asks it, for the extensions the refresh changed.
 *
 *   EXTENSION_RELOAD_MANAGER=1            daemon-reload (systemd 255)
 *   EXTENSION_RESTART_UNITS="a.service"   restart them (systemd 262): the new
 *                                          binaries run; a unit that is gone
 *                                          (its extension left) is stopped
 *   EXTENSION_RELOAD_OR_RESTART_UNITS=... reload or restart them; a unit in
 *                                          both lists is only restarted
 *
 * Listing units implies the daemon-reload: a unit an extension ships, or
 * took away, is otherwise unknown to the manager (systemd 262 does the same).
 *
 * Unlike systemd-sysext, which acts on every extension merged after each
 * merge, tuck acts on those that changed in this swap only: an extension
 * that entered, whose image changed, or that left (its record says what its
 * release file asked). An unchanged one is left alone, so a refresh that
 * updates one extension restarts that extension's units, not everybody's.
 *
 * Skipped with --no-reload, with ReloadManager=no (tuck.conf(5)), and below
 * a --root other than "/" unless ReloadManager=yes (the host's manager has
 * no business with a test tree's units; systemd-sysext: --root implies
 * --no-reload).
 */

#include <stdbool.h>

#include "report.h"
#include "state.h"

typedef struct ManagerRequest {
        bool reload;                 /* daemon-reload */
        char **asked_by;             /* the extensions that ask, for the report */
        char **restart;              /* units, unique, sorted */
        char **reload_or_restart;    /* units, unique, sorted, none of them in restart */
} ManagerRequest;

void manager_request_done(ManagerRequest *m);

/*
 * The fields of a release file into @l. An invalid boolean or unit name is
 * logged (a warning naming the extension) and left out, as systemd-sysext
 * does.
 */
int layer_set_manager_fields(Layer *l, char * const *release);

/* Is @s a unit name systemd accepts here ("foo.service", "foo@bar.service"; no template)? */
bool unit_name_is_valid(const char *s);

/*
 * What a swap from @old to @new asks: the layers that entered or changed
 * (another fingerprint) from @new, those that left from @old. @old NULL: a
 * first merge. @preserved: extension names already merged by someone else
 * (systemd-sysext's overlay that tuck takes over): not new.
 */
int manager_request_add_swap(ManagerRequest *m, const Generation *old, const Generation *new,
                             char * const *preserved);

/* Everything @g had: it is unmerged. */
int manager_request_add_all(ManagerRequest *m, const Generation *g);

/* Carries @m out: as root over PID 1's own socket (also at boot, before the bus), else the system bus. */
void manager_request_execute(const ManagerRequest *m, ManagerReport *ret);
