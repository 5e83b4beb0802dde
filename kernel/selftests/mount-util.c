/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount-util.h"

int write_file_at(int dir_fd, const char *path, const char *content) {
        _cleanup_close_ int fd = -EBADF;
        size_t len = strlen(content);

        fd = openat(dir_fd, path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0644);
        if (fd < 0)
                return -errno;
        if (write(fd, content, len) != (ssize_t) len)
                return errno > 0 ? -errno : -EIO;
        return 0;
}

char *read_file_at(int dir_fd, const char *path) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *buf = NULL;
        size_t size = 0, used = 0;

        fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return NULL;

        for (;;) {
                ssize_t n;

                if (used + 1 >= size) {
                        size_t nsize = size ? size * 2 : 4096;
                        char *nbuf = realloc(buf, nsize);

                        if (!nbuf)
                                return NULL;
                        buf = nbuf;
                        size = nsize;
                }
                n = read(fd, buf + used, size - used - 1);
                if (n < 0)
                        return NULL;
                if (n == 0)
                        break;
                used += n;
        }
        buf[used] = '\0';
        return TAKE_PTR(buf);
}

char *marker_at(const char *dir) {
        char path[PATH_MAX], *s;

        snprintf(path, sizeof(path), "%s/" MARKER_FILE, dir);
        s = read_file_at(AT_FDCWD, path);
        if (!s && asprintf(&s, "<no marker: %s>", errno_name(errno)) < 0)
                abort();
        return s;
}

int mkdir_p(const char *path, mode_t mode) {
        char buf[PATH_MAX];

        if (strlen(path) >= sizeof(buf))
                return -ENAMETOOLONG;
        strcpy(buf, path);

        for (char *p = buf + 1; *p; p++) {
                if (*p != '/')
                        continue;
                *p = '\0';
                if (mkdir(buf, mode) < 0 && errno != EEXIST)
                        return -errno;
                *p = '/';
        }
        if (mkdir(buf, mode) < 0 && errno != EEXIST)
                return -errno;
        return 0;
}

int tmpfs_mount_at(const char *path, const char *marker) {
        char file[PATH_MAX];
        int r;

        r = mkdir_p(path, 0755);
        if (r < 0)
                return r;
        if (mount("tmpfs", path, "tmpfs", 0, "mode=0755") < 0)
                return -errno;
        snprintf(file, sizeof(file), "%s/" MARKER_FILE, path);
        return write_file_at(AT_FDCWD, file, marker);
}

int tmpfs_detached(const char *marker) {
        _cleanup_close_ int fs_fd = -EBADF, mnt_fd = -EBADF;
        int r;

        fs_fd = fsopen("tmpfs", FSOPEN_CLOEXEC);
        if (fs_fd < 0)
                return -errno;
        if (fsconfig(fs_fd, FSCONFIG_SET_STRING, "mode", "0755", 0) < 0)
                return -errno;
        if (fsconfig(fs_fd, FSCONFIG_CMD_CREATE, NULL, NULL, 0) < 0)
                return -errno;
        mnt_fd = fsmount(fs_fd, FSMOUNT_CLOEXEC, 0);
        if (mnt_fd < 0)
                return -errno;

        r = write_file_at(mnt_fd, MARKER_FILE, marker);
        if (r < 0)
                return r;
        return TAKE_FD(mnt_fd);
}

int move_mount_raw(int from_fd, const char *from, int to_fd, const char *to, unsigned flags) {
        if (move_mount(from_fd, from, to_fd, to, flags) < 0)
                return -errno;
        return 0;
}

int move_beneath(int from_fd, const char *from, int to_fd, const char *to, unsigned extra) {
        unsigned flags = MOVE_MOUNT_BENEATH | extra;

        if (!*from)
                flags |= MOVE_MOUNT_F_EMPTY_PATH;
        if (!*to)
                flags |= MOVE_MOUNT_T_EMPTY_PATH;
        return move_mount_raw(from_fd, from, to_fd, to, flags);
}

int set_propagation(const char *path, unsigned long type) {
        if (mount(NULL, path, NULL, type, NULL) < 0)
                return -errno;
        return 0;
}

int set_propagation_fd(int fd, unsigned long type) {
        struct mount_attr attr = { .propagation = type };

        if (mount_setattr(fd, "", AT_EMPTY_PATH, &attr, sizeof(attr)) < 0)
                return -errno;
        return 0;
}

int bind_mount(const char *from, const char *to) {
        if (mount(from, to, NULL, MS_BIND, NULL) < 0)
                return -errno;
        return 0;
}

int set_group(const char *from, const char *to) {
        return move_mount_raw(AT_FDCWD, from, AT_FDCWD, to, MOVE_MOUNT_SET_GROUP);
}

int open_path(const char *path) {
        int fd = open(path, O_PATH | O_CLOEXEC | O_NOFOLLOW);

        return fd < 0 ? -errno : fd;
}

int enter_mount_ns_of(pid_t pid) {
        _cleanup_close_ int fd = -EBADF;
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/ns/mnt", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (setns(fd, CLONE_NEWNS) < 0)
                return -errno;
        /* setns() leaves cwd in the old namespace; start at the new root. */
        if (chdir("/") < 0)
                return -errno;
        return 0;
}

int enter_private_mount_ns(void) {
        if (unshare(CLONE_NEWNS) < 0)
                return -errno;
        return set_propagation("/", MS_REC | MS_PRIVATE);
}

static int write_id_map(const char *file, unsigned id) {
        char map[64];

        snprintf(map, sizeof(map), "0 %u 1\n", id);
        return write_file_at(AT_FDCWD, file, map);
}

int enter_user_and_mount_ns(void) {
        uid_t uid = geteuid();
        gid_t gid = getegid();
        int r;

        if (unshare(CLONE_NEWUSER | CLONE_NEWNS) < 0)
                return -errno;
        r = write_file_at(AT_FDCWD, "/proc/self/setgroups", "deny\n");
        if (r < 0)
                return r;
        r = write_id_map("/proc/self/uid_map", uid);
        if (r < 0)
                return r;
        r = write_id_map("/proc/self/gid_map", gid);
        if (r < 0)
                return r;
        if (setresgid(0, 0, 0) < 0 || setresuid(0, 0, 0) < 0)
                return -errno;
        return 0;
}

pid_t spawn_mount_ns(int (*setup)(void *userdata), void *userdata) {
        int ready[2];
        pid_t pid;
        char c = 0;

        if (pipe2(ready, O_CLOEXEC) < 0)
                return -errno;
        pid = fork();
        if (pid < 0) {
                int r = -errno;

                close(ready[0]);
                close(ready[1]);
                return r;
        }
        if (pid == 0) {
                close(ready[0]);
                if (unshare(CLONE_NEWNS) < 0)
                        _exit(1);
                if (setup && setup(userdata) < 0)
                        _exit(2);
                if (write(ready[1], "r", 1) != 1)
                        _exit(3);
                for (;;)
                        pause();
        }
        close(ready[1]);
        if (read(ready[0], &c, 1) != 1 || c != 'r') {
                close(ready[0]);
                kill_child(pid);
                return -ECHILD;
        }
        close(ready[0]);
        return pid;
}

int wait_child(pid_t pid) {
        int status;

        if (waitpid(pid, &status, 0) < 0)
                return -errno;
        if (WIFEXITED(status))
                return WEXITSTATUS(status);
        return 128 + WTERMSIG(status);
}

void kill_child(pid_t pid) {
        if (pid <= 0)
                return;
        (void) kill(pid, SIGKILL);
        (void) wait_child(pid);
}

char *mountinfo_read(pid_t pid) {
        char path[64];

        if (pid == 0)
                return read_file_at(AT_FDCWD, "/proc/self/mountinfo");
        snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int) pid);
        return read_file_at(AT_FDCWD, path);
}

/* Whether @line (up to its newline) occurs as a whole line in @text. */
static bool has_line(const char *text, const char *line) {
        size_t len = strcspn(line, "\n");

        for (const char *p = text; *p; ) {
                size_t l = strcspn(p, "\n");

                if (l == len && strncmp(p, line, len) == 0)
                        return true;
                p += l;
                if (*p)
                        p++;
        }
        return false;
}

static void print_missing_lines(FILE *f, const char *prefix, const char *from, const char *in) {
        for (const char *p = from; *p; ) {
                size_t l = strcspn(p, "\n");

                if (!has_line(in, p))
                        fprintf(f, "# %s %.*s\n", prefix, (int) l, p);
                p += l;
                if (*p)
                        p++;
        }
}

void mountinfo_print_diff(FILE *f, const char *before, const char *after) {
        print_missing_lines(f, "-", before, after);
        print_missing_lines(f, "+", after, before);
}

int mount_id_at(int dir_fd, const char *path) {
        struct statx sx;
        int flags = AT_NO_AUTOMOUNT | AT_SYMLINK_NOFOLLOW;

        if (!*path)
                flags |= AT_EMPTY_PATH;
        if (statx(dir_fd, path, flags, STATX_MNT_ID, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_MNT_ID))
                return -EOPNOTSUPP;
        return (int) sx.stx_mnt_id;
}

/* Calls @fn for each line of @mountinfo until it returns non-zero. */
typedef int (*mountinfo_fn)(int id, int parent, const char *mountpoint, const char *line, void *userdata);

static int mountinfo_foreach(const char *mountinfo, mountinfo_fn fn, void *userdata) {
        for (const char *p = mountinfo; *p; ) {
                char mountpoint[PATH_MAX];
                int id, parent, r;

                if (sscanf(p, "%d %d %*s %*s %4095s", &id, &parent, mountpoint) == 3) {
                        r = fn(id, parent, mountpoint, p, userdata);
                        if (r != 0)
                                return r;
                }
                p += strcspn(p, "\n");
                if (*p)
                        p++;
        }
        return 0;
}

struct parent_query {
        int id;
        int parent;
};

static int find_parent(int id, int parent, const char *mountpoint, const char *line, void *userdata) {
        struct parent_query *q = userdata;

        if (id != q->id)
                return 0;
        q->parent = parent;
        return 1;
}

int mountinfo_parent(const char *mountinfo, int id) {
        struct parent_query q = { .id = id, .parent = -ENOENT };

        mountinfo_foreach(mountinfo, find_parent, &q);
        return q.parent;
}

struct count_query {
        const char *path;
        unsigned count;
};

static int count_at(int id, int parent, const char *mountpoint, const char *line, void *userdata) {
        struct count_query *q = userdata;

        if (streq(mountpoint, q->path))
                q->count++;
        return 0;
}

unsigned mountinfo_count_at(const char *mountinfo, const char *path) {
        struct count_query q = { .path = path };

        mountinfo_foreach(mountinfo, count_at, &q);
        return q.count;
}

struct tag_query {
        int id;
        const char *tag;
        int value;
};

static int find_tag(int id, int parent, const char *mountpoint, const char *line, void *userdata) {
        struct tag_query *q = userdata;
        size_t len = strcspn(line, "\n"), tlen = strlen(q->tag);
        const char *sep;

        if (id != q->id)
                return 0;
        /* Optional fields ("shared:N", "master:N") sit between the options and " - ". */
        sep = strstr(line, " - ");
        if (!sep || (size_t) (sep - line) > len)
                return 1;
        for (const char *p = line + 1; p + tlen <= sep; p++)
                if (p[-1] == ' ' && strncmp(p, q->tag, tlen) == 0) {
                        q->value = atoi(p + tlen);
                        break;
                }
        return 1;
}

int mountinfo_tag(const char *mountinfo, int id, const char *tag) {
        struct tag_query q = { .id = id, .tag = tag, .value = -ENOENT };

        mountinfo_foreach(mountinfo, find_tag, &q);
        return q.value;
}

struct shadow_query {
        const char *mountinfo;
        FILE *log;
        int shadowed;
};

struct same_place_query {
        int id, parent;
        const char *mountpoint;
        bool found;
};

static int find_same_place(int id, int parent, const char *mountpoint, const char *line, void *userdata) {
        struct same_place_query *q = userdata;

        if (id == q->id || parent != q->parent || !streq(mountpoint, q->mountpoint))
                return 0;
        q->found = true;
        return 1;
}

static int check_shadow(int id, int parent, const char *mountpoint, const char *line, void *userdata) {
        struct shadow_query *q = userdata;
        struct same_place_query same = { .id = id, .parent = parent, .mountpoint = mountpoint };

        mountinfo_foreach(q->mountinfo, find_same_place, &same);
        if (!same.found)
                return 0;
        q->shadowed++;
        if (q->log)
                fprintf(q->log, "# mount %d shares parent %d and mount point %s with another mount\n",
                        id, parent, mountpoint);
        return 0;
}

int mountinfo_shadowed(const char *mountinfo, FILE *log) {
        struct shadow_query q = { .mountinfo = mountinfo, .log = log };

        mountinfo_foreach(mountinfo, check_shadow, &q);
        return q.shadowed;
}

struct orphan_query {
        const char *mountinfo;
        FILE *log;
        int orphans;
};

static int check_parent(int id, int parent, const char *mountpoint, const char *line, void *userdata) {
        struct orphan_query *q = userdata;

        /* The bottom mount on "/" hangs off the namespace root, which is never listed. */
        if (parent == id || streq(mountpoint, "/") || mountinfo_parent(q->mountinfo, parent) != -ENOENT)
                return 0;
        q->orphans++;
        if (q->log)
                fprintf(q->log, "# parent %d of mount %d (%s) is not in the table\n",
                        parent, id, mountpoint);
        return 0;
}

int mountinfo_orphans(const char *mountinfo, FILE *log) {
        struct orphan_query q = { .mountinfo = mountinfo, .log = log };

        mountinfo_foreach(mountinfo, check_parent, &q);
        return q.orphans;
}

const char *errno_name(int err) {
        const char *name;

        if (err < 0)
                err = -err;
        if (err == 0)
                return "0";
        name = strerrorname_np(err);
        return name ?: "E?";
}
