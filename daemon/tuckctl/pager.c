/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The pager, as systemd's tools run it (src/shared/pager.c): only when
 * stdout is a terminal; $SYSTEMD_PAGER, else $PAGER, "" or "cat" meaning
 * none; otherwise pager, less, more. less gets $SYSTEMD_LESS (default
 * FRSXMK) as $LESS. Secure mode ($SYSTEMD_PAGERSECURE, or on by itself when
 * the caller is not the session's owner, e.g. under sudo) sets LESSSECURE=1
 * and runs only less, never a pager the environment names.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "config.h"
#include "log.h"
#include "pager.h"
#include "util.h"

static pid_t pager_pid;
static int saved_stdout = -EBADF, saved_stderr = -EBADF;

/* The pager the environment names, or NULL for the default list; "" and "cat" mean none at all. */
static const char *pager_from_env(bool *ret_none) {
        const char *p = getenv("SYSTEMD_PAGER");

        if (!p)
                p = getenv("PAGER");
        *ret_none = p && (isempty(strstrip(strdupa(p))) || streq(p, "cat"));
        return *ret_none ? NULL : p;
}

/* 1 secure, 0 not; *ret_trust: the environment chose, so its pager is trusted. */
static int pager_secure_mode(bool *ret_trust) {
        const char *e = secure_getenv("SYSTEMD_PAGERSECURE");
        uid_t owner;
        int b;

        if (e && (b = config_parse_boolean(e)) >= 0) {
                *ret_trust = true;
                return b;
        }
        *ret_trust = false;
        /* Not the owner of the session (sudo, su): less must not be a way to a root shell. */
        return sd_pid_get_owner_uid(0, &owner) < 0 || owner != getuid();
}

/* Copies stdin to stdout: when no pager program could be run. */
static _Noreturn void pager_fallback(void) {
        char buf[4096];
        ssize_t n;

        while ((n = read(STDIN_FILENO, buf, sizeof(buf))) > 0)
                if (write(STDOUT_FILENO, buf, (size_t) n) != n)
                        _exit(EXIT_FAILURE);
        _exit(n < 0 ? EXIT_FAILURE : EXIT_SUCCESS);
}

static _Noreturn void pager_exec(int read_fd) {
        static const char * const defaults[] = { "pager", "less", "more" };
        const char *less = getenv("SYSTEMD_LESS"), *charset = getenv("SYSTEMD_LESSCHARSET"), *p;
        bool none, trust;
        int secure;

        if (dup2(read_fd, STDIN_FILENO) < 0)
                _exit(EXIT_FAILURE);
        safe_close(read_fd);
        (void) prctl(PR_SET_PDEATHSIG, SIGTERM);
        rlimit_nofile_safe();
        (void) setenv("LESS", less ?: "FRSXMK", 1);
        if (charset)
                (void) setenv("LESSCHARSET", charset, 1);
        secure = pager_secure_mode(&trust);
        if (secure)
                (void) setenv("LESSSECURE", "1", 1);
        else
                (void) unsetenv("LESSSECURE");

        p = pager_from_env(&none);
        if (p && (trust || !secure))
                (void) execl("/bin/sh", "sh", "-c", p, (char *) NULL);
        for (size_t i = 0; i < ELEMENTSOF(defaults); i++) {
                /* Only less has a secure mode. */
                if (secure && !streq(defaults[i], "less"))
                        continue;
                (void) execlp(defaults[i], defaults[i], (char *) NULL);
        }
        pager_fallback();
}

int pager_open(bool enabled) {
        _cleanup_close_pair_ int fds[2] = { -EBADF, -EBADF };
        bool none;

        if (!enabled || pager_pid > 0 || !isatty(STDOUT_FILENO))
                return 0;
        (void) pager_from_env(&none);
        if (none)
                return 0;

        fflush(stdout);
        if (pipe2(fds, O_CLOEXEC) < 0)
                return log_error_errno(errno, "Failed to create a pipe for the pager: %m");
        pager_pid = fork();
        if (pager_pid < 0)
                return log_error_errno(errno, "Failed to start the pager: %m");
        if (pager_pid == 0) {
                fds[1] = safe_close(fds[1]);
                pager_exec(TAKE_FD(fds[0]));
        }

        saved_stdout = fcntl(STDOUT_FILENO, F_DUPFD_CLOEXEC, 3);
        if (dup2(fds[1], STDOUT_FILENO) < 0)
                return log_error_errno(errno, "Failed to hand stdout to the pager: %m");
        /* Errors go to the pager too while it shows the terminal, as systemd does. */
        if (isatty(STDERR_FILENO)) {
                saved_stderr = fcntl(STDERR_FILENO, F_DUPFD_CLOEXEC, 3);
                (void) dup2(fds[1], STDERR_FILENO);
        }
        return 1;
}

void pager_close(void) {
        if (pager_pid <= 0)
                return;
        fflush(stdout);
        fflush(stderr);
        /* The pager sees EOF once our ends are gone, then we wait for it to quit. */
        if (saved_stdout >= 0)
                (void) dup2(saved_stdout, STDOUT_FILENO);
        else
                (void) close(STDOUT_FILENO);
        if (saved_stderr >= 0)
                (void) dup2(saved_stderr, STDERR_FILENO);
        saved_stdout = safe_close(saved_stdout);
        saved_stderr = safe_close(saved_stderr);
        while (waitpid(pager_pid, NULL, 0) < 0 && errno == EINTR)
                ;
        pager_pid = 0;
}
