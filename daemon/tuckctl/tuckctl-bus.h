/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * tuckctl's way to tuckd: when tuckd owns org.tuck1 on the system bus, the
 * mutating verbs go through it (so they serialize with its own refreshes,
 * and namespaces that do not follow are healed by its policy); otherwise
 * tuckctl does the work itself, with the same libtuck functions.
 */

#include <stdbool.h>
#include <stdint.h>

#include "tuck.h"

/*
 * Is tuckd running (its name owned on the system bus)? Never for a --root
 * other than "/": a test tree is not the host's. Returns 1, 0, or <0 if the
 * bus could not be asked (then the caller works directly).
 */
int tuckctl_bus_available(const char *root);

/*
 * Runs @verb ("merge", "refresh", "unmerge") through tuckd's MergeEx,
 * RefreshEx or UnmergeEx with @o's flags, --allow-downgrade=NAME and
 * --remove=NAME, and o->via as the command recorded with a decision. Prints
 * what happened (unless @quiet) and returns >0 if a generation changed, 0 if
 * there was nothing to do, <0 with the daemon's reason logged.
 */
int tuckctl_bus_run(const char *verb, const TuckOptions *o, bool quiet);

/* Status() or List() of tuckd: the same JSON as --json, printed to stdout. */
int tuckctl_bus_json(const char *method);

/*
 * tuckctl's hook: run @verb through tuckd if it runs for @root and @o says
 * nothing D-Bus cannot carry (--allow-window), and no
 * $SYSTEMD_*_HIERARCHIES chooses other hierarchies than tuckd's;
 * @json also means direct (tuckd answers with a boolean, not a report).
 * Sets *ret_handled; when true, the return value is the verb's result.
 */
int tuckctl_bus_try(const char *verb, const char *root, const TuckOptions *o, bool json, bool quiet,
                    bool *ret_handled);
