/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The inside of a TuckContext, for libtuck's own files. */

#include "config.h"
#include "extension-release.h"
#include "nsscan.h"
#include "tuck.h"

struct TuckContext {
        char *root;              /* canonical, "/" on a real host */
        char *config_path;
        TuckConfig config;
        char *run_dir;           /* <root>/run/tuck */
        char *state_dir;         /* <root>/var/lib/tuck */
        TuckHierarchy *hierarchies;
        size_t n_hierarchies;
        char **image_dirs;
        int lock_fd;
        void (*keepalive)(void *userdata);      /* tuck_context_set_keepalive() */
        void *keepalive_userdata;
};

/* Root-prefixed path. */
char *context_path(const TuckContext *c, const char *path);

/* A run's scan budget from tuck.conf [Scan], fed through @hooks' keepalive (may be NULL). */
ScanBudget context_scan_budget(const TuckContext *c, const TuckHooks *hooks);
