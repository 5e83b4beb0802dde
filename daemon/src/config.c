/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>

#include "config.h"
#include "log.h"
#include "nsscan.h"
#include "util.h"

int ini_parse(const char *text, IniCallback callback, void *userdata, char **ret_error) {
        _cleanup_free_ char *copy = strdup(text), *section = NULL;
        unsigned line = 0;
        char *saveptr = NULL, *l;
        int r;

        if (!copy)
                return -ENOMEM;

        /* strtok_r() would merge empty lines and so miscount; walk by hand. */
        for (char *p = copy; p; p = saveptr) {
                char *eq;

                line++;
                saveptr = strchr(p, '\n');
                if (saveptr)
                        *saveptr++ = 0;
                l = strstrip(p);
                if (*l == 0 || *l == '#' || *l == ';')
                        continue;
                if (*l == '[') {
                        char *e = strchr(l, ']');

                        if (!e || e[1] != 0 || e == l + 1) {
                                (void) asprintf_safe(ret_error, "line %u: malformed section header '%s'", line, l);
                                return -EBADMSG;
                        }
                        free(section);
                        section = strndup(l + 1, e - l - 1);
                        if (!section)
                                return -ENOMEM;
                        continue;
                }
                eq = strchr(l, '=');
                if (!eq || eq == l) {
                        (void) asprintf_safe(ret_error, "line %u: expected KEY=VALUE, got '%s'", line, l);
                        return -EBADMSG;
                }
                if (!section) {
                        (void) asprintf_safe(ret_error, "line %u: assignment outside of a section", line);
                        return -EBADMSG;
                }
                *eq = 0;
                r = callback(section, strstrip(l), strstrip(eq + 1), line, userdata);
                if (r < 0)
                        return r;
        }
        return 0;
}

static const char *const stale_policy_table[_STALE_POLICY_MAX] = {
        [STALE_POLICY_HEAL] = "heal",
        [STALE_POLICY_REPORT] = "report",
        [STALE_POLICY_RESTART] = "restart",
};

const char *stale_policy_to_string(StalePolicy p) {
        return p >= 0 && p < _STALE_POLICY_MAX ? stale_policy_table[p] : NULL;
}

StalePolicy stale_policy_from_string(const char *s) {
        for (size_t i = 0; i < ELEMENTSOF(stale_policy_table); i++)
                if (streq_ptr(s, stale_policy_table[i]))
                        return (StalePolicy) i;
        return _STALE_POLICY_INVALID;
}

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

int config_parse_boolean(const char *s) {
        static const char * const yes[] = { "1", "yes", "y", "true", "t", "on" };
        static const char * const no[] = { "0", "no", "n", "false", "f", "off" };

        for (size_t i = 0; i < ELEMENTSOF(yes); i++) {
                if (strcasecmp(s, yes[i]) == 0)
                        return 1;
                if (strcasecmp(s, no[i]) == 0)
                        return 0;
        }
        return -EINVAL;
}

int config_init_defaults(TuckConfig *c) {
        *c = (TuckConfig) {
                .reload_manager = -1,
                .scan_namespace_usec = SCAN_NAMESPACE_USEC_DEFAULT,
                .scan_refresh_usec = SCAN_REFRESH_USEC_DEFAULT,
                .scan_max_mounts = SCAN_MAX_MOUNTS_DEFAULT,
                .scan_heal_usec = SCAN_HEAL_USEC_DEFAULT,
        };
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                c->image_policy[k] = IMAGE_POLICY_DEFAULT;
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                if (!(c->search_dirs[k] = strv_copy((char * const *) image_class_info[k].search_dirs)) ||
                    !(c->hierarchies[k] = strv_copy((char * const *) image_class_info[k].hierarchies))) {
                        config_done(c);
                        return -ENOMEM;
                }
        return 0;
}

void config_done(TuckConfig *c) {
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                strv_free(c->search_dirs[k]);
                strv_free(c->hierarchies[k]);
        }
        strv_free(c->restart_units);
        *c = (TuckConfig) {};
}

typedef struct ParseState {
        TuckConfig *config;
        char **error;
} ParseState;

int hierarchy_path_canonicalize(const char *path, char **ret, char **ret_error) {
        _cleanup_free_ char *c = NULL;
        int r;

        r = path_canonicalize(path, &c);
        if (r == -EINVAL) {
                (void) asprintf_safe(ret_error, "'%s' is not a normalized absolute path", path);
                return r;
        }
        if (r < 0)
                return r;
        if (streq(c, "/")) {
                (void) asprintf_safe(ret_error, "'/' cannot be a hierarchy");
                return -EINVAL;
        }
        /* Both separate overlayfs options (lowerdir=a:b,ro): mount(2) would read another layer list. */
        if (strpbrk(c, ",:")) {
                (void) asprintf_safe(ret_error, "hierarchy '%s' contains ',' or ':', which overlayfs options cannot carry", c);
                return -EINVAL;
        }
        *ret = TAKE_PTR(c);
        return 0;
}

/* A list of absolute paths in canonical form ("/usr/" is "/usr"): replaces the default. */
static int parse_path_list(const char *value, unsigned line, bool hierarchies, char ***target, char **error) {
        _cleanup_strv_free_ char **l = strv_split(value, WHITESPACE);

        if (!l)
                return -ENOMEM;
        STRV_FOREACH(p, l) {
                _cleanup_free_ char *c = NULL, *why = NULL;
                int r;

                r = hierarchies ? hierarchy_path_canonicalize(*p, &c, &why) : path_canonicalize(*p, &c);
                if (r == -EINVAL && !why)
                        (void) asprintf_safe(&why, "'%s' is not a normalized absolute path", *p);
                if (r == -EINVAL) {
                        (void) asprintf_safe(error, "line %u: %s", line, strna(why));
                        return r;
                }
                if (r < 0)
                        return r;
                free(*p);
                *p = TAKE_PTR(c);
        }
        strv_free(*target);
        *target = TAKE_PTR(l);
        return 0;
}

/*
 * Unit names (foo.service, foo@bar.service): systemd's characters only, so a
 * name here is what sd_pid_get_unit() can return. An empty value resets
 * the list, as in systemd's unit files; lines add up.
 */
static int parse_restart_units(const char *value, unsigned line, char ***target, char **error) {
        _cleanup_strv_free_ char **l = strv_split(value, WHITESPACE);

        if (!l)
                return -ENOMEM;
        if (!l[0]) {
                strv_free(*target);
                *target = NULL;
                return 0;
        }
        STRV_FOREACH(u, l) {
                if (!endswith(*u, ".service") || strlen(*u) <= strlen(".service") || strlen(*u) > 255 ||
                    (*u)[strspn(*u, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789:-_.\\@")] != 0) {
                        (void) asprintf_safe(error, "line %u: RestartUnits= takes service unit names, got '%s'",
                                             line, *u);
                        return -EINVAL;
                }
                if (!strv_contains(*target, *u) && strv_extend(target, *u) < 0)
                        return -ENOMEM;
        }
        return 0;
}

static int parse_scan(ParseState *s, const char *key, const char *value, unsigned line) {
        uint64_t *usec = streq(key, "NamespaceBudgetSec") ? &s->config->scan_namespace_usec :
                         streq(key, "RefreshBudgetSec") ? &s->config->scan_refresh_usec :
                         streq(key, "HealBudgetSec") ? &s->config->scan_heal_usec : NULL;
        uint64_t v;
        char *end;

        if (usec) {
                if (parse_timespan(value, &v) < 0 || v == 0) {
                        (void) asprintf_safe(s->error, "line %u: %s= takes a time span above zero, got '%s'",
                                             line, key, value);
                        return -EINVAL;
                }
                *usec = v;
                return 0;
        }
        if (streq(key, "MaxMounts")) {
                errno = 0;
                v = strtoull(value, &end, 10);
                if (errno != 0 || end == value || *end != 0 || v == 0 || v > UINT_MAX || value[0] == '-') {
                        (void) asprintf_safe(s->error, "line %u: MaxMounts= takes a number above zero, got '%s'",
                                             line, value);
                        return -EINVAL;
                }
                s->config->scan_max_mounts = (unsigned) v;
                return 0;
        }
        log_warning("tuck.conf line %u: unknown key %s= in [Scan], ignoring.", line, key);
        return 0;
}

static int parse_one(const char *section, const char *key, const char *value, unsigned line, void *userdata) {
        ParseState *s = userdata;
        ImageClass k = streq(section, "Sysext") ? IMAGE_SYSEXT :
                       streq(section, "Confext") ? IMAGE_CONFEXT : _IMAGE_CLASS_INVALID;
        int b;

        if (k != _IMAGE_CLASS_INVALID) {
                if (streq(key, "SearchPaths"))
                        return parse_path_list(value, line, false, &s->config->search_dirs[k], s->error);
                if (streq(key, "Hierarchies"))
                        return parse_path_list(value, line, true, &s->config->hierarchies[k], s->error);
                if (streq(key, "ImagePolicy")) {
                        int r = image_policy_from_string(value, &s->config->image_policy[k]);

                        if (r == -EINVAL)
                                (void) asprintf_safe(s->error, "line %u: ImagePolicy= takes signed, verity, "
                                                     "unprotected and absent joined by '+', or '*'; got '%s'",
                                                     line, value);
                        return r;
                }
        } else if (streq(section, "Policy")) {
                if (streq(key, "ReloadManager")) {
                        b = config_parse_boolean(value);
                        if (b < 0) {
                                (void) asprintf_safe(s->error, "line %u: %s= takes a boolean, got '%s'", line, key, value);
                                return -EINVAL;
                        }
                        s->config->reload_manager = b;
                        return 0;
                }
                bool *target = streq(key, "AllowDowngrade") ? &s->config->allow_downgrade :
                               streq(key, "AllowWindow") ? &s->config->allow_window : NULL;

                if (target) {
                        b = config_parse_boolean(value);
                        if (b < 0) {
                                (void) asprintf_safe(s->error, "line %u: %s= takes a boolean, got '%s'", line, key, value);
                                return -EINVAL;
                        }
                        *target = b;
                        return 0;
                }
        } else if (streq(section, "Scan"))
                return parse_scan(s, key, value, line);
        else if (streq(section, "Daemon")) {
                StalePolicy p;

                if (streq(key, "RestartUnits"))
                        return parse_restart_units(value, line, &s->config->restart_units, s->error);
                if (!streq(key, "StalePolicy"))
                        return 0;   /* tuckd's */
                p = stale_policy_from_string(value);
                if (p < 0) {
                        (void) asprintf_safe(s->error, "line %u: StalePolicy= takes heal, report or restart, got '%s'",
                                             line, value);
                        return -EINVAL;
                }
                s->config->stale_policy = p;
                return 0;
        } else
                return 0;   /* someone else's section */

        log_warning("tuck.conf line %u: unknown key %s= in [%s], ignoring.", line, key, section);
        return 0;
}

int config_load(TuckConfig *c, const char *path, char **ret_error) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        ParseState s = { .config = c, .error = &error };
        int r;

        r = config_init_defaults(c);
        if (r < 0)
                return r;

        r = read_full_file_at(AT_FDCWD, path, 1024 * 1024, &text);
        if (r == -ENOENT)
                return 0;
        if (r < 0) {
                (void) asprintf_safe(ret_error, "cannot read %s: %s", path, strerror(-r));
                return r;
        }
        r = ini_parse(text, parse_one, &s, &error);
        if (r < 0) {
                if (ret_error)
                        (void) asprintf_safe(ret_error, "%s: %s", path, error ?: strerror(-r));
                config_done(c);
                return r;
        }
        return 0;
}
