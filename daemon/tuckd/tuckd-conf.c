/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "config.h"
#include "log.h"
#include "macro.h"
#include "tuckd-conf.h"
#include "util.h"

static int config_assign(DaemonConfig *c, const char *key, const char *value) {
        int r;

        if (strcmp(key, "Watch") == 0) {
                r = config_parse_boolean(value);
                if (r < 0)
                        return r;
                c->watch = r;
        } else if (strcmp(key, "QuietPeriodSec") == 0)
                return parse_timespan(value, &c->quiet_usec);
        else if (strcmp(key, "MaxDelaySec") == 0)
                return parse_timespan(value, &c->max_delay_usec);
        else if (strcmp(key, "StalePolicy") == 0) {
                StalePolicy p = stale_policy_from_string(value);

                if (p < 0)
                        return p;
                c->stale_policy = p;
        } else if (strcmp(key, "RestartUnits") != 0)
                return -ENOENT;         /* RestartUnits= is libtuck's (config.c) */
        return 0;
}

typedef struct ParseState {
        DaemonConfig *config;
        const char *path;
        int error;
} ParseState;

static int parse_one(const char *section, const char *key, const char *value, unsigned line, void *userdata) {
        ParseState *s = userdata;
        int r;

        if (!streq_ptr(section, "Daemon"))
                return 0;               /* libtuck's sections */
        r = config_assign(s->config, key, value);
        if (r == -ENOENT)
                log_warning("%s:%u: unknown key '%s' in [Daemon], ignoring.", s->path, line, key);
        else if (r < 0) {
                /* Keep the first error, report every bad line. */
                log_error_errno(r, "%s:%u: invalid value '%s' for %s: %m", s->path, line, value, key);
                if (s->error == 0)
                        s->error = r;
        }
        return 0;
}

int daemon_config_load(const char *path, DaemonConfig *c) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        DaemonConfig n = DAEMON_CONFIG_DEFAULT;
        ParseState s = { .config = &n, .path = path };
        int r;

        r = read_full_file_at(AT_FDCWD, path, 1024 * 1024, &text);
        if (r == -ENOENT) {
                *c = n;
                return 0;
        }
        if (r < 0)
                return log_error_errno(r, "Failed to read '%s': %m", path);

        r = ini_parse(text, parse_one, &s, &error);
        if (r < 0)
                return log_error_errno(r, "%s: %s", path, error ?: strerror(-r));
        if (s.error < 0)
                return s.error;

        if (n.max_delay_usec < n.quiet_usec)
                n.max_delay_usec = n.quiet_usec;
        *c = n;
        return 0;
}
