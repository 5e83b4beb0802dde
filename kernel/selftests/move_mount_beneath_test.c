/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * MOVE_MOUNT_BENEATH semantics, one test per rule.
 *
 * The rules are those merged in Linux 6.5 (6ac392815628 "fs: allow to mount
 * beneath top mount": do_move_mount() and can_move_mount_beneath() in
 * fs/namespace.c, propagation_would_overmount() in fs/pnode.c) as kept by the
 * later fixes 0d039eac6e59 (CVE-2025-37988) and 5f31c549382b. The same binary
 * runs on the 6.1 backport (kernel/patches/) in QEMU and, as the oracle, on
 * the build machine's own kernel, which has the feature upstream.
 *
 * Every test runs in its own forked process (kselftest harness) that enters a
 * private mount namespace and builds its tree on a scratch tmpfs at BASE, so
 * nothing reaches the machine. A refusal must be exactly the errno of the
 * rule and must leave /proc/self/mountinfo byte for byte as it was. Every
 * refusal of can_move_mount_beneath() and propagation_would_overmount() is
 * EINVAL, but beneath also inherits do_move_mount()'s generic checks: the
 * ELOOP ones (the source an ancestor of the destination, an nsfs loop),
 * ENOENT from do_lock_mount() for a target that is no longer mounted,
 * ENOSPC from count_mounts() and EPERM from may_mount(). Each test prints an
 * "outcome" line with the result of its key call; the side-by-side table
 * (tests/kernel/compare) shows those.
 *
 * The lock_mount fixture checks what 0d039eac6e59 (kernel/patches/0006)
 * changed for every lock_mount() caller, beneath or not: a target on a lazily
 * unmounted mount is ENOENT, checked under namespace_sem, where 6.5 and
 * earlier returned EINVAL from a later check_mnt().
 *
 * Layout built by the fixture:
 *
 *   BASE            tmpfs "base" (private; its parent is not the namespace root)
 *   BASE/target     tmpfs "top"  (the mount we put things beneath)
 */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "kselftest_harness.h"
#include "mount-util.h"

#define BASE "/tmp"
#define TARGET BASE "/target"
#define SOURCE BASE "/source"
#define SHARED BASE "/shared"

/* Print the outcome of the call under test, for the side-by-side table. */
#define OUTCOME(r)                                                              \
        do {                                                                    \
                ksft_print_msg("outcome %s.%s: %s\n",                          \
                               _metadata->fixture->name, _metadata->name,      \
                               errno_name(r));                                  \
                fflush(stdout);                                                 \
        } while (0)

/* The mount table must be exactly @before; show the difference if not. */
#define ASSERT_MOUNTS_UNCHANGED(before)                                         \
        do {                                                                    \
                _cleanup_free_ char *_after = mountinfo_read(0);               \
                ASSERT_NE(NULL, _after);                                        \
                if (!streq((before), _after))                                   \
                        mountinfo_print_diff(stderr, (before), _after);         \
                ASSERT_STREQ((before), _after)                                  \
                        TH_LOG("the refused call changed the mount table");    \
        } while (0)

/* @call must fail with exactly -@err and change nothing. */
#define ASSERT_REFUSED_WITH(err, call)                                          \
        do {                                                                    \
                _cleanup_free_ char *_before = mountinfo_read(0);              \
                int _r;                                                         \
                ASSERT_NE(NULL, _before);                                       \
                _r = (call);                                                    \
                OUTCOME(_r);                                                    \
                ASSERT_EQ(-(err), _r)                                           \
                        TH_LOG("expected %s, got %s", errno_name(err), errno_name(_r)); \
                ASSERT_MOUNTS_UNCHANGED(_before);                               \
        } while (0)

/* The refusals of can_move_mount_beneath() and most of do_move_mount(). */
#define ASSERT_REFUSED(call) ASSERT_REFUSED_WITH(EINVAL, call)

#define ASSERT_MARKER(dir, expected)                                            \
        do {                                                                    \
                _cleanup_free_ char *_m = marker_at(dir);                      \
                ASSERT_STREQ((expected), _m) TH_LOG("wrong mount visible at %s", (dir)); \
        } while (0)

static int make_shared_slave(void *userdata) {
        return set_propagation(SHARED, MS_REC | MS_SLAVE);
}

/*
 * The kernel must support MOVE_MOUNT_BENEATH at all, or every refusal below
 * would pass for the wrong reason (an unknown flag is EINVAL too).
 */
static int probe_beneath(void) {
        _cleanup_close_ int fd = -EBADF;
        int r;

        r = tmpfs_mount_at(BASE "/probe", "probe-top");
        if (r < 0)
                return r;
        fd = tmpfs_detached("probe-new");
        if (fd < 0)
                return fd;
        r = move_beneath(fd, "", AT_FDCWD, BASE "/probe", 0);
        if (r < 0)
                return r;
        fd = safe_close(fd);
        if (umount2(BASE "/probe", 0) < 0 || umount2(BASE "/probe", 0) < 0)
                return -errno;
        if (rmdir(BASE "/probe") < 0)
                return -errno;
        return 0;
}

FIXTURE(beneath) {
        pid_t ns_child, ns_child2;
};

FIXTURE_SETUP(beneath) {
        int r;

        self->ns_child = self->ns_child2 = -1;
        /* The harness ends each test with _exit(): keep no output buffered. */
        setvbuf(stdout, NULL, _IOLBF, 0);
        ASSERT_EQ(0, enter_private_mount_ns());
        ASSERT_EQ(0, tmpfs_mount_at(BASE, "base"));
        r = probe_beneath();
        ASSERT_EQ(0, r)
                TH_LOG("this kernel does not support MOVE_MOUNT_BENEATH (probe: %s)", errno_name(r));
        ASSERT_EQ(0, tmpfs_mount_at(TARGET, "top"));
}

FIXTURE_TEARDOWN(beneath) {
        kill_child(self->ns_child);
        kill_child(self->ns_child2);
        /* The namespace dies with this process; unmount anyway, and see it work. */
        EXPECT_EQ(0, umount2(BASE, MNT_DETACH));
}

/* ---- success ------------------------------------------------------------ */

/*
 * Put the detached mount @fd beneath the top at TARGET: the top stays
 * visible until unmounted, then the new mount (marker @revealed) shows.
 */
static void check_beneath_then_reveal(struct __test_metadata *_metadata, int fd, const char *revealed) {
        int r;

        r = move_beneath(fd, "", AT_FDCWD, TARGET, 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        ASSERT_MARKER(TARGET, "top");

        /* The fd pins the mount: an unmount of it would be EBUSY. */
        safe_close(fd);
        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, revealed);
}

/*
 * LTP move_mount03: a clone (open_tree OPEN_TREE_CLONE) goes beneath the top
 * mount, stays hidden, and shows once the top is unmounted; the original
 * stays where it was.
 */
TEST_F(beneath, open_tree_clone_beneath_revealed_on_umount) {
        int fd;

        ASSERT_EQ(0, tmpfs_mount_at(BASE "/a", "a"));
        fd = open_tree(AT_FDCWD, BASE "/a", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        ASSERT_LE(0, fd);

        check_beneath_then_reveal(_metadata, fd, "a");
        ASSERT_MARKER(BASE "/a", "a");
        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, "<no marker: ENOENT>");
}

/* A new filesystem (fsopen/fsmount) beneath, revealed on unmount. */
TEST_F(beneath, fsmount_beneath_revealed_on_umount) {
        int fd = tmpfs_detached("new");

        ASSERT_LE(0, fd);
        check_beneath_then_reveal(_metadata, fd, "new");
}

/* A whole detached tree (OPEN_TREE_CLONE | AT_RECURSIVE) goes beneath. */
TEST_F(beneath, recursive_tree_beneath) {
        int fd;

        ASSERT_EQ(0, tmpfs_mount_at(BASE "/tree", "tree"));
        ASSERT_EQ(0, tmpfs_mount_at(BASE "/tree/sub", "sub"));
        fd = open_tree(AT_FDCWD, BASE "/tree", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        ASSERT_LE(0, fd);

        check_beneath_then_reveal(_metadata, fd, "tree");
        ASSERT_MARKER(TARGET "/sub", "sub");
}

/* An attached mount of ours moves beneath: it leaves its old place. */
TEST_F(beneath, attached_mount_beneath) {
        _cleanup_free_ char *after = NULL;
        int r;

        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));

        r = move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, TARGET, 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        ASSERT_EQ(0u, mountinfo_count_at(after, SOURCE));
        ASSERT_EQ(2u, mountinfo_count_at(after, TARGET));
        ASSERT_MARKER(TARGET, "top");

        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, "src");
}

/*
 * The kernel never unmounts the top mount: it stays where it was, now
 * mounted on the new mount, which took its place on the old parent; a second
 * beneath slides in between. Only our umount2() removes the top.
 */
TEST_F(beneath, top_mount_never_removed) {
        _cleanup_close_ int fd1 = -EBADF, fd2 = -EBADF;
        _cleanup_free_ char *after1 = NULL, *after2 = NULL;
        int base_id, top_id, new1_id, new2_id, r;

        base_id = mount_id_at(AT_FDCWD, BASE);
        top_id = mount_id_at(AT_FDCWD, TARGET);
        ASSERT_LT(0, base_id);
        ASSERT_LT(0, top_id);

        fd1 = tmpfs_detached("new1");
        ASSERT_LE(0, fd1);
        new1_id = mount_id_at(fd1, "");
        ASSERT_LT(0, new1_id);

        r = move_beneath(fd1, "", AT_FDCWD, TARGET, 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        after1 = mountinfo_read(0);
        ASSERT_NE(NULL, after1);
        ASSERT_EQ(top_id, mount_id_at(AT_FDCWD, TARGET));
        ASSERT_EQ(new1_id, mountinfo_parent(after1, top_id));
        ASSERT_EQ(base_id, mountinfo_parent(after1, new1_id));
        ASSERT_EQ(2u, mountinfo_count_at(after1, TARGET));

        fd2 = tmpfs_detached("new2");
        ASSERT_LE(0, fd2);
        new2_id = mount_id_at(fd2, "");
        ASSERT_EQ(0, move_beneath(fd2, "", AT_FDCWD, TARGET, 0));
        after2 = mountinfo_read(0);
        ASSERT_NE(NULL, after2);
        ASSERT_EQ(top_id, mount_id_at(AT_FDCWD, TARGET));
        ASSERT_EQ(new2_id, mountinfo_parent(after2, top_id));
        ASSERT_EQ(new1_id, mountinfo_parent(after2, new2_id));
        ASSERT_EQ(3u, mountinfo_count_at(after2, TARGET));
        ASSERT_MARKER(TARGET, "top");

        fd1 = safe_close(fd1);
        fd2 = safe_close(fd2);
        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, "new2");
        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, "new1");
}

/*
 * Shared parent P with the top mount on it; a second namespace holds a copy of
 * both, as peers (@slave false) or as slaves (@slave true). The new mount goes
 * beneath in our namespace and propagates there, hidden under that
 * namespace's copy of the top, until unmounting our top propagates too.
 */
static void check_propagation_beneath(struct __test_metadata *_metadata,
                                      FIXTURE_DATA(beneath) *self, bool slave) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *theirs = NULL;
        char view[PATH_MAX];
        int r;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));

        self->ns_child = spawn_mount_ns(slave ? make_shared_slave : NULL, NULL);
        ASSERT_LT(0, self->ns_child);
        snprintf(view, sizeof(view), "/proc/%d/root" SHARED "/m", (int) self->ns_child);
        ASSERT_MARKER(view, "top");

        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        r = move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        fd = safe_close(fd);

        /* Arrived there, and hidden: their top still shows. */
        theirs = mountinfo_read(self->ns_child);
        ASSERT_NE(NULL, theirs);
        ASSERT_EQ(2u, mountinfo_count_at(theirs, SHARED "/m"))
                TH_LOG("the beneath mount did not propagate to the %s namespace", slave ? "slave" : "peer");
        ASSERT_MARKER(SHARED "/m", "top");
        ASSERT_MARKER(view, "top");

        /* Unmounting our top propagates and reveals the new mount there too. */
        ASSERT_EQ(0, umount2(SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "new");
        ASSERT_MARKER(view, "new");
        free(theirs);
        theirs = mountinfo_read(self->ns_child);
        ASSERT_NE(NULL, theirs);
        ASSERT_EQ(1u, mountinfo_count_at(theirs, SHARED "/m"));
}

TEST_F(beneath, propagates_to_slave_namespace) {
        check_propagation_beneath(_metadata, self, true);
}

TEST_F(beneath, propagates_to_peer_namespace) {
        check_propagation_beneath(_metadata, self, false);
}

/*
 * What DESIGN.md says of hardened services: a slave namespace that put its
 * own bind mount on the top (as ProtectSystem= does with a read-only bind)
 * receives the beneath mount, but unmounting our top does not reveal it
 * there: umount propagation reparents their bind, which still shows the old
 * top's content. tuck must find and heal such namespaces itself.
 */
static int make_slave_with_own_overmount(void *userdata) {
        int r = make_shared_slave(userdata);

        if (r < 0)
                return r;
        /* Their own read-only bind on top, as a sandboxed service has. */
        if (mount(SHARED "/m", SHARED "/m", NULL, MS_BIND, NULL) < 0 ||
            mount(NULL, SHARED "/m", NULL, MS_REMOUNT | MS_BIND | MS_RDONLY, NULL) < 0)
                return -errno;
        return 0;
}

TEST_F(beneath, slave_own_overmount_keeps_old_top) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *theirs = NULL;
        char view[PATH_MAX];
        pid_t pid;
        int r;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));

        pid = self->ns_child = spawn_mount_ns(make_slave_with_own_overmount, NULL);
        ASSERT_LT(0, pid);
        snprintf(view, sizeof(view), "/proc/%d/root" SHARED "/m", (int) pid);

        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        r = move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        fd = safe_close(fd);
        theirs = mountinfo_read(pid);
        ASSERT_NE(NULL, theirs);
        ASSERT_EQ(3u, mountinfo_count_at(theirs, SHARED "/m"))
                TH_LOG("the beneath mount did not reach the slave namespace");

        ASSERT_EQ(0, umount2(SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "new");
        /* Theirs still shows the old top, through their own bind. */
        ASSERT_MARKER(view, "top");
        free(theirs);
        theirs = mountinfo_read(pid);
        ASSERT_NE(NULL, theirs);
        ASSERT_EQ(2u, mountinfo_count_at(theirs, SHARED "/m"));
}

/* ---- refusals: where the target is -------------------------------------- */

/* can_move_mount_beneath(): &mnt_to->mnt == current->fs->root.mnt */
TEST_F(beneath, target_is_caller_root) {
        _cleanup_close_ int fd = tmpfs_detached("new");

        ASSERT_LE(0, fd);
        ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, "/", 0));
}

/*
 * Run move_beneath(@fd, "", @target_fd, @target) in a child chrooted into
 * @jail: the move's errno (positive), or 128+ for a failure of the child.
 */
static int beneath_from_chroot(const char *jail, int fd, int target_fd, const char *target) {
        pid_t pid = fork();

        if (pid < 0)
                return -errno;
        if (pid == 0) {
                if (chroot(jail) < 0 || chdir("/") < 0)
                        _exit(127);
                _exit(-move_beneath(fd, "", target_fd, target, 0));
        }
        return wait_child(pid);
}

/*
 * The same rule, reached through chroot(2): the root of the chroot is the
 * caller's root. Control: the very same move from outside the chroot works.
 */
TEST_F(beneath, target_is_chroot_root) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *before = NULL;
        int r;

        ASSERT_EQ(0, tmpfs_mount_at(BASE "/jail", "jail"));
        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);

        before = mountinfo_read(0);
        ASSERT_NE(NULL, before);
        r = beneath_from_chroot(BASE "/jail", fd, AT_FDCWD, "/");
        ASSERT_GT(128, r) TH_LOG("chroot child failed (%d)", r);
        OUTCOME(-r);
        ASSERT_EQ(EINVAL, r);
        ASSERT_MOUNTS_UNCHANGED(before);

        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, BASE "/jail", 0));
}

/*
 * can_move_mount_beneath(): mnt_to->mnt_parent == ns->root. As on a booted
 * system, "/" is a mount on the namespace's rootfs (the QEMU init switches
 * root like a real boot); from a chroot elsewhere, "/" is not our root, so
 * only this rule applies.
 */
TEST_F(beneath, target_on_namespace_root) {
        _cleanup_close_ int fd = -EBADF, root_fd = -EBADF;
        _cleanup_free_ char *before = NULL;
        int root_id, r;

        before = mountinfo_read(0);
        ASSERT_NE(NULL, before);
        root_id = mount_id_at(AT_FDCWD, "/");
        ASSERT_LT(0, root_id);
        /* Precondition: the parent of "/" is not listed, i.e. is the namespace root. */
        ASSERT_EQ(-ENOENT, mountinfo_parent(before, mountinfo_parent(before, root_id)))
                TH_LOG("'/' does not sit directly on the namespace root here");

        ASSERT_EQ(0, tmpfs_mount_at(BASE "/jail", "jail"));
        root_fd = open("/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_LE(0, root_fd);
        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);

        free(before);
        before = mountinfo_read(0);
        ASSERT_NE(NULL, before);
        r = beneath_from_chroot(BASE "/jail", fd, root_fd, "");
        ASSERT_GT(128, r) TH_LOG("chroot child failed (%d)", r);
        OUTCOME(-r);
        ASSERT_EQ(EINVAL, r);
        ASSERT_MOUNTS_UNCHANGED(before);
}

/* can_move_mount_beneath(): !path_mounted(to), a directory inside a mount. */
TEST_F(beneath, target_not_mount_root) {
        _cleanup_close_ int fd = tmpfs_detached("new");

        ASSERT_LE(0, fd);
        ASSERT_EQ(0, mkdir(TARGET "/dir", 0755));
        ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, TARGET "/dir", 0));
}

/*
 * do_move_mount(): !check_mnt(p). The target, reached through
 * /proc/PID/root, is a mount of another namespace.
 */
static int make_foreign_mount(void *userdata) {
        int r = set_propagation("/", MS_REC | MS_PRIVATE);

        return r < 0 ? r : tmpfs_mount_at(BASE "/foreign", "foreign");
}

/*
 * A mount of another namespace, BASE/foreign there, reached through
 * /proc/PID/root, as the target (@as_source false) or as the source of a
 * beneath: refused, and nothing changes there either.
 */
static void check_foreign_mount_refused(struct __test_metadata *_metadata,
                                        FIXTURE_DATA(beneath) *self, bool as_source) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *theirs_before = NULL, *theirs_after = NULL;
        char foreign[PATH_MAX];
        pid_t pid;

        pid = self->ns_child = spawn_mount_ns(make_foreign_mount, NULL);
        ASSERT_LT(0, pid);
        snprintf(foreign, sizeof(foreign), "/proc/%d/root" BASE "/foreign", (int) pid);
        ASSERT_MARKER(foreign, "foreign");
        theirs_before = mountinfo_read(pid);
        ASSERT_NE(NULL, theirs_before);

        if (as_source)
                ASSERT_REFUSED(move_beneath(AT_FDCWD, foreign, AT_FDCWD, TARGET, 0));
        else {
                fd = tmpfs_detached("new");
                ASSERT_LE(0, fd);
                ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, foreign, 0));
        }

        theirs_after = mountinfo_read(pid);
        ASSERT_NE(NULL, theirs_after);
        ASSERT_STREQ(theirs_before, theirs_after);
}

TEST_F(beneath, target_not_in_caller_namespace) {
        check_foreign_mount_refused(_metadata, self, false);
}

/*
 * A target inside a detached tree (a mount below the root of an
 * open_tree(OPEN_TREE_CLONE | AT_RECURSIVE) clone), the source detached too.
 *
 * Intended difference. Under the 6.5 rules, which the backport carries, the
 * target must be in the caller's namespace (do_move_mount(): !check_mnt(p))
 * and this is EINVAL. Linux 6.15 lets a detached mount be mounted onto
 * another detached tree ("fs: mount detached mounts onto detached mounts",
 * merged with vfs-6.15-rc1.mount.namespace, 130e696aa68b; the checks were
 * reshaped by 290da20e3339), so the oracle mounts it beneath. The beneath
 * result must match what a plain move of a detached mount onto a detached
 * tree does on the same kernel (detected by trying, never by version), and
 * tests/kernel/intended-differences names the expected pair of outcomes.
 */
TEST_F(beneath, target_in_detached_tree) {
        _cleanup_close_ int tree = -EBADF, probe_src = -EBADF, probe_tree = -EBADF, fd = -EBADF;
        _cleanup_free_ char *before = NULL;
        int plain, r;

        ASSERT_EQ(0, tmpfs_mount_at(BASE "/tree", "tree"));
        ASSERT_EQ(0, tmpfs_mount_at(BASE "/tree/sub", "sub"));

        /* What this kernel does with detached-onto-detached at all. */
        probe_tree = open_tree(AT_FDCWD, BASE "/tree", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        ASSERT_LE(0, probe_tree);
        probe_src = tmpfs_detached("probe");
        ASSERT_LE(0, probe_src);
        plain = move_mount_raw(probe_src, "", probe_tree, "sub", MOVE_MOUNT_F_EMPTY_PATH);
        ASSERT_TRUE(plain == 0 || plain == -EINVAL) TH_LOG("plain move: %s", errno_name(plain));
        ksft_print_msg("target_in_detached_tree: a plain move of a detached mount onto a detached tree gives %s here\n",
                       errno_name(plain));

        tree = open_tree(AT_FDCWD, BASE "/tree", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        ASSERT_LE(0, tree);
        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        before = mountinfo_read(0);
        ASSERT_NE(NULL, before);

        r = move_beneath(fd, "", tree, "sub", 0);
        OUTCOME(r);
        ASSERT_EQ(plain, r);
        /* Either way our own namespace is untouched: the tree is detached. */
        ASSERT_MOUNTS_UNCHANGED(before);
}

/* can_move_mount_beneath(): mount_is_ancestor(mnt_to, mnt_from), from == to. */
TEST_F(beneath, target_is_source) {
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        ASSERT_REFUSED(move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, SOURCE, 0));
}

/* can_move_mount_beneath(): the target is an ancestor of the source. */
TEST_F(beneath, target_is_ancestor_of_source) {
        ASSERT_EQ(0, tmpfs_mount_at(TARGET "/sub", "sub"));
        ASSERT_REFUSED(move_beneath(AT_FDCWD, TARGET "/sub", AT_FDCWD, TARGET, 0));
}

/*
 * can_move_mount_beneath(): a mount locked by entering a user namespace
 * (copy_mnt_ns() -> lock_mnt_tree()) cannot be unmounted there, so nothing
 * may go beneath it either. (Lifted upstream only in 2026 by c62a4766937e
 * "move_mount: transfer MNT_LOCKED", which neither kernel here has.)
 * Control: a mount made inside the user namespace is not locked.
 */
TEST_F(beneath, target_locked) {
        pid_t pid;

        pid = fork();
        ASSERT_LE(0, pid);
        if (pid == 0) {
                _cleanup_close_ int fd = -EBADF, fd2 = -EBADF;

                ASSERT_EQ(0, enter_user_and_mount_ns());
                /* Sanity: the top mount is locked now. */
                ASSERT_EQ(-1, umount2(TARGET, MNT_DETACH));
                ASSERT_EQ(EINVAL, errno);

                fd = tmpfs_detached("new");
                ASSERT_LE(0, fd);
                ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, TARGET, 0));

                ASSERT_EQ(0, tmpfs_mount_at(BASE "/fresh", "fresh"));
                fd2 = tmpfs_detached("new2");
                ASSERT_LE(0, fd2);
                ASSERT_EQ(0, move_beneath(fd2, "", AT_FDCWD, BASE "/fresh", 0));
                fflush(stdout);
                _exit(_metadata->passed ? 0 : 1);
        }
        ASSERT_EQ(0, wait_child(pid));
}

/*
 * do_lock_mount(): the top was lazily unmounted while we held a path to it,
 * so it is no longer mounted when the locks are taken: ENOENT (6.5 checks
 * !is_mounted() for beneath; since 0d039eac6e59 under namespace_sem).
 */
TEST_F(beneath, target_lazily_unmounted) {
        _cleanup_close_ int top = -EBADF, fd = -EBADF;

        top = open_path(TARGET);
        ASSERT_LE(0, top);
        ASSERT_EQ(0, umount2(TARGET, MNT_DETACH));
        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);

        ASSERT_REFUSED_WITH(ENOENT, move_beneath(fd, "", top, "", MOVE_MOUNT_T_EMPTY_PATH));
}

/*
 * do_lock_mount() follows the mount stack from the target: an fd on a mount
 * that has since been overmounted names the stack, and the new mount goes
 * beneath its current top (between our old mount and what covers it).
 */
TEST_F(beneath, target_fd_follows_to_current_top) {
        _cleanup_close_ int top = -EBADF, fd = -EBADF;
        _cleanup_free_ char *after = NULL;
        int top_id, over_id, new_id, r;

        top = open_path(TARGET);
        ASSERT_LE(0, top);
        top_id = mount_id_at(top, "");
        ASSERT_EQ(0, tmpfs_mount_at(TARGET, "over"));
        over_id = mount_id_at(AT_FDCWD, TARGET);
        ASSERT_NE(top_id, over_id);
        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        new_id = mount_id_at(fd, "");

        r = move_beneath(fd, "", top, "", MOVE_MOUNT_T_EMPTY_PATH);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        /* top <- new <- over: the stale fd's mount stays at the bottom. */
        ASSERT_EQ(new_id, mountinfo_parent(after, over_id));
        ASSERT_EQ(top_id, mountinfo_parent(after, new_id));
        ASSERT_MARKER(TARGET, "over");

        fd = safe_close(fd);
        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, "new");
        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, "top");
}

/*
 * do_move_mount(): !check_mnt(p). The target is the root of a detached
 * tree: it has no parent to mount beneath on, and it is not in the caller's
 * namespace.
 */
TEST_F(beneath, target_is_detached_root) {
        _cleanup_close_ int tree = -EBADF, fd = -EBADF;

        ASSERT_EQ(0, tmpfs_mount_at(BASE "/tree", "tree"));
        tree = open_tree(AT_FDCWD, BASE "/tree", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        ASSERT_LE(0, tree);
        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);

        ASSERT_REFUSED(move_beneath(fd, "", tree, "", 0));
}

/* ---- refusals: what the source is ----------------------------------------- */

/*
 * can_move_mount_beneath(): path_overmounted(from), no shadow mounts. The
 * source is attached and something is mounted on its root. Control: after
 * unmounting that, the same move works.
 */
TEST_F(beneath, source_root_overmounted) {
        _cleanup_close_ int src = -EBADF;

        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        src = open(SOURCE, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_LE(0, src);
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "over"));

        ASSERT_REFUSED(move_beneath(src, "", AT_FDCWD, TARGET, 0));

        ASSERT_EQ(0, umount2(SOURCE, 0));
        ASSERT_EQ(0, move_beneath(src, "", AT_FDCWD, TARGET, 0));
}

/*
 * The same rule for a detached tree: a recursive clone of a mount whose root
 * is overmounted carries the overmount. Control: the non-recursive clone.
 */
TEST_F(beneath, detached_source_root_overmounted) {
        _cleanup_close_ int src = -EBADF, tree = -EBADF, flat = -EBADF;

        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        src = open(SOURCE, O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_LE(0, src);
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "over"));

        tree = open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE | AT_EMPTY_PATH);
        ASSERT_LE(0, tree);
        ASSERT_REFUSED(move_beneath(tree, "", AT_FDCWD, TARGET, 0));

        flat = open_tree(src, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH);
        ASSERT_LE(0, flat);
        ASSERT_EQ(0, move_beneath(flat, "", AT_FDCWD, TARGET, 0));
}

/*
 * do_move_mount(): !path_mounted(old_path). The source is a directory inside
 * a mount, not the root of one. Control: the mount's root moves.
 */
TEST_F(beneath, source_not_mount_root) {
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        ASSERT_EQ(0, mkdir(SOURCE "/dir", 0755));

        ASSERT_REFUSED(move_beneath(AT_FDCWD, SOURCE "/dir", AT_FDCWD, TARGET, 0));

        ASSERT_EQ(0, move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, TARGET, 0));
}

/*
 * do_move_mount(): old->mnt.mnt_flags & MNT_LOCKED. In a user namespace the
 * mounts inherited from the parent namespace are locked to what they cover:
 * one of them cannot be moved, beneath or elsewhere. Control: a mount made
 * inside the user namespace moves beneath the same (unlocked) top.
 */
TEST_F(beneath, source_locked) {
        pid_t pid;

        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        pid = fork();
        ASSERT_LE(0, pid);
        if (pid == 0) {
                ASSERT_EQ(0, enter_user_and_mount_ns());
                ASSERT_EQ(0, tmpfs_mount_at(BASE "/fresh", "fresh"));
                /* Sanity: the inherited source is locked now. */
                ASSERT_EQ(-1, umount2(SOURCE, MNT_DETACH));
                ASSERT_EQ(EINVAL, errno);

                ASSERT_REFUSED(move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, BASE "/fresh", 0));

                ASSERT_EQ(0, tmpfs_mount_at(BASE "/own", "own"));
                ASSERT_EQ(0, move_beneath(AT_FDCWD, BASE "/own", AT_FDCWD, BASE "/fresh", 0));
                fflush(stdout);
                _exit(_metadata->passed ? 0 : 1);
        }
        ASSERT_EQ(0, wait_child(pid));
}

/*
 * do_move_mount(): attached && !check_mnt(old). The source is an attached
 * mount of another namespace, reached through /proc/PID/root.
 */
TEST_F(beneath, source_in_other_namespace) {
        check_foreign_mount_refused(_metadata, self, true);
}

/*
 * do_move_mount(): !is_mounted(&old->mnt). The source fd refers to a mount
 * that has been lazily unmounted: it is in no namespace, neither ours nor an
 * anonymous one. Control: a detached mount (anonymous namespace) moves.
 */
TEST_F(beneath, source_not_mounted) {
        _cleanup_close_ int src = -EBADF, fd = -EBADF;

        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        src = open_path(SOURCE);
        ASSERT_LE(0, src);
        ASSERT_EQ(0, umount2(SOURCE, MNT_DETACH));

        ASSERT_REFUSED(move_beneath(src, "", AT_FDCWD, TARGET, 0));

        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, TARGET, 0));
}

/*
 * do_move_mount(): attached && IS_MNT_SHARED(parent). An attached source
 * whose parent is shared cannot be moved away (the move would have to
 * propagate an unmount). Control: the same source once its parent is private.
 */
TEST_F(beneath, source_parent_shared) {
        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/src", "src"));

        ASSERT_REFUSED(move_beneath(AT_FDCWD, SHARED "/src", AT_FDCWD, TARGET, 0));

        ASSERT_EQ(0, set_propagation(SHARED, MS_PRIVATE));
        ASSERT_EQ(0, move_beneath(AT_FDCWD, SHARED "/src", AT_FDCWD, TARGET, 0));
        ASSERT_MARKER(TARGET, "top");
}

/*
 * do_move_mount(): d_is_dir(new_path->dentry) != d_is_dir(old_path->dentry),
 * with new_path the top's root. A file mount cannot go beneath a directory
 * top. Control: the same file mount beneath a top that is a file bind mount.
 */
TEST_F(beneath, source_and_target_file_type_differ) {
        _cleanup_close_ int file = -EBADF;
        _cleanup_free_ char *content = NULL;
        int r;

        ASSERT_EQ(0, write_file_at(AT_FDCWD, TARGET "/file", "file-src"));
        file = open_tree(AT_FDCWD, TARGET "/file", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        ASSERT_LE(0, file);

        ASSERT_REFUSED(move_beneath(file, "", AT_FDCWD, TARGET, 0));

        ASSERT_EQ(0, tmpfs_mount_at(BASE "/files", "files"));
        ASSERT_EQ(0, write_file_at(AT_FDCWD, BASE "/files/top", "file-top"));
        ASSERT_EQ(0, write_file_at(AT_FDCWD, BASE "/ftarget", ""));
        ASSERT_EQ(0, bind_mount(BASE "/files/top", BASE "/ftarget"));
        r = move_beneath(file, "", AT_FDCWD, BASE "/ftarget", 0);
        ASSERT_EQ(0, r) TH_LOG("file beneath a file top: %s", errno_name(r));
        ASSERT_EQ(0, umount2(BASE "/ftarget", 0));
        content = read_file_at(AT_FDCWD, BASE "/ftarget");
        ASSERT_STREQ("file-src", content);
}

/* ---- refusals: ELOOP, not EINVAL --------------------------------------------- */

/*
 * do_move_mount(): for (; mnt_has_parent(p); p = p->mnt_parent) if (p == old)
 * ELOOP, with p the top's parent for beneath: the source would end up
 * mounted inside itself. (can_move_mount_beneath()'s own ancestor walk, the
 * other way round, is EINVAL: target_is_ancestor_of_source.)
 */
TEST_F(beneath, source_is_ancestor_of_top_parent) {
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE "/top", "inner-top"));

        ASSERT_REFUSED_WITH(ELOOP, move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, SOURCE "/top", 0));
}

/*
 * do_move_mount(): !check_for_nsfs_mounts(old), ELOOP. The source tree holds
 * a bind mount of the mount namespace file of a namespace no newer than the
 * mover's own (mnt_ns_loop(): a namespace could end up pinning itself).
 * The tree binds namespace C's file; a process in C may not attach it, the
 * older namespace it was made in may (the control).
 */
struct nsfs_loop_args {
        int tree;
        const char *target;
};

static int beneath_in_ns(void *userdata) {
        struct nsfs_loop_args *a = userdata;

        return move_beneath(a->tree, "", AT_FDCWD, a->target, 0);
}

TEST_F(beneath, source_holds_nsfs_loop) {
        _cleanup_close_ int tree = -EBADF;
        char ns_file[64];
        cpu_set_t cpus;
        pid_t pid;
        int r;

        /*
         * "Newer" is the order of the namespaces' sequence numbers (6.1: a
         * global counter). Since 6.18 they are ids from a per-CPU batched
         * cookie, ordered only among namespaces made on one CPU: pin this
         * test to one CPU and make both namespaces, ours (P) and C, here.
         */
        ASSERT_EQ(0, sched_getaffinity(0, sizeof(cpus), &cpus));
        for (int cpu = 0; cpu < CPU_SETSIZE; cpu++)
                if (CPU_ISSET(cpu, &cpus)) {
                        CPU_ZERO(&cpus);
                        CPU_SET(cpu, &cpus);
                        break;
                }
        ASSERT_EQ(0, sched_setaffinity(0, sizeof(cpus), &cpus));
        ASSERT_EQ(0, unshare(CLONE_NEWNS));

        /* C: a newer namespace with its own copy of TARGET. */
        self->ns_child = spawn_mount_ns(NULL, NULL);
        ASSERT_LT(0, self->ns_child);
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        ASSERT_EQ(0, write_file_at(AT_FDCWD, SOURCE "/ns", ""));
        snprintf(ns_file, sizeof(ns_file), "/proc/%d/ns/mnt", (int) self->ns_child);
        ASSERT_EQ(0, bind_mount(ns_file, SOURCE "/ns"));
        tree = open_tree(AT_FDCWD, SOURCE, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
        ASSERT_LE(0, tree);

        pid = fork();
        ASSERT_LE(0, pid);
        if (pid == 0) {
                struct nsfs_loop_args a = { .tree = tree, .target = TARGET };
                _cleanup_free_ char *theirs = NULL;

                ASSERT_EQ(0, enter_mount_ns_of(self->ns_child));
                theirs = mountinfo_read(0);
                ASSERT_NE(NULL, theirs);
                r = beneath_in_ns(&a);
                OUTCOME(r);
                ASSERT_EQ(-ELOOP, r) TH_LOG("expected ELOOP, got %s", errno_name(r));
                ASSERT_MOUNTS_UNCHANGED(theirs);
                fflush(stdout);
                _exit(_metadata->passed ? 0 : 1);
        }
        ASSERT_EQ(0, wait_child(pid));

        ASSERT_EQ(0, move_beneath(tree, "", AT_FDCWD, TARGET, 0));
}

/* ---- refusals: flags --------------------------------------------------------- */

/*
 * SYSCALL_DEFINE5(move_mount): MOVE_MOUNT_BENEATH | MOVE_MOUNT_SET_GROUP is
 * EINVAL. Control: the same MOVE_MOUNT_SET_GROUP alone works.
 */
TEST_F(beneath, beneath_with_set_group) {
        _cleanup_free_ char *after = NULL;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, mkdir_p(BASE "/peer", 0755));
        ASSERT_EQ(0, mount(SHARED, BASE "/peer", NULL, MS_BIND, NULL));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));

        ASSERT_REFUSED(move_mount_raw(AT_FDCWD, SHARED, AT_FDCWD, BASE "/peer",
                                      MOVE_MOUNT_SET_GROUP | MOVE_MOUNT_BENEATH));

        ASSERT_EQ(0, move_mount_raw(AT_FDCWD, SHARED, AT_FDCWD, BASE "/peer", MOVE_MOUNT_SET_GROUP));
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        ASSERT_LT(0, mountinfo_tag(after, mount_id_at(AT_FDCWD, SHARED), "shared:"));
        ASSERT_EQ(mountinfo_tag(after, mount_id_at(AT_FDCWD, SHARED), "shared:"),
                  mountinfo_tag(after, mount_id_at(AT_FDCWD, BASE "/peer"), "shared:"));
}

/*
 * SYSCALL_DEFINE5(move_mount): flags & ~MOVE_MOUNT__MASK is EINVAL, with
 * MOVE_MOUNT__MASK 0x377 since 6.5. Every bit outside it, together with
 * MOVE_MOUNT_BENEATH. Control: the valid flags alone work.
 */
TEST_F(beneath, unknown_flags) {
        _cleanup_close_ int fd = tmpfs_detached("new");
        const unsigned known = 0x377;
        int first_bad = 0;

        ASSERT_LE(0, fd);
        ASSERT_EQ(known, MOVE_MOUNT_F_SYMLINKS | MOVE_MOUNT_F_AUTOMOUNTS | MOVE_MOUNT_F_EMPTY_PATH |
                         MOVE_MOUNT_T_SYMLINKS | MOVE_MOUNT_T_AUTOMOUNTS | MOVE_MOUNT_T_EMPTY_PATH |
                         MOVE_MOUNT_SET_GROUP | MOVE_MOUNT_BENEATH);

        for (unsigned bit = 0; bit < 32; bit++) {
                _cleanup_free_ char *before = mountinfo_read(0);
                unsigned flag = 1u << bit;
                int r;

                if (flag & known)
                        continue;
                ASSERT_NE(NULL, before);
                r = move_beneath(fd, "", AT_FDCWD, TARGET, flag);
                if (r != -EINVAL && first_bad == 0)
                        first_bad = r ?: 1;
                EXPECT_EQ(-EINVAL, r) TH_LOG("flag 0x%x: %s", flag, errno_name(r));
                ASSERT_MOUNTS_UNCHANGED(before);
        }
        OUTCOME(first_bad ?: -EINVAL);

        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, TARGET, 0));
}

/* ---- refusals: propagation_would_overmount() ------------------------------- */

/*
 * Shared parent P at SHARED, and the top mount a bind mount of P's own
 * directory m onto itself: the top is a peer of P with root == mountpoint.
 */
static void make_peer_top(struct __test_metadata *_metadata) {
        _cleanup_free_ char *mi = NULL;
        int p_id, top_id;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, mkdir(SHARED "/m", 0755));
        ASSERT_EQ(0, mount(SHARED "/m", SHARED "/m", NULL, MS_BIND, NULL));

        mi = mountinfo_read(0);
        ASSERT_NE(NULL, mi);
        p_id = mount_id_at(AT_FDCWD, SHARED);
        top_id = mount_id_at(AT_FDCWD, SHARED "/m");
        ASSERT_NE(p_id, top_id);
        ASSERT_EQ(p_id, mountinfo_parent(mi, top_id));
        ASSERT_LT(0, mountinfo_tag(mi, p_id, "shared:"));
        ASSERT_EQ(mountinfo_tag(mi, p_id, "shared:"), mountinfo_tag(mi, top_id, "shared:"));
}

/*
 * propagation_would_overmount(parent, top, mp): the parent propagates to the
 * top mount at the same mountpoint (same peer group), so the copy of the new
 * mount would land on top of the top. Control: the cover letter's advice,
 * give the top its own peer group (--make-private, --make-shared).
 */
TEST_F(beneath, parent_and_top_same_peer_group) {
        _cleanup_close_ int fd = tmpfs_detached("new");

        ASSERT_LE(0, fd);
        make_peer_top(_metadata);
        ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0));

        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_PRIVATE));
        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_SHARED));
        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0));
}

/*
 * The same, through the mnt_master walk: the top is a slave of the parent's
 * peer group. Control: a private top.
 */
TEST_F(beneath, top_slave_of_parent_peer_group) {
        _cleanup_close_ int fd = tmpfs_detached("new");
        _cleanup_free_ char *mi = NULL;

        ASSERT_LE(0, fd);
        make_peer_top(_metadata);
        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_SLAVE));
        mi = mountinfo_read(0);
        ASSERT_NE(NULL, mi);
        ASSERT_EQ(mountinfo_tag(mi, mount_id_at(AT_FDCWD, SHARED), "shared:"),
                  mountinfo_tag(mi, mount_id_at(AT_FDCWD, SHARED "/m"), "master:"));

        ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0));

        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_PRIVATE));
        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0));
}

/*
 * propagation_would_overmount(parent, source, mp), the source variant: the
 * parent propagates to the (attached) source at the same mountpoint, so the
 * source would end up covered by a copy of itself. The source is a bind
 * mount of P's directory m (its root is the top's mountpoint), joined to P's
 * peer group with MOVE_MOUNT_SET_GROUP and, with @slave, made a slave of it
 * (the mnt_master walk). Control: a private source moves.
 */
static void check_source_propagated_from_parent(struct __test_metadata *_metadata, bool slave) {
        _cleanup_free_ char *mi = NULL;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, mkdir(SHARED "/m", 0755));
        ASSERT_EQ(0, mkdir_p(SOURCE, 0755));
        ASSERT_EQ(0, bind_mount(SHARED "/m", SOURCE));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, set_group(SHARED, SOURCE));
        if (slave)
                ASSERT_EQ(0, set_propagation(SOURCE, MS_SLAVE));
        mi = mountinfo_read(0);
        ASSERT_NE(NULL, mi);
        ASSERT_LT(0, mountinfo_tag(mi, mount_id_at(AT_FDCWD, SHARED), "shared:"));
        ASSERT_EQ(mountinfo_tag(mi, mount_id_at(AT_FDCWD, SHARED), "shared:"),
                  mountinfo_tag(mi, mount_id_at(AT_FDCWD, SOURCE), slave ? "master:" : "shared:"));

        ASSERT_REFUSED(move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, SHARED "/m", 0));

        ASSERT_EQ(0, set_propagation(SOURCE, MS_PRIVATE));
        ASSERT_EQ(0, move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "top");
        ASSERT_EQ(0, umount2(SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "<no marker: ENOENT>");
}

TEST_F(beneath, source_peer_of_parent) {
        check_source_propagated_from_parent(_metadata, false);
}

/* ---- unbindable: checked against the top's parent --------------------------- */

/*
 * do_move_mount(): IS_MNT_SHARED(p) && tree_contains_unbindable(old), where
 * for beneath p is the top's parent, the mount the new one is attached to.
 * An unbindable source may not go beneath a top whose parent is shared.
 */
TEST_F(beneath, unbindable_source_shared_parent) {
        _cleanup_close_ int fd = tmpfs_detached("new");

        ASSERT_LE(0, fd);
        ASSERT_EQ(0, set_propagation_fd(fd, MS_UNBINDABLE));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));
        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_PRIVATE));

        ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0));
}

/*
 * The same check, allowed: the top is shared but its parent is private, so
 * the unbindable source may go beneath it, although a plain move onto that
 * top (whose destination is the top itself) is refused.
 */
TEST_F(beneath, unbindable_source_private_parent_shared_top) {
        _cleanup_close_ int fd = tmpfs_detached("new");
        int r;

        ASSERT_LE(0, fd);
        ASSERT_EQ(0, set_propagation_fd(fd, MS_UNBINDABLE));
        ASSERT_EQ(0, set_propagation(TARGET, MS_SHARED));
        r = move_mount_raw(fd, "", AT_FDCWD, TARGET, MOVE_MOUNT_F_EMPTY_PATH);
        ASSERT_EQ(-EINVAL, r) TH_LOG("a plain move onto the shared top: %s", errno_name(r));

        r = move_beneath(fd, "", AT_FDCWD, TARGET, 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        ASSERT_MARKER(TARGET, "top");
        fd = safe_close(fd);
        ASSERT_EQ(0, umount2(TARGET, 0));
        ASSERT_MARKER(TARGET, "new");
}

/* ---- propagation: allowed layouts and deeper chains ------------------------- */

/*
 * propagation_would_overmount(parent, top, mp) is false when the top's root
 * is not the mount point: a top that is a peer of its parent but shows
 * another directory of it (bind of P/other onto P/m) receives no copy, and
 * the move is allowed.
 */
TEST_F(beneath, peer_top_root_differs_from_mountpoint) {
        _cleanup_close_ int fd = tmpfs_detached("new");
        _cleanup_free_ char *mi = NULL, *after = NULL;
        int p_id, top_id, r;

        ASSERT_LE(0, fd);
        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, mkdir(SHARED "/m", 0755));
        ASSERT_EQ(0, mkdir(SHARED "/other", 0755));
        ASSERT_EQ(0, write_file_at(AT_FDCWD, SHARED "/other/" MARKER_FILE, "other"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, bind_mount(SHARED "/other", SHARED "/m"));
        mi = mountinfo_read(0);
        ASSERT_NE(NULL, mi);
        p_id = mount_id_at(AT_FDCWD, SHARED);
        top_id = mount_id_at(AT_FDCWD, SHARED "/m");
        ASSERT_EQ(mountinfo_tag(mi, p_id, "shared:"), mountinfo_tag(mi, top_id, "shared:"));

        r = move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        ASSERT_EQ(2u, mountinfo_count_at(after, SHARED "/m"));
        ASSERT_MARKER(SHARED "/m", "other");
        fd = safe_close(fd);
        ASSERT_EQ(0, umount2(SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "new");
}

/*
 * propagation_would_overmount(parent, source, mp) is false for a source that
 * is new (IS_MNT_NEW(): in an anonymous namespace): a detached clone that is
 * a peer of the parent with its root at the mount point is allowed, where
 * the attached variant (source_peer_of_parent) is refused.
 */
TEST_F(beneath, detached_source_peer_of_parent) {
        _cleanup_close_ int clone = -EBADF;
        _cleanup_free_ char *after = NULL;
        int new_id, r;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, mkdir(SHARED "/m", 0755));
        ASSERT_EQ(0, write_file_at(AT_FDCWD, SHARED "/m/" MARKER_FILE, "parent-m"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));
        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_PRIVATE));
        /* P's directory m, uncovered, through a peer of P (a bind of it). */
        ASSERT_EQ(0, mkdir_p(BASE "/peer", 0755));
        ASSERT_EQ(0, bind_mount(SHARED, BASE "/peer"));
        clone = open_tree(AT_FDCWD, BASE "/peer/m", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        ASSERT_LE(0, clone);
        ASSERT_EQ(0, umount2(BASE "/peer", 0));
        new_id = mount_id_at(clone, "");

        r = move_beneath(clone, "", AT_FDCWD, SHARED "/m", 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        /* It was a peer of P: attached, it is in P's group. */
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        ASSERT_EQ(mountinfo_tag(after, mount_id_at(AT_FDCWD, SHARED), "shared:"),
                  mountinfo_tag(after, new_id, "shared:"));
        ASSERT_MARKER(SHARED "/m", "top");
        clone = safe_close(clone);
        ASSERT_EQ(0, umount2(SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "parent-m");
}

/*
 * propagation_would_overmount(parent, top, mp) walks the top's whole chain
 * of masters: a top that is a slave of X, X a slave of the parent's peer
 * group, with its root at the mount point, would still receive a copy on
 * top of itself. Control: a private top.
 *
 * Built while everything is private, so no bind propagates, then wired up:
 * X = bind of P/m, joined to P's group (MOVE_MOUNT_SET_GROUP), made a slave
 * of it and shared again (a group of its own); top = bind of P/m on P/m,
 * joined to X's group and made a slave of it.
 */
TEST_F(beneath, top_in_two_level_master_chain) {
        _cleanup_close_ int fd = tmpfs_detached("new");
        _cleanup_free_ char *mi = NULL;
        int p_id, x_id, top_id, p_group, x_group;

        ASSERT_LE(0, fd);
        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, mkdir(SHARED "/m", 0755));
        ASSERT_EQ(0, mkdir_p(BASE "/x", 0755));
        ASSERT_EQ(0, bind_mount(SHARED "/m", BASE "/x"));
        ASSERT_EQ(0, bind_mount(SHARED "/m", SHARED "/m"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, set_group(SHARED, BASE "/x"));
        ASSERT_EQ(0, set_propagation(BASE "/x", MS_SLAVE));
        ASSERT_EQ(0, set_propagation(BASE "/x", MS_SHARED));
        ASSERT_EQ(0, set_group(BASE "/x", SHARED "/m"));
        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_SLAVE));

        mi = mountinfo_read(0);
        ASSERT_NE(NULL, mi);
        p_id = mount_id_at(AT_FDCWD, SHARED);
        x_id = mount_id_at(AT_FDCWD, BASE "/x");
        top_id = mount_id_at(AT_FDCWD, SHARED "/m");
        p_group = mountinfo_tag(mi, p_id, "shared:");
        x_group = mountinfo_tag(mi, x_id, "shared:");
        ASSERT_LT(0, p_group);
        ASSERT_LT(0, x_group);
        ASSERT_NE(p_group, x_group);
        ASSERT_EQ(p_group, mountinfo_tag(mi, x_id, "master:"));
        ASSERT_EQ(x_group, mountinfo_tag(mi, top_id, "master:"));
        ASSERT_EQ(-ENOENT, mountinfo_tag(mi, top_id, "shared:"));

        ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0));

        ASSERT_EQ(0, set_propagation(SHARED "/m", MS_PRIVATE));
        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0));
}

/* The same through the source's masters: a slave of the parent's peer group. */
TEST_F(beneath, source_slave_of_parent_peer_group) {
        check_source_propagated_from_parent(_metadata, true);
}

/* ---- what the new mount becomes ------------------------------------------------ */

/*
 * attach_recursive_mnt(): beneath a top whose parent is shared, the new
 * mount joins sharing (invent_group_ids(), set_mnt_shared()) in a peer group
 * of its own, as any mount attached to a shared mount does. Control: beneath
 * a top whose parent is private it stays private.
 */
TEST_F(beneath, new_mount_joins_sharing) {
        _cleanup_close_ int fd = -EBADF, fd2 = -EBADF;
        _cleanup_free_ char *after = NULL;
        int new_id, new2_id, group, r;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));
        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        new_id = mount_id_at(fd, "");

        r = move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        group = mountinfo_tag(after, new_id, "shared:");
        ASSERT_LT(0, group) TH_LOG("the new mount did not join sharing");
        ASSERT_NE(mountinfo_tag(after, mount_id_at(AT_FDCWD, SHARED), "shared:"), group);
        ASSERT_NE(mountinfo_tag(after, mount_id_at(AT_FDCWD, SHARED "/m"), "shared:"), group);

        fd2 = tmpfs_detached("new2");
        ASSERT_LE(0, fd2);
        new2_id = mount_id_at(fd2, "");
        ASSERT_EQ(0, move_beneath(fd2, "", AT_FDCWD, TARGET, 0));
        free(after);
        after = mountinfo_read(0);
        ASSERT_NE(NULL, after);
        ASSERT_EQ(-ENOENT, mountinfo_tag(after, new2_id, "shared:"));
}

/*
 * Propagation into a mount namespace owned by another user namespace: its
 * copy of the shared parent is a slave there (CL_SHARED_TO_SLAVE) and
 * receives the new mount, slid under its copy of the top. That copy was
 * inherited, so it is MNT_LOCKED: its owner cannot unmount it to reveal the
 * new mount early. Once our top is unmounted the new mount shows there, and
 * it is not locked: attach_recursive_mnt() strips MNT_LOCKED from the root of
 * every propagated copy (only mounts inside a copied tree stay locked), so
 * the owner may unmount it, revealing only the directory it was mounted on.
 */
static char userns_step(int fd_in, int fd_out, char answer) {
        char c = 0;

        if (write(fd_out, &answer, 1) != 1 || read(fd_in, &c, 1) != 1)
                return 0;
        return c;
}

TEST_F(beneath, propagates_into_other_user_namespace) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *theirs = NULL;
        char view[PATH_MAX], c;
        int to_child[2], to_us[2];
        pid_t pid;
        int r;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));
        ASSERT_EQ(0, pipe2(to_child, O_CLOEXEC));
        ASSERT_EQ(0, pipe2(to_us, O_CLOEXEC));

        pid = fork();
        ASSERT_LE(0, pid);
        if (pid == 0) {
                /* Their side: answer each step with the errno of an umount of their top. */
                char step;

                if (enter_user_and_mount_ns() < 0)
                        _exit(1);
                step = userns_step(to_child[0], to_us[1], 'r');
                while (step == 'u') {
                        int e = umount2(SHARED "/m", MNT_DETACH) < 0 ? errno : 0;

                        step = userns_step(to_child[0], to_us[1], (char) e);
                }
                _exit(0);
        }
        self->ns_child = pid;
        ASSERT_EQ(1, read(to_us[0], &c, 1));
        ASSERT_EQ('r', c);
        snprintf(view, sizeof(view), "/proc/%d/root" SHARED "/m", (int) pid);
        ASSERT_MARKER(view, "top");

        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        r = move_beneath(fd, "", AT_FDCWD, SHARED "/m", 0);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        fd = safe_close(fd);
        theirs = mountinfo_read(pid);
        ASSERT_NE(NULL, theirs);
        ASSERT_EQ(2u, mountinfo_count_at(theirs, SHARED "/m"))
                TH_LOG("the beneath mount did not reach the other user namespace");
        ASSERT_MARKER(view, "top");

        /* Their inherited top is locked over the new mount. */
        ASSERT_EQ(1, write(to_child[1], "u", 1));
        ASSERT_EQ(1, read(to_us[0], &c, 1));
        ASSERT_EQ(EINVAL, c) TH_LOG("their umount of their locked top: %s", errno_name(c));
        ASSERT_MARKER(view, "top");

        ASSERT_EQ(0, umount2(SHARED "/m", 0));
        ASSERT_MARKER(view, "new");

        /* The copy that arrived is theirs to unmount. */
        ASSERT_EQ(1, write(to_child[1], "u", 1));
        ASSERT_EQ(1, read(to_us[0], &c, 1));
        ASSERT_EQ(0, c) TH_LOG("their umount of the propagated copy: %s", errno_name(c));
        ASSERT_MARKER(view, "<no marker: ENOENT>");
        ASSERT_EQ(1, write(to_child[1], "q", 1));
        self->ns_child = -1;
        ASSERT_EQ(0, wait_child(pid));
}

/* ---- limits and privilege ------------------------------------------------------ */

/* Mounts in the current namespace, from its mountinfo. */
static unsigned mounts_here(void) {
        _cleanup_free_ char *mi = mountinfo_read(0);
        unsigned n = 0;

        for (const char *p = mi; p && *p; p++)
                n += *p == '\n';
        return n;
}

static unsigned long read_mount_max(void) {
        _cleanup_free_ char *s = read_file_at(AT_FDCWD, "/proc/sys/fs/mount-max");

        return s ? strtoul(s, NULL, 10) : 0;
}

/*
 * Fill the namespace to fs.mount-max with recursive bind mounts of a
 * doubling tree, so that 100000 mounts take some 2 x 17 syscalls, not
 * 100000: G at BASE/fill doubles by rbinding itself onto BASE/fill/d until
 * the kernel says ENOSPC, then the subtrees of size 2^j reachable at
 * BASE/fill/d/d/... are rbound elsewhere, largest first, each where it still
 * fits. The kernel's count (which includes mounts mountinfo does not show,
 * such as the namespace's rootfs) decides: afterwards not even one more
 * mount fits. Returns the mounts added, or -errno.
 */
static int fill_namespace(void) {
        char path[PATH_MAX], dst[PATH_MAX];
        unsigned size = 1, added = 1;
        int levels = 0, r;

        r = tmpfs_mount_at(BASE "/fill", "fill");
        if (r < 0)
                return r;
        if (mkdir(BASE "/fill/d", 0755) < 0)
                return -errno;
        for (;;) {
                if (mount(BASE "/fill", BASE "/fill/d", NULL, MS_BIND | MS_REC, NULL) < 0) {
                        if (errno != ENOSPC)
                                return -errno;
                        break;
                }
                added += size;
                size *= 2;
                levels++;
        }
        /* BASE/fill followed by k times "/d" is the root of a tree of 2^(levels - k) mounts. */
        for (int j = levels - 1; j >= 0; j--) {
                strcpy(path, BASE "/fill");
                for (int k = 0; k < levels - j; k++)
                        strcat(path, "/d");
                snprintf(dst, sizeof(dst), BASE "/extra%d", j);
                r = mkdir_p(dst, 0755);
                if (r < 0)
                        return r;
                if (mount(path, dst, NULL, MS_BIND | MS_REC, NULL) < 0) {
                        if (errno != ENOSPC)
                                return -errno;
                        continue;
                }
                added += 1u << j;
        }
        return (int) added;
}

/*
 * attach_recursive_mnt() -> count_mounts(): a detached mount attached beneath
 * counts against fs.mount-max like any new mount, ENOSPC. The namespace is
 * filled to exactly the limit (the guest's init lowers it to 10000 so that
 * this takes seconds under TCG; the oracle fills its default, 100000).
 * Control: once some mounts are gone the same move works.
 */
TEST_F_TIMEOUT(beneath, mount_max_exceeded, 600) {
        _cleanup_close_ int fd = tmpfs_detached("new");
        unsigned long max = read_mount_max();
        struct timespec t0, t1;
        int added, r;

        ASSERT_LE(0, fd);
        ASSERT_LT(0ul, max);
        ASSERT_GE(1000000ul, max) TH_LOG("fs.mount-max is %lu: too many mounts to fill", max);
        clock_gettime(CLOCK_MONOTONIC, &t0);
        added = fill_namespace();
        clock_gettime(CLOCK_MONOTONIC, &t1);
        ASSERT_LT(0, added) TH_LOG("filling the namespace: %s", errno_name(added));
        /* Reported, never judged. */
        ksft_print_msg("mount_max_exceeded: fs.mount-max %lu, %d mounts added in %.1f s, %u listed\n",
                       max, added, (t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) / 1e9, mounts_here());
        /* Full: not even a single bind fits any more. */
        ASSERT_EQ(0, mkdir(BASE "/one", 0755));
        r = bind_mount(TARGET, BASE "/one");
        ASSERT_EQ(-ENOSPC, r) TH_LOG("one more bind mount: %s", errno_name(r));

        ASSERT_REFUSED_WITH(ENOSPC, move_beneath(fd, "", AT_FDCWD, TARGET, 0));

        ASSERT_EQ(0, umount2(BASE "/fill/d", MNT_DETACH));
        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, TARGET, 0));
}

/*
 * SYSCALL_DEFINE5(move_mount): !may_mount(), EPERM, before any lookup.
 * Without CAP_SYS_ADMIN (as an unprivileged uid) the move is refused.
 * Control: the same move by root.
 */
TEST_F(beneath, without_cap_sys_admin) {
        _cleanup_close_ int fd = tmpfs_detached("new");
        pid_t pid;

        ASSERT_LE(0, fd);
        pid = fork();
        ASSERT_LE(0, pid);
        if (pid == 0) {
                ASSERT_EQ(0, setresgid(65534, 65534, 65534));
                ASSERT_EQ(0, setresuid(65534, 65534, 65534));
                ASSERT_REFUSED_WITH(EPERM, move_beneath(fd, "", AT_FDCWD, TARGET, 0));
                fflush(stdout);
                _exit(_metadata->passed ? 0 : 1);
        }
        ASSERT_EQ(0, wait_child(pid));
        ASSERT_EQ(0, move_beneath(fd, "", AT_FDCWD, TARGET, 0));
}

/* ---- as LTP uses it ------------------------------------------------------------ */

/*
 * LTP move_mount03's form: the source an open_tree(OPEN_TREE_CLONE) of a
 * mount A, the target an O_PATH fd on the top mount B, both empty paths
 * (MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH). As LTP runs on a booted
 * system, A and B sit on a shared parent with a slave namespace (a service)
 * and a peer namespace (a container's shared root): every view shows B until
 * B is unmounted, then A; A itself stays where it was.
 */
TEST_F(beneath, ltp_move_mount03_fd_target_with_propagation) {
        _cleanup_close_ int fda = -EBADF, fdb = -EBADF;
        pid_t peer, slave;
        char slave_b[PATH_MAX], peer_b[PATH_MAX];
        int r;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/A", "A"));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/B", "B"));
        peer = self->ns_child = spawn_mount_ns(NULL, NULL);
        ASSERT_LT(0, peer);
        slave = self->ns_child2 = spawn_mount_ns(make_shared_slave, NULL);
        ASSERT_LT(0, slave);
        snprintf(slave_b, sizeof(slave_b), "/proc/%d/root" SHARED "/B", (int) slave);
        snprintf(peer_b, sizeof(peer_b), "/proc/%d/root" SHARED "/B", (int) peer);

        fda = open_tree(AT_FDCWD, SHARED "/A", OPEN_TREE_CLOEXEC | OPEN_TREE_CLONE);
        ASSERT_LE(0, fda);
        fdb = open(SHARED "/B", O_PATH | O_NOFOLLOW | O_CLOEXEC);
        ASSERT_LE(0, fdb);
        r = move_mount_raw(fda, "", fdb, "", MOVE_MOUNT_BENEATH | MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH);
        OUTCOME(r);
        ASSERT_EQ(0, r);
        fda = safe_close(fda);
        fdb = safe_close(fdb);

        ASSERT_MARKER(SHARED "/B", "B");
        ASSERT_MARKER(SHARED "/A", "A");
        ASSERT_MARKER(slave_b, "B");
        ASSERT_MARKER(peer_b, "B");

        ASSERT_EQ(0, umount2(SHARED "/B", 0));
        ASSERT_MARKER(SHARED "/B", "A");
        ASSERT_MARKER(slave_b, "A");
        ASSERT_MARKER(peer_b, "A");
}

/* ---- lock_mount(): a lazily unmounted target, for every caller ---------------- */

/*
 * 0d039eac6e59 (kernel/patches/0006) moved the cant_mount() check under
 * namespace_sem and added !is_mounted() to it, for do_lock_mount() whether
 * beneath or not. So every caller of lock_mount() now refuses a target
 * directory on a lazily unmounted mount with ENOENT; 6.5 and earlier (and
 * Debian's stock 6.1) let it through to a later check_mnt(), EINVAL. The
 * fixture holds an O_PATH fd on such a directory (BASE/dead/d after
 * umount2(BASE/dead, MNT_DETACH)) and names it /proc/self/fd/N.
 */
FIXTURE(lock_mount) {
        int dead;
        char dead_path[64];
};

FIXTURE_SETUP(lock_mount) {
        int r;

        self->dead = -EBADF;
        setvbuf(stdout, NULL, _IOLBF, 0);
        ASSERT_EQ(0, enter_private_mount_ns());
        ASSERT_EQ(0, tmpfs_mount_at(BASE, "base"));
        r = probe_beneath();
        ASSERT_EQ(0, r)
                TH_LOG("this kernel does not support MOVE_MOUNT_BENEATH (probe: %s)", errno_name(r));
        ASSERT_EQ(0, tmpfs_mount_at(BASE "/dead", "dead"));
        ASSERT_EQ(0, mkdir(BASE "/dead/d", 0755));
        self->dead = open(BASE "/dead/d", O_PATH | O_DIRECTORY | O_CLOEXEC);
        ASSERT_LE(0, self->dead);
        ASSERT_EQ(0, umount2(BASE "/dead", MNT_DETACH));
        snprintf(self->dead_path, sizeof(self->dead_path), "/proc/self/fd/%d", self->dead);
        ASSERT_EQ(0, tmpfs_mount_at(SOURCE, "src"));
        ASSERT_EQ(0, tmpfs_mount_at(BASE "/newroot", "newroot"));
}

FIXTURE_TEARDOWN(lock_mount) {
        safe_close(self->dead);
        EXPECT_EQ(0, umount2(BASE, MNT_DETACH));
}

static int mount_nerrno(const char *source, const char *target, const char *fstype, unsigned long flags) {
        return mount(source, target, fstype, flags, NULL) < 0 ? -errno : 0;
}

/* do_new_mount() -> do_add_mount() -> lock_mount() */
TEST_F(lock_mount, lazily_unmounted_target_new_mount) {
        ASSERT_REFUSED_WITH(ENOENT, mount_nerrno("tmpfs", self->dead_path, "tmpfs", 0));
}

/* do_loopback() -> lock_mount() */
TEST_F(lock_mount, lazily_unmounted_target_bind) {
        ASSERT_REFUSED_WITH(ENOENT, mount_nerrno(SOURCE, self->dead_path, NULL, MS_BIND));
}

/* do_move_mount_old() -> do_move_mount() -> do_lock_mount(path, false) */
TEST_F(lock_mount, lazily_unmounted_target_ms_move) {
        ASSERT_REFUSED_WITH(ENOENT, mount_nerrno(SOURCE, self->dead_path, NULL, MS_MOVE));
}

/* move_mount(2) without MOVE_MOUNT_BENEATH: do_move_mount() -> do_lock_mount(path, false) */
TEST_F(lock_mount, lazily_unmounted_target_move_mount) {
        ASSERT_REFUSED_WITH(ENOENT, move_mount_raw(AT_FDCWD, SOURCE, self->dead, "", MOVE_MOUNT_T_EMPTY_PATH));
}

/* pivot_root(2) -> lock_mount(&old): put_old on the dead mount. */
TEST_F(lock_mount, lazily_unmounted_target_pivot_root) {
        ASSERT_REFUSED_WITH(ENOENT, syscall(SYS_pivot_root, BASE "/newroot", self->dead_path) < 0 ? -errno : 0);
}

TEST_HARNESS_MAIN
