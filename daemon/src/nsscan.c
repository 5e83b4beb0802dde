/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <dirent.h>
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
};

const char *ns_view_state_to_string(NsViewState s) {
        return s < _NS_VIEW_STATE_MAX ? ns_view_state_table[s] : NULL;
}

void namespace_views_free(NamespaceView *v, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(v[i].unit);
                free(v[i].machine);
        }
        free(v);
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

static void read_comm(pid_t pid, char comm[static 17]) {
        _cleanup_free_ char *text = NULL;
        char path[64];

        snprintf(path, sizeof(path), "/proc/%d/comm", (int) pid);
        if (read_full_file_at(AT_FDCWD, path, 64, &text) < 0) {
                strcpy(comm, "?");
                return;
        }
        snprintf(comm, 17, "%s", strstrip(text));
}

static void classify(NamespaceView *v, const Generation *g) {
        v->state = NS_VIEW_FOREIGN;
        if (!g)
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

/* Does this process see our root prefix (the same directory), and is its root ours? */
static bool sees_root(pid_t pid, const char *root, const struct stat *root_st, const struct stat *slash_st,
                      bool *ret_own_root) {
        _cleanup_free_ char *p = NULL;
        char proc_root[64];
        struct stat st;

        snprintf(proc_root, sizeof(proc_root), "/proc/%d/root", (int) pid);
        if (stat(proc_root, &st) < 0)
                return false;
        *ret_own_root = st.st_dev != slash_st->st_dev || st.st_ino != slash_st->st_ino;
        if (streq(root, "/"))
                return true;
        p = path_join(proc_root, root);
        return p && stat(p, &st) == 0 && st.st_dev == root_st->st_dev && st.st_ino == root_st->st_ino;
}

static int read_view(pid_t pid, const char *root, const char *hierarchy, NamespaceView *v) {
        _cleanup_free_ char *path = NULL;
        char proc_root[64];
        struct statx sx;
        int r;

        snprintf(proc_root, sizeof(proc_root), "/proc/%d/root", (int) pid);
        path = path_join(proc_root, v->own_root ? "/" : root, hierarchy);
        if (!path)
                return -ENOMEM;
        if (statx(AT_FDCWD, path, AT_NO_AUTOMOUNT, STATX_MNT_ID | STATX_INO, &sx) < 0)
                return -errno;
        v->dev = makedev(sx.stx_dev_major, sx.stx_dev_minor);
        v->mnt_id = sx.stx_mnt_id;
        r = path_get_mount_attr(AT_FDCWD, path, &v->attr);
        if (r < 0)
                return r;
        v->pid = pid;
        read_comm(pid, v->comm);
        (void) process_identify(pid, &v->unit, &v->machine);
        return 0;
}

int nsscan_hierarchy(const char *root, const char *hierarchy, const Generation *g,
                     NamespaceView **ret, size_t *ret_n) {
        NamespaceView *views = NULL;
        size_t n = 0;
        struct stat root_st, slash_st;
        DIR *d;
        int r = 0;

        if (stat(root, &root_st) < 0 || stat("/", &slash_st) < 0)
                return -errno;
        d = opendir("/proc");
        if (!d)
                return -errno;

        for (struct dirent *de; (de = readdir(d)); ) {
                char ns_path[64];
                struct stat st;
                NamespaceView v = {};
                NamespaceView *a;
                bool seen = false;
                pid_t pid;

                if (!isdigit((unsigned char) de->d_name[0]))
                        continue;
                pid = (pid_t) atoi(de->d_name);
                snprintf(ns_path, sizeof(ns_path), "/proc/%d/ns/mnt", (int) pid);
                if (stat(ns_path, &st) < 0)
                        continue;   /* gone, or a kernel thread */
                for (size_t i = 0; i < n; i++)
                        if (views[i].ns_ino == st.st_ino) {
                                views[i].n_processes++;
                                seen = true;
                                break;
                        }
                if (seen)
                        continue;
                v.ns_ino = st.st_ino;
                v.n_processes = 1;
                if (!sees_root(pid, root, &root_st, &slash_st, &v.own_root))
                        continue;
                if (read_view(pid, root, hierarchy, &v) < 0) {
                        free(v.unit);
                        free(v.machine);
                        continue;   /* vanished, or has no such directory */
                }
                classify(&v, g);
                a = realloc(views, sizeof(NamespaceView) * (n + 1));
                if (!a) {
                        free(v.unit);
                        free(v.machine);
                        r = -ENOMEM;
                        break;
                }
                views = a;
                views[n++] = v;
        }
        closedir(d);
        if (r < 0) {
                namespace_views_free(views, n);
                return r;
        }
        *ret = views;
        *ret_n = n;
        return 0;
}
