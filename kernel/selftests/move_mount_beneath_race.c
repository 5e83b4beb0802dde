/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Race tests aimed at the two fixes the backport carries on top of the 6.5
 * code (kernel/patches/0006 and 0007). Each runs for TUCK_RACE_SECONDS
 * (default 10) and prints how often it tried and how often the window it
 * aims at showed; the QEMU harness also fails the run on any WARN, KASAN or
 * lockdep report.
 *
 * 0d039eac6e59 (0006, CVE-2025-37988): for MOVE_MOUNT_BENEATH, do_lock_mount()
 * locks the top's mountpoint, which belongs to the top's parent, before it
 * holds namespace_sem. 6.5 pinned only that dentry: a racing move of the top
 * plus an unmount of its old parent could shut the parent's filesystem down
 * under it (Al Viro's reproducer: move_mount(foo, bar/baz, BENEATH) against
 * mount --move bar/baz splat; umount bar). The fix pins the parent mount as
 * well and, when the top moved while the locks were taken, retries at its
 * new place where 6.5 gave up with ENOENT. That wrong result is what these
 * tests catch reliably: the top is only ever moved, never unmounted, so a
 * beneath through an fd on it must always succeed; ENOENT means the window
 * was hit on a kernel without the fix. The use-after-free itself needs the
 * parent's final mntput() to win a second race against the mover's own
 * dput(); Al needed an injected delay for it, so KASAN catching it here is a
 * matter of luck (the soak, tests/kernel/soak, runs these for much longer).
 *
 * 5f31c549382b (0007): path_overmounted() looks the source's overmount up
 * with __lookup_mnt() under namespace_sem, which does not stop mounts from
 * being unhashed elsewhere: the stuck children of a lazily unmounted mount
 * are unhashed on its final mntput(), by whoever drops the last reference.
 * The fix rechecks mount_lock's sequence count. The test keeps the source
 * overmounted, so every beneath of it must be refused, while other processes
 * churn lazily unmounted trees with children and drop their last references;
 * a false negative would let the move through and leave a shadow mount.
 * There is no layout that shows the bug without the race (only the
 * sequence-count retry differs), and the race needs an unhashed mount in
 * the source's own hash chain: see tests/kernel/README.md for the numbers.
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mount-util.h"

#define BASE "/tmp"
#define DEFAULT_SECONDS 10
#define MAX_HELPERS 4

/* What one side of a race saw: a count per result. */
struct tally {
        unsigned long ok, einval, enoent, ebusy, other;
        int other_errno;
};

static void tally(struct tally *t, int r) {
        switch (r) {
        case 0:         t->ok++; break;
        case -EINVAL:   t->einval++; break;
        case -ENOENT:   t->enoent++; break;
        case -EBUSY:    t->ebusy++; break;
        default:        t->other++; t->other_errno = r; break;
        }
}

static unsigned long tally_sum(const struct tally *t) {
        return t->ok + t->einval + t->enoent + t->ebusy + t->other;
}

static void tally_print(const char *test, const char *what, const struct tally *t) {
        ksft_print_msg("race %s: %s %lu: %lu ok, %lu EINVAL, %lu ENOENT, %lu EBUSY, %lu other%s%s\n",
                       test, what, tally_sum(t), t->ok, t->einval, t->enoent, t->ebusy, t->other,
                       t->other ? ", last " : "", t->other ? errno_name(t->other_errno) : "");
}

/* Shared between the test process and its helpers (MAP_SHARED). */
struct race_shared {
        _Atomic unsigned long round;    /* the round both sides start together */
        _Atomic unsigned long ready;    /* the round the helper is waiting at */
        _Atomic int stop;
        struct tally main, helper[MAX_HELPERS], cleanup;
        unsigned long shadows;
};

static double now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

static int race_seconds(void) {
        const char *env = getenv("TUCK_RACE_SECONDS");

        return env ? atoi(env) : DEFAULT_SECONDS;
}

/* A few hundred ns to a few µs of busy work, to vary who gets where first. */
static void jitter(unsigned seed) {
        for (volatile unsigned i = 0; i < (seed * 2654435761u) % 2048; i++)
                ;
}

/* Lazily detach everything stacked at @path; how many. */
static unsigned detach_all(const char *path) {
        unsigned n = 0;

        while (umount2(path, MNT_DETACH | UMOUNT_NOFOLLOW) == 0)
                n++;
        return n;
}

/* Attach a new tmpfs (marker @marker) at @path; its mount fd, or -errno. */
static int attach_tmpfs(const char *path, const char *marker) {
        _cleanup_close_ int fd = tmpfs_detached(marker);
        int r;

        if (fd < 0)
                return fd;
        r = move_mount_raw(fd, "", AT_FDCWD, path, MOVE_MOUNT_F_EMPTY_PATH);
        if (r < 0)
                return r;
        return TAKE_FD(fd);
}

/* Beneath the mount @top_fd refers to (or whatever now tops its stack). */
static int beneath_fd(int top_fd) {
        _cleanup_close_ int fd = tmpfs_detached("new");

        if (fd < 0)
                return fd;
        return move_beneath(fd, "", top_fd, "", MOVE_MOUNT_T_EMPTY_PATH);
}

FIXTURE(race) {
        struct race_shared *sh;
        pid_t helpers[MAX_HELPERS];
        unsigned nhelpers;
        char *before;
};

FIXTURE_SETUP(race) {
        setvbuf(stdout, NULL, _IOLBF, 0);
        self->nhelpers = 0;
        self->sh = mmap(NULL, sizeof(*self->sh), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, self->sh);
        memset(self->sh, 0, sizeof(*self->sh));
        ASSERT_EQ(0, enter_private_mount_ns());
        ASSERT_EQ(0, tmpfs_mount_at(BASE, "base"));
        self->before = mountinfo_read(0);
        ASSERT_NE(NULL, self->before);
}

FIXTURE_TEARDOWN(race) {
        self->sh->stop = 1;
        for (unsigned i = 0; i < self->nhelpers; i++)
                kill_child(self->helpers[i]);
        free(self->before);
        EXPECT_EQ(0, umount2(BASE, MNT_DETACH));
}

/* Fork a helper that runs @fn(sh, i) in our mount namespace until stopped. */
static pid_t start_helper(FIXTURE_DATA(race) *self, void (*fn)(struct race_shared *sh, unsigned i)) {
        unsigned i = self->nhelpers;
        pid_t pid;

        if (i >= MAX_HELPERS)
                return -E2BIG;
        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                fn(self->sh, i);
                _exit(0);
        }
        self->helpers[self->nhelpers++] = pid;
        return pid;
}

/* Stop the helpers and wait for them: 0 if all ran to the end. */
static int stop_helpers(FIXTURE_DATA(race) *self) {
        int bad = 0;

        self->sh->stop = 1;
        for (unsigned i = 0; i < self->nhelpers; i++)
                bad |= wait_child(self->helpers[i]) != 0;
        self->nhelpers = 0;
        return bad ? -ECHILD : 0;
}

/* ---- 0006: the top moves while a beneath locks it -------------------------- */

/*
 * The top is only ever moved, never unmounted, so every beneath through an
 * fd on it must succeed: ENOENT is a kernel that gave up on a moved top.
 */
static void expect_every_beneath_succeeded(struct __test_metadata *_metadata, const struct tally *t) {
        EXPECT_LT(0ul, t->ok) TH_LOG("no beneath ever succeeded");
        EXPECT_EQ(0ul, t->enoent)
                TH_LOG("%lu beneath calls failed with ENOENT: the top moved while it was being locked and the kernel gave up (no 0d039eac6e59)",
                       t->enoent);
        EXPECT_EQ(0ul, t->einval + t->ebusy + t->other)
                TH_LOG("beneath failed unexpectedly (last %s)", errno_name(t->other_errno));
}

#define PAR BASE "/p"
#define BENEATH_PER_ROUND 8

/* Move whatever tops PAR/s to PAR/t and back, without pause. */
static void mover(struct race_shared *sh, unsigned i) {
        while (!sh->stop) {
                tally(&sh->helper[i], move_mount_raw(AT_FDCWD, PAR "/s", AT_FDCWD, PAR "/t", 0));
                tally(&sh->helper[i], move_mount_raw(AT_FDCWD, PAR "/t", AT_FDCWD, PAR "/s", 0));
        }
}

/*
 * A fresh parent P at PAR and top T at PAR/s each round; a helper moves T
 * back and forth between PAR/s and PAR/t without pause and never unmounts
 * anything, and each of BENEATH_PER_ROUND beneath calls through an fd on T
 * must land beneath T wherever it is. ENOENT is 6.5's answer when T moved while do_lock_mount() took its
 * locks (0006 retries instead). Between rounds P goes, with everything on
 * it, in one lazy unmount (the helper then fails to find PAR/s: ENOENT).
 */
TEST_F_TIMEOUT(race, top_moved_while_locking, 3600) {
        struct race_shared *sh = self->sh;
        _cleanup_free_ char *after = NULL;
        double start, deadline;
        unsigned long rounds = 0;

        ASSERT_EQ(0, mkdir(PAR, 0755));
        ASSERT_LT(0, start_helper(self, mover));

        start = now();
        deadline = start + race_seconds();
        while (now() < deadline) {
                _cleanup_close_ int top = -EBADF;

                ASSERT_EQ(0, tmpfs_mount_at(PAR, "parent"));
                ASSERT_EQ(0, mkdir(PAR "/s", 0755));
                ASSERT_EQ(0, mkdir(PAR "/t", 0755));
                top = attach_tmpfs(PAR "/s", "top");
                ASSERT_LE(0, top) TH_LOG("attaching the top: %s", errno_name(top));
                /* Each success slides one more mount under T; T stays on top. */
                for (unsigned i = 0; i < BENEATH_PER_ROUND; i++)
                        tally(&sh->main, beneath_fd(top));
                top = safe_close(top);
                ASSERT_EQ(0, umount2(PAR, MNT_DETACH));
                rounds++;
        }
        ASSERT_EQ(0, stop_helpers(self));

        ksft_print_msg("race top_moved_while_locking: %lu rounds in %.1f s\n", rounds, now() - start);
        tally_print("top_moved_while_locking", "beneath", &sh->main);
        tally_print("top_moved_while_locking", "move", &sh->helper[0]);
        expect_every_beneath_succeeded(_metadata, &sh->main);
        EXPECT_LT(0ul, sh->helper[0].ok) TH_LOG("the top was never moved");
        EXPECT_EQ(0ul, sh->helper[0].ebusy + sh->helper[0].other)
                TH_LOG("the mover failed unexpectedly (last %s)", errno_name(sh->helper[0].other_errno));

        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        EXPECT_STREQ(self->before, after) TH_LOG("mounts leaked");
}

#define OLD BASE "/q"
#define SPLAT BASE "/splat"

/*
 * Al Viro's reproducer of CVE-2025-37988, one round at a time: parent Q at
 * OLD, top T at OLD/baz, and at the same moment (a spin barrier in shared
 * memory, plus jitter) a beneath through an fd on T and, in the helper,
 * mount --move OLD/baz SPLAT; umount -l OLD. T is never unmounted, so the
 * beneath must succeed, at OLD/baz or at SPLAT; on a kernel without the fix
 * it fails with ENOENT when the move falls into do_lock_mount(), and may
 * touch Q's dentry after Q is gone.
 */
static void mover_and_umounter(struct race_shared *sh, unsigned i) {
        for (unsigned long round = 1; !sh->stop; round++) {
                sh->ready = round;
                while (sh->round != round)
                        if (sh->stop)
                                return;
                        else
                                sched_yield();
                jitter(round);
                tally(&sh->helper[i], move_mount_raw(AT_FDCWD, OLD "/baz", AT_FDCWD, SPLAT, 0));
                tally(&sh->helper[i + 1], umount2(OLD, MNT_DETACH) < 0 ? -errno : 0);
                sh->ready = 0;
                while (sh->round == round)
                        if (sh->stop)
                                return;
                        else
                                sched_yield();
        }
}

TEST_F_TIMEOUT(race, top_moved_and_old_parent_unmounted_while_locking, 3600) {
        struct race_shared *sh = self->sh;
        _cleanup_free_ char *after = NULL;
        double start, deadline;
        unsigned long round;

        ASSERT_EQ(0, mkdir(OLD, 0755));
        ASSERT_EQ(0, mkdir(SPLAT, 0755));
        ASSERT_LT(0, start_helper(self, mover_and_umounter));

        start = now();
        deadline = start + race_seconds();
        for (round = 1; now() < deadline; round++) {
                _cleanup_close_ int top = -EBADF;

                ASSERT_EQ(0, tmpfs_mount_at(OLD, "old-parent"));
                ASSERT_EQ(0, mkdir(OLD "/baz", 0755));
                top = attach_tmpfs(OLD "/baz", "top");
                ASSERT_LE(0, top) TH_LOG("attaching the top: %s", errno_name(top));

                while (sh->ready != round)
                        sched_yield();
                sh->round = round;
                jitter(round * 7);
                tally(&sh->main, beneath_fd(top));
                while (sh->ready == round)
                        sched_yield();
                top = safe_close(top);
                /* The helper has detached OLD; what is left sits at SPLAT. */
                detach_all(OLD);
                detach_all(SPLAT);
                sh->round = 0;
        }
        ASSERT_EQ(0, stop_helpers(self));

        ksft_print_msg("race top_moved_and_old_parent_unmounted_while_locking: %lu rounds in %.1f s\n",
                       round - 1, now() - start);
        tally_print("top_moved_and_old_parent_unmounted_while_locking", "beneath", &sh->main);
        tally_print("top_moved_and_old_parent_unmounted_while_locking", "move", &sh->helper[0]);
        tally_print("top_moved_and_old_parent_unmounted_while_locking", "umount", &sh->helper[1]);
        expect_every_beneath_succeeded(_metadata, &sh->main);
        EXPECT_EQ(0ul, sh->helper[0].einval + sh->helper[0].enoent + sh->helper[0].ebusy + sh->helper[0].other)
                TH_LOG("the move failed (last %s)", errno_name(sh->helper[0].other_errno));
        EXPECT_EQ(0ul, sh->helper[1].einval + sh->helper[1].enoent + sh->helper[1].ebusy + sh->helper[1].other)
                TH_LOG("the lazy umount failed (last %s)", errno_name(sh->helper[1].other_errno));

        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        EXPECT_STREQ(self->before, after) TH_LOG("mounts leaked");
}

/* ---- 0007: an overmounted source while unrelated mounts are unhashed ------- */

#define SRC BASE "/src"
#define TOP BASE "/top"

/*
 * Trees with a child, lazily unmounted while an fd pins them, then the fd
 * closed: the final mntput() unhashes the stuck child outside namespace_sem.
 */
static void stuck_children(struct race_shared *sh, unsigned i) {
        char root[64], child[80];

        snprintf(root, sizeof(root), BASE "/churn%u", i);
        snprintf(child, sizeof(child), "%s/c", root);
        while (!sh->stop) {
                _cleanup_close_ int pin = -EBADF;
                int r;

                r = tmpfs_mount_at(root, "churn");
                if (r == 0)
                        r = mkdir(child, 0755) < 0 ? -errno : 0;
                if (r == 0)
                        r = tmpfs_mount_at(child, "churn-child");
                if (r == 0)
                        r = pin = open_path(root);
                if (r >= 0)
                        r = umount2(root, MNT_DETACH) < 0 ? -errno : 0;
                tally(&sh->helper[i], r);
                /* Here: the child's last reference goes, and it is unhashed. */
                pin = safe_close(pin);
                detach_all(root);
        }
}

TEST_F_TIMEOUT(race, overmounted_source_while_mounts_unhashed, 3600) {
        struct race_shared *sh = self->sh;
        _cleanup_close_ int src = -EBADF;
        _cleanup_free_ char *after = NULL;
        double start, deadline;

        ASSERT_EQ(0, tmpfs_mount_at(SRC, "src"));
        src = open_path(SRC);
        ASSERT_LE(0, src);
        ASSERT_EQ(0, tmpfs_mount_at(SRC, "over"));
        ASSERT_EQ(0, tmpfs_mount_at(TOP, "top"));
        ASSERT_LT(0, start_helper(self, stuck_children));
        ASSERT_LT(0, start_helper(self, stuck_children));

        start = now();
        deadline = start + race_seconds();
        while (now() < deadline) {
                int r = move_beneath(src, "", AT_FDCWD, TOP, 0);

                tally(&sh->main, r);
                if (r == 0) {
                        _cleanup_free_ char *mi = mountinfo_read(0);

                        /* A false negative: the overmounted source moved. */
                        sh->shadows += mi ? mountinfo_shadowed(mi, stderr) : 0;
                        break;
                }
        }
        ASSERT_EQ(0, stop_helpers(self));

        ksft_print_msg("race overmounted_source_while_mounts_unhashed: %.1f s\n", now() - start);
        tally_print("overmounted_source_while_mounts_unhashed", "beneath", &sh->main);
        tally_print("overmounted_source_while_mounts_unhashed", "churn-0", &sh->helper[0]);
        tally_print("overmounted_source_while_mounts_unhashed", "churn-1", &sh->helper[1]);
        EXPECT_LT(0ul, sh->main.einval) TH_LOG("no beneath was tried");
        EXPECT_LT(0ul, sh->helper[0].ok + sh->helper[1].ok) TH_LOG("no tree was churned");
        EXPECT_EQ(0ul, sh->main.ok)
                TH_LOG("the overmounted source was moved beneath (%lu shadow mounts): path_overmounted() missed the overmount",
                       sh->shadows);
        EXPECT_EQ(0ul, sh->main.enoent + sh->main.ebusy + sh->main.other)
                TH_LOG("beneath failed unexpectedly (last %s)", errno_name(sh->main.other_errno));
        EXPECT_EQ(0ul, sh->helper[0].other + sh->helper[1].other + sh->helper[0].einval + sh->helper[1].einval)
                TH_LOG("the churn failed unexpectedly");

        ASSERT_EQ(2u, detach_all(SRC));
        ASSERT_EQ(0, umount2(TOP, 0));
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        EXPECT_STREQ(self->before, after) TH_LOG("mounts leaked");
}

TEST_HARNESS_MAIN
