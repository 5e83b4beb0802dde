/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * org.tuck1.Manager, tuckd's D-Bus API (docs/org.tuck1.Manager.5): the names
 * and flags tuckd serves and tuckctl calls, written down once.
 */

#include <errno.h>
#include <stdint.h>

#define TUCK_BUS_NAME      "org.tuck1"
#define TUCK_BUS_PATH      "/org/tuck1"
#define TUCK_BUS_INTERFACE "org.tuck1.Manager"

/* Why Merge, Refresh or Unmerge did not complete; the message says more. One
 * name per exit status of tuckctl(8), so tuckctl exits alike whether it runs
 * an operation itself or through tuckd (report_error() decides for both). */
#define TUCK_BUS_ERROR_REFUSED       "org.tuck1.Error.Refused"       /* -EPERM: downgrade, removal (exit 3) */
#define TUCK_BUS_ERROR_NOT_SUPPORTED "org.tuck1.Error.NotSupported"  /* -EOPNOTSUPP: no MOVE_MOUNT_BENEATH (exit 4) */
#define TUCK_BUS_ERROR_BUSY          "org.tuck1.Error.Busy"          /* -EBUSY: the lock is held (exit 5) */
#define TUCK_BUS_ERROR_FAILED        "org.tuck1.Error.Failed"        /* anything else, old generation kept (exit 1) */

/* The error name for a negative errno from report_error(). */
static inline const char *tuck_bus_error_name(int error) {
        switch (error) {
        case -EPERM:
                return TUCK_BUS_ERROR_REFUSED;
        case -EOPNOTSUPP:
                return TUCK_BUS_ERROR_NOT_SUPPORTED;
        case -EBUSY:
                return TUCK_BUS_ERROR_BUSY;
        default:
                return TUCK_BUS_ERROR_FAILED;
        }
}

/* The flags of Merge(t), Refresh(t) and Unmerge(t). Bit 0 was called FORCE before
 * tuckctl's --force took systemd-sysext's meaning; its wire meaning is unchanged. */
#define TUCK_BUS_FLAG_ALWAYS_REFRESH  (UINT64_C(1) << 0)   /* --always-refresh: refresh even if unchanged */
#define TUCK_BUS_FLAG_ALLOW_DOWNGRADE (UINT64_C(1) << 1)   /* --allow-downgrade */
#define TUCK_BUS_FLAG_IGNORE_RELEASE  (UINT64_C(1) << 2)   /* --force: ignore version incompatibilities */
#define TUCK_BUS_FLAG_NO_RELOAD       (UINT64_C(1) << 3)   /* --no-reload */
#define TUCK_BUS_FLAG_SYSEXT          (UINT64_C(1) << 4)   /* only sysext hierarchies (with CONFEXT: both) */
#define TUCK_BUS_FLAG_CONFEXT         (UINT64_C(1) << 5)   /* only confext hierarchies */
#define _TUCK_BUS_FLAGS_ALL           (TUCK_BUS_FLAG_ALWAYS_REFRESH | TUCK_BUS_FLAG_ALLOW_DOWNGRADE | \
                                       TUCK_BUS_FLAG_IGNORE_RELEASE | TUCK_BUS_FLAG_NO_RELOAD |       \
                                       TUCK_BUS_FLAG_SYSEXT | TUCK_BUS_FLAG_CONFEXT)
