/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The [Daemon] section of tuck.conf(5). Other sections (image directories,
 * policy) belong to libtuck and are ignored here.
 */

#include <stdbool.h>
#include <stdint.h>

#include "config.h"
#include "heal.h"

typedef struct DaemonConfig {
        bool watch;                     /* Watch=: refresh when image directories change */
        uint64_t quiet_usec;            /* QuietPeriodSec=: refresh this long after the last change */
        uint64_t max_delay_usec;        /* MaxDelaySec=: ...but no later than this after the first */
        StalePolicy stale_policy;       /* StalePolicy=: heal, report, restart */
} DaemonConfig;

#define DAEMON_CONFIG_DEFAULT                                   \
        (DaemonConfig) {                                        \
                .watch = true,                                  \
                .quiet_usec = 2 * USEC_PER_SEC,                 \
                .max_delay_usec = 30 * USEC_PER_SEC,            \
                .stale_policy = STALE_POLICY_HEAL,              \
        }

/* Parse @path into @c (defaults first). A missing file is not an error. */
int daemon_config_load(const char *path, DaemonConfig *c);
