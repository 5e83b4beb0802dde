/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * /etc/tuck/tuck.conf: an ini-style file (systemd's unit-file syntax without
 * specifiers). Every key is optional; a missing file means the defaults.
 *
 *   # Extension search directories, highest priority first (space-separated),
 *   # and the hierarchies each class extends. Paths are absolute and are
 *   # taken below --root= when one is given.
 *   [Sysext]
 *   SearchPaths=/etc/extensions /run/extensions /var/lib/extensions
 *               (default also /usr/local/lib/extensions /usr/lib/extensions)
 *   Hierarchies=/usr /opt
 *   ImagePolicy=signed+verity+unprotected+absent   (image-policy.h; a fleet: signed)
 *
 *   [Confext]
 *   SearchPaths=/etc/confexts /run/confexts /var/lib/confexts
 *               (default also /usr/local/lib/confexts /usr/lib/confexts)
 *   Hierarchies=/etc
 *   ImagePolicy=signed+verity+unprotected+absent
 *
 *   # Policy defaults; the command-line options override them per call.
 *   [Policy]
 *   AllowDowngrade=no   # yes: like --allow-downgrade on every call
 *   AllowWindow=no      # yes: like --allow-window (never needed on Linux >= 6.5)
 *   ReloadManager=      # no: never daemon-reload or restart units after a swap
 *                       # (like --no-reload on every call); yes: also below a
 *                       # --root other than "/"; unset: on "/" only
 *
 *   # Namespaces a refresh leaves behind (a container's own bind of /usr,
 *   # ...): heal (default), report or restart. Read by libtuck, so tuckctl
 *   # working without tuckd applies it too; the section name is historical.
 *   [Daemon]
 *   StalePolicy=heal
 *   RestartUnits=       # under restart, the only units restarted (none by default)
 *
 *   # What one run may spend on other namespaces (nsscan.h).
 *   [Scan]
 *   NamespaceBudgetSec=500ms
 *   RefreshBudgetSec=10s
 *   MaxMounts=10000
 *   HealBudgetSec=5s
 *
 * Sections and keys libtuck does not know (the rest of [Daemon], read by
 * tuckd) are left to their readers: ini_parse() hands every assignment to a
 * callback.
 */

#include <errno.h>
#include <stdbool.h>

#include "image-class.h"
#include "image-policy.h"

/* What a refresh does with a namespace that did not follow (StalePolicy=). */
typedef enum StalePolicy {
        STALE_POLICY_HEAL,      /* default: beneath swap inside the namespace */
        STALE_POLICY_REPORT,    /* log and list it, touch nothing */
        STALE_POLICY_RESTART,   /* restart the owning unit through systemd */
        _STALE_POLICY_MAX,
        _STALE_POLICY_INVALID = -EINVAL,
} StalePolicy;

const char *stale_policy_to_string(StalePolicy p);
StalePolicy stale_policy_from_string(const char *s);

typedef struct TuckConfig {
        char **search_dirs[_IMAGE_CLASS_MAX];
        char **hierarchies[_IMAGE_CLASS_MAX];
        ImagePolicy image_policy[_IMAGE_CLASS_MAX];
        bool allow_downgrade;
        bool allow_window;
        int reload_manager;          /* ReloadManager=: 1 yes, 0 no, -1 (unset) on "/" only (reload.h) */
        StalePolicy stale_policy;
        char **restart_units;           /* [Daemon] RestartUnits=: what restart may restart */
        uint64_t scan_namespace_usec;   /* [Scan] NamespaceBudgetSec= */
        uint64_t scan_refresh_usec;     /* [Scan] RefreshBudgetSec= */
        unsigned scan_max_mounts;       /* [Scan] MaxMounts= */
        uint64_t scan_heal_usec;        /* [Scan] HealBudgetSec= */
} TuckConfig;

#define USEC_PER_SEC UINT64_C(1000000)
#define USEC_PER_MSEC UINT64_C(1000)

/* "1.5", "2s", "500ms", "1min" → microseconds. */
int parse_timespan(const char *s, uint64_t *ret);

/* Called for each assignment; return <0 to abort parsing. */
typedef int (*IniCallback)(const char *section, const char *key, const char *value,
                           unsigned line, void *userdata);

/* Parses ini text. Malformed lines are an error naming the line (-EBADMSG, *ret_error). */
int ini_parse(const char *text, IniCallback callback, void *userdata, char **ret_error);

/*
 * A hierarchy path as tuck uses it: canonical ("/usr/" is "/usr"), absolute,
 * not "/", without ',' or ':' (overlayfs option syntax). Else -EINVAL and
 * *ret_error says why.
 */
int hierarchy_path_canonicalize(const char *path, char **ret, char **ret_error);

int config_parse_boolean(const char *s);

int config_init_defaults(TuckConfig *c);
/* Loads path into c (defaults first). A missing file is not an error. */
int config_load(TuckConfig *c, const char *path, char **ret_error);
void config_done(TuckConfig *c);
