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

#include "floors.h"
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
        EXIT_REFUSED = 3,        /* policy: an extension held back (downgrade or removal not allowed);
                                  * for status: one is held back now */
        EXIT_NO_FEATURE = 4,     /* the kernel lacks MOVE_MOUNT_BENEATH */
        EXIT_BUSY = 5,           /* --no-block and another operation holds the lock */
};

static const char *arg_root = "/";
static const char *arg_config = NULL;
static bool arg_json = false;
static bool arg_quiet = false;
static TuckOptions arg_options = {};
static char *arg_via = NULL;

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
               "  versions               Each extension's version floor, the decision behind it,\n"
               "                         and what is active and held back\n"
               "  forget NAME...         Retire extensions: drop their floors and removal protection\n"
               "  beneath SOURCE TARGET  Clone SOURCE and move it beneath the top mount at TARGET\n\n"
               "Options:\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "     --root=PATH         Operate below PATH (hierarchies, search dirs, /run/tuck)\n"
               "     --config=PATH       Configuration file (default: ROOT/etc/tuck/tuck.conf)\n"
               "     --class=CLASS       Only sysext or confext\n"
               "     --json              status, list and the verbs: print JSON\n"
               "     --force             Refresh even if the inputs did not change\n"
               "     --allow-downgrade[=NAME]\n"
               "                         Allow older versions and unrequested removals: of every\n"
               "                         extension, or of NAME (may repeat). Recorded: the floor\n"
               "                         moves to the allowed version, later runs honour it\n"
               "     --remove=NAME       Allow extension NAME to leave the merged set\n"
               "     --allow-window      Without MOVE_MOUNT_BENEATH: unmount, then mount\n"
               "                         (opens a window in which everyone sees the base)\n"
               "     --no-block          Fail instead of waiting for another operation's lock\n"
               "  -q --quiet             Print only errors\n"
               "  -v --verbose           Print debug messages\n\n"
               "Exit status: 0 success, 1 failure (old generation kept), 2 usage error,\n"
               "3 refused by policy: an extension held back (downgrade/removal; the rest\n"
               "went ahead; for status: one is held back now), 4 kernel lacks MOVE_MOUNT_BENEATH,\n"
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
                { "allow-downgrade", optional_argument, NULL, ARG_ALLOW_DOWNGRADE },
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
                        if (!optarg) {
                                arg_options.allow_downgrade = true;
                                break;
                        }
                        if (!image_name_is_valid(optarg)) {
                                log_error("--allow-downgrade= takes an extension name, not '%s'.", optarg);
                                return -EINVAL;
                        }
                        if (!strv_contains(arg_options.allow_downgrade_names, optarg) &&
                            strv_extend(&arg_options.allow_downgrade_names, optarg) < 0)
                                return -ENOMEM;
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
        if (r >= 0)
                return EXIT_OK;
        return exit_status(report_error(report) ?: r);
}

/* tuck_merge(), tuck_refresh(), tuck_unmerge() */
typedef int (*Operation)(TuckContext *c, const TuckOptions *o, Report **ret);

static int verb_operation(TuckContext *c, const char *verb, Operation operation) {
        _cleanup_report_ Report *report = NULL;
        int r;

        r = operation(c, &arg_options, &report);
        if (!report)
                return exit_status(log_error_errno(r, "Failed to %s: %m", verb));
        if (arg_json)
                (void) print_json(report_to_json(report));
        else if (!arg_quiet || r < 0)
                report_print(report, r < 0 ? stderr : stdout);
        return operation_status(report, r);
}

static int verb_list(TuckContext *c, const char *verb, Operation unused) {
        _cleanup_free_ char *error = NULL;
        ImageList *l = NULL;
        int r;

        r = tuck_list(c, &arg_options, &l, &error);
        if (r < 0)
                return exit_status(log_error_errno(r, "Failed to list images: %s", error ?: strerror(-r)));
        if (arg_json)
                r = print_json(image_list_to_json(l));
        else
                image_list_print(l, stdout);
        image_list_free(l);
        return exit_status(r);
}

static int verb_status(TuckContext *c, const char *verb, Operation unused) {
        Status *s = NULL;
        bool degraded;
        int r;

        r = tuck_status(c, &s);
        if (r < 0)
                return exit_status(log_error_errno(r, "Failed to get status: %m"));
        if (arg_json)
                r = print_json(status_to_json(s));
        else
                status_print(s, stdout);
        /* Degraded (an extension held back, a record unusable): exit 3, like a refusal by policy. */
        degraded = status_degraded(s);
        status_free(s);
        return r < 0 ? exit_status(r) : degraded ? EXIT_REFUSED : EXIT_OK;
}

static int verb_versions(TuckContext *c, const char *verb, Operation unused) {
        _cleanup_free_ char *error = NULL;
        VersionsView *v = NULL;
        int r;

        r = tuck_versions(c, &arg_options, &v, &error);
        if (r < 0)
                return exit_status(log_error_errno(r, "%s", error ?: strerror(-r)));
        if (arg_json)
                r = print_json(versions_view_to_json(v));
        else
                versions_view_print(v, stdout);
        versions_view_free(v);
        return exit_status(r);
}

static const struct {
        const char *name;
        int (*run)(TuckContext *c, const char *verb, Operation operation);   /* returns the exit status */
        Operation operation;
} verbs[] = {
        { "status",  verb_status,    NULL          },
        { "list",    verb_list,      NULL          },
        { "merge",   verb_operation, tuck_merge    },
        { "refresh", verb_operation, tuck_refresh  },
        { "unmerge", verb_operation, tuck_unmerge  },
        { "versions", verb_versions, NULL          },
};

/* The words recorded with a decision (versions.json): the verb and the options that decide. */
static int make_via(const char *verb) {
        _cleanup_strv_free_ char **words = NULL;

        if (strv_extend(&words, "tuckctl") < 0 || strv_extend(&words, verb) < 0)
                return -ENOMEM;
        if (arg_options.allow_downgrade && strv_extend(&words, "--allow-downgrade") < 0)
                return -ENOMEM;
        STRV_FOREACH(n, arg_options.allow_downgrade_names)
                if (strv_consume(&words, strjoin("--allow-downgrade=", *n)) < 0)
                        return -ENOMEM;
        STRV_FOREACH(n, arg_options.remove)
                if (strv_consume(&words, strjoin("--remove=", *n)) < 0)
                        return -ENOMEM;
        arg_via = strv_join(words, " ");
        if (!arg_via)
                return -ENOMEM;
        arg_options.via = arg_via;
        return 0;
}

/* forget NAME...: works on versions.json under the lock, with or without tuckd. */
static int verb_forget(char * const *names) {
        _cleanup_free_ char *error = NULL, *message = NULL;
        TuckContext *c = NULL;
        int r;

        STRV_FOREACH(n, names)
                if (!image_name_is_valid(*n)) {
                        log_error("'%s' is not an extension name.", *n);
                        return EXIT_USAGE;
                }
        r = tuck_context_new(arg_root, arg_config, &c, &error);
        if (r < 0) {
                log_error_errno(r, "Failed to set up: %s", error ?: strerror(-r));
                return r == -EINVAL || r == -EBADMSG ? EXIT_USAGE : EXIT_FAILED;
        }
        r = tuck_forget(c, &arg_options, names, &message);
        tuck_context_free(c);
        if (r < 0) {
                log_error("%s", message ?: strerror(-r));
                return r == -EBUSY ? EXIT_BUSY : EXIT_FAILED;
        }
        if (!arg_quiet && !isempty(message))
                puts(message);
        return EXIT_OK;
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

/* A verb with a context: through tuckd while it runs for this root (mutating verbs), else directly. */
static int run_verb(size_t v) {
        _cleanup_free_ char *error = NULL;
        TuckContext *c = NULL;
        bool handled;
        int r;

        r = make_via(verbs[v].name);
        if (r < 0)
                return exit_status(log_error_errno(r, "Out of memory."));
        r = tuckctl_bus_try(verbs[v].name, arg_root, &arg_options, arg_json, arg_quiet, &handled);
        if (handled)
                return exit_status(r);

        r = tuck_context_new(arg_root, arg_config, &c, &error);
        if (r < 0) {
                log_error_errno(r, "Failed to set up: %s", error ?: strerror(-r));
                return r == -EINVAL || r == -EBADMSG ? EXIT_USAGE : EXIT_FAILED;
        }
        r = verbs[v].run(c, verbs[v].name, verbs[v].operation);
        tuck_context_free(c);
        return r;
}

static int run(int argc, char *argv[]) {
        const char *verb;
        int r;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_OK;
        if (optind >= argc) {
                log_error("No command given; see --help.");
                return EXIT_USAGE;
        }
        verb = argv[optind];

        if (streq(verb, "forget")) {
                if (argc - optind < 2) {
                        log_error("Usage: tuckctl forget NAME...");
                        return EXIT_USAGE;
                }
                return verb_forget(argv + optind + 1);
        }
        if (streq(verb, "beneath")) {
                if (argc - optind != 3) {
                        log_error("Usage: tuckctl beneath SOURCE TARGET");
                        return EXIT_USAGE;
                }
                return exit_status(verb_beneath(argv[optind + 1], argv[optind + 2]));
        }
        for (size_t v = 0; v < ELEMENTSOF(verbs); v++) {
                if (!streq(verb, verbs[v].name))
                        continue;
                if (argc - optind != 1) {
                        log_error("'%s' takes no arguments.", verb);
                        return EXIT_USAGE;
                }
                return run_verb(v);
        }
        log_error("Unknown command '%s'; see --help.", verb);
        return EXIT_USAGE;
}

int main(int argc, char *argv[]) {
        int r = run(argc, argv);

        strv_free(arg_options.remove);
        strv_free(arg_options.allow_downgrade_names);
        free(arg_via);
        return r;
}
