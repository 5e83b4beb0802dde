/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * String, string-vector and file helpers shared by libtuck. Plain C, no
 * global state; every allocating function returns NULL or -ENOMEM.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>

#include "macro.h"

#define WHITESPACE " \t\n\r"

static inline bool streq(const char *a, const char *b) {
        return strcmp(a, b) == 0;
}

static inline bool streq_ptr(const char *a, const char *b) {
        if (!a || !b)
                return a == b;
        return streq(a, b);
}

static inline bool isempty(const char *s) {
        return !s || !*s;
}

static inline const char *strempty(const char *s) {
        return s ?: "";
}

static inline const char *strna(const char *s) {
        return s ?: "n/a";
}

char *startswith(const char *s, const char *prefix);
char *endswith(const char *s, const char *suffix);
char *strjoin_real(const char *first, ...);
#define strjoin(...) strjoin_real(__VA_ARGS__, NULL)
char *path_join_real(const char *first, ...);
/* Join path components with exactly one '/' between them; NULL or "" components are skipped. */
#define path_join(...) path_join_real(__VA_ARGS__, NULL)
char *strstrip(char *s);
int asprintf_safe(char **ret, const char *format, ...) _printf_(2, 3);

/* NULL-terminated string vectors. */
void strv_free(char **l);
DEFINE_TRIVIAL_CLEANUP_FUNC(char **, strv_free);
#define _cleanup_strv_free_ _cleanup_(strv_freep)
size_t strv_length(char * const *l);
bool strv_contains(char * const *l, const char *s);
int strv_extend(char ***l, const char *value);
int strv_consume(char ***l, char *value);
char **strv_copy(char * const *l);
char **strv_split(const char *s, const char *separators);
char *strv_join(char * const *l, const char *separator);
#define STRV_FOREACH(s, l) for (typeof(*(l)) *s = (l); s && *s; s++)

/* Files. */
int read_full_file_at(int dir_fd, const char *path, size_t max_size, char **ret);
int write_file_atomic(const char *path, const char *contents, mode_t mode);
int mkdir_p(const char *path, mode_t mode);

/* Monotonic and realtime clocks in microseconds. */
uint64_t now_usec(clockid_t clock);
char *format_timestamp(uint64_t realtime_usec);

/* FNV-1a, 64 bit: cheap fingerprints of metadata, not a security hash. */
#define FNV64_INIT UINT64_C(0xcbf29ce484222325)
uint64_t fnv64(uint64_t h, const void *data, size_t n);
