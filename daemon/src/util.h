/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * String, string-vector and file helpers shared by libtuck. Plain C, no
 * global state; every allocating function returns NULL or -ENOMEM.
 */

#include <dirent.h>
#include <stdarg.h>
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
/*
 * An absolute path in canonical form: one '/' between components, none at
 * the end ("/usr//lib/" -> "/usr/lib"). -EINVAL for a relative path or one
 * with "." or ".." components.
 */
int path_canonicalize(const char *path, char **ret);
char *strstrip(char *s);
/* Sets *ret_reason (if asked for) and returns 0: "not so, and why", for checks that return 1 when fine. */
int refuse_with(char **ret_reason, const char *fmt, ...) _printf_(2, 3);
/* Lower-case hex of n bytes; and back (-EINVAL unless an even number of hex digits). */
char *hexmem(const void *p, size_t n);
int unhexmem(const char *s, uint8_t **ret, size_t *ret_size);
/* Well-formed UTF-8: no overlong forms, surrogates or code points past U+10FFFF. */
bool utf8_is_valid(const char *s);
int asprintf_safe(char **ret, const char *format, ...) _printf_(2, 3);
/* Replaces *p (freed) with a newly formatted string; -ENOMEM leaves *p NULL. */
int free_and_vasprintf(char **p, const char *format, va_list ap) _printf_(2, 0);
/* Replaces *p (freed) with a copy of s (NULL for NULL). */
int free_and_strdup(char **p, const char *s);

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
void strv_sort(char **l);
#define STRV_FOREACH(s, l) for (typeof(*(l)) *s = (l); s && *s; s++)

/* Directories. */
DEFINE_TRIVIAL_CLEANUP_FUNC(DIR *, closedir);
#define _cleanup_closedir_ _cleanup_(closedirp)
/* opendir() of dir_fd/path, O_CLOEXEC; NULL with errno set on failure. */
DIR *opendir_at(int dir_fd, const char *path);
/* readdir() without "." and "..". */
struct dirent *readdir_no_dot(DIR *d);

/* Files. */
/* The whole file (NUL-terminated, no NUL inside: -EBADMSG), at most max_size bytes (-EFBIG). */
int read_full_fd(int fd, size_t max_size, char **ret);
int read_full_file_at(int dir_fd, const char *path, size_t max_size, char **ret);
/*
 * Replaces path with contents so that a crash or a power loss at any point
 * leaves the old file or the new one, never a mix or none: written to
 * "path.tmp" (writers are serialised by tuck's lock), fsync(), rename(),
 * fsync() of the directory so the rename itself is on disk.
 */
int write_file_atomic(const char *path, const char *contents, mode_t mode);
int mkdir_p(const char *path, mode_t mode);
/*
 * path resolved as if root_fd were "/" (symlinks and ".." stay inside):
 * openat2(RESOLVE_IN_ROOT), or the same walked by hand where openat2() is
 * refused (seccomp, e.g. systemd's RestrictSUIDSGID=) or missing.
 */
int openat_in_root(int root_fd, const char *path, int flags);
/* The walk by hand alone (flags: O_PATH, O_DIRECTORY, O_RDONLY): tests and
 * tests/fuzz/fuzz-in-root.c hold it against openat2() itself. */
int openat_in_root_by_hand(int root_fd, const char *path, int flags);
/*
 * The walk by hand, and the name of what it reached below root_fd ("" for
 * root_fd itself) spelled from the components it walked, as chase() spells
 * it: the same for as long as the directories stay, whatever mounts on top
 * come and go (a name read back from the fd follows its mount).
 */
int openat_in_root_by_hand_named(int root_fd, const char *path, int flags, char **ret_name);
/*
 * openat_in_root() from the kernel's caches only (openat2 RESOLVE_CACHED): a
 * lookup that would have to ask a file system (a dentry not cached, FUSE or
 * NFS revalidation) fails with -EAGAIN instead of waiting for it, so this
 * never blocks. -EOPNOTSUPP where openat2() or RESOLVE_CACHED is refused or
 * missing (seccomp, Linux < 5.12): the caller resolves elsewhere.
 */
int openat_in_root_cached(int root_fd, const char *path, int flags);
/* open("/proc/PID/WHAT", flags | O_CLOEXEC) */
int proc_open(pid_t pid, const char *what, int flags);

/*
 * A name someone else chose (a process's comm, a unit or container name),
 * fit for one line of a log, a report or a signal: control characters,
 * bytes >= 0x7f and backslashes as \xNN. NULL for NULL or on -ENOMEM.
 */
char *name_escape(const char *s);

/* Processes. pidfd_open(), never returned as fd 0, 1 or 2 (CLOEXEC). */
int pidfd_open_above_stdio(pid_t pid);

/*
 * File descriptors. A scan holds one pidfd per namespace it keeps, so the
 * soft RLIMIT_NOFILE (1024 by default) would cap how many namespaces tuck
 * can see: rlimit_nofile_bump() raises it to the hard limit at start-up, as
 * systemd's tools do (tuck only polls, never select()s). Programs we exec
 * may select(): rlimit_nofile_safe() puts the soft limit back first.
 */
void rlimit_nofile_bump(void);
void rlimit_nofile_safe(void);

/* The kernel's boot ID (/proc/sys/kernel/random/boot_id), read once; NULL if it cannot be read. */
const char *boot_id_current(void);
/* 0 while the process behind @pidfd runs (or is a zombie not yet reaped), -ESRCH once it is gone. */
int pidfd_check_alive(int pidfd);

/* Monotonic and realtime clocks in microseconds. */
uint64_t now_usec(clockid_t clock);
char *format_timestamp(uint64_t realtime_usec);

/* FNV-1a, 64 bit: cheap fingerprints of metadata, not a security hash. */
#define FNV64_INIT UINT64_C(0xcbf29ce484222325)
uint64_t fnv64(uint64_t h, const void *data, size_t n);
