/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Microbenchmark (issue 14): move_mount() with MOVE_MOUNT_BENEATH against a
 * plain move_mount() of the same tree. The target is beneath ≤ 1.5×
 * plain. Under QEMU/TCG only the ratio means anything, and even that is a
 * measurement, never a verdict: this program fails only when a syscall does.
 *
 * Layout, in a private mount namespace on a tmpfs at /tmp:
 *
 *   /tmp/src         tmpfs "src", with /tmp/leaf (tmpfs "leaf") bound on
 *   /tmp/src/sub     ... so the source is a tree of two mounts
 *   /tmp/target      a directory with exactly one copy of the tree on it,
 *                    "the top", whenever an iteration starts
 *
 * One iteration, the same code for both variants but for the flag:
 *
 *   1. open_tree("/tmp/src", OPEN_TREE_CLONE | AT_RECURSIVE): a detached
 *      copy of the tree (two new mounts).
 *   2. move_mount(fd, "", AT_FDCWD, "/tmp/target", MOVE_MOUNT_F_EMPTY_PATH
 *      | flag): plain (no flag) puts the copy on the top, beneath
 *      (MOVE_MOUNT_BENEATH) puts it under the top.
 *   3. close(fd): before the umount, so the fd holds no reference that would
 *      move the freeing of a mount out of the umount in one variant only.
 *   4. umount2("/tmp/target", MNT_DETACH): whatever is uppermost now goes,
 *      two mounts: plain drops the copy it just attached, beneath drops the
 *      old top and reveals the copy, which is the top of the next iteration.
 *
 * So each iteration makes two mounts, attaches them, and detaches and frees
 * two, and leaves the target as it found it: one tree on it. The "move_mount"
 * figures time step 2 alone, the "iteration" figures steps 1-4
 * (CLOCK_MONOTONIC). The variants alternate, ABBA, so that drift (another
 * job on the machine, the page cache, a TCG translation cache warming up)
 * falls on both alike; warm-up iterations, untimed, check every step: the
 * mount that is on top after steps 2 and 4, and the leaf below it.
 *
 * Output: TAP (one point per variant, so the kernel suite's init and
 * tap-check can run and judge it) with result lines between, tab-separated:
 *
 *   bench  VARIANT  SPAN  ITERATIONS  MEDIAN_NS  P90_NS  TOTAL_NS
 *   ratio  SPAN  MEDIAN_BENEATH/MEDIAN_PLAIN  P90_BENEATH/P90_PLAIN
 *
 * where SPAN is "move_mount" or "iteration". tests/bench/bench-kernel runs
 * it on the patched 6.1 in QEMU and on the build machine's kernel.
 *
 *   move_mount_beneath_bench [--iterations N] [--warmup N]
 *
 * Defaults: TUCK_BENCH_ITERATIONS (else 2000) and TUCK_BENCH_WARMUP (else a
 * tenth of the iterations, at least 10) per variant. Run it as root, in a
 * mount namespace of its own (unshare -m) on a machine that matters; it
 * enters a private one itself as well.
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "kselftest.h"
#include "mount-util.h"

#define BASE "/tmp"
#define SRC BASE "/src"
#define LEAF BASE "/leaf"
#define TARGET BASE "/target"

#define DEFAULT_ITERATIONS 2000
#define MIN_WARMUP 10

struct variant {
        const char *name;
        unsigned flags;         /* added to MOVE_MOUNT_F_EMPTY_PATH */
        bool beneath;           /* the copy is on top only after the umount */
};

static const struct variant variants[] = {
        { "plain",   0,                  false },
        { "beneath", MOVE_MOUNT_BENEATH, true  },
};

enum span {
        SPAN_MOVE,              /* step 2 */
        SPAN_ITERATION,         /* steps 1-4 */
        _SPAN_MAX,
};

static const char *const span_names[_SPAN_MAX] = {
        [SPAN_MOVE]      = "move_mount",
        [SPAN_ITERATION] = "iteration",
};

struct samples {
        uint64_t *ns[_SPAN_MAX];
        size_t n;
};

struct summary {
        uint64_t median, p90, total;
};

struct config {
        unsigned long iterations;
        unsigned long warmup;
};

static uint64_t now_ns(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

/* Step 1: a detached copy of the source tree, or -errno. */
static int clone_source(void) {
        int fd = open_tree(AT_FDCWD, SRC, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);

        return fd < 0 ? -errno : fd;
}

/* Step 2: attach the copy on or beneath the top of the target. */
static int attach(const struct variant *v, int fd) {
        return move_mount_raw(fd, "", AT_FDCWD, TARGET, MOVE_MOUNT_F_EMPTY_PATH | v->flags);
}

/* Step 4: drop the uppermost tree on the target, with what is mounted below it. */
static int drop_top(void) {
        if (umount2(TARGET, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                return -errno;
        return 0;
}

/* One timed iteration; @move_ns and @iteration_ns receive the durations. */
static int iterate(const struct variant *v, uint64_t *move_ns, uint64_t *iteration_ns) {
        _cleanup_close_ int fd = -EBADF;
        uint64_t start, move_start, move_end;
        int r;

        start = now_ns();
        fd = clone_source();
        if (fd < 0)
                return fd;
        move_start = now_ns();
        r = attach(v, fd);
        move_end = now_ns();
        if (r < 0)
                return r;
        fd = safe_close(fd);
        r = drop_top();
        if (r < 0)
                return r;

        *move_ns = move_end - move_start;
        *iteration_ns = now_ns() - start;
        return 0;
}

/* The mount on top of the target must be @want_id, with the leaf below it. */
static int check_top(int want_id) {
        _cleanup_free_ char *leaf = NULL;
        int id;

        id = mount_id_at(AT_FDCWD, TARGET);
        if (id < 0)
                return id;
        if (id != want_id)
                return -EPROTO;
        leaf = marker_at(TARGET "/sub");
        return streq(leaf, "leaf") ? 0 : -ENOENT;
}

/*
 * One untimed iteration that checks every step: a kernel that ignored the
 * flag, or refused it, must not produce figures. -EPROTO: the wrong mount
 * is on top.
 */
static int iterate_checked(const struct variant *v) {
        _cleanup_close_ int fd = -EBADF;
        int old_top, copy, r;

        old_top = mount_id_at(AT_FDCWD, TARGET);
        if (old_top < 0)
                return old_top;
        fd = clone_source();
        if (fd < 0)
                return fd;
        copy = mount_id_at(fd, "");
        if (copy < 0)
                return copy;
        r = attach(v, fd);
        if (r < 0)
                return r;
        r = check_top(v->beneath ? old_top : copy);
        if (r < 0)
                return r;
        fd = safe_close(fd);
        r = drop_top();
        if (r < 0)
                return r;
        return check_top(v->beneath ? copy : old_top);
}

/* The source tree and the first top on the target, in a private namespace. */
static int setup(void) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = enter_private_mount_ns();
        if (r < 0)
                return r;
        r = tmpfs_mount_at(BASE, "base");
        if (r < 0)
                return r;
        r = tmpfs_mount_at(SRC, "src");
        if (r < 0)
                return r;
        r = tmpfs_mount_at(LEAF, "leaf");
        if (r < 0)
                return r;
        r = mkdir_p(SRC "/sub", 0755);
        if (r < 0)
                return r;
        r = bind_mount(LEAF, SRC "/sub");
        if (r < 0)
                return r;
        r = mkdir_p(TARGET, 0755);
        if (r < 0)
                return r;

        fd = clone_source();
        if (fd < 0)
                return fd;
        return attach(&variants[0], fd);
}

static int samples_alloc(struct samples *s, size_t n) {
        for (enum span i = 0; i < _SPAN_MAX; i++) {
                s->ns[i] = calloc(n, sizeof(uint64_t));
                if (!s->ns[i])
                        return -ENOMEM;
        }
        return 0;
}

static void samples_free(struct samples *s) {
        for (enum span i = 0; i < _SPAN_MAX; i++)
                s->ns[i] = mfree(s->ns[i]);
}

static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;

        return (x > y) - (x < y);
}

/* Median (mean of the middle two for an even count), p90 (nearest rank) and sum. */
static struct summary summarize(uint64_t *ns, size_t n) {
        struct summary s = {};

        qsort(ns, n, sizeof(*ns), cmp_u64);
        for (size_t i = 0; i < n; i++)
                s.total += ns[i];
        s.median = n % 2 ? ns[n / 2] : (ns[n / 2 - 1] + ns[n / 2]) / 2;
        s.p90 = ns[(n * 9 + 9) / 10 - 1];
        return s;
}

/* Warm-up: every step of both variants checked, nothing timed. */
static int warm_up(unsigned long count, const struct variant **failed) {
        for (unsigned long i = 0; i < count; i++)
                for (size_t k = 0; k < ELEMENTSOF(variants); k++) {
                        const struct variant *v = &variants[(i + k) % 2 ? 1 : 0];
                        int r = iterate_checked(v);

                        if (r < 0) {
                                *failed = v;
                                return r;
                        }
                }
        return 0;
}

/* The timed loop: ABBA order, so drift falls on both variants alike. */
static int measure(unsigned long count, struct samples s[static 2], const struct variant **failed) {
        for (unsigned long i = 0; i < count; i++)
                for (size_t k = 0; k < ELEMENTSOF(variants); k++) {
                        size_t which = (i + k) % 2;
                        int r = iterate(&variants[which], &s[which].ns[SPAN_MOVE][i],
                                        &s[which].ns[SPAN_ITERATION][i]);

                        if (r < 0) {
                                *failed = &variants[which];
                                return r;
                        }
                        s[which].n = i + 1;
                }
        return 0;
}

/* The target must hold exactly one tree again: nothing leaked or stacked up. */
static int check_final_state(void) {
        _cleanup_free_ char *mountinfo = NULL, *marker = NULL;

        mountinfo = mountinfo_read(0);
        if (!mountinfo)
                return -errno;
        if (mountinfo_count_at(mountinfo, TARGET) != 1 ||
            mountinfo_count_at(mountinfo, TARGET "/sub") != 1)
                return -EPROTO;
        marker = marker_at(TARGET);
        return streq(marker, "src") ? 0 : -ENOENT;
}

static void report(struct samples s[static 2]) {
        struct summary sum[ELEMENTSOF(variants)][_SPAN_MAX];

        ksft_print_msg("bench\tvariant\tspan\titerations\tmedian_ns\tp90_ns\ttotal_ns\n");
        for (size_t k = 0; k < ELEMENTSOF(variants); k++) {
                for (enum span i = 0; i < _SPAN_MAX; i++) {
                        sum[k][i] = summarize(s[k].ns[i], s[k].n);
                        printf("bench\t%s\t%s\t%zu\t%llu\t%llu\t%llu\n",
                               variants[k].name, span_names[i], s[k].n,
                               (unsigned long long) sum[k][i].median,
                               (unsigned long long) sum[k][i].p90,
                               (unsigned long long) sum[k][i].total);
                }
                ksft_test_result_pass("%s: %zu iterations\n", variants[k].name, s[k].n);
        }

        ksft_print_msg("ratio\tspan\tmedian_beneath/plain\tp90_beneath/plain\n");
        for (enum span i = 0; i < _SPAN_MAX; i++)
                printf("ratio\t%s\t%.3f\t%.3f\n", span_names[i],
                       (double) sum[1][i].median / (double) (sum[0][i].median ?: 1),
                       (double) sum[1][i].p90 / (double) (sum[0][i].p90 ?: 1));
}

static unsigned long parse_count(const char *s, const char *what) {
        char *end;
        unsigned long n;

        errno = 0;
        n = strtoul(s, &end, 10);
        if (errno != 0 || end == s || *end || n == 0 || n > 100000000)
                ksft_exit_fail_msg("Bad %s '%s': expected a positive number\n", what, s);
        return n;
}

static struct config parse_args(int argc, char *argv[]) {
        static const struct option options[] = {
                { "iterations", required_argument, NULL, 'i' },
                { "warmup",     required_argument, NULL, 'w' },
                {}
        };
        struct config cfg = { .iterations = DEFAULT_ITERATIONS };
        const char *env;
        int c;

        env = getenv("TUCK_BENCH_ITERATIONS");
        if (env)
                cfg.iterations = parse_count(env, "TUCK_BENCH_ITERATIONS");
        env = getenv("TUCK_BENCH_WARMUP");
        if (env)
                cfg.warmup = parse_count(env, "TUCK_BENCH_WARMUP");

        while ((c = getopt_long(argc, argv, "", options, NULL)) >= 0)
                switch (c) {
                case 'i':
                        cfg.iterations = parse_count(optarg, "--iterations");
                        break;
                case 'w':
                        cfg.warmup = parse_count(optarg, "--warmup");
                        break;
                default:
                        ksft_exit_fail_msg("usage: %s [--iterations N] [--warmup N]\n", argv[0]);
                }
        if (optind < argc)
                ksft_exit_fail_msg("Unexpected argument '%s'\n", argv[optind]);
        if (cfg.warmup == 0)
                cfg.warmup = cfg.iterations / 10 > MIN_WARMUP ? cfg.iterations / 10 : MIN_WARMUP;
        return cfg;
}

int main(int argc, char *argv[]) {
        struct samples s[ELEMENTSOF(variants)] = {};
        const struct variant *failed = NULL;
        struct config cfg;
        struct utsname u;
        int r;

        /* Line-buffered: the guest's init pipes us to a serial port. */
        setvbuf(stdout, NULL, _IOLBF, 0);
        ksft_print_header();
        cfg = parse_args(argc, argv);
        ksft_set_plan(ELEMENTSOF(variants));
        uname(&u);
        ksft_print_msg("move_mount_beneath_bench: kernel %s, %lu iterations per variant after %lu warm-up, interleaved ABBA\n",
                       u.release, cfg.iterations, cfg.warmup);

        r = setup();
        if (r < 0)
                ksft_exit_fail_msg("Failed to set up the source tree and the target under '%s': %s\n",
                                   BASE, errno_name(r));

        r = warm_up(cfg.warmup, &failed);
        if (r == -EINVAL && failed->beneath)
                ksft_exit_skip("MOVE_MOUNT_BENEATH is not supported by kernel %s (EINVAL)\n", u.release);
        if (r < 0)
                ksft_exit_fail_msg("Warm-up of '%s' failed: %s%s\n", failed->name, errno_name(r),
                                   r == -EPROTO ? " (the wrong mount is on top of the target)" : "");

        for (size_t k = 0; k < ELEMENTSOF(variants); k++)
                if (samples_alloc(&s[k], cfg.iterations) < 0)
                        ksft_exit_fail_msg("Out of memory for %lu samples\n", cfg.iterations);

        r = measure(cfg.iterations, s, &failed);
        if (r < 0)
                ksft_exit_fail_msg("Iteration of '%s' failed: %s\n", failed->name, errno_name(r));
        r = check_final_state();
        if (r < 0)
                ksft_exit_fail_msg("The target does not hold exactly one tree after the run: %s\n",
                                   errno_name(r));

        report(s);
        for (size_t k = 0; k < ELEMENTSOF(variants); k++)
                samples_free(&s[k]);
        ksft_finished();
}
