/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* strverscmp_improved(): the ordering systemd documents, and its edge cases. */

#include "tap.h"
#include "util.h"
#include "version.h"

/* Strictly increasing, from systemd's own documentation of the function and the UAPI spec. */
static const char * const ascending[] = {
        "~1",
        "",
        "0",
        "1~rc1",
        "1~rc2",
        "1",
        "1-1",
        "1.0",
        "1.0.1",
        "1.2",
        "1.9",
        "1.10",
        "1.10a",
        "2",
        "122.1",
        "123~rc1-1",
        "123",
        "123-a",
        "123-a.1",
        "123-1",
        "123-1.1",
        "123^post1",
        "123.a-1",
        "123.1-1",
        "123a-1",
        "124-1",
        "247.2-3.1.fc33.x86_64",
        "1000",
};

static const struct {
        const char *a, *b;
} equal[] = {
        { "1.0", "1.0" },
        { "00123", "123" },
        { "123_a", "123a" },     /* '_' is dropped: only a separator */
        { NULL, "" },
        { "abc", "abc" },
};

static int sign(int x) {
        return (x > 0) - (x < 0);
}

int main(void) {
        size_t n = ELEMENTSOF(ascending);

        for (size_t i = 0; i < n; i++)
                for (size_t j = 0; j < n; j++) {
                        int want = sign((int) i - (int) j), got = sign(strverscmp_improved(ascending[i], ascending[j]));

                        if (want != got || i + 1 == j)   /* report neighbours, and every failure */
                                tap_ok(want == got, "'%s' %s '%s'", ascending[i],
                                       want < 0 ? "<" : want > 0 ? ">" : "==", ascending[j]);
                }

        for (size_t i = 0; i < ELEMENTSOF(equal); i++)
                tap_ok(strverscmp_improved(equal[i].a, equal[i].b) == 0, "'%s' == '%s'",
                       tap_str(equal[i].a), equal[i].b);

        /* Antisymmetry on a few mixed pairs. */
        tap_ok(strverscmp_improved("1.2", "1.10") < 0 && strverscmp_improved("1.10", "1.2") > 0, "1.2 < 1.10 both ways");
        tap_ok(strverscmp_improved("foo-9", "foo-10") < 0, "names with numbers: foo-9 < foo-10");
        tap_ok(strverscmp_improved("a", "b") < 0, "plain text orders alphabetically");
        return tap_done();
}
