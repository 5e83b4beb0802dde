/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Minimal TAP output for table-driven tests: one "ok"/"not ok" line per
 * check, the plan at the end, exit status 1 if anything failed.
 */

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static unsigned tap_count, tap_failed;

__attribute__((format(printf, 2, 3)))
static inline bool tap_ok(bool ok, const char *fmt, ...) {
        va_list ap;

        tap_count++;
        if (!ok)
                tap_failed++;
        printf("%sok %u - ", ok ? "" : "not ", tap_count);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
        fflush(stdout);
        return ok;
}

__attribute__((format(printf, 1, 2)))
static inline void tap_diag(const char *fmt, ...) {
        va_list ap;

        fputs("# ", stdout);
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        putchar('\n');
}

static inline int tap_done(void) {
        printf("1..%u\n", tap_count);
        if (tap_failed)
                printf("# %u of %u failed\n", tap_failed, tap_count);
        return tap_failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

static inline const char *tap_str(const char *s) {
        return s ? s : "(null)";
}

#define tap_streq(got, want, ...)                                               \
        ({                                                                      \
                const char *_g_ = (got), *_w_ = (want);                         \
                bool _ok_ = (!_g_ && !_w_) || (_g_ && _w_ && strcmp(_g_, _w_) == 0); \
                if (!tap_ok(_ok_, __VA_ARGS__))                                 \
                        tap_diag("got '%s', want '%s'", tap_str(_g_), tap_str(_w_)); \
                _ok_;                                                           \
        })
