/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Forked helpers with a deadline, for work that may block on someone else's
 * file system: a lookup below another namespace's root (the scan), or
 * setns() and a swap there (heal). A FUSE server that never answers, or a
 * dead NFS server, leaves the task that asked waiting; the parent stops
 * waiting at the deadline, kills the child and goes on. A child whose
 * request the FUSE server already read cannot even be killed (the kernel
 * waits for the answer uninterruptibly: fs/fuse/dev.c
 * request_wait_answer()): it is abandoned, never waited for, and reaped
 * once it exits (the connection aborted, the server gone).
 */

#include <stdint.h>
#include <sys/types.h>

#include "nsscan.h"

typedef struct Worker {
        pid_t pid;
        int pidfd;
} Worker;

#define WORKER_NULL ((Worker) { .pid = 0, .pidfd = -EBADF })

/*
 * fork(): 0 in the child (which must _exit()), 1 in the parent (*ret set),
 * <0 on failure. The child keeps fds 0-2 and the @n_keep fds in @keep and
 * closes every other one at once: a worker that gets stuck must not hold
 * what its parent holds, above all the lock on /run/tuck/lock (flock()
 * belongs to the open file, which the child shares), the staging namespace
 * or the bus, for as long as it waits.
 */
int worker_fork(Worker *ret, const int *keep, size_t n_keep);

/*
 * Wait for @w to exit until @deadline (CLOCK_MONOTONIC µs), calling @b's
 * keepalive meanwhile (@b may be NULL). Returns its exit status (>= 0),
 * -EPROTO if a signal ended it, or -ETIMEDOUT: then it was sent SIGKILL and
 * is abandoned (worker_abandon()). @w is done either way.
 */
int worker_wait(Worker *w, uint64_t deadline, const ScanBudget *b);

/*
 * The same, for a child that sends one answer of @size bytes on @fd (a
 * socketpair: heal.c's, carry.c's) before it exits: the answer and then the
 * exit, both by @deadline. Returns the exit status (>= 0) with the answer in
 * @buf and, if @ret_fd is not NULL, the fd the answer carried (SCM_RIGHTS;
 * -EBADF if none); -ETIMEDOUT (killed, abandoned) or -EPROTO (no answer, or
 * a signal ended it).
 */
int worker_recv_wait(Worker *w, int fd, void *buf, size_t size, int *ret_fd, uint64_t deadline,
                     const ScanBudget *b);

/* SIGKILL, and reap it if it died at once; otherwise reaped later by worker_reap_abandoned(). */
void worker_abandon(Worker *w);

/* Reap the abandoned workers that have exited since (never blocks). Returns how many remain. */
size_t worker_reap_abandoned(void);

void worker_done(Worker *w);
