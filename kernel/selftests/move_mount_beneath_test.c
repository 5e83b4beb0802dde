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
 * nothing reaches the machine. A refusal must be exactly EINVAL and must leave
 * /proc/self/mountinfo byte for byte as it was. Each test prints an
 * "outcome" line with the result of its key call; the side-by-side table
 * (tests/kernel/compare) shows those.
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
#include <sys/wait.h>
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

/*
 * @call must fail with exactly -EINVAL (every beneath refusal is EINVAL) and
 * change nothing.
 */
#define ASSERT_REFUSED(call)                                                    \
        do {                                                                    \
                _cleanup_free_ char *_before = mountinfo_read(0);              \
                int _r;                                                         \
                ASSERT_NE(NULL, _before);                                       \
                _r = (call);                                                    \
                OUTCOME(_r);                                                    \
                ASSERT_EQ(-EINVAL, _r)                                          \
                        TH_LOG("expected EINVAL, got %s", errno_name(_r));     \
                ASSERT_MOUNTS_UNCHANGED(_before);                               \
        } while (0)

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
        pid_t ns_child;
};

FIXTURE_SETUP(beneath) {
        int r;

        self->ns_child = -1;
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

TEST_F(beneath, target_not_in_caller_namespace) {
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

        fd = tmpfs_detached("new");
        ASSERT_LE(0, fd);
        ASSERT_REFUSED(move_beneath(fd, "", AT_FDCWD, foreign, 0));

        theirs_after = mountinfo_read(pid);
        ASSERT_NE(NULL, theirs_after);
        ASSERT_STREQ(theirs_before, theirs_after);
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
 * peer group with MOVE_MOUNT_SET_GROUP. Control: a private source moves.
 */
TEST_F(beneath, source_peer_of_parent) {
        _cleanup_free_ char *mi = NULL;

        ASSERT_EQ(0, tmpfs_mount_at(SHARED, "parent"));
        ASSERT_EQ(0, mkdir(SHARED "/m", 0755));
        ASSERT_EQ(0, mkdir_p(SOURCE, 0755));
        ASSERT_EQ(0, mount(SHARED "/m", SOURCE, NULL, MS_BIND, NULL));
        ASSERT_EQ(0, tmpfs_mount_at(SHARED "/m", "top"));
        ASSERT_EQ(0, set_propagation(SHARED, MS_SHARED));
        ASSERT_EQ(0, move_mount_raw(AT_FDCWD, SHARED, AT_FDCWD, SOURCE, MOVE_MOUNT_SET_GROUP));
        mi = mountinfo_read(0);
        ASSERT_NE(NULL, mi);
        ASSERT_LT(0, mountinfo_tag(mi, mount_id_at(AT_FDCWD, SHARED), "shared:"));
        ASSERT_EQ(mountinfo_tag(mi, mount_id_at(AT_FDCWD, SHARED), "shared:"),
                  mountinfo_tag(mi, mount_id_at(AT_FDCWD, SOURCE), "shared:"));

        ASSERT_REFUSED(move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, SHARED "/m", 0));

        ASSERT_EQ(0, set_propagation(SOURCE, MS_PRIVATE));
        ASSERT_EQ(0, move_beneath(AT_FDCWD, SOURCE, AT_FDCWD, SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "top");
        ASSERT_EQ(0, umount2(SHARED "/m", 0));
        ASSERT_MARKER(SHARED "/m", "<no marker: ENOENT>");
}

TEST_HARNESS_MAIN
