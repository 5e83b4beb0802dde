/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Drives the healing primitive for tests/host/tuckd-heal.sh without tuckd:
 *
 *   tuckd-heal-tool swap ROOT HIERARCHY SOURCE heal|report [OLD...]
 *
 * does what tuckd does around one swap: snapshot the namespaces that see the
 * current top of HIERARCHY, swap a clone of SOURCE in beneath it (the host's
 * refresh, with the current top's flags), then find the namespaces that did
 * not follow and heal or only report them, one line each. The st_dev of
 * each OLD path counts as one of ours too (tuckd remembers superseded
 * overlays the same way), so namespaces left behind earlier are found.
 *
 *   tuckd-heal-tool view PID ROOT HIERARCHY
 *
 * prints one namespace's view (dev, mount id, flags).
 *
 *   tuckd-heal-tool halfway PID HIERARCHY PATH [writable]
 *
 * leaves the namespace of PID as a heal killed between its two halves does
 * (or one whose unmount was refused): a private clone of the host's top at
 * HIERARCHY, with the flags of the namespace's top at PATH and that top's
 * mounts carried onto it (carry.h), attached beneath that top, which stays.
 * With "writable" the tree lacks the top's "ro" (a flag wanted now that the
 * heal's tree did not have). Prints "attached beneath PATH, N mounts carried".
 *
 *   tuckd-heal-tool handover ROOT HIERARCHY
 *
 * scans HIERARCHY twice as a refresh does around its swap, the second scan
 * taking over from the first (NsFollowers, nsscan.h), with no swap between:
 * after the first it prints "first done" and waits for a line on stdin, so
 * a test can change a namespace meanwhile. Each scan's debug line goes to
 * stderr ("N following, ... K known from the scan before").
 */

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "carry.h"
#include "heal.h"
#include "log.h"
#include "nsscan.h"
#include "macro.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "swap.h"
#include "util.h"

static void print_view(const char *prefix, const NamespaceView *v, uint64_t attr) {
        char buf[32];

        printf("%s pid=%d comm=%s unit=%s machine=%s path=%s dev=%u:%u flags=%s",
               prefix, (int) v->pid, v->comm, v->unit ?: "-", v->machine ?: "-", v->path,
               major(v->dev), minor(v->dev), mount_attr_to_string(attr, buf, 32));
}

/* The host's swap, with the host's primitive (swap.h): SOURCE's tree with the top's flags. */
static int host_swap(const char *hierarchy, const char *source) {
        _cleanup_close_ int top = -EBADF, tree = -EBADF;
        _cleanup_(swap_result_done) SwapResult res = {};
        struct statfs sfs;
        struct mount_attr a = { .propagation = MS_PRIVATE };
        uint64_t id;
        int r;

        top = open(hierarchy, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (top < 0 || fstatfs(top, &sfs) < 0)
                return negative_errno();
        if (sfs.f_flags & ST_RDONLY)
                a.attr_set |= MOUNT_ATTR_RDONLY;
        if (sfs.f_flags & ST_NODEV)
                a.attr_set |= MOUNT_ATTR_NODEV;
        r = path_get_mnt_id(top, "", &id);
        if (r < 0)
                return r;

        tree = open_tree(AT_FDCWD, source, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC);
        if (tree < 0)
                return negative_errno();
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof a) < 0)
                return negative_errno();
        r = swap_replace_top(&(SwapSpec) { .proc_fd = -EBADF, .path = hierarchy, .top_id = id, .tree_fd = tree,
                                           .how = SWAP_BENEATH }, &res);
        if (r < 0)
                fprintf(stderr, "swap: %s\n", strna(res.error));
        return r;
}

static int verb_swap(const char *root, const char *hierarchy, const char *source, bool heal,
                     char **old_paths, int n_old) {
        _cleanup_close_ int host_fd = -EBADF;
        NamespaceView *before = NULL;
        HealReport *reports = NULL;
        _cleanup_free_ uint64_t *pins = NULL;
        size_t n_before = 0, n = 0;
        struct stat st;
        dev_t devs[1 + n_old];
        int r;

        if (stat(hierarchy, &st) < 0)
                return negative_errno();
        devs[0] = st.st_dev;
        for (int i = 0; i < n_old; i++) {
                if (stat(old_paths[i], &st) < 0)
                        return negative_errno();
                devs[1 + i] = st.st_dev;
        }

        r = heal_snapshot(root, hierarchy, devs, 1 + n_old, &before, &n_before);
        if (r < 0)
                return r;
        if (heal) {
                struct statfs sfs;

                if (statfs(hierarchy, &sfs) < 0)
                        return negative_errno();
                pins = calloc(n_before ?: 1, sizeof(uint64_t));
                if (!pins)
                        return -ENOMEM;
                r = heal_pin_loosenable(before, n_before,
                                        (sfs.f_flags & ST_RDONLY ? MOUNT_ATTR_RDONLY : 0) |
                                        (sfs.f_flags & ST_NODEV ? MOUNT_ATTR_NODEV : 0) |
                                        (sfs.f_flags & ST_NOSUID ? MOUNT_ATTR_NOSUID : 0) |
                                        (sfs.f_flags & ST_NOEXEC ? MOUNT_ATTR_NOEXEC : 0), NULL, pins);
                printf("pinned %d namespaces\n", r);
        }
        r = host_swap(hierarchy, source);
        if (r < 0) {
                fprintf(stderr, "swap: %s\n", strerror(-r));
                namespace_views_free(before, n_before);
                return r;
        }
        host_fd = open(hierarchy, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (host_fd < 0)
                return negative_errno();
        r = heal_after_swap(root, hierarchy, host_fd, devs, 1 + n_old, before, n_before, heal, NULL, &reports, &n);
        namespace_views_free(before, n_before);
        if (r < 0)
                return r;
        printf("snapshot %zu namespaces, stale %zu\n", n_before, n);
        for (size_t i = 0; i < n; i++) {
                print_view("stale", &reports[i].view, reports[i].view.attr);
                printf(" action=%s want=%s result=%s\n", heal_action_to_string(reports[i].action),
                       mount_attr_to_string(reports[i].want_attr, (char[32]) {}, 32),
                       reports[i].result == 1 ? "reported" :
                       reports[i].result == 0 ? "healed" : strerror(-reports[i].result));
        }
        heal_reports_free(reports, n);
        return 0;
}

static int verb_handover(const char *root, const char *hierarchy) {
        _cleanup_(ns_followers_done) NsFollowers followers = {};
        NamespaceView *views = NULL;
        size_t n = 0;
        char line[16];
        struct stat st;
        int r;

        if (stat(hierarchy, &st) < 0)
                return negative_errno();
        NsScanSpec spec = {
                .root = root, .path = hierarchy, .live = st.st_dev,
                .flags = NSSCAN_SKIP_SELF | NSSCAN_SKIP_FOLLOWING, .followers_out = &followers,
        };
        r = path_get_mount_attr(AT_FDCWD, hierarchy, &spec.host_attr);
        if (r < 0)
                return r;
        log_set_max_level(LOG_DEBUG);
        r = namespaces_scan(&spec, &views, &n);
        namespace_views_free(views, n);
        if (r < 0)
                return r;
        printf("first done\n");
        fflush(stdout);
        if (!fgets(line, sizeof(line), stdin))
                return -EPIPE;
        spec.followers_out = NULL;
        spec.followers_in = &followers;
        r = namespaces_scan(&spec, &views, &n);
        namespace_views_free(views, n);
        return r;
}

/* In the namespace: the top at @path gets @tree beneath it, its mounts carried, and stays. */
static int halfway_here(int proc_fd, const char *path, int tree, bool writable) {
        _cleanup_close_ int top = -EBADF, full = -EBADF;
        _cleanup_free_ char *error = NULL;
        struct mount_attr a = {};
        unsigned carried = 0;
        struct stat st;
        uint64_t attr;
        int r;

        top = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (top < 0 || fstat(top, &st) < 0)
                return negative_errno();
        r = fd_get_mount_attr(top, &attr);
        if (r < 0)
                return r;
        a.attr_set = attr & ~(writable ? MOUNT_ATTR_RDONLY : 0);
        a.attr_clr = writable ? MOUNT_ATTR_RDONLY : 0;
        if (mount_setattr(tree, "", AT_EMPTY_PATH, &a, sizeof(a)) < 0)
                return negative_errno();
        r = carry_children(&(CarrySpec) { .proc_fd = proc_fd, .path = path, .top_dev = st.st_dev,
                                          .tree_fd = tree }, &full, &carried, &error);
        if (r < 0) {
                fprintf(stderr, "carry: %s\n", error ?: strerror(-r));
                return r;
        }
        if (move_mount(full, "", top, "", MOVE_MOUNT_F_EMPTY_PATH | MOVE_MOUNT_T_EMPTY_PATH | MOVE_MOUNT_BENEATH) < 0)
                return negative_errno();
        printf("attached beneath %s, %u mounts carried\n", path, carried);
        return fflush(stdout) == 0 ? 0 : -EIO;     /* we leave by _exit() */
}

static int verb_halfway(const char *pid, const char *hierarchy, const char *path, bool writable) {
        _cleanup_close_ int host = -EBADF, tree = -EBADF, ns = -EBADF, root = -EBADF, proc = -EBADF;
        struct mount_attr private = { .propagation = MS_PRIVATE };
        _cleanup_free_ char *ns_path = strjoin("/proc/", pid, "/ns/mnt"), *root_path = strjoin("/proc/", pid, "/root");
        int status;
        pid_t child;

        if (!ns_path || !root_path)
                return -ENOMEM;
        host = open(hierarchy, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (host < 0)
                return negative_errno();
        tree = open_tree(host, "", OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_EMPTY_PATH | AT_RECURSIVE);
        if (tree < 0 || mount_setattr(tree, "", AT_EMPTY_PATH | AT_RECURSIVE, &private, sizeof(private)) < 0)
                return negative_errno();
        ns = open(ns_path, O_RDONLY | O_CLOEXEC);
        root = open(root_path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        proc = open("/proc", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (ns < 0 || root < 0 || proc < 0)
                return negative_errno();
        fflush(stdout);
        child = fork();
        if (child < 0)
                return negative_errno();
        if (child == 0) {
                if (setns(ns, CLONE_NEWNS) < 0 || fchdir(root) < 0 || chroot(".") < 0 || chdir("/") < 0) {
                        perror("enter");
                        _exit(1);
                }
                _exit(halfway_here(proc, path, tree, writable) < 0 ? 1 : 0);
        }
        if (waitpid(child, &status, 0) < 0)
                return negative_errno();
        return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : -EIO;
}

int main(int argc, char **argv) {
        NamespaceView v;
        int r;

        if (argc >= 6 && strcmp(argv[1], "swap") == 0)
                r = verb_swap(argv[2], argv[3], argv[4], strcmp(argv[5], "heal") == 0, argv + 6, argc - 6);
        else if ((argc == 5 || (argc == 6 && strcmp(argv[5], "writable") == 0)) && strcmp(argv[1], "halfway") == 0)
                r = verb_halfway(argv[2], argv[3], argv[4], argc == 6);
        else if (argc == 4 && strcmp(argv[1], "handover") == 0)
                r = verb_handover(argv[2], argv[3]);
        else if (argc == 5 && strcmp(argv[1], "view") == 0) {
                r = namespace_view_read(atoi(argv[2]), argv[3], argv[4], &v);
                if (r >= 0) {
                        /* The flags of the very mount statx() saw, whatever it is (a test may ask
                         * while a heal replaces it): statvfs() of it, through its own fd. */
                        uint64_t attr = v.attr;
                        _cleanup_close_ int proc_fd = namespace_view_open_proc(&v), root_fd = -EBADF, fd = -EBADF;

                        if (proc_fd >= 0)
                                root_fd = openat(proc_fd, "root", O_PATH | O_DIRECTORY | O_CLOEXEC);
                        if (root_fd >= 0)
                                fd = openat_in_root(root_fd, v.path, O_PATH | O_DIRECTORY);
                        if (fd >= 0)
                                (void) fd_get_mount(fd, &v.mnt_id, &v.dev, &attr);
                        print_view("view", &v, attr);
                        printf(" mnt_id=%llu\n", (unsigned long long) v.mnt_id);
                        namespace_view_done(&v);
                }
        } else {
                fprintf(stderr, "usage: %s swap ROOT HIERARCHY SOURCE heal|report [OLD...] | view PID ROOT HIERARCHY | "
                        "handover ROOT HIERARCHY | halfway PID HIERARCHY PATH [writable]\n", argv[0]);
                return 2;
        }
        if (r < 0) {
                fprintf(stderr, "%s: %s\n", argv[1], strerror(-r));
                return 1;
        }
        return 0;
}
