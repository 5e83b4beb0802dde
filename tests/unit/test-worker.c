/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Forked workers with a deadline (worker.h): a child that answers is waited
 * for and its status returned; one that never does is killed at the
 * deadline and the caller goes on (-ETIMEDOUT); one that dies without an
 * answer says so (-EPROTO). The keepalive is called while waiting.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/socket.h>
#include <unistd.h>

#include "config.h"
#include "tap.h"
#include "util.h"
#include "worker.h"

static unsigned keepalives;

static void count(void *userdata) {
        keepalives++;
}

int main(void) {
        ScanBudget b = { .keepalive = count };
        Worker w = WORKER_NULL;
        int r, pair[2], lock;
        char answer[8] = "";

        r = worker_fork(&w, NULL, 0);
        if (r == 0)
                _exit(7);
        r = worker_wait(&w, now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC, &b);
        tap_ok(r == 7, "a child that exits: its status (%d)", r);
        tap_ok(w.pidfd < 0, "... and it is done with");

        r = worker_fork(&w, NULL, 0);
        if (r == 0)
                for (;;)
                        pause();
        r = worker_wait(&w, now_usec(CLOCK_MONOTONIC) + 200 * USEC_PER_MSEC, &b);
        tap_ok(r == -ETIMEDOUT, "a child that never exits: -ETIMEDOUT at the deadline (%s)", strerror(-r));
        tap_ok(keepalives > 0, "the keepalive was called while waiting (%u times)", keepalives);
        tap_ok(worker_reap_abandoned() == 0, "killed, it was reaped: none left abandoned");

        if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) < 0)
                return tap_ok(false, "socketpair: %m"), tap_done();
        lock = open("/proc/self/exe", O_RDONLY | O_CLOEXEC);
        r = worker_fork(&w, &pair[1], 1);
        if (r == 0) {
                /* Only what it was told to keep: the lock's fd is closed in here. */
                _exit(fcntl(lock, F_GETFD) < 0 && errno == EBADF && write(pair[1], "healed", 7) == 7 ? 0 : 1);
        }
        r = worker_recv_wait(&w, pair[0], answer, 7, NULL, now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC, &b);
        tap_ok(r == 0 && streq(answer, "healed"), "an answer, then the exit; no other fd of ours inherited (%d, '%s')",
               r, answer);

        r = worker_fork(&w, NULL, 0);
        if (r == 0)
                _exit(3);
        r = worker_recv_wait(&w, pair[0], answer, 7, NULL, now_usec(CLOCK_MONOTONIC) + 10 * USEC_PER_SEC, &b);
        tap_ok(r == -EPROTO, "no answer before the exit: -EPROTO (%s)", strerror(-r));

        r = worker_fork(&w, NULL, 0);
        if (r == 0)
                for (;;)
                        pause();
        r = worker_recv_wait(&w, pair[0], answer, 7, NULL, now_usec(CLOCK_MONOTONIC) + 200 * USEC_PER_MSEC, &b);
        tap_ok(r == -ETIMEDOUT, "no answer at all: -ETIMEDOUT (%s)", strerror(-r));
        close(pair[0]);
        close(pair[1]);
        return tap_done();
}
