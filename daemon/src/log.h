/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Logging. Helpers stay quiet (debug level); the boundary (a tuckctl verb, a
 * tuckd method) logs one error with context. The default sink writes to
 * stderr; tuckd installs its own (the journal) with log_set_sink().
 *
 * log_*_errno(r, ...) returns r (made negative) so an error can be logged and
 * returned in one statement, and sets errno so "%m" names it.
 */

#include <errno.h>
#include <stdarg.h>
#include <syslog.h>

#include "macro.h"

typedef void (*LogSink)(int level, int error, const char *message, void *userdata);

void log_set_max_level(int level);
int log_get_max_level(void);
void log_set_sink(LogSink sink, void *userdata);

int log_internal(int level, int error, const char *file, int line, const char *format, ...) _printf_(5, 6);

#define log_full_errno(level, error, ...)                                       \
        ({                                                                      \
                int _level_ = (level), _e_ = (error);                           \
                _level_ <= log_get_max_level()                                  \
                        ? log_internal(_level_, _e_, __FILE__, __LINE__, __VA_ARGS__) \
                        : -abs(_e_);                                            \
        })

#define log_debug(...)   (void) log_full_errno(LOG_DEBUG, 0, __VA_ARGS__)
#define log_info(...)    (void) log_full_errno(LOG_INFO, 0, __VA_ARGS__)
#define log_notice(...)  (void) log_full_errno(LOG_NOTICE, 0, __VA_ARGS__)
#define log_warning(...) (void) log_full_errno(LOG_WARNING, 0, __VA_ARGS__)
#define log_error(...)   (void) log_full_errno(LOG_ERR, 0, __VA_ARGS__)

#define log_debug_errno(e, ...)   log_full_errno(LOG_DEBUG, e, __VA_ARGS__)
#define log_info_errno(e, ...)    log_full_errno(LOG_INFO, e, __VA_ARGS__)
#define log_warning_errno(e, ...) log_full_errno(LOG_WARNING, e, __VA_ARGS__)
#define log_error_errno(e, ...)   log_full_errno(LOG_ERR, e, __VA_ARGS__)
