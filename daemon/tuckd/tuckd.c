/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * tuckd: keeps /usr, /opt and /etc current from extension images, atomically
 * (MOVE_MOUNT_BENEATH), and makes every service and container namespace
 * follow. See tuckd(8).
 */

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <systemd/sd-daemon.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "util.h"

static const char *arg_root = "/";
static const char *arg_config = SYSCONFDIR "/tuck/tuck.conf";

static void help(void) {
        printf("Usage: tuckd [OPTIONS]\n\n"
               "Keep /usr, /opt and /etc current from extension images, atomically.\n\n"
               "  -h --help           Show this help\n"
               "     --version        Show the version\n"
               "     --root=DIR       Operate on the hierarchies below DIR (tests)\n"
               "     --config=FILE    Read FILE instead of %s\n"
               "     --debug          Log debug messages\n",
               SYSCONFDIR "/tuck/tuck.conf");
}

static int parse_argv(int argc, char *argv[]) {
        enum { ARG_VERSION = 0x100, ARG_ROOT, ARG_CONFIG, ARG_DEBUG };
        static const struct option options[] = {
                { "help",    no_argument,       NULL, 'h'         },
                { "version", no_argument,       NULL, ARG_VERSION },
                { "root",    required_argument, NULL, ARG_ROOT    },
                { "config",  required_argument, NULL, ARG_CONFIG  },
                { "debug",   no_argument,       NULL, ARG_DEBUG   },
                {}
        };
        int c;

        while ((c = getopt_long(argc, argv, "h", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("tuckd %s\n", PROJECT_VERSION);
                        return 0;
                case ARG_ROOT:
                        arg_root = optarg;
                        break;
                case ARG_CONFIG:
                        arg_config = optarg;
                        break;
                case ARG_DEBUG:
                        log_set_max_level(LOG_DEBUG);
                        break;
                case '?':
                        return -EINVAL;
                default:
                        return -EINVAL;
                }
        if (optind < argc) {
                log_error("tuckd takes no arguments, got '%s'.", argv[optind]);
                return -EINVAL;
        }
        return 1;
}

static int on_sighup(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        (void) sd_notify(false, "RELOADING=1");
        log_info("SIGHUP: re-reading configuration and refreshing.");
        (void) manager_reload(m);
        (void) sd_notify(false, "READY=1");
        return 0;
}

static int on_sigterm(sd_event_source *s, const struct signalfd_siginfo *si, void *userdata) {
        Manager *m = userdata;

        /* Stopping tuckd never unmerges: the extensions stay as they are. */
        (void) sd_notify(false, "STOPPING=1\nSTATUS=Stopping, extensions stay merged.");
        return sd_event_exit(m->event, 0);
}

/* SIGTERM and SIGINT stop, SIGHUP reloads: blocked from the start, handled in the event loop. */
static int block_signals(void) {
        sigset_t mask;

        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        if (sigprocmask(SIG_BLOCK, &mask, NULL) < 0)
                return log_error_errno(errno, "Failed to block signals: %m");
        return 0;
}

static int handle_signals(Manager *m) {
        int r;

        r = sd_event_add_signal(m->event, NULL, SIGTERM, on_sigterm, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGINT, on_sigterm, m);
        if (r >= 0)
                r = sd_event_add_signal(m->event, NULL, SIGHUP, on_sighup, m);
        if (r < 0)
                return log_error_errno(r, "Failed to install signal handlers: %m");
        return 0;
}

static int run(int argc, char *argv[]) {
        _cleanup_(manager_freep) Manager *m = NULL;
        int r;

        log_setup_journal();

        r = parse_argv(argc, argv);
        if (r <= 0)
                return r;
        r = block_signals();
        if (r < 0)
                return r;

        r = manager_new(arg_root, arg_config, &m);
        if (r < 0)
                return log_error_errno(r, "Failed to set up: %m");
        r = handle_signals(m);
        if (r < 0)
                return r;

        r = sd_event_set_watchdog(m->event, true);
        if (r < 0)
                log_warning_errno(r, "Failed to enable the watchdog, continuing: %m");

        r = manager_start(m);
        if (r < 0)
                return r;

        /* READY only now: the state is adopted and the bus name is ours, so a
         * unit ordered after us finds its extensions and our API. */
        manager_notify_status(m);
        (void) sd_notify(false, "READY=1");
        log_info("tuckd %s ready (stale namespaces: %s, quiet period %llu ms).", PROJECT_VERSION,
                 stale_policy_to_string(m->config.stale_policy),
                 (unsigned long long) (m->config.quiet_usec / USEC_PER_MSEC));

        r = sd_event_loop(m->event);
        if (r < 0)
                return log_error_errno(r, "Event loop failed: %m");
        return 0;
}

int main(int argc, char *argv[]) {
        rlimit_nofile_bump();
        return run(argc, argv) < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
