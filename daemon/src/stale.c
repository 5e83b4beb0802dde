/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "image-class.h"
#include "log.h"
#include "macro.h"
#include "mountinfo.h"
#include "stale.h"
#include "util.h"

void stale_snapshot_done(StaleSnapshot *s) {
        namespace_views_free(s->views, s->n_views);
        *s = (StaleSnapshot) {};
}

static void add_dev(dev_t *devs, size_t *n, size_t max, dev_t d) {
        if (d == 0 || *n >= max)
                return;
        for (size_t i = 0; i < *n; i++)
                if (devs[i] == d)
                        return;
        devs[(*n)++] = d;
}

size_t stale_ours(const Generation *g, dev_t replaced, dev_t *devs, size_t max) {
        size_t n = 0;

        add_dev(devs, &n, max, replaced);
        if (g) {
                add_dev(devs, &n, max, g->overlay_dev);
                for (size_t i = 0; i < g->n_history; i++)
                        add_dev(devs, &n, max, g->history[i].dev);
        }
        return n;
}

/* ---- what namespaces want: <run_dir>/namespaces/<id>.json, {"<mnt ns inode>": MOUNT_ATTR_*} */

static char *wants_path(const StaleHierarchy *h) {
        _cleanup_free_ char *name = strjoin(h->id, ".json");

        return name ? path_join(h->run_dir, "namespaces", name) : NULL;
}

static int wants_load(const StaleHierarchy *h, NsWant **ret, size_t *ret_n) {
        _cleanup_free_ char *path = wants_path(h);
        json_object *o = NULL;
        NsWant *w;
        size_t n = 0;
        int r;

        *ret = NULL;
        *ret_n = 0;
        if (!path)
                return -ENOMEM;
        r = json_load(path, &o);
        if (r == -ENOENT)
                return 0;
        if (r < 0)
                return r;
        w = calloc(json_object_object_length(o) ?: 1, sizeof(NsWant));
        if (!w) {
                json_object_put(o);
                return -ENOMEM;
        }
        json_object_object_foreach(o, key, value)
                w[n++] = (NsWant) { strtoull(key, NULL, 10), (uint64_t) json_object_get_int64(value) & TUCK_ATTR_MASK };
        json_object_put(o);
        *ret = w;
        *ret_n = n;
        return 0;
}

/* Only the namespaces seen now are kept: the others are gone. */
static int wants_save(const StaleHierarchy *h, const NsWant *w, size_t n) {
        _cleanup_free_ char *path = wants_path(h), *dir = path_join(h->run_dir, "namespaces");
        json_object *o = json_object_new_object();
        int r;

        if (!path || !dir || !o) {
                json_object_put(o);
                return -ENOMEM;
        }
        for (size_t i = 0; i < n; i++) {
                char key[24];

                snprintf(key, sizeof(key), "%" PRIu64, w[i].ns_ino);
                json_object_object_add(o, key, json_object_new_int64((int64_t) w[i].attr));
        }
        r = mkdir_p(dir, 0755);
        if (r >= 0)
                r = json_save(path, o);
        json_object_put(o);
        return r;
}

static uint64_t wanted(const NsWant *w, size_t n, uint64_t ns_ino) {
        for (size_t i = 0; i < n; i++)
                if (w[i].ns_ino == ns_ino)
                        return w[i].attr;
        return 0;
}

/* Each view's wish: what it has now and what it was known to want. Saved for the next pass. */
static int wants_update(const StaleHierarchy *h, const NsWant *old, size_t n_old, const NamespaceView *views,
                        size_t n_views, NsWant **ret) {
        NsWant *w = calloc(n_views ?: 1, sizeof(NsWant));
        int r;

        if (!w)
                return -ENOMEM;
        for (size_t i = 0; i < n_views; i++)
                w[i] = (NsWant) { views[i].ns_ino, (views[i].attr | wanted(old, n_old, views[i].ns_ino)) & TUCK_ATTR_MASK };
        r = wants_save(h, w, n_views);
        if (r < 0)
                log_debug_errno(r, "Cannot record what the namespaces of %s want: %m", h->path);
        *ret = w;
        return 0;
}

/* The mount source of @v's top if it is an overlay, else NULL (owned). */
static char *view_overlay_source(const NamespaceView *v) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_fs *fs;

        if (mount_table_read(v->pid, &tb) < 0)
                return NULL;
        fs = mount_table_find_id(tb, (int) v->mnt_id);
        if (!fs || !streq_ptr(mnt_fs_get_fstype(fs), "overlay") || !mnt_fs_get_source(fs))
                return NULL;
        return strdup(mnt_fs_get_source(fs));
}

static bool dev_in(dev_t d, const dev_t *devs, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (devs[i] == d)
                        return true;
        return false;
}

/* Does @v show one of our overlays (see stale.h)? @live: the host's top, alive. */
static bool view_is_ours(const StaleHierarchy *h, dev_t live, const dev_t *ours, size_t n_ours,
                         const NamespaceView *v) {
        _cleanup_free_ char *source = NULL;
        const ImageClassInfo *info = &image_class_info[h->class];

        if (v->error < 0 || v->dev == live)
                return true;
        if (!dev_in(v->dev, ours, n_ours) && !h->foreign)
                return false;
        source = view_overlay_source(v);
        if (streq_ptr(source, info->foreign_source))
                return true;
        return dev_in(v->dev, ours, n_ours) && streq_ptr(source, info->overlay_source);
}

/* Keep the views that show one of our overlays, drop the others. */
static void keep_ours(const StaleHierarchy *h, dev_t live, const dev_t *ours, size_t n_ours,
                      NamespaceView *views, size_t *n) {
        size_t k = 0;

        for (size_t i = 0; i < *n; i++) {
                if (view_is_ours(h, live, ours, n_ours, &views[i])) {
                        views[k++] = views[i];
                        continue;
                }
                if (dev_in(views[i].dev, ours, n_ours))
                        log_debug("%s: pid %d shows device %u:%u, a number one of our past overlays had: "
                                  "not ours now.", h->path, (int) views[i].pid, major(views[i].dev),
                                  minor(views[i].dev));
                namespace_view_done(&views[i]);
        }
        *n = k;
}

/*
 * Every namespace but ours that shows one of our overlays (@live: the
 * host's top). The scan itself checks that a view on one of @ours is an
 * overlay of tuck's or systemd-sysext's; for a take-over every namespace is
 * read, and those on an overlay of systemd-sysext's are kept too.
 */
static int scan(const StaleHierarchy *h, dev_t live, const dev_t *ours, size_t n_ours,
                NamespaceView **ret, size_t *ret_n) {
        int r;

        if (!h->foreign)
                return namespaces_scan(h->root, h->path, ours, n_ours, NSSCAN_ONLY_OURS | NSSCAN_SKIP_SELF,
                                       ret, ret_n);
        r = namespaces_scan(h->root, h->path, ours, n_ours, NSSCAN_SKIP_SELF, ret, ret_n);
        if (r >= 0)
                keep_ours(h, live, ours, n_ours, *ret, ret_n);
        return r;
}

int stale_before_swap(const StaleHierarchy *h, const dev_t *ours, size_t n_ours, uint64_t new_attr,
                      StaleSnapshot *ret) {
        _cleanup_free_ NsWant *old = NULL, *now = NULL;
        StaleSnapshot s = {};
        size_t n_old = 0;
        struct stat st;
        int r;

        *ret = (StaleSnapshot) {};
        if (n_ours == 0 && !h->foreign)
                return 0;       /* a first merge: nobody can be on an older overlay of ours */
        if (stat(h->path, &st) < 0)
                return -errno;
        r = scan(h, st.st_dev, ours, n_ours, &s.views, &s.n_views);
        if (r < 0)
                return r;
        (void) wants_load(h, &old, &n_old);
        r = wants_update(h, old, n_old, s.views, s.n_views, &now);
        if (r < 0) {
                stale_snapshot_done(&s);
                return r;
        }
        /* The flags each namespace wants, not only those it has now (report may have loosened them). */
        for (size_t i = 0; i < s.n_views; i++)
                s.views[i].attr = now[i].attr;
        if (h->policy == STALE_POLICY_HEAL && s.n_views > 0)
                s.pinned = heal_pin_loosenable(s.views, s.n_views, new_attr);
        *ret = s;
        return 0;
}

/* ---- after */

static int restart_unit(sd_bus **bus, const char *unit) {
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *reply = NULL;
        sd_bus_error error = SD_BUS_ERROR_NULL;
        int r;

        if (!*bus) {
                r = sd_bus_open_system(bus);
                if (r < 0)
                        return r;
        }
        r = sd_bus_call_method(*bus, "org.freedesktop.systemd1", "/org/freedesktop/systemd1",
                               "org.freedesktop.systemd1.Manager", "RestartUnit", &error, &reply,
                               "ss", unit, "replace");
        if (r < 0)
                log_debug("Failed to restart '%s': %s", unit, error.message ?: strerror(-r));
        sd_bus_error_free(&error);
        return r;
}

/* The outcome in words; under restart, the restart (once per unit). */
static int describe(const StaleHierarchy *h, HealReport *rep, sd_bus **bus, char ***restarted) {
        const char *unit = rep->view.unit;
        int r;

        if (rep->view.error < 0)
                return asprintf_safe(&rep->outcome, "cannot read its view: %s", strerror(-rep->view.error));
        if (rep->result == 0)
                return asprintf_safe(&rep->outcome, "healed");
        if (rep->result < 0)
                return asprintf_safe(&rep->outcome, "heal failed: %s", strerror(-rep->result));
        if (h->policy != STALE_POLICY_RESTART)
                return asprintf_safe(&rep->outcome, "reported");
        if (!unit)
                return asprintf_safe(&rep->outcome, "not restarted: no unit");
        if (strv_contains(*restarted, unit))
                return asprintf_safe(&rep->outcome, "restart of %s requested", unit);
        r = strv_extend(restarted, unit);
        if (r < 0)
                return r;
        r = restart_unit(bus, unit);
        if (r < 0)
                return asprintf_safe(&rep->outcome, "restart of %s failed: %s", unit, strerror(-r));
        return asprintf_safe(&rep->outcome, "restart of %s requested", unit);
}

int stale_handle(const StaleHierarchy *h, const dev_t *ours, size_t n_ours, const StaleSnapshot *before,
                 HealReport **ret, size_t *ret_n) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_strv_free_ char **restarted = NULL;
        _cleanup_free_ NsWant *old = NULL, *want = NULL;
        _cleanup_free_ dev_t *all = NULL;
        _cleanup_close_ int host_fd = -EBADF;
        NamespaceView *now = NULL;
        HealReport *reports = NULL;
        size_t n_old = 0, n_now = 0, n = 0;
        struct stat st;
        int r;

        *ret = NULL;
        *ret_n = 0;
        host_fd = open(h->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (host_fd < 0 || fstat(host_fd, &st) < 0)
                return -errno;

        /* Namespaces on an old overlay of ours, and on the new one (whose flags
         * propagation may have loosened). */
        all = malloc((n_ours + 1) * sizeof(dev_t));
        if (!all)
                return -ENOMEM;
        memcpy(all, ours, n_ours * sizeof(dev_t));
        all[n_ours] = st.st_dev;
        r = scan(h, st.st_dev, all, n_ours + 1, &now, &n_now);
        if (r < 0)
                return r;

        /* What each wants: the snapshot before the swap, or what was recorded. */
        if (before) {
                old = calloc(before->n_views ?: 1, sizeof(NsWant));
                if (!old) {
                        namespace_views_free(now, n_now);
                        return -ENOMEM;
                }
                for (size_t i = 0; i < before->n_views; i++)
                        old[n_old++] = (NsWant) { before->views[i].ns_ino, before->views[i].attr };
        } else
                (void) wants_load(h, &old, &n_old);
        r = wants_update(h, old, n_old, now, n_now, &want);
        if (r >= 0)
                r = heal_views(h->root, h->path, host_fd, now, n_now, want, n_now,
                               h->policy == STALE_POLICY_HEAL, &reports, &n);
        namespace_views_free(now, n_now);
        if (r < 0)
                return r;

        for (size_t i = 0; i < n; i++) {
                r = describe(h, &reports[i], &bus, &restarted);
                if (r < 0) {
                        heal_reports_free(reports, n);
                        return r;
                }
        }
        *ret = reports;
        *ret_n = n;
        return 0;
}
