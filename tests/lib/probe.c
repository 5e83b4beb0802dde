/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * tuck-probe: the window probe. Reads one or more files as fast as it can and
 * classifies every read, to catch any moment in which a refresh exposes the
 * bare base or a missing file.
 *
 * Convention: a probe file holds one line "generation=<label>". Extension
 * images carry a label per generation (images/mkext --label=); the base
 * trees carry "generation=base".
 *
 * Each read is one of: a label (counted per label, with the first and last
 * time it was seen), the base label (an "exposure"), ENOENT (missing: also
 * an exposure), another error, or content that does not follow the
 * convention (garbage). The probe runs until --duration elapses or it gets
 * SIGTERM/SIGINT, then prints one JSON line of results. SIGUSR1 prints the
 * line for the reads so far and starts counting afresh (one probe, several
 * measurements: the VM suite's phases).
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define MAX_FILES 16
/* A campaign of monotonic updates (tuckd-crash.sh) shows a label per version: hundreds. */
#define MAX_LABELS 1024

typedef struct Label {
        char name[64];
        uint64_t count;
        uint64_t first_ns, last_ns;
} Label;

typedef struct Target {
        const char *path;
        uint64_t reads, base, missing, errors, garbage, transitions;
        int last_errno;
        int last_label;               /* index into labels, -1 none yet */
        Label labels[MAX_LABELS];
        size_t n_labels;
} Target;

static volatile sig_atomic_t stop, dump;
static Target targets[MAX_FILES];
static size_t n_targets;
static const char *base_label = "base";
static const char *tag = "";

static void on_signal(int sig) {
        if (sig == SIGUSR1)
                dump = 1;
        else
                stop = 1;
}

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static void help(void) {
        printf("tuck-probe [OPTIONS...] FILE...\n\n"
               "Read FILEs round-robin as fast as possible and classify every read.\n"
               "A probe file holds one line 'generation=<label>'.\n\n"
               "  -h --help              Show this help\n"
               "  -d --duration=SECONDS  Stop after SECONDS (default: until SIGTERM/SIGINT)\n"
               "  -b --base-label=LABEL  The label of the base trees (default: base)\n"
               "  -r --ready=PATH        Create PATH once the first round of reads is done\n"
               "  -t --tag=TEXT          Copy TEXT into the output (which reader this is)\n"
               "  -o --output=PATH       Write the JSON line to PATH instead of stdout\n\n"
               "Output: one JSON object: {\"tag\", \"duration_ms\", \"reads\", \"exposures\",\n"
               "\"files\": [{\"path\", \"reads\", \"base\", \"missing\", \"errors\", \"garbage\",\n"
               "\"transitions\", \"labels\": {LABEL: {\"count\", \"first_ms\", \"last_ms\"}}}]}.\n"
               "exposures = base + missing over all files. Times are ms since the probe started\n"
               "(or since the last SIGUSR1, which prints the line so far and starts afresh).\n"
               "Exit status: 0, or 2 on a usage error.\n");
}

static void record(Target *t, const char *label, uint64_t ns) {
        size_t i = 0;

        /* Almost every read sees what the one before saw. */
        if (t->last_label >= 0 && strcmp(t->labels[t->last_label].name, label) == 0)
                i = (size_t) t->last_label;
        else
                for (i = 0; i < t->n_labels; i++)
                        if (strcmp(t->labels[i].name, label) == 0)
                                break;
        if (i == t->n_labels) {
                size_t len = strlen(label);

                if (t->n_labels == MAX_LABELS || len >= sizeof(t->labels[i].name)) {
                        t->garbage++;
                        return;
                }
                memcpy(t->labels[i].name, label, len + 1);
                t->labels[i].first_ns = ns;
                t->n_labels++;
        }
        t->labels[i].count++;
        t->labels[i].last_ns = ns;
        if (t->last_label >= 0 && t->last_label != (int) i)
                t->transitions++;
        t->last_label = (int) i;
        if (strcmp(label, base_label) == 0)
                t->base++;
}

static void read_one(Target *t, uint64_t start) {
        char buf[256];
        ssize_t n;
        int fd;

        t->reads++;
        fd = open(t->path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0) {
                if (errno == ENOENT)
                        t->missing++;
                else {
                        t->errors++;
                        t->last_errno = errno;
                }
                return;
        }
        n = read(fd, buf, sizeof(buf) - 1);
        close(fd);
        if (n < 0) {
                t->errors++;
                t->last_errno = errno;
                return;
        }
        buf[n] = 0;
        if (strncmp(buf, "generation=", 11) != 0 || n < 13 || buf[n - 1] != '\n') {
                t->garbage++;
                return;
        }
        buf[n - 1] = 0;
        record(t, buf + 11, now_ns() - start);
}

static void print_results(FILE *f, uint64_t start) {
        uint64_t reads = 0, exposures = 0;

        for (size_t i = 0; i < n_targets; i++) {
                reads += targets[i].reads;
                exposures += targets[i].base + targets[i].missing;
        }
        fprintf(f, "{\"tag\":\"%s\",\"duration_ms\":%llu,\"reads\":%llu,\"exposures\":%llu,\"files\":[", tag,
                (unsigned long long) ((now_ns() - start) / 1000000), (unsigned long long) reads,
                (unsigned long long) exposures);
        for (size_t i = 0; i < n_targets; i++) {
                const Target *t = &targets[i];

                fprintf(f, "%s{\"path\":\"%s\",\"reads\":%llu,\"base\":%llu,\"missing\":%llu,\"errors\":%llu,"
                        "\"last_errno\":%d,\"garbage\":%llu,\"transitions\":%llu,\"labels\":{",
                        i ? "," : "", t->path, (unsigned long long) t->reads, (unsigned long long) t->base,
                        (unsigned long long) t->missing, (unsigned long long) t->errors, t->last_errno,
                        (unsigned long long) t->garbage, (unsigned long long) t->transitions);
                for (size_t k = 0; k < t->n_labels; k++)
                        fprintf(f, "%s\"%s\":{\"count\":%llu,\"first_ms\":%.3f,\"last_ms\":%.3f}", k ? "," : "",
                                t->labels[k].name, (unsigned long long) t->labels[k].count,
                                t->labels[k].first_ns / 1e6, t->labels[k].last_ns / 1e6);
                fprintf(f, "}}");
        }
        fprintf(f, "]}\n");
        fflush(f);
}

/* After a SIGUSR1 line: every counter from zero; returns the new start. */
static uint64_t reset_targets(void) {
        for (size_t i = 0; i < n_targets; i++)
                targets[i] = (Target) { .path = targets[i].path, .last_label = -1 };
        return now_ns();
}

int main(int argc, char *argv[]) {
        static const struct option options[] = {
                { "help",       no_argument,       NULL, 'h' },
                { "duration",   required_argument, NULL, 'd' },
                { "base-label", required_argument, NULL, 'b' },
                { "ready",      required_argument, NULL, 'r' },
                { "tag",        required_argument, NULL, 't' },
                { "output",     required_argument, NULL, 'o' },
                {}
        };
        const char *ready = NULL, *output = NULL;
        double duration = 0;
        uint64_t start, deadline = 0;
        struct sigaction sa = { .sa_handler = on_signal };
        FILE *out = stdout;
        int c;

        while ((c = getopt_long(argc, argv, "hd:b:r:t:o:", options, NULL)) >= 0)
                switch (c) {
                case 'h':
                        help();
                        return 0;
                case 'd':
                        duration = strtod(optarg, NULL);
                        if (duration <= 0) {
                                fprintf(stderr, "tuck-probe: --duration takes a positive number of seconds\n");
                                return 2;
                        }
                        break;
                case 'b':
                        base_label = optarg;
                        break;
                case 'r':
                        ready = optarg;
                        break;
                case 't':
                        tag = optarg;
                        break;
                case 'o':
                        output = optarg;
                        break;
                default:
                        return 2;
                }
        if (optind >= argc || argc - optind > MAX_FILES) {
                fprintf(stderr, "tuck-probe: give 1 to %d files to read; see --help\n", MAX_FILES);
                return 2;
        }
        for (int i = optind; i < argc; i++)
                targets[n_targets++] = (Target) { .path = argv[i], .last_label = -1 };

        sigaction(SIGTERM, &sa, NULL);
        sigaction(SIGINT, &sa, NULL);
        sigaction(SIGUSR1, &sa, NULL);

        start = now_ns();
        if (duration > 0)
                deadline = start + (uint64_t) (duration * 1e9);

        for (size_t i = 0; i < n_targets; i++)
                read_one(&targets[i], start);
        if (ready) {
                int fd = open(ready, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);

                if (fd >= 0)
                        close(fd);
        }
        if (output) {
                out = fopen(output, "we");
                if (!out) {
                        fprintf(stderr, "tuck-probe: cannot write %s: %m\n", output);
                        out = stdout;
                }
        }
        while (!stop) {
                for (size_t i = 0; i < n_targets; i++)
                        read_one(&targets[i], start);
                if (dump) {
                        dump = 0;
                        print_results(out, start);
                        start = reset_targets();
                }
                if (deadline && (targets[0].reads & 63) == 0 && now_ns() >= deadline)
                        break;
        }

        print_results(out, start);
        if (out != stdout)
                fclose(out);
        return 0;
}
