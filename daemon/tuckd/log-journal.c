/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * tuckd's logging: one structured journal entry per event (MESSAGE_ID plus
 * TUCK_* fields, see tuckd(8) "JOURNAL"), and the same one readable line on
 * stderr when stderr is not already the journal (a test, a terminal).
 */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <syslog.h>
#include <systemd/sd-journal.h>

#include "log.h"
#include "manager.h"

static bool stderr_is_journal;

static const char *level_prefix(int level) {
        return level <= LOG_ERR ? "error: " : level == LOG_WARNING ? "warning: " : "";
}

static void send_journal(int priority, const char *message_id, const char *message, const char *fields[]) {
        struct iovec iov[32];
        char prio[16], *owned[32];
        size_t n = 0, n_owned = 0;

        snprintf(prio, sizeof prio, "PRIORITY=%d", priority);
        iov[n++] = (struct iovec) { prio, strlen(prio) };
        iov[n++] = (struct iovec) { (char *) "SYSLOG_IDENTIFIER=tuckd", strlen("SYSLOG_IDENTIFIER=tuckd") };
        if (asprintf(&owned[n_owned], "MESSAGE=%s", message) >= 0) {
                iov[n++] = (struct iovec) { owned[n_owned], strlen(owned[n_owned]) };
                n_owned++;
        }
        if (message_id && asprintf(&owned[n_owned], "MESSAGE_ID=%s", message_id) >= 0) {
                iov[n++] = (struct iovec) { owned[n_owned], strlen(owned[n_owned]) };
                n_owned++;
        }
        for (size_t i = 0; fields && fields[i] && fields[i + 1] && n < ELEMENTSOF(iov); i += 2)
                if (asprintf(&owned[n_owned], "%s=%s", fields[i], fields[i + 1]) >= 0) {
                        iov[n++] = (struct iovec) { owned[n_owned], strlen(owned[n_owned]) };
                        n_owned++;
                }

        (void) sd_journal_sendv(iov, (int) n);
        for (size_t i = 0; i < n_owned; i++)
                free(owned[i]);
}

static void emit(int priority, const char *message_id, const char *message, const char *fields[]) {
        send_journal(priority, message_id, message, fields);
        if (!stderr_is_journal)
                fprintf(stderr, "tuckd: %s%s\n", level_prefix(priority), message);
}

void log_event(const char *message_id, int priority, const char *fields[], const char *format, ...) {
        char buf[2048];
        va_list ap;

        va_start(ap, format);
        (void) vsnprintf(buf, sizeof buf, format, ap);
        va_end(ap);
        emit(priority, message_id, buf, fields);
}

static void journal_sink(int level, int error, const char *message, void *userdata) {
        char e[16];
        const char *fields[] = { "ERRNO", e, NULL };

        snprintf(e, sizeof e, "%d", error);
        emit(level, NULL, message, error > 0 ? fields : NULL);
}

/* systemd sets JOURNAL_STREAM=DEV:INO when stderr is connected to the journal. */
void log_setup_journal(void) {
        const char *js = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (js && sscanf(js, "%llu:%llu", &dev, &ino) == 2 && fstat(STDERR_FILENO, &st) == 0)
                stderr_is_journal = st.st_dev == dev && st.st_ino == ino;
        log_set_sink(journal_sink, NULL);
}
