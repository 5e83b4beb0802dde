/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * tuck-fault: run a command with system calls failing on purpose (a seccomp
 * filter, inherited by every child), to test tuck's failure paths on a
 * healthy kernel.
 *
 *   tuck-fault [--hide-beneath] [--fail=RULE]... -- COMMAND [ARGS...]
 *
 *   --hide-beneath   move_mount() with MOVE_MOUNT_BENEATH fails with EINVAL,
 *                    exactly what a kernel without the feature says
 *   --kill=SYSCALL[:ARG=VALUE|:ARG&MASK]
 *                    the process is killed (SIGSYS) at that call: a crash
 *                    at a chosen point
 *   --kill-armed=SYSCALL[:ARG=VALUE|:ARG&MASK] --arm-file=PATH [--arm-skip=N]
 *                    the same kill, but only once PATH exists, and then not
 *                    at the first N such calls: a crash at a chosen point
 *                    after start-up (a command's own start-up may make the
 *                    same calls). A supervisor process (forked first, so it
 *                    runs without the filter, in the same process group)
 *                    gets each call through a seccomp listener, lets it run
 *                    while unarmed, and kills the caller's process with
 *                    SIGKILL once armed. It exits when no process with the
 *                    filter is left.
 *   --fail=SYSCALL:ERRNO[:ARG=VALUE|:ARG&MASK]
 *                    SYSCALL fails with ERRNO (a name like EIO or a number),
 *                    optionally only when argument ARG (0-5) equals VALUE, or
 *                    has all bits of MASK set. Example: move_mount:EIO:4=0x204
 *                    fails only the swap (a detached tree moved beneath).
 */

#include <errno.h>
#include <getopt.h>
#include <linux/seccomp.h>
#include <poll.h>
#include <seccomp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include "swap.h"   /* send_fd(), receive_fd(): libtuck's SCM_RIGHTS helpers */

#define MOVE_MOUNT_BENEATH 0x00000200

static const struct { const char *name; int value; } errnos[] = {
        { "EIO", EIO }, { "EINVAL", EINVAL }, { "EPERM", EPERM }, { "ENOSPC", ENOSPC },
        { "ENOMEM", ENOMEM }, { "EBUSY", EBUSY }, { "ENODEV", ENODEV }, { "EACCES", EACCES },
        { "ENOSYS", ENOSYS },
};

static int parse_errno(const char *s) {
        for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
                if (strcmp(s, errnos[i].name) == 0)
                        return errnos[i].value;
        return atoi(s);
}

/* "SYSCALL:ERRNO[:COND]", or for a kill "SYSCALL[:COND]"; an armed kill goes to the listener. */
static int add_rule(scmp_filter_ctx ctx, const char *spec, bool kill, bool armed) {
        char *copy = strdup(spec), *name, *err = NULL, *cond;
        uint32_t action;
        int nr, r;

        if (!copy)
                return -ENOMEM;
        name = strtok(copy, ":");
        if (!kill)
                err = strtok(NULL, ":");
        cond = strtok(NULL, ":");
        if (!name || (!kill && !err))
                goto bad;
        nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR || (!kill && parse_errno(err) <= 0))
                goto bad;
        action = armed ? SCMP_ACT_NOTIFY : kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(parse_errno(err));
        if (!cond)
                r = seccomp_rule_add(ctx, action, nr, 0);
        else {
                unsigned arg;
                unsigned long long v;
                char op;

                if (sscanf(cond, "%u%c%lli", &arg, &op, &v) != 3 || arg > 5 || (op != '=' && op != '&'))
                        goto bad;
                if (op == '=')
                        r = seccomp_rule_add(ctx, action, nr, 1, SCMP_CMP(arg, SCMP_CMP_EQ, v));
                else
                        r = seccomp_rule_add(ctx, action, nr, 1, SCMP_CMP(arg, SCMP_CMP_MASKED_EQ, v, v));
        }
        free(copy);
        return r;
bad:
        fprintf(stderr, "tuck-fault: bad rule '%s' (SYSCALL%s[:ARG=VALUE|:ARG&MASK])\n", spec, kill ? "" : ":ERRNO");
        free(copy);
        return -EINVAL;
}

/*
 * The supervisor: every armed call comes here. Unarmed (no arm file yet, or
 * one of the first skip calls since): the call goes on as if nothing had
 * looked at it. Armed: the caller's process is killed before the call runs
 * (SIGKILL to a thread's id reaches its whole process), and so is every
 * later caller, as SCMP_ACT_KILL_PROCESS would. When the last process with
 * the filter is gone, the listener hangs up and we exit.
 */
static int supervise(int listener, const char *arm_file, unsigned skip) {
        struct seccomp_notif *req = NULL;
        struct seccomp_notif_resp *resp = NULL;
        unsigned armed_calls = 0;
        int r;

        r = seccomp_notify_alloc(&req, &resp);
        if (r < 0) {
                fprintf(stderr, "tuck-fault: cannot allocate notifications: %s\n", strerror(-r));
                return 1;
        }
        for (;;) {
                struct pollfd p = { .fd = listener, .events = POLLIN };

                if (poll(&p, 1, -1) < 0) {
                        if (errno == EINTR)
                                continue;
                        perror("tuck-fault: poll");
                        break;
                }
                if (!(p.revents & POLLIN))
                        break;   /* POLLHUP: no process with the filter left */
                /* The kernel takes only a zeroed one. libseccomp says -ECANCELED
                 * for any failure of the ioctl: errno has the kernel's word. */
                memset(req, 0, sizeof(*req));
                r = seccomp_notify_receive(listener, req);
                if (r < 0) {
                        if (errno == ENOENT || errno == EINTR)   /* the caller died meanwhile */
                                continue;
                        fprintf(stderr, "tuck-fault: cannot receive a notification: %m\n");
                        break;
                }
                if (access(arm_file, F_OK) == 0 && armed_calls++ >= skip) {
                        /* Still blocked in the call (not gone, its pid not reused): kill it there. */
                        if (seccomp_notify_id_valid(listener, req->id) == 0)
                                (void) kill((pid_t) req->pid, SIGKILL);
                        continue;
                }
                *resp = (struct seccomp_notif_resp) { .id = req->id, .flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE };
                r = seccomp_notify_respond(listener, resp);
                if (r < 0 && errno != ENOENT) {
                        fprintf(stderr, "tuck-fault: cannot let a call go on: %m\n");
                        break;
                }
        }
        seccomp_notify_free(req, resp);
        return 0;
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help",         no_argument,       NULL, 'h' },
                { "hide-beneath", no_argument,       NULL, 'B' },
                { "fail",         required_argument, NULL, 'f' },
                { "kill",         required_argument, NULL, 'k' },
                { "kill-armed",   required_argument, NULL, 'a' },
                { "arm-file",     required_argument, NULL, 'F' },
                { "arm-skip",     required_argument, NULL, 'S' },
                {}
        };
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        const char *arm_file = NULL;
        bool armed = false;
        unsigned skip = 0;
        int c, sock[2], listener;
        pid_t pid;

        if (!ctx)
                return 1;
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("tuck-fault [--hide-beneath] [--fail=SYSCALL:ERRNO[:ARG=VALUE|:ARG&MASK]]...\n"
                               "           [--kill=SYSCALL[:ARG=VALUE|:ARG&MASK]]...\n"
                               "           [--kill-armed=SYSCALL[:ARG=VALUE|:ARG&MASK]... --arm-file=PATH [--arm-skip=N]]\n"
                               "           -- COMMAND [ARGS...]\n");
                        return 0;
                case 'B':
                        if (add_rule(ctx, "move_mount:EINVAL:4&0x200", false, false) < 0)
                                return 2;
                        break;
                case 'f':
                case 'k':
                case 'a':
                        if (add_rule(ctx, optarg, c != 'f', c == 'a') < 0)
                                return 2;
                        armed = armed || c == 'a';
                        break;
                case 'F':
                        arm_file = optarg;
                        break;
                case 'S': {
                        char *end;

                        errno = 0;
                        unsigned long v = strtoul(optarg, &end, 10);
                        if (errno != 0 || end == optarg || *end != 0 || v > 1000000) {
                                fprintf(stderr, "tuck-fault: bad --arm-skip '%s'\n", optarg);
                                return 2;
                        }
                        skip = (unsigned) v;
                        break;
                }
                default:
                        return 2;
                }
        if (optind >= argc) {
                fprintf(stderr, "tuck-fault: no command\n");
                return 2;
        }
        if (armed != !!arm_file) {
                fprintf(stderr, "tuck-fault: --kill-armed and --arm-file go together\n");
                return 2;
        }
        if (armed) {
                /* The supervisor first, without the filter: it must never wait for itself. */
                if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sock) < 0) {
                        perror("tuck-fault: socketpair");
                        return 1;
                }
                pid = fork();
                if (pid < 0) {
                        perror("tuck-fault: fork");
                        return 1;
                }
                if (pid == 0) {
                        close(sock[0]);
                        listener = receive_fd(sock[1]);
                        if (listener < 0) {
                                fprintf(stderr, "tuck-fault: no listener from the command's process\n");
                                _exit(1);
                        }
                        close(sock[1]);
                        _exit(supervise(listener, arm_file, skip));
                }
                close(sock[1]);
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_load(ctx) < 0) {
                perror("tuck-fault: cannot load the seccomp filter");
                return 1;
        }
        if (armed) {
                listener = seccomp_notify_fd(ctx);
                if (listener < 0 || send_fd(sock[0], listener) < 0) {
                        perror("tuck-fault: cannot hand the listener to the supervisor");
                        return 1;
                }
                /* The kernel made the listener close-on-exec: the supervisor's is the one left. */
                close(sock[0]);
        }
        seccomp_release(ctx);
        execvp(argv[optind], argv + optind);
        perror("tuck-fault: exec");
        return 127;
}
