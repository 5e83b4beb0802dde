/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * tuckctl: the command line for libtuck. Each verb parses options, calls the
 * one libtuck function that does the work (the same tuckd's D-Bus methods
 * call) and prints its report as text or JSON.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "mount-api.h"
#include "status.h"
#include "swap.h"
#include "tuck.h"
#include "tuckctl-bus.h"
#include "util.h"

/* Exit codes, documented in tuckctl(8). */
enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,         /* an operation failed; the old generation is in place */
        EXIT_USAGE = 2,
        EXIT_REFUSED = 3,        /* policy: downgrade or removal not allowed */
        EXIT_NO_FEATURE = 4,     /* the kernel lacks MOVE_MOUNT_BENEATH */
        EXIT_BUSY = 5,           /* --no-block and another operation holds the lock */
};

static const char *arg_root = "/";
static const char *arg_config = NULL;
static bool arg_json = false;
static bool arg_quiet = false;
static TuckOptions arg_options = {};

static void help(void) {
        printf("tuckctl [OPTIONS...] COMMAND [ARGS...]\n\n"
               "Atomically merge and refresh system (/usr, /opt) and configuration (/etc)\n"
               "extension images with MOVE_MOUNT_BENEATH.\n\n"
               "Commands:\n"
               "  status                 Per hierarchy: generation, layers, since when, and the\n"
               "                         mount namespaces that do not see the current generation\n"
               "  list                   Images found, valid or why not\n"
               "  merge                  Merge extensions into hierarchies not merged yet\n"
               "  refresh                Replace the merged overlays with the current images,\n"
               "                         atomically (or merge, if nothing is merged)\n"
               "  unmerge                Unmount the overlays: the base is visible again\n"
               "  beneath SOURCE TARGET  Clone SOURCE and move it beneath the top mount at TARGET\n\n"
               "Options:\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "     --root=PATH         Operate below PATH (hierarchies, search dirs, /run/tuck)\n"
               "     --config=PATH       Configuration file (default: ROOT/etc/tuck/tuck.conf)\n"
               "     --class=CLASS       Only sysext or confext\n"
               "     --json              status, list and the verbs: print JSON\n"
               "     --force             Refresh even if the inputs did not change\n"
               "     --allow-downgrade   Allow older versions and unrequested removals\n"
               "     --remove=NAME       Allow extension NAME to leave the merged set\n"
               "     --allow-window      Without MOVE_MOUNT_BENEATH: unmount, then mount\n"
               "                         (opens a window in which everyone sees the base)\n"
               "     --no-block          Fail instead of waiting for another operation's lock\n"
               "  -q --quiet             Print only errors\n"
               "  -v --verbose           Print debug messages\n\n"
               "Exit status: 0 success, 1 failure (old generation kept), 2 usage error,\n"
               "3 refused by policy (downgrade/removal), 4 kernel lacks MOVE_MOUNT_BENEATH,\n"
               "5 lock held by another operation (--no-block).\n\n"
               "See tuckctl(8).\n");
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_ROOT,
                ARG_CONFIG,
                ARG_CLASS,
                ARG_JSON,
                ARG_FORCE,
                ARG_ALLOW_DOWNGRADE,
                ARG_REMOVE,
                ARG_ALLOW_WINDOW,
                ARG_NO_BLOCK,
        };
        static const struct option options[] = {
                { "help",            no_argument,       NULL, 'h'                 },
                { "version",         no_argument,       NULL, ARG_VERSION         },
                { "root",            required_argument, NULL, ARG_ROOT            },
                { "config",          required_argument, NULL, ARG_CONFIG          },
                { "class",           required_argument, NULL, ARG_CLASS           },
                { "json",            no_argument,       NULL, ARG_JSON            },
                { "force",           no_argument,       NULL, ARG_FORCE           },
                { "allow-downgrade", no_argument,       NULL, ARG_ALLOW_DOWNGRADE },
                { "remove",          required_argument, NULL, ARG_REMOVE          },
                { "allow-window",    no_argument,       NULL, ARG_ALLOW_WINDOW    },
                { "no-block",        no_argument,       NULL, ARG_NO_BLOCK        },
                { "quiet",           no_argument,       NULL, 'q'                 },
                { "verbose",         no_argument,       NULL, 'v'                 },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "hqv", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("tuckctl %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_ROOT:
                        arg_root = optarg;
                        break;
                case ARG_CONFIG:
                        arg_config = optarg;
                        break;
                case ARG_CLASS: {
                        ImageClass k = image_class_from_string(optarg);

                        if (k < 0) {
                                log_error("--class= takes 'sysext' or 'confext', not '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg_options.classes |= 1u << k;
                        break;
                }
                case ARG_JSON:
                        arg_json = true;
                        break;
                case ARG_FORCE:
                        arg_options.force = true;
                        break;
                case ARG_ALLOW_DOWNGRADE:
                        arg_options.allow_downgrade = true;
                        break;
                case ARG_REMOVE:
                        if (strv_extend(&arg_options.remove, optarg) < 0)
                                return -ENOMEM;
                        break;
                case ARG_ALLOW_WINDOW:
                        arg_options.allow_window = true;
                        break;
                case ARG_NO_BLOCK:
                        arg_options.no_block = true;
                        break;
                case 'q':
                        arg_quiet = true;
                        log_set_max_level(LOG_ERR);
                        break;
                case 'v':
                        log_set_max_level(LOG_DEBUG);
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }
        return 1;
}

static int print_json(json_object *o) {
        if (!o)
                return -ENOMEM;
        puts(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE));
        json_object_put(o);
        return 0;
}

static int exit_status(int r) {
        switch (r) {
        case -EPERM:
                return EXIT_REFUSED;
        case -EOPNOTSUPP:
                return EXIT_NO_FEATURE;
        case -EBUSY:
                return EXIT_BUSY;
        case -EINVAL:
                return EXIT_FAILED;
        default:
                return r < 0 ? EXIT_FAILED : EXIT_OK;
        }
}

/* One exit status for a report: the lock, a missing feature and policy have their own. */
static int operation_status(const Report *report, int r) {
        bool feature = false, policy = false;

        if (r >= 0)
                return EXIT_OK;
        if (report->error == -EBUSY)
                return EXIT_BUSY;
        for (size_t i = 0; i < report->n_hierarchies; i++) {
                feature = feature || report->hierarchies[i].error == -EOPNOTSUPP;
                policy = policy || report->hierarchies[i].error == -EPERM;
        }
        return feature ? EXIT_NO_FEATURE : policy ? EXIT_REFUSED : EXIT_FAILED;
}

static int verb_operation(TuckContext *c, const char *verb) {
        Report *report = NULL;
        int r;

        if (streq(verb, "merge"))
                r = tuck_merge(c, &arg_options, &report);
        else if (streq(verb, "refresh"))
                r = tuck_refresh(c, &arg_options, &report);
        else
                r = tuck_unmerge(c, &arg_options, &report);
        if (!report)
                return log_error_errno(r, "Failed to %s: %m", verb);

        if (arg_json)
                (void) print_json(report_to_json(report));
        else if (!arg_quiet || r < 0)
                report_print(report, r < 0 ? stderr : stdout);
        r = operation_status(report, r);
        report_free(report);
        return r;
}

static int verb_list(TuckContext *c) {
        ImageList *l = NULL;
        int r;

        r = tuck_list(c, &arg_options, &l);
        if (r < 0)
                return log_error_errno(r, "Failed to list images: %m");
        if (arg_json)
                r = print_json(image_list_to_json(l));
        else
                image_list_print(l, stdout);
        image_list_free(l);
        return r;
}

static int verb_status(TuckContext *c) {
        Status *s = NULL;
        int r;

        r = tuck_status(c, &s);
        if (r < 0)
                return log_error_errno(r, "Failed to get status: %m");
        if (arg_json)
                r = print_json(status_to_json(s));
        else
                status_print(s, stdout);
        status_free(s);
        return r;
}

/* The raw primitive: util-linux 2.38 has no "mount --beneath". */
static int verb_beneath(const char *source, const char *target) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        fd = open_tree(AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0)
                return log_error_errno(errno, "Failed to clone '%s': %m", source);
        r = mount_beneath(fd, target);
        /* The kernel says EINVAL both for "no such flag" and for every layout it refuses: ask which. */
        if (r == -EINVAL && mount_beneath_supported("/tmp") == 0)
                return log_error_errno(EOPNOTSUPP, "The kernel lacks MOVE_MOUNT_BENEATH (Linux 6.5).");
        if (r == -EINVAL)
                return log_error_errno(r, "The kernel refused to move a clone of '%s' beneath '%s' (EINVAL): is "
                                       "something mounted there, not the namespace root's child, and not an "
                                       "ancestor of '%s'? See move_mount(2).", source, target, source);
        if (r < 0)
                return log_error_errno(r, "Failed to move a clone of '%s' beneath the top mount at '%s': %m",
                                       source, target);
        if (!arg_quiet)
                printf("Mounted a clone of '%s' beneath the top mount at '%s'.\n", source, target);
        return 0;
}

int main(int argc, char *argv[]) {
        _cleanup_free_ char *error = NULL;
        TuckContext *c = NULL;
        const char *verb;
        int r;

        r = parse_argv(argc, argv);
        if (r <= 0) {
                strv_free(arg_options.remove);
                return r < 0 ? EXIT_USAGE : EXIT_OK;
        }
        if (optind >= argc) {
                log_error("No command given; see --help.");
                return EXIT_USAGE;
        }
        verb = argv[optind];

        if (streq(verb, "beneath")) {
                if (argc - optind != 3) {
                        log_error("Usage: tuckctl beneath SOURCE TARGET");
                        return EXIT_USAGE;
                }
                return exit_status(verb_beneath(argv[optind + 1], argv[optind + 2]));
        }
        if (!strv_contains((char *[]) { "status", "list", "merge", "refresh", "unmerge", NULL }, verb)) {
                log_error("Unknown command '%s'; see --help.", verb);
                return EXIT_USAGE;
        }
        if (argc - optind != 1) {
                log_error("'%s' takes no arguments.", verb);
                return EXIT_USAGE;
        }

        /* While tuckd runs for this root, the mutating verbs go through it (tuckctl-bus.c). */
        bool handled;
        r = tuckctl_bus_try(verb, arg_root, &arg_options, arg_json, arg_quiet, &handled);
        if (handled) {
                strv_free(arg_options.remove);
                return exit_status(r);
        }

        r = tuck_context_new(arg_root, arg_config, &c, &error);
        if (r < 0) {
                log_error_errno(r, "Failed to set up: %s", error ?: strerror(-r));
                return r == -EINVAL || r == -EBADMSG ? EXIT_USAGE : EXIT_FAILED;
        }

        if (streq(verb, "status"))
                r = exit_status(verb_status(c));
        else if (streq(verb, "list"))
                r = exit_status(verb_list(c));
        else
                r = verb_operation(c, verb);

        tuck_context_free(c);
        strv_free(arg_options.remove);
        return r;
}
