/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * openat_in_root(): a path resolved as if a directory were "/", as the
 * namespace scan and the heal resolve a hierarchy inside a container's root
 * (whose owner may have put any symlink there). The tree is made once per
 * process: a root full of hostile symlinks, and beside it a directory that
 * must never be reached. For every path the fuzzer makes, both resolvers
 * are run, openat2(RESOLVE_IN_ROOT) and the walk by hand tuckd.service
 * falls back to (openat_in_root_by_hand()):
 *
 *   - whatever either opens lies inside the root;
 *   - both open the same inode, or both fail with the same errno.
 *
 * The first byte of the input picks the open flags, the rest is the path.
 */

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "util.h"

static const int flag_choices[] = {
        O_PATH | O_DIRECTORY,   /* what nsscan.c and heal.c ask for */
        O_PATH,
        O_RDONLY,
        O_RDONLY | O_DIRECTORY,
};

static const struct {
        char what;              /* d: directory, f: file, l: symlink */
        const char *path;
        const char *target;
} tree[] = {
        { 'd', "outside", NULL },
        { 'd', "outside/usr", NULL },
        { 'f', "outside/secret", NULL },
        { 'd', "root", NULL },
        { 'd', "root/usr", NULL },
        { 'd', "root/usr/lib", NULL },
        { 'f', "root/usr/lib/file", NULL },
        { 'd', "root/usr/lib/deep", NULL },
        { 'd', "root/usr/lib/deep/er", NULL },
        { 'd', "root/real-etc", NULL },
        { 'l', "root/etc", "/real-etc" },
        { 'l', "root/lib", "usr/lib" },
        { 'l', "root/escape-abs", "/../../outside" },
        { 'l', "root/escape-rel", "../outside" },
        { 'l', "root/secret", "../outside/secret" },
        { 'l', "root/loop", "loop" },
        { 'l', "root/usr/lib/up", "../../usr" },
        { 'l', "root/usr/lib/deep/er/top", "../../../../../../.." },
        { 'l', "root/slash", "/" },
        { 'l', "root/dotdot", ".." },
        { 'l', "root/dotdots", "usr/../../../../outside/usr" },
        { 'l', "root/up-link", "usr/lib/up/../../../../outside" },
        { 'l', "root/abs-chain", "/slash/slash/../dotdots" },
        { 'l', "root/loop-a", "loop-b" },
        { 'l', "root/loop-b", "./loop-a" },
        { 'l', "root/to-file", "usr/lib/file" },
        { 'l', "root/to-file-slash", "usr/lib/file/" },
        { 'l', "root/empty-dir-link", "real-etc/" },
        { 'l', "root/dangling", "nowhere/at/all" },
        { 'l', "root/proc-self", "/proc/self/root" },
        { 'l', "root/c0", "c1" }, { 'l', "root/c1", "c2" }, { 'l', "root/c2", "c3" },
        { 'l', "root/c3", "c4" }, { 'l', "root/c4", "c5" }, { 'l', "root/c5", "c6" },
        { 'l', "root/c6", "c7" }, { 'l', "root/c7", "/usr/lib" },
};

static char *root;
static size_t root_len;
static int root_fd = -EBADF;

static void build_tree(void) {
        _cleanup_free_ char *top = NULL;

        for (size_t i = 0; i < ELEMENTSOF(tree); i++) {
                _cleanup_free_ char *p = path_join(fuzz_dir(), tree[i].path);
                int r;

                fuzz_assert(p);
                r = tree[i].what == 'd' ? mkdir(p, 0755) :
                    tree[i].what == 'f' ? close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) :
                    symlink(tree[i].target, p);
                if (r < 0)
                        fuzz_fail("cannot create %s: %m", tree[i].path);
        }
        top = realpath(fuzz_dir(), NULL);
        fuzz_assert(top);
        root = path_join(top, "root");
        fuzz_assert(root);
        root_len = strlen(root);
        root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        fuzz_assert(root_fd >= 0);
}

/*
 * Where fd is, by the kernel's name for it: inside the root or not. With name
 * (the walk by hand's spelling, below the root), the kernel's name must be it:
 * the tree has no mounts and nothing renames, so the two may not differ.
 */
static void assert_inside(int fd, const char *how, const char *path, const char *name) {
        char link[64], where[PATH_MAX + 1];
        ssize_t n;

        snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
        n = readlink(link, where, sizeof(where) - 1);
        fuzz_assert(n > 0);
        where[n] = 0;
        if (strncmp(where, root, root_len) != 0 || (where[root_len] != 0 && where[root_len] != '/'))
                fuzz_fail("%s resolved '%s' to '%s', outside the root '%s'", how, path, where, root);
        if (name && !streq(where + root_len, name))
                fuzz_fail("%s resolved '%s' to '%s', but named it '%s'", how, path, where, name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *path = NULL, *name = NULL;
        _cleanup_close_ int a = -EBADF, b = -EBADF;
        struct stat sa, sb;
        int flags;

        fuzz_setup();
        if (root_fd < 0)
                build_tree();
        if (size == 0)
                return 0;
        flags = flag_choices[data[0] % ELEMENTSOF(flag_choices)];
        path = fuzz_strndup(data + 1, size - 1);

        a = openat_in_root(root_fd, path, flags);
        b = openat_in_root_by_hand_named(root_fd, path, flags, &name);
        /* openat2() can say ELOOP for a path with fewer than 40 symlinks when its walk is
         * restarted under concurrent renames (some links counted twice): 1 in 200,000 lookups
         * of a 38-link path here, with a rename loop beside it; the fuzzer met it under load.
         * Asked again, the kernel answers as the walk by hand does: only a difference that
         * stays is one. */
        for (unsigned retry = 0; a == -ELOOP && b != -ELOOP && retry < 20; retry++)
                a = openat_in_root(root_fd, path, flags);
        if (a >= 0)
                assert_inside(a, "openat2()", path, NULL);
        if (b >= 0)
                assert_inside(b, "the walk by hand", path, name);
        if (a < 0 || b < 0) {
                if (a != b)
                        fuzz_fail("'%s' (flags 0%o): openat2() says %s, the walk by hand %s", path, (unsigned) flags,
                                  a < 0 ? strerror(-a) : "opened", b < 0 ? strerror(-b) : "opened");
                return 0;
        }
        fuzz_assert(fstat(a, &sa) == 0 && fstat(b, &sb) == 0);
        if (sa.st_dev != sb.st_dev || sa.st_ino != sb.st_ino)
                fuzz_fail("'%s' (flags 0%o): openat2() and the walk by hand opened different inodes", path,
                          (unsigned) flags);
        return 0;
}
