/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A port of systemd's strverscmp_improved() (src/fundamental/
 * string-util-fundamental.c, LGPL-2.1-or-later), so that tuck stacks
 * extensions in exactly the order systemd-sysext does and compares versions
 * the way systemd-sysupdate and the boot loader specification do.
 *
 * The string is split into segments, each numeric or alphabetic, optionally
 * prefixed by one of:
 *   '~'  pre-release: older than anything, even the end of the string,
 *   '-'  version/release separator,
 *   '^'  patched release: newer than '-',
 *   '.'  point release.
 * No prefix is newest. Other characters only separate segments. Numeric
 * segments compare by value (leading zeros dropped) and are newer than
 * alphabetic ones. So:
 *   122.1 < 123~rc1-1 < 123 < 123-a < 123-a.1 < 123-1 < 123-1.1 < 123^post1
 *         < 123.a-1 < 123.1-1 < 123a-1 < 124-1
 */

#include <string.h>

#include "util.h"
#include "version.h"

#define CMP(a, b) ((a) < (b) ? -1 : (a) > (b) ? 1 : 0)

static bool is_digit(char c) {
        return c >= '0' && c <= '9';
}

static bool is_alpha(char c) {
        return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_version_char(char c) {
        return is_digit(c) || is_alpha(c) || strchr("~-^.", c);
}

/* If either side starts with the prefix character, the side without it is newer. */
static int compare_prefix(const char **a, const char **b, char prefix) {
        int r;

        if (**a != prefix && **b != prefix)
                return 0;
        r = CMP(**a != prefix, **b != prefix);
        if (r == 0) {
                (*a)++;
                (*b)++;
        }
        return r;
}

static int compare_numeric(const char **a, const char **b) {
        const char *aa, *bb;
        int r;

        for (aa = *a; is_digit(*aa); aa++)
                ;
        for (bb = *b; is_digit(*bb); bb++)
                ;
        /* A numeric segment is newer than an alphabetic (empty numeric) one. */
        r = CMP(*a != aa, *b != bb);
        if (r != 0)
                return r;
        while (**a == '0')
                (*a)++;
        while (**b == '0')
                (*b)++;
        /* Longer (without leading zeros) is bigger; equal length compares as text. */
        r = CMP(aa - *a, bb - *b);
        if (r == 0)
                r = CMP(strncmp(*a, *b, aa - *a), 0);
        *a = aa;
        *b = bb;
        return r;
}

static int compare_alpha(const char **a, const char **b) {
        const char *aa, *bb;
        int r;

        for (aa = *a; is_alpha(*aa); aa++)
                ;
        for (bb = *b; is_alpha(*bb); bb++)
                ;
        r = CMP(strncmp(*a, *b, (size_t) (aa - *a < bb - *b ? aa - *a : bb - *b)), 0);
        if (r == 0)
                r = CMP(aa - *a, bb - *b);   /* "abc" < "abcde" */
        *a = aa;
        *b = bb;
        return r;
}

int strverscmp_improved(const char *a, const char *b) {
        a = strempty(a);
        b = strempty(b);

        for (;;) {
                int r;

                while (*a && !is_version_char(*a))
                        a++;
                while (*b && !is_version_char(*b))
                        b++;

                /* '~' is checked before the end: "1~rc1" < "1". */
                r = compare_prefix(&a, &b, '~');
                if (r != 0)
                        return r;

                /* Otherwise the string with more segments is newer. */
                if (*a == 0 || *b == 0)
                        return CMP(*a, *b);

                r = compare_prefix(&a, &b, '-');
                if (r == 0)
                        r = compare_prefix(&a, &b, '^');
                if (r == 0)
                        r = compare_prefix(&a, &b, '.');
                if (r != 0)
                        return r;

                if (is_digit(*a) || is_digit(*b))
                        r = compare_numeric(&a, &b);
                else
                        r = compare_alpha(&a, &b);
                if (r != 0)
                        return r;
        }
}
