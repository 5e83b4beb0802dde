/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * Smoke test for a freshly built kernel, run by the /init of a throwaway
 * busybox initramfs that kernel/smoke-test builds: one real
 * MOVE_MOUNT_BENEATH and the two cheapest refusals. The real semantics suite
 * lives in tests/kernel/; this only proves that the image boots and has the
 * feature.
 *
 * An initramfs never switches root, so "/" is the namespace's root mount
 * and a target whose parent is that mount is refused by design (see
 * DESIGN.md). Everything therefore happens under a tmpfs mounted first:
 *
 *   /smoke        tmpfs (parent of the target)
 *   /smoke/t      tmpfs "old" (the top mount), then the new one beneath it
 *
 * Prints "SMOKE: PASS" or "SMOKE: FAIL: <reason>" on the console.
 */

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../../daemon/src/macro.h"
#include "../../daemon/src/mount-api.h"

static int failures;

_printf_(1, 2) static void fail(const char *fmt, ...) {
        va_list ap;

        failures++;
        printf("SMOKE: FAIL: ");
        va_start(ap, fmt);
        vprintf(fmt, ap);
        va_end(ap);
        printf("\n");
}

static bool file_exists(const char *path) {
        return access(path, F_OK) == 0;
}

static int write_marker(int dir_fd, const char *name) {
        _cleanup_close_ int fd = openat(dir_fd, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0)
                return -errno;
        return 0;
}

/* A detached tmpfs mount holding one file, @marker. */
static int make_detached_tmpfs(const char *marker) {
        _cleanup_close_ int fs_fd = -EBADF, mnt_fd = -EBADF;
        int r;

        fs_fd = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs_fd < 0)
                return -errno;
        if (fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, 0);
        if (mnt_fd < 0)
                return -errno;
        r = write_marker(mnt_fd, marker);
        if (r < 0)
                return r;
        return TAKE_FD(mnt_fd);
}

static int setup_tree(void) {
        if (mkdir("/smoke", 0755) < 0 && errno != EEXIST)
                return -errno;
        if (mount("tmpfs", "/smoke", "tmpfs", 0, NULL) < 0)
                return -errno;
        if (mkdir("/smoke/t", 0755) < 0)
                return -errno;
        if (mount("tmpfs", "/smoke/t", "tmpfs", 0, NULL) < 0)
                return -errno;
        _cleanup_close_ int fd = open("/smoke/t", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return write_marker(fd, "old");
}

static void check_beneath(void) {
        _cleanup_close_ int mnt_fd = make_detached_tmpfs("new");
        if (mnt_fd < 0)
                return fail("creating a detached tmpfs: %s", strerror(-mnt_fd));

        if (move_mount(mnt_fd, "", AT_FDCWD, "/smoke/t",
                       MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_BENEATH) < 0)
                return fail("move_mount(MOVE_MOUNT_BENEATH) onto /smoke/t: %m");
        printf("SMOKE: move_mount(MOVE_MOUNT_BENEATH) succeeded\n");

        /* The old top still covers the new mount until it is unmounted. */
        if (!file_exists("/smoke/t/old") || file_exists("/smoke/t/new"))
                return fail("after mounting beneath, /smoke/t should still show the old top");
        if (umount2("/smoke/t", MNT_DETACH) < 0)
                return fail("unmounting the old top: %m");
        if (file_exists("/smoke/t/old") || !file_exists("/smoke/t/new"))
                return fail("after unmounting the top, /smoke/t should show the new mount");
        printf("SMOKE: unmounting the top revealed the mount beneath it\n");
}

static bool refused_with_einval(const char *what, int mnt_fd, const char *target, unsigned flags) {
        if (move_mount(mnt_fd, "", AT_FDCWD, target, MOVE_MOUNT_F_EMPTY_PATH | flags) == 0) {
                fail("%s: want EINVAL, but it succeeded", what);
                return false;
        }
        if (errno != EINVAL) {
                fail("%s: want EINVAL, got %m", what);
                return false;
        }
        return true;
}

static void check_refusals(void) {
        _cleanup_close_ int mnt_fd = make_detached_tmpfs("x");
        if (mnt_fd < 0)
                return fail("creating a detached tmpfs: %s", strerror(-mnt_fd));

        /* /smoke sits directly on the namespace root. */
        if (!refused_with_einval("beneath a mount whose parent is the namespace root",
                                 mnt_fd, "/smoke", MOVE_MOUNT_BENEATH))
                return;
        if (!refused_with_einval("MOVE_MOUNT_BENEATH together with MOVE_MOUNT_SET_GROUP",
                                 mnt_fd, "/smoke/t", MOVE_MOUNT_BENEATH | MOVE_MOUNT_SET_GROUP))
                return;
        printf("SMOKE: refusals return EINVAL\n");
}

int main(void) {
        int r;

        r = setup_tree();
        if (r < 0)
                fail("setting up the tmpfs tree: %s", strerror(-r));
        else {
                check_beneath();
                check_refusals();
        }

        if (failures == 0)
                printf("SMOKE: PASS\n");
        return failures == 0 ? 0 : 1;
}
