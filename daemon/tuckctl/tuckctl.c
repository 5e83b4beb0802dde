/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * tuckctl: the command line for libtuck. Each verb parses options, calls the
 * one libtuck function that does the work (the same tuckd's D-Bus methods
 * call) and prints its report as text or JSON.
 *
 * It speaks systemd-sysext's language too: its verbs and options with their
 * meaning, status as the default verb, its JSON shapes. Invoked as
 * systemd-sysext or systemd-confext (the symlink the package puts in place
 * of systemd's binary, units/README.md), it is that tool: one class, its text
 * tables, its exit status (0 or 1), its help.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <systemd/sd-login.h>
#include <unistd.h>

#include "floors.h"
#include "log.h"
#include "mount-api.h"
#include "pager.h"
#include "status.h"
#include "swap.h"
#include "tuck.h"
#include "tuckctl-bus.h"
#include "util.h"

/* Exit codes, documented in tuckctl(8). Invoked as systemd-sysext: 0 or 1 (EXIT_FAILURE), as systemd's. */
enum {
        EXIT_OK = 0,
        EXIT_FAILED = 1,         /* an operation failed; the old generation is in place */
        EXIT_USAGE = 2,
        EXIT_REFUSED = 3,        /* policy: an extension held back (downgrade or removal not allowed);
                                  * for status: one is held back now */
        EXIT_NO_FEATURE = 4,     /* the kernel lacks MOVE_MOUNT_BENEATH */
        EXIT_BUSY = 5,           /* --no-block and another operation holds the lock */
};

typedef enum JsonMode {
        JSON_OFF,
        JSON_PRETTY,
        JSON_SHORT,
        _JSON_MODE_MAX,
        _JSON_MODE_INVALID = -EINVAL,
} JsonMode;

static const char *arg_root = "/";
static const char *arg_config = NULL;
static JsonMode arg_json = JSON_OFF;
static bool arg_pager = true;
static bool arg_legend = true;
static bool arg_quiet = false;
static TuckOptions arg_options = {};
static char *arg_via = NULL;
/* Invoked as systemd-sysext (IMAGE_SYSEXT) or systemd-confext (IMAGE_CONFEXT). */
static ImageClass arg_compat = _IMAGE_CLASS_INVALID;

static const char *program_name(void) {
        return program_invocation_short_name;
}

static void help_compat(void) {
        printf("%s [OPTIONS...] COMMAND\n\n"
               "Merge extension images into %s hierarchies, atomically (tuck %s).\n\n"
               "  status                  Show current merge status (default)\n"
               "  merge                   Merge extensions into relevant hierarchies\n"
               "  unmerge                 Unmerge extensions from relevant hierarchies\n"
               "  refresh                 Replace the merged extensions atomically\n"
               "  list                    List installed extensions\n"
               "  -h --help               Show this help\n"
               "     --version            Show package version\n\n"
               "Options:\n"
               "     --no-pager           Do not pipe output into a pager\n"
               "     --no-legend          Do not show the headers and footers\n"
               "     --root=PATH          Operate relative to root path\n"
               "     --json=pretty|short|off\n"
               "                          Generate JSON output\n"
               "     --force              Ignore version incompatibilities\n"
               "     --always-refresh=yes Refresh even if nothing changed\n"
               "     --no-reload          Do not reload the service manager\n\n"
               "This is tuckctl(8) acting as %s: see \"Differences from\n"
               "systemd-sysext\" there.\n",
               program_name(), arg_compat == IMAGE_SYSEXT ? "/usr/ and /opt/" : "the /etc/", PROJECT_VERSION,
               program_name());
}

static void help(void) {
        if (arg_compat >= 0) {
                help_compat();
                return;
        }
        printf("tuckctl [OPTIONS...] [COMMAND] [ARGS...]\n\n"
               "Atomically merge and refresh system (/usr, /opt) and configuration (/etc)\n"
               "extension images with MOVE_MOUNT_BENEATH.\n\n"
               "Commands:\n"
               "  status                 Per hierarchy: generation, layers, since when, and the\n"
               "                         mount namespaces that do not see the current generation\n"
               "                         (default)\n"
               "  list                   Images found, valid or why not\n"
               "  merge                  Merge extensions into hierarchies not merged yet\n"
               "  refresh                Replace the merged overlays with the current images,\n"
               "                         atomically (or merge, if nothing is merged)\n"
               "  unmerge                Unmount the overlays: the base is visible again\n"
               "  versions               Each extension's version floor, the decision behind it,\n"
               "                         and what is active and held back\n"
               "  forget NAME...         Retire extensions: drop their floors and removal protection\n"
               "  beneath SOURCE TARGET  Clone SOURCE and move it beneath the top mount at TARGET\n"
               "  help                   Show this help\n\n"
               "Options (as systemd-sysext's):\n"
               "  -h --help              Show this help\n"
               "     --version           Show the version\n"
               "     --root=PATH         Operate below PATH (hierarchies, search dirs, /run/tuck)\n"
               "     --json[=pretty|short|off]\n"
               "                         status, list and the verbs: print JSON\n"
               "     --no-pager          Do not pipe status and list into a pager\n"
               "     --no-legend         Do not print column headers and footers\n"
               "     --force             Ignore version incompatibilities with the host\n"
               "                         (ID, VERSION_ID, SYSEXT_LEVEL, ARCHITECTURE, SCOPE)\n"
               "     --always-refresh[=BOOL]\n"
               "                         Refresh even if the inputs did not change\n"
               "     --no-reload         Neither reload the service manager nor restart units\n"
               "                         after a swap, whatever the extensions ask\n\n"
               "Options (tuck's own):\n"
               "     --config=PATH       Configuration file (default: ROOT/etc/tuck/tuck.conf)\n"
               "     --class=CLASS       Only sysext or confext\n"
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

/* systemd's form: "PACKAGE VERSION (FULL VERSION)" and a line of compiled-in features. */
static void version(void) {
        printf("tuck %s (%s)\n"
               "+SYSEXT +CONFEXT +MOVE_MOUNT_BENEATH +SQUASHFS +EROFS +DDI +VERITY +JSON +DBUS "
               "+RELOAD_MANAGER +RESTART_UNITS +ALWAYS_REFRESH -MUTABLE -IMAGE_POLICY -VARLINK\n",
               PROJECT_VERSION, PROJECT_VERSION);
}

static JsonMode json_mode_from_string(const char *s) {
        static const char * const table[_JSON_MODE_MAX] = {
                [JSON_OFF] = "off",
                [JSON_PRETTY] = "pretty",
                [JSON_SHORT] = "short",
        };

        for (JsonMode m = 0; m < _JSON_MODE_MAX; m++)
                if (streq_ptr(s, table[m]))
                        return m;
        return _JSON_MODE_INVALID;
}

static int parse_argv(int argc, char *argv[]) {
        enum {
                ARG_VERSION = 0x100,
                ARG_ROOT,
                ARG_CONFIG,
                ARG_CLASS,
                ARG_JSON,
                ARG_NO_PAGER,
                ARG_NO_LEGEND,
                ARG_FORCE,
                ARG_ALWAYS_REFRESH,
                ARG_NO_RELOAD,
                ARG_ALLOW_DOWNGRADE,
                ARG_REMOVE,
                ARG_ALLOW_WINDOW,
                ARG_NO_BLOCK,
                ARG_NOT_SUPPORTED,
        };
        static const struct option options[] = {
                /* systemd-sysext's */
                { "help",            no_argument,       NULL, 'h'                 },
                { "version",         no_argument,       NULL, ARG_VERSION         },
                { "root",            required_argument, NULL, ARG_ROOT            },
                { "json",            optional_argument, NULL, ARG_JSON            },
                { "no-pager",        no_argument,       NULL, ARG_NO_PAGER        },
                { "no-legend",       no_argument,       NULL, ARG_NO_LEGEND       },
                { "force",           no_argument,       NULL, ARG_FORCE           },
                { "always-refresh",  optional_argument, NULL, ARG_ALWAYS_REFRESH  },
                { "no-reload",       no_argument,       NULL, ARG_NO_RELOAD       },
                /* systemd-sysext's that tuck does not implement: named, then refused */
                { "image-policy",    required_argument, NULL, ARG_NOT_SUPPORTED   },
                { "noexec",          required_argument, NULL, ARG_NOT_SUPPORTED   },
                { "mutable",         required_argument, NULL, ARG_NOT_SUPPORTED   },
                /* tuck's own */
                { "config",          required_argument, NULL, ARG_CONFIG          },
                { "class",           required_argument, NULL, ARG_CLASS           },
                { "allow-downgrade", optional_argument, NULL, ARG_ALLOW_DOWNGRADE },
                { "remove",          required_argument, NULL, ARG_REMOVE          },
                { "allow-window",    no_argument,       NULL, ARG_ALLOW_WINDOW    },
                { "no-block",        no_argument,       NULL, ARG_NO_BLOCK        },
                { "quiet",           no_argument,       NULL, 'q'                 },
                { "verbose",         no_argument,       NULL, 'v'                 },
                {}
        };
        int c, b, index;

        while ((c = getopt_long(argc, argv, "hqv", options, &index)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        version();
                        return 0;
                case ARG_ROOT:
                        arg_root = optarg;
                        break;
                case ARG_JSON:
                        /* systemd's --json takes its argument after a space too ("--json pretty"). */
                        if (!optarg && optind < argc && json_mode_from_string(argv[optind]) >= 0)
                                optarg = argv[optind++];
                        arg_json = optarg ? json_mode_from_string(optarg) : JSON_PRETTY;
                        if (arg_json < 0) {
                                log_error("Unknown argument to --json=: '%s' (pretty, short or off).", optarg);
                                return -EINVAL;
                        }
                        break;
                case ARG_NO_PAGER:
                        arg_pager = false;
                        break;
                case ARG_NO_LEGEND:
                        arg_legend = false;
                        break;
                case ARG_FORCE:
                        arg_options.ignore_release = true;
                        break;
                case ARG_ALWAYS_REFRESH:
                        b = optarg ? config_parse_boolean(optarg) : 1;
                        if (b < 0) {
                                log_error("--always-refresh= takes a boolean, not '%s'.", optarg);
                                return -EINVAL;
                        }
                        arg_options.always_refresh = b;
                        break;
                case ARG_NO_RELOAD:
                        arg_options.no_reload = true;
                        break;
                case ARG_NOT_SUPPORTED:
                        log_error("--%s= is systemd-sysext's; tuck does not implement it (tuckctl(8), "
                                  "\"Differences from systemd-sysext\")%s.", options[index].name,
                                  streq(options[index].name, "image-policy") ?
                                  "; tuck's is ImagePolicy= in tuck.conf(5)" : "");
                        return -EOPNOTSUPP;
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
                default:
                        return -EINVAL;
                }
        if (arg_compat >= 0)
                arg_options.classes = 1u << arg_compat;
        return 1;
}

static int print_json(json_object *o) {
        int flags = JSON_C_TO_STRING_NOSLASHESCAPE |
                    (arg_json == JSON_SHORT ? JSON_C_TO_STRING_PLAIN :
                     JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_PRETTY_TAB | JSON_C_TO_STRING_SPACED);

        if (!o)
                return -ENOMEM;
        puts(json_object_to_json_string_ext(o, flags));
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

static int run_operation(TuckContext *c, const char *verb, Operation operation) {
        _cleanup_report_ Report *report = NULL;
        int r;

        r = operation(c, &arg_options, &report);
        if (!report)
                return exit_status(log_error_errno(r, "Failed to %s: %m", verb));
        if (arg_json != JSON_OFF)
                (void) print_json(report_to_json(report));
        else if (!arg_quiet || r < 0)
                /* systemd-sysext says what it did on stderr: a script's $(...) stays empty. */
                report_print(report, r < 0 || arg_compat >= 0 ? stderr : stdout);
        return operation_status(report, r);
}

static int verb_merge(TuckContext *c, char **args) {
        return run_operation(c, "merge", tuck_merge);
}

static int verb_refresh(TuckContext *c, char **args) {
        return run_operation(c, "refresh", tuck_refresh);
}

static int verb_unmerge(TuckContext *c, char **args) {
        return run_operation(c, "unmerge", tuck_unmerge);
}

static int verb_list(TuckContext *c, char **args) {
        _cleanup_free_ char *error = NULL;
        ImageList *l = NULL;
        int r;

        r = tuck_list(c, &arg_options, &l, &error);
        if (r < 0)
                return exit_status(log_error_errno(r, "Failed to list images: %s", error ?: strerror(-r)));
        if (arg_json != JSON_OFF)
                r = print_json(image_list_to_json(l));
        else {
                (void) pager_open(arg_pager);
                if (arg_compat >= 0)
                        image_list_print_table(l, arg_legend, stdout);
                else
                        image_list_print(l, arg_legend, stdout);
        }
        image_list_free(l);
        return exit_status(r);
}

static int verb_status(TuckContext *c, char **args) {
        Status *s = NULL;
        bool degraded;
        int r;

        r = tuck_status(c, &arg_options, &s);
        if (r < 0)
                return exit_status(log_error_errno(r, "Failed to get status: %m"));
        if (arg_json != JSON_OFF)
                r = print_json(status_to_json(s));
        else {
                (void) pager_open(arg_pager);
                if (arg_compat >= 0)
                        status_print_table(s, arg_legend, stdout);
                else
                        status_print(s, stdout);
        }
        /* Degraded (an extension held back, a record unusable): exit 3, like a refusal by policy.
         * Not as systemd-sysext: its status succeeds whenever it could look. */
        degraded = arg_compat < 0 && status_degraded(s);
        status_free(s);
        return r < 0 ? exit_status(r) : degraded ? EXIT_REFUSED : EXIT_OK;
}

static int verb_versions(TuckContext *c, char **args) {
        _cleanup_free_ char *error = NULL;
        VersionsView *v = NULL;
        int r;

        r = tuck_versions(c, &arg_options, &v, &error);
        if (r < 0)
                return exit_status(log_error_errno(r, "%s", error ?: strerror(-r)));
        if (arg_json != JSON_OFF)
                r = print_json(versions_view_to_json(v));
        else {
                (void) pager_open(arg_pager);
                versions_view_print(v, stdout);
        }
        versions_view_free(v);
        return exit_status(r);
}

static int verb_help(TuckContext *c, char **args) {
        help();
        return EXIT_OK;
}

/* The words recorded with a decision (versions.json): the verb and the options that decide. */
static int make_via(const char *verb) {
        _cleanup_strv_free_ char **words = NULL;

        if (strv_extend(&words, arg_compat >= 0 ? program_name() : "tuckctl") < 0 || strv_extend(&words, verb) < 0)
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
static int verb_forget(TuckContext *c, char **names) {
        _cleanup_free_ char *message = NULL;
        int r;

        r = tuck_forget(c, &arg_options, names, &message);
        if (r < 0) {
                log_error("%s", message ?: strerror(-r));
                return r == -EBUSY ? EXIT_BUSY : EXIT_FAILED;
        }
        if (!arg_quiet && !isempty(message))
                puts(message);
        return EXIT_OK;
}

/* The raw primitive: util-linux 2.38 has no "mount --beneath". */
static int verb_beneath(TuckContext *c, char **args) {
        _cleanup_close_ int fd = -EBADF;
        const char *source = args[0], *target = args[1];
        int r;

        fd = open_tree(AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        if (fd < 0)
                return exit_status(log_error_errno(errno, "Failed to clone '%s': %m", source));
        r = mount_beneath(fd, target);
        /* The kernel says EINVAL both for "no such flag" and for every layout it refuses: ask which. */
        if (r == -EINVAL && mount_beneath_supported("/tmp") == 0)
                r = log_error_errno(EOPNOTSUPP, "The kernel lacks MOVE_MOUNT_BENEATH (Linux 6.5).");
        else if (r == -EINVAL)
                r = log_error_errno(r, "The kernel refused to move a clone of '%s' beneath '%s' (EINVAL): is "
                                    "something mounted there, not the namespace root's child, and not an "
                                    "ancestor of '%s'? See move_mount(2).", source, target, source);
        else if (r < 0)
                r = log_error_errno(r, "Failed to move a clone of '%s' beneath the top mount at '%s': %m",
                                    source, target);
        else if (!arg_quiet)
                printf("Mounted a clone of '%s' beneath the top mount at '%s'.\n", source, target);
        return exit_status(r);
}

typedef enum VerbFlags {
        VERB_DEFAULT = 1 << 0,   /* runs when no verb is given */
        VERB_CONTEXT = 1 << 1,   /* needs a context: the root, tuck.conf, hierarchies */
        VERB_BUS     = 1 << 2,   /* goes through tuckd when it runs for this root */
        VERB_TUCK    = 1 << 3,   /* tuck's own: not a verb of systemd-sysext's */
        VERB_NAMES   = 1 << 4,   /* its arguments are extension names */
} VerbFlags;

typedef struct Verb {
        const char *name;
        unsigned min_args, max_args;     /* after the verb */
        VerbFlags flags;
        int (*run)(TuckContext *c, char **args);   /* returns the exit status */
} Verb;

static const Verb verbs[] = {
        { "status",  0, 0, VERB_DEFAULT | VERB_CONTEXT,   verb_status  },
        { "list",    0, 0, VERB_CONTEXT,                  verb_list    },
        { "merge",   0, 0, VERB_CONTEXT | VERB_BUS,       verb_merge   },
        { "refresh", 0, 0, VERB_CONTEXT | VERB_BUS,       verb_refresh },
        { "unmerge", 0, 0, VERB_CONTEXT | VERB_BUS,       verb_unmerge },
        { "help",    0, 0, 0,                             verb_help    },
        { "versions", 0, 0, VERB_CONTEXT | VERB_TUCK,     verb_versions },
        { "forget",  1, UINT_MAX, VERB_CONTEXT | VERB_TUCK | VERB_NAMES, verb_forget },
        { "beneath", 2, 2, VERB_TUCK,                     verb_beneath },
};

static const Verb *find_verb(const char *name) {
        for (size_t v = 0; v < ELEMENTSOF(verbs); v++)
                if (name ? streq(name, verbs[v].name) : (verbs[v].flags & VERB_DEFAULT))
                        return &verbs[v];
        return NULL;
}

/* Run by systemd-sysext.service (its stock ExecStop=/ExecStart=, a unit file systemd has not
 * reloaded since tuck's drop-in came): never unmerge, and merge means refresh. units/README.md. */
static const char *verb_for_unit(const char *verb) {
        _cleanup_free_ char *unit = NULL;

        if (arg_compat < 0 || (!streq(verb, "merge") && !streq(verb, "unmerge")))
                return verb;
        if (sd_pid_get_unit(0, &unit) < 0 || !streq_ptr(unit, arg_compat == IMAGE_SYSEXT ?
                                                       "systemd-sysext.service" : "systemd-confext.service"))
                return verb;
        if (streq(verb, "unmerge")) {
                log_notice("%s: not unmerging while %s stops: tuck keeps the extensions merged and "
                           "replaces them atomically (tuckctl unmerge unmerges).", program_name(), unit);
                return NULL;
        }
        return "refresh";
}

static int dispatch(const Verb *v, char **args) {
        _cleanup_free_ char *error = NULL;
        TuckContext *c = NULL;
        bool handled;
        int r;

        r = make_via(v->name);
        if (r < 0)
                return exit_status(log_error_errno(r, "Out of memory."));
        if (v->flags & VERB_BUS) {
                /* As systemd-sysext: what was done goes to stderr, stdout stays empty. */
                r = tuckctl_bus_try(v->name, arg_root, &arg_options, arg_json != JSON_OFF,
                                    arg_quiet || arg_compat >= 0, &handled);
                if (handled && arg_compat >= 0 && !arg_quiet)
                        fprintf(stderr, "%s (through tuckd): %s\n", v->name,
                                r > 0 ? "done" : r == 0 ? "nothing to do" : "failed");
                if (handled)
                        return exit_status(r);
        }
        if (v->flags & VERB_CONTEXT) {
                r = tuck_context_new(arg_root, arg_config, &c, &error);
                if (r < 0) {
                        log_error_errno(r, "Failed to set up: %s", error ?: strerror(-r));
                        return r == -EINVAL || r == -EBADMSG ? EXIT_USAGE : EXIT_FAILED;
                }
        }
        r = v->run(c, args);
        tuck_context_free(c);
        return r;
}

static int run(int argc, char *argv[]) {
        const char *name = NULL;
        const Verb *v;
        unsigned n;
        int r;

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r < 0 ? EXIT_USAGE : EXIT_OK;
        if (optind < argc)
                name = argv[optind++];
        v = find_verb(name);
        if (!v || (arg_compat >= 0 && (v->flags & VERB_TUCK))) {
                log_error("Unknown command verb '%s'; see --help.", name);
                return EXIT_USAGE;
        }
        n = (unsigned) (argc - optind);
        if (n < v->min_args || n > v->max_args) {
                if (v->max_args == 0)
                        log_error("'%s' takes no arguments.", v->name);
                else if (v->max_args == UINT_MAX)
                        log_error("Usage: tuckctl %s NAME...", v->name);
                else
                        log_error("'%s' takes %u argument%s; see --help.", v->name, v->max_args,
                                  v->max_args == 1 ? "" : "s");
                return EXIT_USAGE;
        }
        if (v->flags & VERB_NAMES)
                STRV_FOREACH(a, argv + optind)
                        if (!image_name_is_valid(*a)) {
                                log_error("'%s' is not an extension name.", *a);
                                return EXIT_USAGE;
                        }
        name = verb_for_unit(v->name);
        if (!name)
                return EXIT_OK;
        return dispatch(find_verb(name), argv + optind);
}

int main(int argc, char *argv[]) {
        int r;

        rlimit_nofile_bump();
        if (streq(program_name(), "systemd-sysext"))
                arg_compat = IMAGE_SYSEXT;
        else if (streq(program_name(), "systemd-confext"))
                arg_compat = IMAGE_CONFEXT;

        r = run(argc, argv);
        pager_close();
        strv_free(arg_options.remove);
        strv_free(arg_options.allow_downgrade_names);
        free(arg_via);
        /* systemd-sysext knows success and failure only. */
        return arg_compat >= 0 && r != EXIT_OK ? EXIT_FAILED : r;
}
