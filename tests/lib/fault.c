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
 *   --fail=SYSCALL:ERRNO[:ARG=VALUE|:ARG&MASK]
 *                    SYSCALL fails with ERRNO (a name like EIO or a number),
 *                    optionally only when argument ARG (0-5) equals VALUE, or
 *                    has all bits of MASK set. Example: move_mount:EIO:4=0x204
 *                    fails only the swap (a detached tree moved beneath).
 */

#include <errno.h>
#include <getopt.h>
#include <seccomp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#define MOVE_MOUNT_BENEATH 0x00000200

static const struct { const char *name; int value; } errnos[] = {
        { "EIO", EIO }, { "EINVAL", EINVAL }, { "EPERM", EPERM }, { "ENOSPC", ENOSPC },
        { "ENOMEM", ENOMEM }, { "EBUSY", EBUSY }, { "ENODEV", ENODEV }, { "EACCES", EACCES },
};

static int parse_errno(const char *s) {
        for (size_t i = 0; i < sizeof(errnos) / sizeof(errnos[0]); i++)
                if (strcmp(s, errnos[i].name) == 0)
                        return errnos[i].value;
        return atoi(s);
}

/* "SYSCALL:ERRNO[:COND]", or with kill set "SYSCALL[:COND]". */
static int add_rule(scmp_filter_ctx ctx, const char *spec, bool kill) {
        char *copy = strdup(spec), *name, *err = NULL, *cond;
        uint32_t action;
        int nr, r;

        name = strtok(copy, ":");
        if (!kill)
                err = strtok(NULL, ":");
        cond = strtok(NULL, ":");
        if (!name || (!kill && !err))
                goto bad;
        nr = seccomp_syscall_resolve_name(name);
        if (nr == __NR_SCMP_ERROR || (!kill && parse_errno(err) <= 0))
                goto bad;
        action = kill ? SCMP_ACT_KILL_PROCESS : SCMP_ACT_ERRNO(parse_errno(err));
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

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help",         no_argument,       NULL, 'h' },
                { "hide-beneath", no_argument,       NULL, 'B' },
                { "fail",         required_argument, NULL, 'f' },
                { "kill",         required_argument, NULL, 'k' },
                {}
        };
        scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
        int c;

        if (!ctx)
                return 1;
        while ((c = getopt_long(argc, argv, "+h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        printf("tuck-fault [--hide-beneath] [--fail=SYSCALL:ERRNO[:ARG=VALUE|:ARG&MASK]]...\n"
                               "           [--kill=SYSCALL[:ARG=VALUE|:ARG&MASK]]... -- COMMAND [ARGS...]\n");
                        return 0;
                case 'B':
                        if (add_rule(ctx, "move_mount:EINVAL:4&0x200", false) < 0)
                                return 2;
                        break;
                case 'f':
                case 'k':
                        if (add_rule(ctx, optarg, c == 'k') < 0)
                                return 2;
                        break;
                default:
                        return 2;
                }
        if (optind >= argc) {
                fprintf(stderr, "tuck-fault: no command\n");
                return 2;
        }
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 || seccomp_load(ctx) < 0) {
                perror("tuck-fault: cannot load the seccomp filter");
                return 1;
        }
        seccomp_release(ctx);
        execvp(argv[optind], argv + optind);
        perror("tuck-fault: exec");
        return 127;
}
