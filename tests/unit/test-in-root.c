/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * openat_in_root(): a path resolved as if a directory were "/", the way the
 * namespace scan reads /proc/PID/root/<hierarchy> of a container. Symlinks,
 * absolute or relative, and ".." must stay inside the root.
 *
 * meson runs this twice: as it is (openat2 with RESOLVE_IN_ROOT), and under
 * tuck-fault with openat2() failing with ENOSYS, as systemd's
 * RestrictSUIDSGID= makes it in tuckd.service (the walk by hand). Both must
 * give the same answers.
 */

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "macro.h"
#include "tap.h"
#include "util.h"

static char top[] = "/tmp/tuck-in-root.XXXXXX";

static void mk(const char *what, const char *path, const char *target) {
        _cleanup_free_ char *p = path_join(top, path);

        if (!p || (what[0] == 'd' ? mkdir(p, 0755) : what[0] == 'f' ? close(open(p, O_CREAT | O_WRONLY | O_CLOEXEC, 0644)) :
                   symlink(target, p)) < 0) {
                printf("Bail out! cannot create %s: %m\n", path);
                exit(EXIT_FAILURE);
        }
}

/* The tree: TOP/outside (must never be reached), TOP/root the root. */
static void build_tree(void) {
        if (!mkdtemp(top)) {
                printf("Bail out! mkdtemp: %m\n");
                exit(EXIT_FAILURE);
        }
        mk("d", "outside", NULL);
        mk("d", "outside/usr", NULL);
        mk("d", "root", NULL);
        mk("d", "root/usr", NULL);
        mk("d", "root/usr/lib", NULL);
        mk("f", "root/usr/lib/file", NULL);
        mk("d", "root/real-etc", NULL);
        mk("l", "root/etc", "/real-etc");                  /* absolute: inside the root */
        mk("l", "root/lib", "usr/lib");                    /* relative */
        mk("l", "root/escape-abs", "/../../outside");      /* ".." above the root stays at it */
        mk("l", "root/escape-rel", "../outside");
        mk("l", "root/loop", "loop");
        mk("l", "root/usr/lib/up", "../../usr");
        /* Hostile: what a container's root may hold. */
        mk("l", "root/slash", "/");
        mk("l", "root/dotdots", "usr/../../../../outside/usr");        /* ".." chain through a real dir */
        mk("l", "root/up-link", "usr/lib/up/../../../../outside");     /* ".." after a symlink */
        mk("l", "root/abs-chain", "/slash/slash/../dotdots");
        mk("l", "root/loop-a", "loop-b");
        mk("l", "root/loop-b", "./loop-a");
        mk("l", "root/to-file", "usr/lib/file");
        mk("l", "root/empty-dir-link", "real-etc/");
        /* The race: "flip" and "flop" are swapped all the time, a directory
         * holding usr and a symlink that points out of the root. */
        mk("d", "root/flip", NULL);
        mk("d", "root/flip/usr", NULL);
        mk("l", "root/flop", "../outside");
}

static void remove_tree(void) {
        _cleanup_free_ char *cmd = strjoin("rm -rf -- '", top, "'");

        if (cmd && system(cmd) != 0)
                tap_diag("could not remove %s", top);
}

static bool is_inode(int fd, const char *below_top) {
        _cleanup_free_ char *p = path_join(top, below_top);
        struct stat a, b;

        return p && fstat(fd, &a) == 0 && stat(p, &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

/*
 * A child exchanges flip (a directory) and flop (a symlink out of the root)
 * as fast as it can while "flip/usr" is resolved over and over: every answer
 * must be the directory's usr or ENOENT (the symlink's target, resolved
 * inside the root), never the outside's, and never a spurious error (openat2
 * answers EAGAIN when a rename races a ".." lookup).
 */
static void test_rename_race(int root_fd) {
        static const char *const paths[] = { "flip/usr", "flip/../flip/usr" };
        unsigned inside = 0, missing = 0, outside = 0, other = 0;
        int other_error = 0;
        pid_t child;

        child = fork();
        if (child == 0) {
                for (;;)
                        (void) renameat2(root_fd, "flip", root_fd, "flop", RENAME_EXCHANGE);
        }
        if (child < 0) {
                printf("Bail out! fork: %m\n");
                exit(EXIT_FAILURE);
        }
        for (unsigned i = 0; i < 20000; i++) {
                _cleanup_close_ int fd = openat_in_root(root_fd, paths[i % ELEMENTSOF(paths)], O_PATH | O_DIRECTORY);

                if (fd >= 0 && is_inode(fd, "outside/usr"))
                        outside++;
                else if (fd >= 0)
                        inside++;
                else if (fd == -ENOENT)
                        missing++;
                else {
                        other++;
                        other_error = fd;
                }
        }
        (void) kill(child, SIGKILL);
        (void) waitpid(child, NULL, 0);
        tap_diag("rename race: %u inside, %u missing, %u outside, %u other errors", inside, missing, outside, other);
        tap_ok(outside == 0, "a directory swapped for a symlink out of the root never leads out (%u times)", outside);
        if (!tap_ok(other == 0, "nor fails for another reason (%u times)", other))
                tap_diag("last: %s", strerror(-other_error));
}

static bool openat2_works(void) {
        struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT };
        int fd = (int) syscall(SYS_openat2, AT_FDCWD, "/", &how, sizeof(how));

        if (fd < 0)
                return false;
        close(fd);
        return true;
}

int main(void) {
        static const struct {
                const char *path;
                int flags;
                const char *want;       /* below TOP, or NULL for an error */
                int error;
        } cases[] = {
                { "usr",                O_PATH | O_DIRECTORY, "root/usr" },
                { "/usr",               O_PATH | O_DIRECTORY, "root/usr" },
                { "./usr//lib/",        O_PATH | O_DIRECTORY, "root/usr/lib" },
                { "etc",                O_PATH | O_DIRECTORY, "root/real-etc" },
                { "lib/file",           O_RDONLY,             "root/usr/lib/file" },
                { "lib/up/lib",         O_PATH | O_DIRECTORY, "root/usr/lib" },
                { "..",                 O_PATH | O_DIRECTORY, "root" },
                { "../../usr",          O_PATH | O_DIRECTORY, "root/usr" },
                { "escape-abs/usr",     O_PATH | O_DIRECTORY, NULL, ENOENT },
                { "escape-rel/usr",     O_PATH | O_DIRECTORY, NULL, ENOENT },
                { "usr/lib/file",       O_PATH | O_DIRECTORY, NULL, ENOTDIR },
                { "missing",            O_PATH | O_DIRECTORY, NULL, ENOENT },
                { "loop",               O_PATH,               NULL, ELOOP },
                { "slash/usr",          O_PATH | O_DIRECTORY, "root/usr" },
                { "slash/../../usr",    O_PATH | O_DIRECTORY, "root/usr" },
                { "dotdots",            O_PATH | O_DIRECTORY, NULL, ENOENT },
                { "up-link/usr",        O_PATH | O_DIRECTORY, NULL, ENOENT },
                { "abs-chain",          O_PATH | O_DIRECTORY, NULL, ENOENT },
                { "loop-a/usr",         O_PATH | O_DIRECTORY, NULL, ELOOP },
                { "to-file",            O_RDONLY,             "root/usr/lib/file" },
                { "to-file/..",         O_PATH,               NULL, ENOTDIR },
                { "usr/lib/file/",      O_PATH,               NULL, ENOTDIR },
                { "usr/lib/file/x",     O_PATH,               NULL, ENOTDIR },
                { "empty-dir-link",     O_PATH | O_DIRECTORY, "root/real-etc" },
                { "",                   O_PATH | O_DIRECTORY, NULL, ENOENT },   /* names nothing (fuzz-in-root) */
        };
        _cleanup_close_ int root_fd = -EBADF;
        _cleanup_free_ char *root = NULL;

        build_tree();
        tap_diag("openat2(): %s", openat2_works() ? "available" : "refused: the walk by hand is tested");
        root = path_join(top, "root");
        root_fd = root ? open(root, O_PATH | O_DIRECTORY | O_CLOEXEC) : -EBADF;
        if (root_fd < 0) {
                printf("Bail out! cannot open %s: %m\n", tap_str(root));
                return EXIT_FAILURE;
        }

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_close_ int fd = openat_in_root(root_fd, cases[i].path, cases[i].flags);
                _cleanup_free_ char *want = cases[i].want ? path_join(top, cases[i].want) : NULL;
                struct stat got_st, want_st;

                if (!cases[i].want) {
                        if (!tap_ok(fd == -cases[i].error, "'%s' fails with %s", cases[i].path,
                                    strerror(cases[i].error)))
                                tap_diag("got %d (%s)", fd, fd < 0 ? strerror(-fd) : "an fd");
                        continue;
                }
                if (!tap_ok(fd >= 0 && fstat(fd, &got_st) == 0 && want && stat(want, &want_st) == 0 &&
                            got_st.st_dev == want_st.st_dev && got_st.st_ino == want_st.st_ino,
                            "'%s' resolves to %s", cases[i].path, cases[i].want))
                        tap_diag("got %s", fd < 0 ? strerror(-fd) : "another inode");
                if (fd >= 0 && !(cases[i].flags & O_PATH))
                        tap_ok(read(fd, (char[1]) {}, 1) == 0, "'%s' is open for reading", cases[i].path);
        }

        /* The walk by hand's name for what it reached: spelled from the components
         * walked, below the root ("" for the root itself), and the same errors. */
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *name = NULL;
                _cleanup_close_ int fd = openat_in_root_by_hand_named(root_fd, cases[i].path, cases[i].flags, &name);
                const char *want = cases[i].want ? cases[i].want + strlen("root") : NULL;

                if (!want) {
                        tap_ok(fd == -cases[i].error && !name, "'%s' named: fails with %s", cases[i].path,
                               strerror(cases[i].error));
                        continue;
                }
                if (!tap_ok(fd >= 0 && name && streq(name, want), "'%s' is named '%s'", cases[i].path, want))
                        tap_diag("got %s", fd < 0 ? strerror(-fd) : tap_str(name));
        }

        test_rename_race(root_fd);

        remove_tree();
        return tap_done();
}
