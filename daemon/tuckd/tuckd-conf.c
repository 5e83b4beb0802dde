/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "macro.h"
#include "tuckd-conf.h"

int parse_timespan(const char *s, uint64_t *ret) {
        static const struct {
                const char *suffix;
                uint64_t usec;
        } units[] = {
                { "",    USEC_PER_SEC },
                { "s",   USEC_PER_SEC },
                { "sec", USEC_PER_SEC },
                { "ms",  USEC_PER_MSEC },
                { "msec", USEC_PER_MSEC },
                { "min", 60 * USEC_PER_SEC },
        };
        char *end;
        double v;

        errno = 0;
        v = strtod(s, &end);
        if (errno != 0 || end == s || v < 0 || !isfinite(v))
                return -EINVAL;
        while (isspace((unsigned char) *end))
                end++;
        for (size_t i = 0; i < ELEMENTSOF(units); i++)
                if (strcmp(end, units[i].suffix) == 0) {
                        if (v * units[i].usec > (double) UINT64_MAX / 2)
                                return -ERANGE;
                        *ret = (uint64_t) (v * units[i].usec);
                        return 0;
                }
        return -EINVAL;
}

static int parse_bool(const char *s) {
        static const char *const yes[] = { "1", "yes", "true", "on" }, *const no[] = { "0", "no", "false", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}

static char *strstrip(char *s) {
        char *e;

        while (isspace((unsigned char) *s))
                s++;
        e = s + strlen(s);
        while (e > s && isspace((unsigned char) e[-1]))
                *--e = 0;
        return s;
}

static int config_assign(DaemonConfig *c, const char *key, const char *value) {
        int r;

        if (strcmp(key, "Watch") == 0) {
                r = parse_bool(value);
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
        } else
                return -ENOENT;
        return 0;
}

int daemon_config_load(const char *path, DaemonConfig *c) {
        _cleanup_free_ char *line = NULL;
        bool in_daemon = false;
        unsigned lineno = 0;
        size_t sz = 0;
        FILE *f;
        int r = 0;

        *c = DAEMON_CONFIG_DEFAULT;

        f = fopen(path, "re");
        if (!f)
                return errno == ENOENT ? 0 : log_error_errno(errno, "Failed to open '%s': %m", path);

        while (getline(&line, &sz, f) > 0) {
                char *l = strstrip(line), *eq;
                int k;

                lineno++;
                if (*l == 0 || *l == '#' || *l == ';')
                        continue;
                if (*l == '[') {
                        in_daemon = strcmp(l, "[Daemon]") == 0;
                        continue;
                }
                if (!in_daemon)
                        continue;
                eq = strchr(l, '=');
                if (!eq) {
                        r = log_error_errno(EINVAL, "%s:%u: expected KEY=VALUE, got '%s'", path, lineno, l);
                        continue;
                }
                *eq = 0;
                k = config_assign(c, strstrip(l), strstrip(eq + 1));
                if (k == -ENOENT)
                        log_warning("%s:%u: unknown key '%s' in [Daemon], ignoring", path, lineno, strstrip(l));
                else if (k < 0)
                        r = log_error_errno(k, "%s:%u: invalid value '%s' for %s: %m",
                                            path, lineno, strstrip(eq + 1), strstrip(l));
        }
        fclose(f);

        if (r == 0 && c->max_delay_usec < c->quiet_usec)
                c->max_delay_usec = c->quiet_usec;
        return r;
}
