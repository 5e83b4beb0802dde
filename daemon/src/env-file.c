/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdio.h>
#include <stdlib.h>

#include "env-file.h"
#include "util.h"

static bool valid_key_char(char c, bool first) {
        return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_' ||
               (!first && c >= '0' && c <= '9');
}

/* Appends one character to a growing buffer. */
static int push(char **buf, size_t *n, size_t *allocated, char c) {
        if (*n + 2 > *allocated) {
                size_t a = *allocated ? *allocated * 2 : 64;
                char *b = realloc(*buf, a);

                if (!b)
                        return -ENOMEM;
                *buf = b;
                *allocated = a;
        }
        (*buf)[(*n)++] = c;
        (*buf)[*n] = 0;
        return 0;
}

/*
 * Parses the value starting at *p, up to the end of the logical line. Returns
 * 0 and the value, or -EBADMSG for an unterminated quote. Advances *p and
 * *line past the line.
 */
static int parse_value(const char **p, unsigned *line, char **ret) {
        _cleanup_free_ char *v = NULL;
        size_t n = 0, allocated = 0, trailing_ws = 0;
        const char *s = *p;
        char quote = 0;
        int r;

        s += strspn(s, " \t");
        if (push(&v, &n, &allocated, 0) < 0)   /* make v non-NULL even when empty */
                return -ENOMEM;
        n = 0;

        for (; *s; s++) {
                char c = *s;

                if (quote == '\'') {
                        if (c == '\'')
                                quote = 0;
                        else if ((r = push(&v, &n, &allocated, c)) < 0)
                                return r;
                        if (c == '\n')
                                (*line)++;
                        continue;
                }
                if (quote == '"') {
                        if (c == '"')
                                quote = 0;
                        else if (c == '\\' && s[1] == '\n') {
                                s++;   /* line continuation */
                                (*line)++;
                        } else if (c == '\\' && s[1] && strchr("\"\\`$", s[1])) {
                                if ((r = push(&v, &n, &allocated, *++s)) < 0)
                                        return r;
                        } else {
                                if (c == '\n')
                                        (*line)++;
                                if ((r = push(&v, &n, &allocated, c)) < 0)
                                        return r;
                        }
                        continue;
                }
                if (c == '\n')
                        break;
                if (c == '"' || c == '\'') {
                        quote = c;
                        trailing_ws = 0;
                        continue;
                }
                if (c == '\\' && s[1] == '\n') {
                        s++;
                        (*line)++;
                        continue;
                }
                if (c == '\\' && s[1])
                        c = *++s;
                else if (c == ' ' || c == '\t' || c == '\r')
                        trailing_ws++;
                else
                        trailing_ws = 0;
                if ((r = push(&v, &n, &allocated, c)) < 0)
                        return r;
        }
        if (quote)
                return -EBADMSG;

        v[n - (trailing_ws > n ? n : trailing_ws)] = 0;
        *p = *s ? s + 1 : s;
        (*line)++;
        *ret = TAKE_PTR(v);
        return 0;
}

static const char *skip_line(const char *s, unsigned *line) {
        const char *e = strchr(s, '\n');

        (*line)++;
        return e ? e + 1 : s + strlen(s);
}

int env_file_parse(const char *text, char ***ret_pairs, unsigned *ret_skipped, char **ret_error) {
        _cleanup_strv_free_ char **pairs = calloc(1, sizeof(char *));
        unsigned line = 1, skipped = 0;
        const char *s = text;
        int r;

        if (!pairs)
                return -ENOMEM;

        while (*s) {
                _cleanup_free_ char *key = NULL, *value = NULL;
                const char *k;
                unsigned start = line;

                s += strspn(s, " \t\r");
                if (*s == '\n' || *s == '#' || *s == ';' || *s == 0) {
                        s = *s ? skip_line(s, &line) : s;
                        continue;
                }
                for (k = s; valid_key_char(*k, k == s); k++)
                        ;
                key = strndup(s, k - s);
                if (!key)
                        return -ENOMEM;
                k += strspn(k, " \t");
                if (k == s || *k != '=') {
                        skipped++;   /* not an assignment: systemd ignores it too */
                        s = skip_line(s, &line);
                        continue;
                }
                s = k + 1;
                r = parse_value(&s, &line, &value);
                if (r == -EBADMSG) {
                        if (ret_error)
                                (void) asprintf_safe(ret_error, "line %u: unterminated quote", start);
                        return r;
                }
                if (r < 0)
                        return r;
                if (strv_consume(&pairs, TAKE_PTR(key)) < 0 || strv_consume(&pairs, TAKE_PTR(value)) < 0)
                        return -ENOMEM;
        }

        if (ret_skipped)
                *ret_skipped = skipped;
        *ret_pairs = TAKE_PTR(pairs);
        return 0;
}

const char *env_pairs_get(char * const *pairs, const char *key) {
        const char *v = NULL;

        for (size_t i = 0; pairs && pairs[i] && pairs[i + 1]; i += 2)
                if (streq(pairs[i], key))
                        v = pairs[i + 1];
        return v;
}
