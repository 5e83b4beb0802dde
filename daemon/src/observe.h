/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Step 3 of the refresh: what is mounted on top of a hierarchy now, and
 * whose it is (ours and recorded, ours but unrecorded, systemd-sysext's,
 * something stacked on ours, or the base). classify_top() works on a parsed
 * mount table, so it is tested with fixture mountinfo; observe_live() reads
 * the live one.
 */

#include <libmount/libmount.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "plan.h"
#include "state.h"
#include "tuck.h"

/* Is @fs an overlay mounted with source @source ("tuck-sysext", "sysext", ...)? */
bool mount_is_overlay_of(struct libmnt_fs *fs, const char *source);

/*
 * Whose is @top, the mount on top of hierarchy @h in table @tb (st_dev @dev,
 * mount ID @id), against generation record @g (NULL: none)?
 */
TopKind classify_top(struct libmnt_table *tb, struct libmnt_fs *top, const TuckHierarchy *h,
                     const Generation *g, dev_t dev, uint64_t id);

/* What sits on top of @h now, in our mount namespace. */
int observe_live(const TuckHierarchy *h, const Generation *g, LiveState *ret);

/*
 * The extensions systemd-sysext's overlay on @h says it carries: its
 * .systemd-sysext/extensions (.systemd-confext/confexts), one name a line.
 * Call only when TOP_SYSTEMD is on top.
 */
int observe_foreign_extensions(const TuckHierarchy *h, char ***ret);
