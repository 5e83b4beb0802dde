/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Race stress for MOVE_MOUNT_BENEATH: several processes mount beneath,
 * mount on top, unmount, move and propagate on the same mount stacks for a
 * fixed time, then the mount tables of every namespace involved must be
 * consistent and unwind to exactly what they were before.
 *
 * Run it on the debug kernel (lockdep, KASAN): the QEMU harness fails the run
 * on any lockdep, KASAN, WARN or BUG report in the kernel log; this test also
 * fails when the kernel's taint flags or lockdep's debug_locks change while it
 * runs, so the oracle run on the build machine checks what it can too.
 *
 * The races it aims at are those of the 6.5 code and its fixes: the target's
 * mountpoint and parent pinned in do_lock_mount() while a concurrent move or
 * umount changes them (0d039eac6e59, CVE-2025-37988), path_overmounted()
 * against concurrent unhashing (5f31c549382b), and propagation tucking a copy
 * under a stack that is changing in a peer or slave namespace.
 *
 * Stacks:
 *   SHARED/s   shared parent: peer namespace and slave namespace get copies
 *   PRIV/s     private parent: the top moves between PRIV/s and PRIV/t
 *
 * TUCK_STRESS_SECONDS sets the duration (default 30); TUCK_STRESS_WORKERS, a
 * comma-separated list of worker names, runs only those (for debugging).
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
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
#define SHARED BASE "/shared"
#define PRIV BASE "/private"

#define DEFAULT_SECONDS 30
#define MAX_UNWIND 100000

/* What a worker does, counted separately. */
enum op {
        OP_BENEATH,     /* move_mount(MOVE_MOUNT_BENEATH) of a new tmpfs */
        OP_MOUNT,       /* mount(2) of a tmpfs on top */
        OP_UMOUNT,      /* umount2() of the top */
        OP_MOVE,        /* move_mount() of the top elsewhere */
        OP_READ,        /* reading the marker through the stack */
        OP_FSMOUNT,     /* fsopen/fsmount of the new tmpfs */
        _OP_MAX,
};

static const char *const op_names[_OP_MAX] = {
        [OP_BENEATH] = "beneath",
        [OP_MOUNT]   = "mount",
        [OP_UMOUNT]  = "umount",
        [OP_MOVE]    = "move",
        [OP_READ]    = "read",
        [OP_FSMOUNT] = "fsmount",
};

/*
 * Results a worker may see without anything being wrong, given what the
 * others do: EINVAL when nothing is mounted at the path right now, ENOENT
 * when the mount we looked up went away before we locked it (6.5
 * do_lock_mount() for beneath, lock_mount() for mount), EBUSY for a plain
 * umount of a mount someone just mounted on or is walking through.
 */
enum slot {
        SLOT_OK,
        SLOT_EINVAL,
        SLOT_ENOENT,
        SLOT_EBUSY,
        SLOT_OTHER,     /* anything else: a failure */
        _SLOT_MAX,
};

struct worker_stats {
        char name[32];
        unsigned long ops[_OP_MAX][_SLOT_MAX];
        int other_errno;
};

#define MAX_WORKERS 16

struct shared_stats {
        struct worker_stats w[MAX_WORKERS];
};

static void count(struct worker_stats *w, enum op op, int r) {
        enum slot slot;

        switch (r) {
        case 0:
                slot = SLOT_OK;
                break;
        case -EINVAL:
                slot = op == OP_READ || op == OP_FSMOUNT ? SLOT_OTHER : SLOT_EINVAL;
                break;
        case -ENOENT:
                slot = op == OP_UMOUNT || op == OP_FSMOUNT ? SLOT_OTHER : SLOT_ENOENT;
                break;
        case -EBUSY:
                slot = op == OP_UMOUNT ? SLOT_EBUSY : SLOT_OTHER;
                break;
        default:
                slot = SLOT_OTHER;
        }
        if (slot == SLOT_OTHER)
                w->other_errno = r;
        w->ops[op][slot]++;
}

static double now(void) {
        struct timespec ts;

        clock_gettime(CLOCK_MONOTONIC, &ts);
        return ts.tv_sec + ts.tv_nsec / 1e9;
}

/*
 * Drop the top of the stack at @path (or, when nothing is there because a
 * mover took the stack away, at @other). Not lazily at first: a lazy umount
 * of the top also takes whatever another worker mounted on it after our
 * lookup, and the stacks would drain. A plain umount refuses that with
 * EBUSY (also while a copy in the slave namespace is covered by a mount of
 * its own); retry for a while, then detach lazily so the stacks stay shallow.
 */
static void umount_top(struct worker_stats *w, const char *path, const char *other) {
        for (unsigned i = 0; i < 20; i++) {
                int r = umount2(path, UMOUNT_NOFOLLOW) < 0 ? -errno : 0;

                count(w, OP_UMOUNT, r);
                if (r == -EINVAL && other) {
                        path = other;
                        other = NULL;
                        continue;
                }
                if (r != -EBUSY)
                        return;
                /* Leave the CPU to the others: whoever holds it busy must move on. */
                usleep(1000);
        }
        count(w, OP_UMOUNT, umount2(path, UMOUNT_NOFOLLOW | MNT_DETACH) < 0 ? -errno : 0);
}

/*
 * The refresh sequence: a new tmpfs beneath the top, then drop the top. With
 * @b, alternate between the stacks at @a and @b (a mover shifts them).
 */
static void work_beneath(struct worker_stats *w, const char *a, const char *b, double deadline) {
        for (unsigned i = 0; now() < deadline; i++) {
                const char *path = b && i % 2 ? b : a, *other = path == a ? b : a;
                int fd = tmpfs_detached(w->name), r;

                if (fd < 0) {
                        count(w, OP_FSMOUNT, fd);
                        continue;
                }
                r = move_beneath(fd, "", AT_FDCWD, path, 0);
                /* Our fd pins the new mount: close it before anyone unmounts that. */
                safe_close(fd);
                count(w, OP_BENEATH, r);
                if (r == 0)
                        umount_top(w, path, b ? other : NULL);
        }
}

/* Plain mounts on top and unmounts: the top the beneath workers lock changes. */
static void work_overmount(struct worker_stats *w, const char *path, double deadline) {
        while (now() < deadline) {
                int r = mount("tmpfs", path, "tmpfs", 0, "mode=0755") < 0 ? -errno : 0;

                count(w, OP_MOUNT, r);
                if (r == 0)
                        umount_top(w, path, NULL);
        }
}

/*
 * Move the top of the stack at @a onto @b and the top at @b onto @a, turn
 * about (mount --move), so that the top a beneath worker is locking changes
 * its parent and mountpoint under it.
 */
static void work_move(struct worker_stats *w, const char *a, const char *b, double deadline) {
        for (unsigned i = 0; now() < deadline; i++) {
                int r = i % 2 ? move_mount_raw(AT_FDCWD, b, AT_FDCWD, a, 0) :
                                move_mount_raw(AT_FDCWD, a, AT_FDCWD, b, 0);

                count(w, OP_MOVE, r);
        }
}

/* Lookups through the stack, as a reader of the hierarchy does. */
static void work_read(struct worker_stats *w, const char *path, double deadline) {
        char file[PATH_MAX];

        snprintf(file, sizeof(file), "%s/" MARKER_FILE, path);
        while (now() < deadline) {
                _cleanup_free_ char *s = read_file_at(AT_FDCWD, file);

                count(w, OP_READ, s || errno == ENOENT ? 0 : -errno);
        }
}

enum worker_kind {
        BENEATH_SHARED,
        OVERMOUNT_SHARED,
        BENEATH_PRIVATE,
        MOVE_PRIVATE,
        PEER_OVERMOUNT,   /* in the peer namespace: its mounts propagate to ours */
        SLAVE_READ,       /* in the slave namespace */
        SLAVE_OVERMOUNT,  /* in the slave namespace: local mounts on a slave stack */
};

static const struct worker_spec {
        enum worker_kind kind;
        const char *name;
        enum op main_op;        /* must succeed at least once, or the run proved nothing */
} workers[] = {
        { BENEATH_SHARED,   "beneath-shared-1", OP_BENEATH },
        { BENEATH_SHARED,   "beneath-shared-2", OP_BENEATH },
        { OVERMOUNT_SHARED, "overmount-shared", OP_MOUNT   },
        { BENEATH_PRIVATE,  "beneath-private",  OP_BENEATH },
        { MOVE_PRIVATE,     "move-private",     OP_MOVE    },
        { PEER_OVERMOUNT,   "peer-overmount",   OP_MOUNT   },
        { SLAVE_READ,       "slave-read",       OP_READ    },
        { SLAVE_OVERMOUNT,  "slave-overmount",  OP_MOUNT   },
};

static void run_worker(const struct worker_spec *spec, struct worker_stats *w, double deadline) {
        switch (spec->kind) {
        case BENEATH_SHARED:
                work_beneath(w, SHARED "/s", NULL, deadline);
                break;
        case OVERMOUNT_SHARED:
        case PEER_OVERMOUNT:
        case SLAVE_OVERMOUNT:
                work_overmount(w, SHARED "/s", deadline);
                break;
        case BENEATH_PRIVATE:
                work_beneath(w, PRIV "/s", PRIV "/t", deadline);
                break;
        case MOVE_PRIVATE:
                work_move(w, PRIV "/s", PRIV "/t", deadline);
                break;
        case SLAVE_READ:
                work_read(w, SHARED "/s", deadline);
                break;
        }
}

static bool worker_enabled(const char *name) {
        const char *list = getenv("TUCK_STRESS_WORKERS");
        size_t len = strlen(name);

        if (!list)
                return true;
        for (const char *p = list; *p; ) {
                size_t l = strcspn(p, ",");

                if (l == len && strncmp(p, name, len) == 0)
                        return true;
                p += l;
                if (*p)
                        p++;
        }
        return false;
}

static int make_shared_slave(void *userdata) {
        return set_propagation(SHARED, MS_REC | MS_SLAVE);
}

/* Fork a worker; in namespace @ns_pid's mount namespace unless 0. */
static pid_t start_worker(const struct worker_spec *spec, struct worker_stats *w,
                          pid_t ns_pid, double deadline) {
        pid_t pid = fork();

        if (pid != 0)
                return pid < 0 ? -errno : pid;
        if (ns_pid > 0) {
                char path[64];
                int fd;

                snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int) ns_pid);
                fd = open(path, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || setns(fd, CLONE_NEWNS) < 0)
                        _exit(1);
                close(fd);
                /* setns() leaves us at the namespace's root; use its cwd too. */
                if (chdir("/") < 0)
                        _exit(1);
        }
        run_worker(spec, w, deadline);
        _exit(0);
}

static unsigned long read_ulong_file(const char *path) {
        _cleanup_free_ char *s = read_file_at(AT_FDCWD, path);

        return s ? strtoul(s, NULL, 10) : 0;
}

/* lockdep's debug_locks (1 until lockdep reported something); -1 without lockdep. */
static int lockdep_debug_locks(void) {
        _cleanup_free_ char *s = read_file_at(AT_FDCWD, "/proc/lockdep_stats");
        const char *p;

        if (!s)
                return -1;
        p = strstr(s, "debug_locks:");
        return p ? atoi(p + strlen("debug_locks:")) : -1;
}

/* Unmount everything stacked at @path, one by one; how many, or -errno. */
static int unwind(const char *path) {
        int n = 0;

        for (; n < MAX_UNWIND; n++)
                if (umount2(path, 0) < 0)
                        return errno == EINVAL ? n : -errno;
        return -ELOOP;
}

/* unwind() in the mount namespace of @ns_pid. */
static int unwind_in(pid_t ns_pid, const char *path) {
        int status;
        pid_t pid;

        pid = fork();
        if (pid < 0)
                return -errno;
        if (pid == 0) {
                char ns[64];
                int fd, n;

                snprintf(ns, sizeof(ns), "/proc/%d/ns/mnt", (int) ns_pid);
                fd = open(ns, O_RDONLY | O_CLOEXEC);
                if (fd < 0 || setns(fd, CLONE_NEWNS) < 0)
                        _exit(255);
                n = unwind(path);
                _exit(n < 0 ? 255 : 0);
        }
        if (waitpid(pid, &status, 0) != pid)
                return -errno;
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EBUSY;
}

static unsigned long sum(const unsigned long *slots) {
        unsigned long n = 0;

        for (unsigned s = 0; s < _SLOT_MAX; s++)
                n += slots[s];
        return n;
}

static void print_stats(const struct shared_stats *st, double seconds) {
        unsigned long total = 0, per_op[_OP_MAX] = {};

        for (unsigned i = 0; i < ELEMENTSOF(workers); i++) {
                const struct worker_stats *w = &st->w[i];

                for (unsigned op = 0; op < _OP_MAX; op++) {
                        const unsigned long *c = w->ops[op];
                        unsigned long n = sum(c);

                        if (n == 0)
                                continue;
                        total += n;
                        per_op[op] += n;
                        ksft_print_msg("stress %-17s %-7s %8lu: %lu ok, %lu EINVAL, %lu ENOENT, %lu EBUSY, %lu other%s%s\n",
                                       w->name, op_names[op], n, c[SLOT_OK], c[SLOT_EINVAL], c[SLOT_ENOENT],
                                       c[SLOT_EBUSY], c[SLOT_OTHER], c[SLOT_OTHER] ? ", last " : "",
                                       c[SLOT_OTHER] ? errno_name(w->other_errno) : "");
                }
        }
        ksft_print_msg("stress total: %lu operations (%lu beneath, %lu mount, %lu umount, %lu move, %lu read) in %.1f s\n",
                       total, per_op[OP_BENEATH], per_op[OP_MOUNT], per_op[OP_UMOUNT], per_op[OP_MOVE],
                       per_op[OP_READ], seconds);
}

/* The mount tables of the three namespaces: ours, the peer's, the slave's. */
enum { NS_OURS, NS_PEER, NS_SLAVE, _NS_MAX };
static const char *const ns_names[_NS_MAX] = { "our", "the peer", "the slave" };

struct tables {
        char *mountinfo[_NS_MAX];
};

static void tables_free(struct tables *t) {
        for (unsigned i = 0; i < _NS_MAX; i++)
                t->mountinfo[i] = mfree(t->mountinfo[i]);
}

/* Read all three; false (with errno) if one cannot be read. */
static bool tables_read(struct tables *t, pid_t peer, pid_t slave) {
        const pid_t pids[_NS_MAX] = { 0, peer, slave };

        for (unsigned i = 0; i < _NS_MAX; i++) {
                t->mountinfo[i] = mountinfo_read(pids[i]);
                if (!t->mountinfo[i])
                        return false;
        }
        return true;
}

FIXTURE(stress) {
        struct shared_stats *stats;
        pid_t peer, slave;
};

FIXTURE_SETUP(stress) {
        self->peer = self->slave = -1;
        /* The harness ends each test with _exit(): keep no output buffered. */
        setvbuf(stdout, NULL, _IOLBF, 0);
        self->stats = mmap(NULL, sizeof(*self->stats), PROT_READ | PROT_WRITE,
                           MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        ASSERT_NE(MAP_FAILED, self->stats);
        memset(self->stats, 0, sizeof(*self->stats));

        ASSERT_EQ(0, enter_private_mount_ns());
        ASSERT_EQ(0, tmpfs_mount_at(BASE, "base"));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "shared-parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, mkdir(SHARED "/s", 0755));
        ASSERT_EQ(0, tmpfs_mount_at(PRIV, "private-parent"));
        ASSERT_EQ(0, mkdir(PRIV "/s", 0755));
        ASSERT_EQ(0, mkdir(PRIV "/t", 0755));
}

FIXTURE_TEARDOWN(stress) {
        kill_child(self->peer);
        kill_child(self->slave);
}

TEST_F_TIMEOUT(stress, beneath_race, 3600) {
        _cleanup_(tables_free) struct tables before = {}, after = {};
        pid_t pids[MAX_WORKERS];
        unsigned long taint0;
        int seconds = DEFAULT_SECONDS, debug_locks0, n;
        double start, deadline;
        const char *env;

        env = getenv("TUCK_STRESS_SECONDS");
        if (env)
                seconds = atoi(env);
        ASSERT_LT(0, seconds) TH_LOG("bad TUCK_STRESS_SECONDS '%s'", env);

        /* A peer and a slave namespace, and the tables every namespace must return to. */
        self->peer = spawn_mount_ns(NULL, NULL);
        ASSERT_LT(0, self->peer);
        self->slave = spawn_mount_ns(make_shared_slave, NULL);
        ASSERT_LT(0, self->slave);
        ASSERT_TRUE(tables_read(&before, self->peer, self->slave));

        /* The initial stacks; the one on SHARED propagates to both namespaces. */
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/s", "shared-top"));
        ASSERT_EQ(0, tmpfs_mount_at(PRIV "/s", "private-top"));

        taint0 = read_ulong_file("/proc/sys/kernel/tainted");
        debug_locks0 = lockdep_debug_locks();
        ksft_print_msg("stress: %d s, %zu processes, lockdep %s, taint %lu at start\n",
                       seconds, ELEMENTSOF(workers),
                       debug_locks0 < 0 ? "absent" : debug_locks0 ? "on" : "already off", taint0);
        fflush(stdout);

        start = now();
        deadline = start + seconds;
        for (unsigned i = 0; i < ELEMENTSOF(workers); i++) {
                const struct worker_spec *spec = &workers[i];
                pid_t ns = spec->kind == PEER_OVERMOUNT ? self->peer :
                           spec->kind == SLAVE_READ || spec->kind == SLAVE_OVERMOUNT ? self->slave : 0;

                snprintf(self->stats->w[i].name, sizeof(self->stats->w[i].name), "%s", spec->name);
                pids[i] = 0;
                if (!worker_enabled(spec->name))
                        continue;
                pids[i] = start_worker(spec, &self->stats->w[i], ns, deadline);
                ASSERT_LT(0, pids[i]);
        }
        for (unsigned i = 0; i < ELEMENTSOF(workers); i++) {
                if (pids[i] == 0)
                        continue;
                EXPECT_EQ(0, waitpid(pids[i], &n, 0) == pids[i] && WIFEXITED(n) ? WEXITSTATUS(n) : -1)
                        TH_LOG("worker %s failed", workers[i].name);
        }

        print_stats(self->stats, now() - start);

        /* Every worker must have done real work, and seen only the expected errors. */
        for (unsigned i = 0; i < ELEMENTSOF(workers); i++) {
                const struct worker_stats *w = &self->stats->w[i];

                if (pids[i] == 0)
                        continue;
                EXPECT_LT(0ul, w->ops[workers[i].main_op][SLOT_OK])
                        TH_LOG("%s: no %s ever succeeded", w->name, op_names[workers[i].main_op]);
                for (unsigned op = 0; op < _OP_MAX; op++) {
                        EXPECT_EQ(0ul, w->ops[op][SLOT_OTHER])
                                TH_LOG("%s: %s failed with %s", w->name, op_names[op], errno_name(w->other_errno));
                }
        }

        /* Consistency: every mount's parent exists, in all three namespaces. */
        ASSERT_TRUE(tables_read(&after, self->peer, self->slave));
        ksft_print_msg("stress: stack depth after the run: shared %u (peer %u, slave %u), private %u + %u\n",
                       mountinfo_count_at(after.mountinfo[NS_OURS], SHARED "/s"),
                       mountinfo_count_at(after.mountinfo[NS_PEER], SHARED "/s"),
                       mountinfo_count_at(after.mountinfo[NS_SLAVE], SHARED "/s"),
                       mountinfo_count_at(after.mountinfo[NS_OURS], PRIV "/s"),
                       mountinfo_count_at(after.mountinfo[NS_OURS], PRIV "/t"));
        for (unsigned i = 0; i < _NS_MAX; i++) {
                EXPECT_EQ(0, mountinfo_orphans(after.mountinfo[i], stderr))
                        TH_LOG("%s namespace has mounts whose parent is gone", ns_names[i]);
        }
        tables_free(&after);

        /* The stacks unwind cleanly: plain umount (not lazy), nothing busy. */
        n = unwind(SHARED "/s");
        EXPECT_LE(0, n) TH_LOG("unwinding " SHARED "/s: %s", errno_name(n));
        n = unwind(PRIV "/s");
        EXPECT_LE(0, n) TH_LOG("unwinding " PRIV "/s: %s", errno_name(n));
        n = unwind(PRIV "/t");
        EXPECT_LE(0, n) TH_LOG("unwinding " PRIV "/t: %s", errno_name(n));
        /* The slave's own mounts did not propagate back; they are its to drop. */
        n = unwind_in(self->slave, SHARED "/s");
        EXPECT_LE(0, n) TH_LOG("unwinding " SHARED "/s in the slave namespace: %s", errno_name(n));

        /* No leaked mounts: every namespace is back to its table from before. */
        ASSERT_TRUE(tables_read(&after, self->peer, self->slave));
        for (unsigned i = 0; i < _NS_MAX; i++) {
                if (!streq(before.mountinfo[i], after.mountinfo[i]))
                        mountinfo_print_diff(stderr, before.mountinfo[i], after.mountinfo[i]);
                EXPECT_STREQ(before.mountinfo[i], after.mountinfo[i])
                        TH_LOG("%s namespace leaked mounts", ns_names[i]);
        }

        EXPECT_EQ(taint0, read_ulong_file("/proc/sys/kernel/tainted"))
                TH_LOG("the kernel got tainted during the run (WARN, BUG, KASAN, ...): see its log");
        EXPECT_EQ(debug_locks0, lockdep_debug_locks())
                TH_LOG("lockdep reported a problem and turned itself off: see the kernel log");
}

TEST_HARNESS_MAIN
