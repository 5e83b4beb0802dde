/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdio.h>
#include <stdlib.h>

#include "log.h"

static int max_level = LOG_INFO;
static LogSink sink = NULL;
static void *sink_userdata = NULL;

void log_set_max_level(int level) {
        max_level = level;
}

int log_get_max_level(void) {
        return max_level;
}

void log_set_sink(LogSink s, void *userdata) {
        sink = s;
        sink_userdata = userdata;
}

static void log_to_stderr(int level, const char *message) {
        const char *prefix = level <= LOG_ERR ? "error: " :
                             level == LOG_WARNING ? "warning: " : "";

        fprintf(stderr, "%s%s\n", prefix, message);
}

int log_internal(int level, int error, const char *file, int line, const char *format, ...) {
        char buf[2048];
        va_list ap;
        int saved = errno;

        error = abs(error);
        /* "%m" names the error we were given, not whatever errno happens to be. */
        errno = error;
        va_start(ap, format);
        (void) vsnprintf(buf, sizeof(buf), format, ap);
        va_end(ap);

        if (sink)
                sink(level, error, buf, sink_userdata);
        else if (level == LOG_DEBUG)
                fprintf(stderr, "debug: %s (%s:%d)\n", buf, file, line);
        else
                log_to_stderr(level, buf);

        errno = saved;
        return -error;
}
