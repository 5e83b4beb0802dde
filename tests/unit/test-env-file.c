/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The os-release/extension-release parser, including malformed input. */

#include "env-file.h"
#include "tap.h"
#include "util.h"

static const struct {
        const char *name;
        const char *text;
        int ret;                 /* 0 or -EBADMSG */
        unsigned skipped;
        const char *pairs[13];   /* key, value, ..., NULL */
} cases[] = {
        { "empty file", "", 0, 0, { NULL } },
        { "comments and blank lines", "# c\n\n; c2\n   \nID=debian\n", 0, 0, { "ID", "debian", NULL } },
        { "plain assignments", "ID=debian\nVERSION_ID=12\n", 0, 0, { "ID", "debian", "VERSION_ID", "12", NULL } },
        { "no trailing newline", "ID=debian", 0, 0, { "ID", "debian", NULL } },
        { "double quotes", "NAME=\"Debian GNU/Linux\"\n", 0, 0, { "NAME", "Debian GNU/Linux", NULL } },
        { "single quotes keep backslashes", "A='x\\\"y'\n", 0, 0, { "A", "x\\\"y", NULL } },
        { "escapes in double quotes", "A=\"a\\\"b\\\\c\\$d\"\n", 0, 0, { "A", "a\"b\\c$d", NULL } },
        { "unquoted backslash escapes", "A=a\\ b\n", 0, 0, { "A", "a b", NULL } },
        { "concatenated quoting", "A=x\"y z\"'w'\n", 0, 0, { "A", "xy zw", NULL } },
        { "spaces around", "  ID = debian  \n", 0, 0, { "ID", "debian", NULL } },
        { "empty value", "SYSEXT_LEVEL=\nID=\"\"\n", 0, 0, { "SYSEXT_LEVEL", "", "ID", "", NULL } },
        { "later assignment wins (both kept)", "ID=a\nID=b\n", 0, 0, { "ID", "a", "ID", "b", NULL } },
        { "line continuation", "A=one\\\ntwo\nB=1\n", 0, 0, { "A", "onetwo", "B", "1", NULL } },
        { "multi-line double quotes", "A=\"one\ntwo\"\nB=1\n", 0, 0, { "A", "one\ntwo", "B", "1", NULL } },
        { "CRLF line endings", "ID=debian\r\nVERSION_ID=12\r\n", 0, 0, { "ID", "debian", "VERSION_ID", "12", NULL } },
        { "malformed: no '='", "garbage line\nID=x\n", 0, 1, { "ID", "x", NULL } },
        { "malformed: key with space", "MY KEY=1\nID=x\n", 0, 1, { "ID", "x", NULL } },
        { "malformed: key starts with digit", "1ID=x\nID=y\n", 0, 1, { "ID", "y", NULL } },
        { "malformed: only '='", "=x\n", 0, 1, { NULL } },
        { "malformed: unterminated double quote", "ID=\"debian\nVERSION_ID=12\n", -EBADMSG, 0, { NULL } },
        { "malformed: unterminated single quote", "A=1\nB='x\n", -EBADMSG, 0, { NULL } },
};

int main(void) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_strv_free_ char **pairs = NULL;
                _cleanup_free_ char *error = NULL;
                unsigned skipped = 0;
                int r;
                bool ok;

                r = env_file_parse(cases[i].text, &pairs, &skipped, &error);
                if (cases[i].ret < 0) {
                        tap_ok(r == cases[i].ret && error, "%s: fails with %d (%s)", cases[i].name, cases[i].ret,
                               tap_str(error));
                        continue;
                }
                ok = r == 0 && skipped == cases[i].skipped;
                for (size_t k = 0; ok && cases[i].pairs[k]; k++)
                        ok = pairs[k] && streq(pairs[k], cases[i].pairs[k]);
                ok = ok && strv_length(pairs) == strv_length((char **) cases[i].pairs);
                if (!tap_ok(ok, "%s", cases[i].name)) {
                        tap_diag("r=%d skipped=%u", r, skipped);
                        STRV_FOREACH(p, pairs)
                                tap_diag("  '%s'", *p);
                }
        }

        {
                char *pairs[] = { "ID", "a", "X", "1", "ID", "b", NULL };

                tap_streq(env_pairs_get(pairs, "ID"), "b", "env_pairs_get: the last assignment wins");
                tap_streq(env_pairs_get(pairs, "NOPE"), NULL, "env_pairs_get: missing key is NULL");
        }
        return tap_done();
}
