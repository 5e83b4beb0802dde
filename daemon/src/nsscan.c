/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "mount-api.h"
#include "mountinfo.h"
#include "nsscan.h"
#include "util.h"

static const char * const ns_view_state_table[_NS_VIEW_STATE_MAX] = {
        [NS_VIEW_CURRENT] = "current",
        [NS_VIEW_STALE] = "stale",
        [NS_VIEW_BASE] = "base",
        [NS_VIEW_FOREIGN] = "foreign",
        [NS_VIEW_UNREADABLE] = "unreadable",
};

const char *ns_view_state_to_string(NsViewState s) {
        return s < _NS_VIEW_STATE_MAX ? ns_view_state_table[s] : NULL;
}

/* systemd escapes '-' in unit names as \x2d. */
static char *unescape_unit_part(const char *s, size_t n) {
        char *r = malloc(n + 1), *p = r;

        if (!r)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                unsigned v;

                if (s[i] == '\\' && i + 3 < n && s[i + 1] == 'x' && sscanf(s + i + 2, "%2x", &v) == 1) {
                        *p++ = (char) v;
                        i += 3;
                } else
                        *p++ = s[i];
        }
        *p = 0;
        return r;
}

int cgroup_path_identify(const char *path, char **ret_unit, char **ret_machine) {
        _cleanup_strv_free_ char **parts = strv_split(path, "/");
        char *unit = NULL, *machine = NULL;

        if (!parts)
                return -ENOMEM;
        STRV_FOREACH(p, parts) {
                const char *m;
                char *e;

                if ((m = startswith(*p, "machine-")) && (e = endswith(m, ".scope")) && !machine)
                        machine = unescape_unit_part(m, e - m);
                else if ((m = startswith(*p, "systemd-nspawn@")) && (e = endswith(m, ".service")) && !machine)
                        machine = unescape_unit_part(m, e - m);
                if (endswith(*p, ".service") || endswith(*p, ".scope")) {
                        free(unit);
                        unit = strdup(*p);
                }
                if (machine && streq(*p, "payload"))
                        break;   /* units below belong to the container's own systemd */
        }
        *ret_unit = unit;
        *ret_machine = machine;
        return 0;
}

/* Is this exact NAME=VALUE in the process's environment? (/proc/PID/environ is NUL-separated.) */
static bool environ_has(pid_t pid, const char *assignment) {
        _cleanup_close_ int fd = -EBADF;
        char path[64], buf[65536];
        ssize_t k;

        snprintf(path, sizeof(path), "/proc/%d/environ", (int) pid);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
                return false;
        k = read(fd, buf, sizeof(buf) - 1);
        if (k <= 0)
                return false;
        buf[k] = 0;
        for (char *s = buf; s < buf + k; s += strlen(s) + 1)
                if (streq(s, assignment))
                        return true;
        return false;
}

int process_identify(pid_t pid, char **ret_unit, char **ret_machine) {
        _cleanup_free_ char *text = NULL, *fallback = NULL;
        char path[64];
        const char *chosen = NULL;
        int r;

        *ret_unit = *ret_machine = NULL;
        snprintf(path, sizeof(path), "/proc/%d/cgroup", (int) pid);
        r = read_full_file_at(AT_FDCWD, path, 64 * 1024, &text);
        if (r < 0)
                return r;
        /* The unified hierarchy ("0::/...") if present, else systemd's named v1 hierarchy. */
        for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
                char *p;

                if ((p = startswith(line, "0::")))
                        chosen = p;
                else if ((p = strstr(line, ":name=systemd:")) && !fallback)
                        fallback = strdup(p + strlen(":name=systemd:"));
        }
        if (!chosen || streq(chosen, "/"))
                chosen = fallback;
        if (chosen) {
                r = cgroup_path_identify(chosen, ret_unit, ret_machine);
                if (r < 0)
                        return r;
        }
        if (!*ret_machine && environ_has(pid, "container=systemd-nspawn"))
                *ret_machine = strdup("(nspawn container)");
        return 0;
}

static void read_comm(pid_t pid, char comm[static 16]) {
        _cleanup_free_ char *text = NULL;
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        if (read_full_file_at(AT_FDCWD, path, 64, &text) < 0) {
                strcpy(comm, "?");
                return;
        }
        snprintf(comm, 16, "%s", strstrip(text));
}

void namespace_view_done(NamespaceView *v) {
        free(v->unit);
        free(v->machine);
        free(v->path);
        *v = (NamespaceView) {};
}

void namespace_views_free(NamespaceView *v, size_t n) {
        for (size_t i = 0; i < n; i++)
                namespace_view_done(&v[i]);
        free(v);
}

static bool same_inode(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

/* "/a/b/usr" under root "/a/b" -> "usr"; under root "/" -> "usr". */
static const char *path_relative_to_root(const char *root, const char *path) {
        size_t n = strlen(root);

        while (n > 0 && root[n - 1] == '/')
                n--;
        if (strncmp(path, root, n) != 0 || (path[n] != '/' && path[n] != 0))
                return NULL;
        path += n;
        path += strspn(path, "/");
        return *path ? path : ".";
}

/* Does the process whose root is root_fd see our root prefix as the same directory? */
static bool sees_root(int root_fd, const char *root) {
        _cleanup_close_ int fd = -EBADF;
        struct stat ours, theirs;

        if (streq(root, "/"))
                return true;
        fd = openat_in_root(root_fd, root, O_PATH | O_DIRECTORY);
        return fd >= 0 && fstat(fd, &theirs) == 0 && stat(root, &ours) == 0 && same_inode(&ours, &theirs);
}

/* The mount side of a view; with ret_sees_root, whether the process sees our root prefix. */
static int view_read_mount(pid_t pid, const char *root, const char *path, NamespaceView *v,
                           bool *ret_sees_root) {
        _cleanup_close_ int ns_fd = -EBADF, root_fd = -EBADF, fd = -EBADF;
        struct stat st, slash;
        const char *name;
        int r;

        *v = (NamespaceView) { .pid = pid, .n_processes = 1 };
        ns_fd = proc_open(pid, "ns/mnt", O_RDONLY);
        if (ns_fd < 0)
                return ns_fd;
        if (fstat(ns_fd, &st) < 0)
                return -errno;
        v->ns_ino = st.st_ino;

        root_fd = proc_open(pid, "root", O_PATH | O_DIRECTORY);
        if (root_fd < 0)
                return root_fd;
        if (fstat(root_fd, &st) < 0 || stat("/", &slash) < 0)
                return -errno;
        v->own_root = !same_inode(&st, &slash);

        /* A container names the hierarchy relative to its own root. */
        name = v->own_root ? path_relative_to_root(root, path) : path;
        if (!name)
                return -EINVAL;
        fd = openat_in_root(root_fd, name, O_PATH | O_DIRECTORY);
        if (fd < 0)
                return fd;
        r = fd_get_mount(fd, &v->mnt_id, &v->dev, &v->attr);
        if (r < 0)
                return r;
        v->path = strdup(name);
        if (!v->path)
                return -ENOMEM;
        if (ret_sees_root)
                *ret_sees_root = !v->own_root && sees_root(root_fd, root);
        return 0;
}

/* Who it is: comm, unit, machine (best effort). */
static void view_identify(NamespaceView *v) {
        read_comm(v->pid, v->comm);
        (void) process_identify(v->pid, &v->unit, &v->machine);
}

int namespace_view_read(pid_t pid, const char *root, const char *path, NamespaceView *ret) {
        NamespaceView v;
        int r;

        r = view_read_mount(pid, root, path, &v, NULL);
        if (r < 0) {
                namespace_view_done(&v);
                return r;
        }
        view_identify(&v);
        *ret = v;
        return 0;
}

/*
 * Is the mount the view shows an overlay that tuck or systemd-sysext made?
 * An st_dev alone does not say: an old overlay's anonymous device number
 * is free again once the overlay is gone, and the kernel hands it to the
 * next tmpfs or overlay mounted anywhere (a container's, say).
 */
char *namespace_view_overlay_source(const NamespaceView *v) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_fs *fs;

        if (mount_table_read(v->pid, &tb) < 0)
                return NULL;
        fs = mount_table_find_id(tb, (int) v->mnt_id);
        if (!fs || !streq_ptr(mnt_fs_get_fstype(fs), "overlay") || !mnt_fs_get_source(fs))
                return NULL;
        return strdup(mnt_fs_get_source(fs));
}

static bool view_is_extension_overlay(const NamespaceView *v) {
        _cleanup_free_ char *source = namespace_view_overlay_source(v);

        for (ImageClass k = 0; source && k < _IMAGE_CLASS_MAX; k++)
                if (streq(source, image_class_info[k].overlay_source) ||
                    streq(source, image_class_info[k].foreign_source))
                        return true;
        return false;
}

bool dev_in(dev_t d, const dev_t *devs, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (devs[i] == d)
                        return true;
        return false;
}

static NamespaceView *find_view(NamespaceView *views, size_t n, uint64_t ns_ino) {
        for (size_t i = 0; i < n; i++)
                if (views[i].ns_ino == ns_ino)
                        return &views[i];
        return NULL;
}

typedef struct Scan {
        const char *root, *path;
        const dev_t *ours;
        size_t n_ours;
        NsScanFlags flags;
        uint64_t self_ns;
        pid_t session;
        NamespaceView *views;
        size_t n_views;
} Scan;

/* Is the namespace one of the root's (see nsscan.h)? */
static bool belongs_to_root(const Scan *s, const NamespaceView *v, bool root_seen) {
        if (streq(s->root, "/"))
                return true;
        return v->own_root ? getsid(v->pid) == s->session : root_seen;
}

/* One process: counted if its namespace is known, else read and kept if it belongs. */
static int scan_process(Scan *s, pid_t pid) {
        NamespaceView v, *known, *a;
        bool root_seen = false, keep;
        char ns_path[64];
        struct stat st;
        int r;

        snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/mnt", (int) pid);
        if (stat(ns_path, &st) < 0)
                return 0;       /* gone, or a kernel thread */
        known = find_view(s->views, s->n_views, st.st_ino);
        if (known) {
                known->n_processes++;
                return 0;
        }
        if ((s->flags & NSSCAN_SKIP_SELF) && st.st_ino == s->self_ns)
                return 0;

        r = view_read_mount(pid, s->root, s->path, &v, &root_seen);
        if (r == -ENOENT || r == -ESRCH || r == -ENOTDIR || r == -EINVAL) {
                namespace_view_done(&v);
                return 0;       /* vanished, no such directory, or outside our root prefix */
        }
        if (r < 0) {
                v.ns_ino = st.st_ino;
                v.error = r;
                v.state = NS_VIEW_UNREADABLE;
        }
        keep = belongs_to_root(s, &v, root_seen);
        /* An unreadable view may be one of ours: kept, for the caller to say so. */
        if (keep && r >= 0 && (s->flags & NSSCAN_ONLY_OURS))
                keep = dev_in(v.dev, s->ours, s->n_ours) && view_is_extension_overlay(&v);
        if (!keep) {
                namespace_view_done(&v);
                return 0;
        }
        view_identify(&v);

        a = realloc(s->views, sizeof(NamespaceView) * (s->n_views + 1));
        if (!a) {
                namespace_view_done(&v);
                return -ENOMEM;
        }
        s->views = a;
        s->views[s->n_views++] = v;
        return 0;
}

int namespaces_scan(const char *root, const char *path, const dev_t *ours, size_t n_ours, NsScanFlags flags,
                    NamespaceView **ret, size_t *ret_n) {
        Scan s = {
                .root = root, .path = path, .ours = ours, .n_ours = n_ours, .flags = flags, .session = getsid(0),
        };
        _cleanup_closedir_ DIR *d = NULL;
        struct stat st;
        int r = 0;

        if (stat("/proc/self/ns/mnt", &st) < 0)
                return -errno;
        s.self_ns = st.st_ino;
        d = opendir_at(AT_FDCWD, "/proc");
        if (!d)
                return -errno;
        for (struct dirent *de; r >= 0 && (de = readdir_no_dot(d)); ) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);

                if (*end == 0 && pid > 0)
                        r = scan_process(&s, (pid_t) pid);
        }
        if (r < 0) {
                namespace_views_free(s.views, s.n_views);
                return r;
        }
        *ret = s.views;
        *ret_n = s.n_views;
        return 0;
}

void namespace_view_classify(NamespaceView *v, const Generation *g) {
        v->state = v->error < 0 ? NS_VIEW_UNREADABLE : NS_VIEW_FOREIGN;
        v->generation = 0;
        if (!g || v->error < 0)
                return;
        if (g->merged && v->dev == g->overlay_dev) {
                v->state = NS_VIEW_CURRENT;
                v->generation = g->number;
                return;
        }
        for (size_t i = 0; i < g->n_history; i++)
                if (v->dev == g->history[i].dev) {
                        v->state = NS_VIEW_STALE;
                        v->generation = g->history[i].number;
                        return;
                }
        if (g->base_dev != 0 && v->dev == g->base_dev)
                v->state = NS_VIEW_BASE;
}

int nsscan_hierarchy(const char *root, const char *path, const Generation *g,
                     NamespaceView **ret, size_t *ret_n) {
        int r;

        r = namespaces_scan(root, path, NULL, 0, 0, ret, ret_n);
        if (r < 0)
                return r;
        for (size_t i = 0; i < *ret_n; i++) {
                NamespaceView *v = &(*ret)[i];

                namespace_view_classify(v, g);
                /* An older overlay's number may be someone else's mount by now. */
                if (v->state == NS_VIEW_STALE && !view_is_extension_overlay(v)) {
                        v->state = NS_VIEW_FOREIGN;
                        v->generation = 0;
                }
        }
        return 0;
}
