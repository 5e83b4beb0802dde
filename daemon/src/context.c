/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
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
        c->config.stale_policy = n.stale_policy;
        strv_free(c->config.restart_units);
        c->config.restart_units = TAKE_PTR(n.restart_units);
        c->config.scan_namespace_usec = n.scan_namespace_usec;
        c->config.scan_refresh_usec = n.scan_refresh_usec;
        c->config.scan_max_mounts = n.scan_max_mounts;
        config_done(&n);
        return 0;
}

static int add_hierarchy(TuckContext *c, const char *path, ImageClass k, char **ret_error) {
        TuckHierarchy *a;

        for (size_t i = 0; i < c->n_hierarchies; i++)
                if (streq(c->hierarchies[i].path, path)) {
                        (void) asprintf_safe(ret_error, "hierarchy %s is configured for both %s and %s", path,
                                             image_class_to_string(c->hierarchies[i].class), image_class_to_string(k));
                        return -EINVAL;
                }
        if (streq(path, "/")) {
                (void) asprintf_safe(ret_error, "'/' cannot be a hierarchy");
                return -EINVAL;
        }
        a = realloc(c->hierarchies, sizeof(TuckHierarchy) * (c->n_hierarchies + 1));
        if (!a)
                return -ENOMEM;
        c->hierarchies = a;
        a[c->n_hierarchies] = (TuckHierarchy) {
                .path = strdup(path),
                .full = context_path(c, path),
                .id = hierarchy_id(path),
                .class = k,
        };
        c->n_hierarchies++;
        if (!a[c->n_hierarchies - 1].path || !a[c->n_hierarchies - 1].full || !a[c->n_hierarchies - 1].id)
                return -ENOMEM;
        return 0;
}

int tuck_context_new(const char *root, const char *config, TuckContext **ret, char **ret_error) {
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

        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                STRV_FOREACH(h, c->config.hierarchies[k]) {
                        r = add_hierarchy(c, *h, k, ret_error);
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
