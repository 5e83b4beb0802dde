/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * org.tuck1.Manager, tuckd's D-Bus API (docs/org.tuck1.Manager.5): the names
 * and flags tuckd serves and tuckctl calls, written down once.
 */

#include <stdint.h>

#define TUCK_BUS_NAME      "org.tuck1"
#define TUCK_BUS_PATH      "/org/tuck1"
#define TUCK_BUS_INTERFACE "org.tuck1.Manager"

/* Merge, Refresh or Unmerge refused or failed; the message says why. */
#define TUCK_BUS_ERROR_REFUSED "org.tuck1.Error.Refused"

/* The flags of Merge(t), Refresh(t) and Unmerge(t). */
#define TUCK_BUS_FLAG_FORCE           (UINT64_C(1) << 0)   /* --force: refresh even if unchanged */
#define TUCK_BUS_FLAG_ALLOW_DOWNGRADE (UINT64_C(1) << 1)   /* --allow-downgrade */
#define _TUCK_BUS_FLAGS_ALL           (TUCK_BUS_FLAG_FORCE | TUCK_BUS_FLAG_ALLOW_DOWNGRADE)
