/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The leak check: N refreshes in one process (as tuckd makes them), flipping
 * the images between two sets before each, and the numbers that must not
 * grow: mounts in our namespace and in the staging namespace, loop devices
 * backed by the test's images, tuck's dm-verity devices (none where the
 * kernel has no device-mapper, as on the build machines), open fds of this
 * process.
 *
 *   leak-check ROOT N LOOP_DIR SET_A... -- SET_B...
 *
 * Each SET entry is SEARCH_DIR/NAME.raw=SOURCE: SOURCE is copied and renamed
 * into place. Loop devices are counted if their backing file is below LOOP_DIR.
 * Prints the numbers after the first refresh and after the last, and exits
 * non-zero if any grew (after giving lazy unmounts a moment to finish).
 */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "status.h"
#include "tuck.h"
#include "util.h"
#include "verity.h"

typedef struct Counts {
        int mounts, staging, loops, dms, fds;
} Counts;

static int count_lines(const char *path) {
        FILE *f = fopen(path, "re");
        char line[4096];
        int n = 0;

        if (!f)
                return -1;
        while (fgets(line, sizeof(line), f))
                n++;
        fclose(f);
        return n;
}

static int count_dir(const char *path) {
        DIR *d = opendir(path);
        int n = 0;

        if (!d)
                return -1;
        for (struct dirent *de; (de = readdir(d)); )
                if (de->d_name[0] != '.')
                        n++;
        closedir(d);
        return n - 1;   /* the DIR's own fd */
}

/* Loop devices whose backing file is below dir. */
static int count_loops(const char *dir) {
        DIR *d = opendir("/sys/block");
        int n = 0;

        if (!d)
                return -1;
        for (struct dirent *de; (de = readdir(d)); ) {
                char path[512], backing[4096] = "";
                FILE *f;

                if (strncmp(de->d_name, "loop", 4) != 0)
                        continue;
                snprintf(path, sizeof(path), "/sys/block/%s/loop/backing_file", de->d_name);
                f = fopen(path, "re");
                if (!f)
                        continue;
                if (fgets(backing, sizeof(backing), f) && strncmp(backing, dir, strlen(dir)) == 0)
                        n++;
                fclose(f);
        }
        closedir(d);
        return n;
}

static Counts measure(TuckContext *c, const char *images) {
        return (Counts) {
                .mounts = count_lines("/proc/self/mountinfo"),
                .staging = tuck_staging_mounts(c),
                .loops = count_loops(images),
                .dms = verity_count_devices(),
                .fds = count_dir("/proc/self/fd"),
        };
}

/*
 * A fresh copy of the image (a new inode, renamed into place) every time, so
 * that every refresh stages new images on new loop devices and the old ones
 * must be released: a symlink flip between two files would let both stay
 * staged and hide a leak.
 */
static int copy_file(const char *from, const char *to) {
        char buf[65536];
        ssize_t n;
        int in, out, r = 0;

        in = open(from, O_RDONLY | O_CLOEXEC);
        if (in < 0)
                return -errno;
        out = open(to, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (out < 0) {
                r = -errno;
                close(in);
                return r;
        }
        while ((n = read(in, buf, sizeof(buf))) > 0)
                if (write(out, buf, n) != n) {
                        r = -EIO;
                        break;
                }
        if (n < 0)
                r = -errno;
        close(in);
        close(out);
        return r;
}

static int flip(char **set) {
        for (char **e = set; *e; e++) {
                char *eq = strchr(*e, '='), tmp[4096];
                int r;

                *eq = 0;
                snprintf(tmp, sizeof(tmp), "%s.new", *e);
                r = copy_file(eq + 1, tmp);
                if (r == 0 && rename(tmp, *e) < 0)
                        r = -errno;
                *eq = '=';
                if (r < 0)
                        return r;
        }
        return 0;
}

static bool same(Counts a, Counts b) {
        return a.mounts == b.mounts && a.staging == b.staging && a.loops == b.loops && a.dms == b.dms &&
               a.fds == b.fds;
}

int main(int argc, char *argv[]) {
        char **set_a, **set_b;
        TuckContext *c;
        Counts first = {}, last = {};
        char *error = NULL;
        int n, r, sep;
        struct timespec t0, t1;

        if (argc < 6)
                return 2;
        for (sep = 4; sep < argc && strcmp(argv[sep], "--") != 0; sep++)
                ;
        if (sep >= argc - 1)
                return 2;
        argv[sep] = NULL;
        set_a = argv + 4;
        set_b = argv + sep + 1;
        n = atoi(argv[2]);

        r = tuck_context_new(argv[1], NULL, &c, &error);
        if (r < 0) {
                fprintf(stderr, "context: %s\n", error ?: strerror(-r));
                return 1;
        }
        clock_gettime(CLOCK_MONOTONIC, &t0);
        for (int i = 1; i <= n; i++) {
                Report *report = NULL;

                r = flip(i % 2 ? set_b : set_a);
                if (r < 0) {
                        fprintf(stderr, "flip: %s\n", strerror(-r));
                        return 1;
                }
                r = tuck_refresh(c, &(TuckOptions) {}, &report);
                if (r <= 0) {
                        fprintf(stderr, "refresh %d: r=%d\n", i, r);
                        if (report)
                                report_print(report, stderr);
                        return 1;
                }
                report_free(report);
                if (i == 1)
                        first = measure(c, argv[3]);
        }
        clock_gettime(CLOCK_MONOTONIC, &t1);

        /* Lazy unmounts and autoclear finish asynchronously: give them up to 5 s. */
        for (int k = 0; k < 50; k++) {
                last = measure(c, argv[3]);
                if (same(first, last))
                        break;
                usleep(100 * 1000);
        }
        printf("# after refresh 1:    mounts %d, staging mounts %d, loop devices %d, dm devices %d, open fds %d\n",
               first.mounts, first.staging, first.loops, first.dms, first.fds);
        printf("# after refresh %d: mounts %d, staging mounts %d, loop devices %d, dm devices %d, open fds %d\n",
               n, last.mounts, last.staging, last.loops, last.dms, last.fds);
        printf("# %d refreshes in %.1f s (%.1f ms each)\n", n,
               (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9,
               ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / n);
        printf("%sok 1 - mounts after %d refreshes equal those after the first (%d, %d)\n",
               first.mounts == last.mounts ? "" : "not ", n, first.mounts, last.mounts);
        printf("%sok 2 - staging mounts equal (%d, %d)\n", first.staging == last.staging ? "" : "not ",
               first.staging, last.staging);
        printf("%sok 3 - loop devices equal (%d, %d)\n", first.loops == last.loops ? "" : "not ",
               first.loops, last.loops);
        printf("%sok 4 - open fds equal (%d, %d)\n", first.fds == last.fds ? "" : "not ", first.fds, last.fds);
        printf("%sok 5 - dm-verity devices equal (%d, %d)\n", first.dms == last.dms ? "" : "not ", first.dms,
               last.dms);
        tuck_context_free(c);
        return same(first, last) ? 0 : 1;
}
