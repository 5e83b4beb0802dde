/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "log.h"
#include "swap.h"
#include "util.h"
#include "worker.h"

#ifndef P_PIDFD
#define P_PIDFD 3
#endif

/* Killed, not yet reaped: a child stuck in a request its FUSE server read and never answers. */
static Worker *abandoned;
static size_t n_abandoned;

void worker_done(Worker *w) {
        w->pidfd = safe_close(w->pidfd);
        w->pid = 0;
}

static bool keep_fd(int fd, const int *keep, size_t n_keep) {
        for (size_t i = 0; i < n_keep; i++)
                if (keep[i] == fd)
                        return true;
        return false;
}

/* In the child: every fd but 0-2 and @keep closed. */
static void close_others(const int *keep, size_t n_keep) {
        _cleanup_closedir_ DIR *d = NULL;
        int lo = 3;

        /* close_range() over the gaps between the kept ones, lowest first. */
        for (;;) {
                int next = INT_MAX;

                for (size_t i = 0; i < n_keep; i++)
                        if (keep[i] >= lo && keep[i] < next)
                                next = keep[i];
                if (next > lo && syscall(SYS_close_range, (unsigned) lo, (unsigned) next - 1, 0) < 0)
                        break;
                if (next == INT_MAX)
                        return;
                lo = next + 1;
        }
        /* Refused (seccomp) or missing (Linux < 5.9): by the list of what is open. */
        d = opendir_at(AT_FDCWD, "/proc/self/fd");
        for (struct dirent *de; d && (de = readdir_no_dot(d)); ) {
                int fd = atoi(de->d_name);

                if (fd >= 3 && fd != dirfd(d) && !keep_fd(fd, keep, n_keep))
                        (void) close(fd);
        }
}

int worker_fork(Worker *ret, const int *keep, size_t n_keep) {
        pid_t pid;
        int fd;

        pid = fork();
        if (pid < 0)
                return negative_errno();
        if (pid == 0) {
                close_others(keep, n_keep);
                return 0;
        }
        fd = pidfd_open_above_stdio(pid);
        if (fd < 0) {
                /* Cannot happen for our own unreaped child; never leave it unwatched. */
                (void) kill(pid, SIGKILL);
                (void) waitpid(pid, NULL, 0);
                return fd;
        }
        *ret = (Worker) { .pid = pid, .pidfd = fd };
        return 1;
}

/* Reaps @w if it has exited: its status (>= 0), -EPROTO (a signal), or -EAGAIN (still running). */
static int worker_try_reap(Worker *w) {
        siginfo_t si = {};

        if (waitid((idtype_t) P_PIDFD, (id_t) w->pidfd, &si, WEXITED | WNOHANG) < 0)
                return negative_errno();
        if (si.si_pid == 0)
                return -EAGAIN;
        return si.si_code == CLD_EXITED ? si.si_status : -EPROTO;
}

void worker_abandon(Worker *w) {
        Worker *a;

        if (w->pidfd < 0)
                return;
        (void) syscall(SYS_pidfd_send_signal, w->pidfd, SIGKILL, NULL, 0);
        /* A child waiting killably (FUSE request not yet read, most NFS waits) dies right away. */
        for (unsigned i = 0; i < 10; i++) {
                struct pollfd p = { .fd = w->pidfd, .events = POLLIN };

                if (poll(&p, 1, 1) > 0)
                        break;
        }
        if (worker_try_reap(w) != -EAGAIN) {
                worker_done(w);
                return;
        }
        a = realloc(abandoned, (n_abandoned + 1) * sizeof(Worker));
        if (!a) {
                /* Cannot remember it: it becomes a zombie until we exit. */
                worker_done(w);
                return;
        }
        abandoned = a;
        abandoned[n_abandoned++] = *w;
        log_debug("Worker %d does not die (waiting uninterruptibly on a file system); reaped once it does.",
                  (int) w->pid);
        *w = WORKER_NULL;
}

size_t worker_reap_abandoned(void) {
        size_t k = 0;

        for (size_t i = 0; i < n_abandoned; i++) {
                if (worker_try_reap(&abandoned[i]) == -EAGAIN) {
                        abandoned[k++] = abandoned[i];
                        continue;
                }
                log_debug("Abandoned worker %d has exited.", (int) abandoned[i].pid);
                worker_done(&abandoned[i]);
        }
        n_abandoned = k;
        return k;
}

int worker_wait(Worker *w, uint64_t deadline, const ScanBudget *b) {
        int r;

        for (;;) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                struct pollfd p = { .fd = w->pidfd, .events = POLLIN };
                int timeout;

                r = worker_try_reap(w);
                if (r != -EAGAIN) {
                        worker_done(w);
                        return r;
                }
                if (now >= deadline) {
                        worker_abandon(w);
                        return -ETIMEDOUT;
                }
                /* Wake at least every 100 ms to keep the watchdog fed. */
                timeout = (int) ((deadline - now + 999) / 1000);
                if (timeout > 100)
                        timeout = 100;
                if (poll(&p, 1, timeout) < 0 && errno != EINTR) {
                        r = negative_errno();
                        worker_abandon(w);
                        return r;
                }
                scan_budget_keepalive(b);
        }
}

int worker_recv_wait(Worker *w, int fd, void *buf, size_t size, int *ret_fd, uint64_t deadline,
                     const ScanBudget *b) {
        _cleanup_close_ int passed = -EBADF;
        ssize_t k = -1;
        int r;

        for (;;) {
                uint64_t now = now_usec(CLOCK_MONOTONIC);
                /* The answer, or its exit (a child that died without one). */
                struct pollfd p[2] = { { .fd = fd, .events = POLLIN }, { .fd = w->pidfd, .events = POLLIN } };

                if (now >= deadline) {
                        worker_abandon(w);
                        return -ETIMEDOUT;
                }
                r = poll(p, 2, deadline - now > 100000 ? 100 : (int) ((deadline - now + 999) / 1000));
                scan_budget_keepalive(b);
                if (r < 0 && errno != EINTR) {
                        r = negative_errno();
                        worker_abandon(w);
                        return r;
                }
                if (r <= 0)
                        continue;
                k = receive_with_fd(fd, buf, size, &passed);
                if (k >= 0 || (k != -EAGAIN && k != -EINTR) || (p[1].revents & POLLIN))
                        break;          /* the answer, EOF, or it exited without one */
        }
        r = worker_wait(w, deadline, b);
        if (r < 0)
                return r;
        if (k != (ssize_t) size)
                return -EPROTO;
        if (ret_fd)
                *ret_fd = TAKE_FD(passed);
        return r;
}
