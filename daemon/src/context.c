/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include "context.h"
#include "log.h"
#include "staging.h"
#include "swap.h"
#include "util.h"

char *context_path(const TuckContext *c, const char *path) {
        return path_join(c->root, path);
}

ScanBudget context_scan_budget(const TuckContext *c, const TuckHooks *hooks) {
        return (ScanBudget) {
                .namespace_usec = c->config.scan_namespace_usec,
                .refresh_usec = c->config.scan_refresh_usec,
                .max_mounts = c->config.scan_max_mounts,
                .heal_usec = c->config.scan_heal_usec,
                .run_dir = c->run_dir,
                .keepalive = hooks && hooks->keepalive ? hooks->keepalive : c->keepalive,
                .userdata = hooks && hooks->keepalive ? hooks->userdata : c->keepalive_userdata,
        };
}

void tuck_context_set_keepalive(TuckContext *c, void (*keepalive)(void *userdata), void *userdata) {
        c->keepalive = keepalive;
        c->keepalive_userdata = userdata;
}

int tuck_context_reload_policy(TuckContext *c, char **ret_error) {
        TuckConfig n;
        int r;

        r = config_load(&n, c->config_path, ret_error);
        if (r < 0)
                return r;
        /* What a run reads from the config, not where things are: that needs a new context. */
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++)
                c->config.image_policy[k] = n.image_policy[k];
        c->config.allow_downgrade = n.allow_downgrade;
        c->config.allow_window = n.allow_window;
        c->config.reload_manager = n.reload_manager;
        c->config.stale_policy = n.stale_policy;
        strv_free(c->config.restart_units);
        c->config.restart_units = TAKE_PTR(n.restart_units);
        c->config.scan_namespace_usec = n.scan_namespace_usec;
        c->config.scan_refresh_usec = n.scan_refresh_usec;
        c->config.scan_max_mounts = n.scan_max_mounts;
        c->config.scan_heal_usec = n.scan_heal_usec;
        config_done(&n);
        return 0;
}

/*
 * Where hierarchy @path is: below the root with symlinks resolved inside it,
 * as systemd-sysext's chase() does (ostree and Fedora CoreOS have /opt ->
 * var/opt; the overlay goes on /var/opt, and mountinfo says so). A hierarchy
 * that does not exist keeps its path: it is skipped later.
 *
 * The name is spelled from the directories walked, never read back from the
 * fd: that is where the mount on top is now, and tuckctl resolves before it
 * takes the lock, while a refresh of tuckd's (or anyone) may detach the top
 * (its fd's name becomes "/") or move it away and back. A name read and
 * checked twice can still be the one it had in between.
 */
static int hierarchy_resolve(const TuckContext *c, int root_fd, const char *path, char **ret) {
        _cleanup_free_ char *name = NULL;
        _cleanup_close_ int fd = -EBADF;

        fd = openat_in_root_by_hand_named(root_fd, path, O_PATH | O_DIRECTORY, &name);
        if (fd == -ENOENT)
                *ret = context_path(c, path);
        else if (fd < 0)
                return fd;
        else
                *ret = path_join(c->root, name);
        return *ret ? 0 : -ENOMEM;
}

static int add_hierarchy(TuckContext *c, int root_fd, const char *path, ImageClass k, char **ret_error) {
        _cleanup_free_ char *full = NULL;
        TuckHierarchy *a;
        int r;

        r = hierarchy_resolve(c, root_fd, path, &full);
        if (r < 0) {
                (void) asprintf_safe(ret_error, "cannot resolve hierarchy %s below '%s': %s", path, c->root,
                                     strerror(-r));
                return r;
        }
        if (streq(full, c->root)) {
                (void) asprintf_safe(ret_error, "hierarchy %s resolves to the root directory itself", path);
                return -EINVAL;
        }
        for (size_t i = 0; i < c->n_hierarchies; i++) {
                const TuckHierarchy *h = &c->hierarchies[i];

                if (!streq(h->path, path) && !streq(h->full, full))
                        continue;
                if (h->class != k)
                        (void) asprintf_safe(ret_error, "hierarchy %s is configured for both %s and %s", path,
                                             image_class_to_string(h->class), image_class_to_string(k));
                else if (streq(h->path, path))
                        (void) asprintf_safe(ret_error, "hierarchy %s is configured twice", path);
                else
                        (void) asprintf_safe(ret_error, "hierarchies %s and %s are the same directory, '%s'",
                                             h->path, path, full);
                return -EINVAL;
        }
        a = realloc(c->hierarchies, sizeof(TuckHierarchy) * (c->n_hierarchies + 1));
        if (!a)
                return -ENOMEM;
        c->hierarchies = a;
        a[c->n_hierarchies] = (TuckHierarchy) {
                .path = strdup(path),
                .full = TAKE_PTR(full),
                .id = hierarchy_id(path),
                .class = k,
        };
        c->n_hierarchies++;
        if (!a[c->n_hierarchies - 1].path || !a[c->n_hierarchies - 1].id)
                return -ENOMEM;
        return 0;
}

/*
 * $SYSTEMD_SYSEXT_HIERARCHIES / $SYSTEMD_CONFEXT_HIERARCHIES, as
 * systemd-sysext reads them: ':'-separated absolute paths, replacing the
 * configured hierarchies of the class ("" means none).
 */
static int hierarchies_from_env(TuckConfig *config, ImageClass k, char **ret_error) {
        const char *name = image_class_info[k].hierarchies_env, *e = secure_getenv(name);
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));
        int r;

        if (!l)
                return -ENOMEM;
        if (!e)
                return 0;
        for (const char *p = e; *e; p++) {
                size_t n = strcspn(p, ":");
                _cleanup_free_ char *one = strndup(p, n), *canonical = NULL, *why = NULL;

                if (!one)
                        return -ENOMEM;
                r = hierarchy_path_canonicalize(one, &canonical, &why);
                if (r == -EINVAL)
                        (void) asprintf_safe(ret_error, "$%s: %s", name, strna(why));
                if (r < 0)
                        return r;
                r = strv_consume(&l, TAKE_PTR(canonical));
                if (r < 0)
                        return r;
                p += n;
                if (!*p)
                        break;
        }
        strv_free(config->hierarchies[k]);
        config->hierarchies[k] = TAKE_PTR(l);
        return 0;
}

int tuck_context_new(const char *root, const char *config, TuckContext **ret, char **ret_error) {
        _cleanup_close_ int root_fd = -EBADF;
        TuckContext *c;
        int r;

        c = calloc(1, sizeof(TuckContext));
        if (!c)
                return -ENOMEM;
        c->lock_fd = -EBADF;

        c->root = realpath(root ?: "/", NULL);
        if (!c->root) {
                r = -errno;
                (void) asprintf_safe(ret_error, "root directory '%s': %s", root, strerror(errno));
                goto fail;
        }
        c->config_path = config ? strdup(config) : context_path(c, "/etc/tuck/tuck.conf");
        c->run_dir = context_path(c, "/run/tuck");
        c->state_dir = context_path(c, "/var/lib/tuck");
        if (!c->config_path || !c->run_dir || !c->state_dir) {
                r = -ENOMEM;
                goto fail;
        }

        r = config_load(&c->config, c->config_path, ret_error);
        if (r < 0)
                goto fail;

        root_fd = open(c->root, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0) {
                r = -errno;
                (void) asprintf_safe(ret_error, "root directory '%s': %s", c->root, strerror(-r));
                goto fail;
        }
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                r = hierarchies_from_env(&c->config, k, ret_error);
                if (r < 0)
                        goto fail;
                STRV_FOREACH(h, c->config.hierarchies[k]) {
                        r = add_hierarchy(c, root_fd, *h, k, ret_error);
                        if (r < 0)
                                goto fail;
                }
                STRV_FOREACH(d, c->config.search_dirs[k]) {
                        r = strv_consume(&c->image_dirs, context_path(c, *d));
                        if (r < 0)
                                goto fail;
                }
        }

        *ret = c;
        return 0;
fail:
        tuck_context_free(c);
        return r;
}

TuckContext *tuck_context_free(TuckContext *c) {
        if (!c)
                return NULL;
        tuck_unlock(c);
        free(c->root);
        free(c->config_path);
        config_done(&c->config);
        free(c->run_dir);
        free(c->state_dir);
        for (size_t i = 0; i < c->n_hierarchies; i++) {
                free(c->hierarchies[i].path);
                free(c->hierarchies[i].full);
                free(c->hierarchies[i].id);
        }
        free(c->hierarchies);
        strv_free(c->image_dirs);
        free(c);
        return NULL;
}

const char *tuck_context_root(const TuckContext *c) {
        return c->root;
}

const char *tuck_context_run_dir(const TuckContext *c) {
        return c->run_dir;
}

const char *tuck_context_state_dir(const TuckContext *c) {
        return c->state_dir;
}

size_t tuck_context_hierarchies(const TuckContext *c, const TuckHierarchy **ret) {
        *ret = c->hierarchies;
        return c->n_hierarchies;
}

char * const *tuck_context_image_dirs(const TuckContext *c) {
        return c->image_dirs;
}

int tuck_lock(TuckContext *c, bool block) {
        _cleanup_free_ char *path = NULL;
        char pid[32];
        int r;

        if (c->lock_fd >= 0)
                return 0;
        r = mkdir_p(c->run_dir, 0755);
        if (r < 0)
                return r;
        path = path_join(c->run_dir, "lock");
        if (!path)
                return -ENOMEM;
        c->lock_fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
        if (c->lock_fd < 0)
                return -errno;
        if (flock(c->lock_fd, LOCK_EX | (block ? 0 : LOCK_NB)) < 0) {
                r = errno == EWOULDBLOCK ? -EBUSY : -errno;
                c->lock_fd = safe_close(c->lock_fd);
                return r;
        }
        /* Who holds it, for the message of whoever waits (informational only). */
        snprintf(pid, sizeof(pid), "%d\n", (int) getpid());
        if (ftruncate(c->lock_fd, 0) == 0)
                (void) !pwrite(c->lock_fd, pid, strlen(pid), 0);
        return 0;
}

void tuck_unlock(TuckContext *c) {
        c->lock_fd = safe_close(c->lock_fd);
}

int tuck_beneath_supported(TuckContext *c) {
        int r = mkdir_p(c->run_dir, 0755);

        if (r < 0)
                return r;
        return mount_beneath_supported(c->run_dir);
}

int tuck_generation(TuckContext *c, const TuckHierarchy *h, Generation *ret) {
        return generation_load(c->run_dir, h->path, ret, NULL);
}

int tuck_staging_mounts(TuckContext *c) {
        _cleanup_free_ char *pin = path_join(c->run_dir, "staging.mnt");
        Staging s = STAGING_INIT;
        int r;

        if (!pin)
                return -ENOMEM;
        if (access(pin, F_OK) < 0)
                return -ENOENT;
        r = staging_open(c->run_dir, &s);
        if (r >= 0)
                r = staging_count_mounts(&s);
        staging_close(&s);
        return r;
}
