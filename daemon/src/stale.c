/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <systemd/sd-bus.h>
#include <unistd.h>

#include "image-class.h"
#include "log.h"
#include "macro.h"
#include "mountinfo.h"
#include "stale.h"
#include "swap.h"
#include "util.h"

void stale_snapshot_done(StaleSnapshot *s) {
        namespace_views_free(s->views, s->n_views);
        free(s->wants);
        free(s->pins);
        ns_followers_done(&s->followers);
        *s = (StaleSnapshot) {};
}

static void add_dev(dev_t *devs, size_t *n, size_t max, dev_t d) {
        if (d == 0 || *n >= max || dev_in(d, devs, *n))
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

/* ---- what namespaces want: <run_dir>/namespaces/<id>.json (format and witnesses: stale.h) */

static char *wants_path(const StaleHierarchy *h) {
        _cleanup_free_ char *name = strjoin(h->id, ".json");

        return name ? path_join(h->run_dir, "namespaces", name) : NULL;
}

static bool parse_u64(const char *s, uint64_t *ret) {
        char *end;

        errno = 0;
        *ret = strtoull(s, &end, 10);
        return errno == 0 && end != s && *end == '\0' && s[0] != '-';
}

static uint64_t field_u64(json_object *o, const char *key) {
        json_object *v;

        return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_int)
                ? (uint64_t) json_object_get_uint64(v) : 0;
}

static NsWant want_from_json(uint64_t ns_ino, json_object *value) {
        NsWant w = { .ns_ino = ns_ino };
        uint64_t pid;

        if (!json_object_is_type(value, json_type_object)) {
                /* The older form, "<inode>": MOUNT_ATTR_*: no witness. */
                w.attr = (uint64_t) json_object_get_int64(value) & TUCK_ATTR_MASK;
                return w;
        }
        w.attr = field_u64(value, "attr") & TUCK_ATTR_MASK;
        pid = field_u64(value, "pid");
        if (pid > 0 && pid <= INT32_MAX) {
                w.pid = (pid_t) pid;
                w.start_time = field_u64(value, "start_time");
        }
        return w;
}

int ns_wants_from_json(json_object *o, NsWant **ret, size_t *ret_n) {
        NsWant *w;
        size_t n = 0;

        if (!json_object_is_type(o, json_type_object))
                return -EBADMSG;
        w = calloc(json_object_object_length(o) ?: 1, sizeof(NsWant));
        if (!w)
                return -ENOMEM;
        json_object_object_foreach(o, key, value) {
                uint64_t ns_ino;

                if (!parse_u64(key, &ns_ino) || ns_ino == 0) {
                        log_debug("Ignoring a wish for '%s': not a mount namespace inode.", key);
                        continue;
                }
                w[n++] = want_from_json(ns_ino, value);
        }
        *ret = w;
        *ret_n = n;
        return 0;
}

json_object *ns_wants_to_json(const NsWant *w, size_t n) {
        json_object *o = json_object_new_object();

        for (size_t i = 0; o && i < n; i++) {
                json_object *e;
                char key[24];

                if (w[i].pid <= 0)
                        continue;
                e = json_object_new_object();
                if (!e) {
                        json_object_put(o);
                        return NULL;
                }
                json_object_object_add(e, "attr", json_object_new_uint64(w[i].attr));
                json_object_object_add(e, "pid", json_object_new_int64(w[i].pid));
                json_object_object_add(e, "start_time", json_object_new_uint64(w[i].start_time));
                snprintf(key, sizeof(key), "%" PRIu64, w[i].ns_ino);
                json_object_object_add(o, key, e);
        }
        return o;
}

size_t ns_wants_confirm(NsWant *w, size_t n, NsWitnessCheck check, void *userdata) {
        size_t k = 0;

        for (size_t i = 0; i < n; i++) {
                if (w[i].pid > 0 && check(&w[i], userdata)) {
                        w[k++] = w[i];
                        continue;
                }
                if (w[i].pid > 0)
                        log_debug("Dropping what mount namespace %" PRIu64 " was known to want (0x%" PRIx64 "): "
                                  "its witness, pid %d started at %" PRIu64 ", is not in it any more, and its "
                                  "inode may be another namespace's now.",
                                  w[i].ns_ino, w[i].attr, (int) w[i].pid, w[i].start_time);
                else
                        log_debug("Dropping what mount namespace %" PRIu64 " was known to want (0x%" PRIx64 "): "
                                  "recorded without a witness, it cannot be told from a namespace given its inode since.",
                                  w[i].ns_ino, w[i].attr);
        }
        return k;
}

uint64_t ns_wanted(const NsWant *w, size_t n, uint64_t ns_ino) {
        for (size_t i = 0; i < n; i++)
                if (w[i].ns_ino == ns_ino)
                        return w[i].attr;
        return 0;
}

int proc_stat_start_time(const char *stat, uint64_t *ret) {
        /* "PID (COMM) STATE ...": the comm may hold spaces and parentheses, the last ')' ends it. */
        const char *p = strrchr(stat, ')');
        unsigned long long t;
        char *end;

        if (!p)
                return -EBADMSG;
        p++;
        for (unsigned field = 3; field <= 22; field++) {
                if (*p != ' ')
                        return -EBADMSG;
                p++;
                if (field < 22)
                        p += strcspn(p, " ");
        }
        if (*p < '0' || *p > '9')
                return -EBADMSG;
        errno = 0;
        t = strtoull(p, &end, 10);
        if (errno != 0 || (*end != ' ' && *end != '\n' && *end != '\0'))
                return -EBADMSG;
        *ret = t;
        return 0;
}

int ns_witness_read(pid_t pid, uint64_t *ret_ns_ino, uint64_t *ret_start_time) {
        _cleanup_close_ int fd = -EBADF;
        _cleanup_free_ char *stat = NULL;
        uint64_t start_time;
        struct stat st;
        int r;

        if (pid <= 0)
                return -ESRCH;
        /* Both through one fd of /proc/PID: once that process is gone, lookups below it fail
         * with ESRCH even if its pid was given to another, so both facts are of one process. */
        fd = proc_open(pid, "", O_RDONLY | O_DIRECTORY);
        if (fd < 0)
                return fd == -ENOENT ? -ESRCH : fd;
        r = read_full_file_at(fd, "stat", 4096, &stat);
        if (r < 0)
                return r;
        r = proc_stat_start_time(stat, &start_time);
        if (r < 0)
                return r;
        if (fstatat(fd, "ns/mnt", &st, 0) < 0)
                return -errno;
        *ret_ns_ino = st.st_ino;
        *ret_start_time = start_time;
        return 0;
}

bool ns_witness_check(const NsWant *w, void *userdata) {
        uint64_t ns_ino, start_time;

        return ns_witness_read(w->pid, &ns_ino, &start_time) >= 0 &&
                ns_ino == w->ns_ino && start_time == w->start_time;
}

/* The wishes recorded for @h whose witnesses still stand. */
static int wants_load(const StaleHierarchy *h, NsWant **ret, size_t *ret_n) {
        _cleanup_free_ char *path = wants_path(h), *error = NULL;
        json_object *o = NULL;
        int r;

        *ret = NULL;
        *ret_n = 0;
        if (!path)
                return -ENOMEM;
        r = json_parse_file(path, &o, &error);
        if (r == -ENOENT)
                return 0;
        if (r >= 0) {
                r = ns_wants_from_json(o, ret, ret_n);
                json_object_put(o);
        }
        if (r < 0) {
                /* Said, then started afresh: the wishes are re-learned from what the namespaces have now. */
                log_warning("Ignoring %s: %s.", path, error ?: strerror(-r));
                return r;
        }
        *ret_n = ns_wants_confirm(*ret, *ret_n, ns_witness_check, NULL);
        return 0;
}

/* Only the namespaces seen now are kept: the others are gone. */
static int wants_save(const StaleHierarchy *h, const NsWant *w, size_t n) {
        _cleanup_free_ char *path = wants_path(h), *dir = path_join(h->run_dir, "namespaces");
        json_object *o = ns_wants_to_json(w, n);
        int r;

        if (!path || !dir || !o) {
                json_object_put(o);
                return -ENOMEM;
        }
        r = mkdir_p(dir, 0755);
        if (r >= 0)
                r = json_save(path, o);
        json_object_put(o);
        return r;
}

/* @v's process, if it is still in @v's namespace, as the witness of @w. */
static void want_witness(NsWant *w, const NamespaceView *v) {
        uint64_t ns_ino, start_time;
        int r;

        r = ns_witness_read(v->pid, &ns_ino, &start_time);
        if (r >= 0 && ns_ino != v->ns_ino)
                r = -ESRCH;
        if (r < 0) {
                log_debug_errno(r, "No witness for mount namespace %" PRIu64 " (pid %d): its wish is not "
                                "recorded: %m", v->ns_ino, (int) v->pid);
                return;
        }
        w->pid = v->pid;
        w->start_time = start_time;
}

/*
 * Each view's wish: what it has now and what it was known to want (@old,
 * confirmed), with a witness. Saved for the next pass. Only wishes beyond
 * the host's own flags @host_attr are worth a witness and a line in the
 * file: a swap cannot loosen a namespace below what the host has (the new
 * overlay never has fewer flags than the top it replaces), and reading a
 * witness per namespace would make the cost of every swap grow with the
 * number of namespaces that simply follow.
 */
static int wants_update(const StaleHierarchy *h, const NsWant *old, size_t n_old, const NamespaceView *views,
                        size_t n_views, uint64_t host_attr, NsWant **ret) {
        NsWant *w = calloc(n_views ?: 1, sizeof(NsWant));
        int r;

        if (!w)
                return -ENOMEM;
        for (size_t i = 0; i < n_views; i++) {
                w[i] = (NsWant) {
                        .ns_ino = views[i].ns_ino,
                        .attr = (views[i].attr | ns_wanted(old, n_old, views[i].ns_ino)) & TUCK_ATTR_MASK,
                };
                if (w[i].attr & ~host_attr & TUCK_ATTR_MASK)
                        want_witness(&w[i], &views[i]);
        }
        r = wants_save(h, w, n_views);
        if (r < 0)
                log_debug_errno(r, "Cannot record what the namespaces of %s want: %m", h->path);
        *ret = w;
        return 0;
}

/* Does @v show one of our overlays (see stale.h)? @live: the host's top, alive. */
static bool view_is_ours(const StaleHierarchy *h, dev_t live, const dev_t *ours, size_t n_ours,
                         const NamespaceView *v) {
        const ImageClassInfo *info = &image_class_info[h->class];

        if (v->error < 0 || v->dev == live)
                return true;
        if (!dev_in(v->dev, ours, n_ours) && !h->foreign)
                return false;
        /* The scan read the mount table of every view it could not decide by number. */
        if (streq_ptr(v->source, info->foreign_source))
                return true;
        return dev_in(v->dev, ours, n_ours) && streq_ptr(v->source, info->overlay_source);
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
static int scan(const StaleHierarchy *h, dev_t live, uint64_t host_attr, const dev_t *ours, size_t n_ours,
                const NsWant *wants, size_t n_wants, NsFollowers *followers_out, NsFollowers *followers_in,
                NamespaceView **ret, size_t *ret_n) {
        _cleanup_free_ uint64_t *watch = calloc(n_wants ?: 1, sizeof(uint64_t));
        NsScanSpec spec = {
                .root = h->root,
                .path = h->path,
                .live = live,
                .ours = ours,
                .n_ours = n_ours,
                .host_attr = host_attr,
                .watch = watch,
                .n_watch = n_wants,
                /* A namespace on the host's top with the host's flags follows every swap by
                 * propagation and has nothing to lose: not even a pidfd or a name for it. Those
                 * that want more than they have are watched by inode (their wishes). The others
                 * are named at the scan, by the process the scan read. */
                .flags = NSSCAN_SKIP_SELF | NSSCAN_SKIP_FOLLOWING | NSSCAN_IDENTIFY |
                         (h->foreign ? NSSCAN_ANY_CANDIDATE : 0),
                .budget = h->budget,
                .followers_out = followers_out,
                .followers_in = followers_in,
        };
        int r;

        if (!watch)
                return -ENOMEM;
        for (size_t i = 0; i < n_wants; i++)
                watch[i] = wants[i].ns_ino;
        r = namespaces_scan(&spec, ret, ret_n);
        if (r >= 0 && h->foreign)
                keep_ours(h, live, ours, n_ours, *ret, ret_n);
        return r;
}

int stale_before_swap(const StaleHierarchy *h, const dev_t *ours, size_t n_ours, uint64_t new_attr,
                      StaleSnapshot *ret) {
        _cleanup_free_ NsWant *old = NULL;
        StaleSnapshot s = {};
        size_t n_old = 0;
        uint64_t host_attr;
        struct stat st;
        int r;

        *ret = (StaleSnapshot) {};
        if (n_ours == 0 && !h->foreign)
                return 0;       /* a first merge: nobody can be on an older overlay of ours */
        if (stat(h->path, &st) < 0)
                return -errno;
        r = path_get_mount_attr(AT_FDCWD, h->path, &host_attr);
        if (r < 0)
                return r;
        (void) wants_load(h, &old, &n_old);
        r = scan(h, st.st_dev, host_attr, ours, n_ours, old, n_old, &s.followers, NULL, &s.views, &s.n_views);
        if (r < 0) {
                stale_snapshot_done(&s);        /* the followers it kept before it failed */
                return r;
        }
        r = wants_update(h, old, n_old, s.views, s.n_views, host_attr, &s.wants);
        if (r < 0) {
                stale_snapshot_done(&s);
                return r;
        }
        /* The flags each namespace wants, not only those it has now (report may have loosened them). */
        for (size_t i = 0; i < s.n_views; i++)
                s.views[i].attr = s.wants[i].attr;
        if (h->policy == STALE_POLICY_HEAL && s.n_views > 0) {
                s.pins = calloc(s.n_views, sizeof(uint64_t));
                if (!s.pins) {
                        stale_snapshot_done(&s);
                        return -ENOMEM;
                }
                s.pinned = heal_pin_loosenable(s.views, s.n_views, new_attr, h->budget, s.pins);
        }
        *ret = s;
        return 0;
}

void stale_unpin(const StaleHierarchy *h, StaleSnapshot *s) {
        if (s->pinned <= 0)
                return;
        heal_unpin(s->views, s->n_views, s->pins, h->budget);
        s->pinned = 0;
        memset(s->pins, 0, s->n_views * sizeof(uint64_t));
}

/* ---- after */

int stale_restart_allowed(const NamespaceView *v, char * const *allowed, const char **ret_reason) {
        if (!v->unit) {
                *ret_reason = "no unit";
                return 0;
        }
        /* A user's manager names its units as it likes: its "systemd-reboot.service" is not the
         * system's. sd_pid_get_unit() says user@UID.service for these; never restart that either. */
        if (v->user_unit || v->owner_uid != UID_INVALID || startswith(v->unit, "user@")) {
                *ret_reason = "a user's process, not a system unit's";
                return 0;
        }
        if (!endswith(v->unit, ".service")) {
                *ret_reason = "its unit is not a service";
                return 0;
        }
        if (!strv_contains(allowed, v->unit)) {
                *ret_reason = "its unit is not in RestartUnits=";
                return 0;
        }
        *ret_reason = NULL;
        return 1;
}

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

/* Under restart, the restart of @rep's unit (once per unit), if policy and process allow it. */
static int describe_restart(const StaleHierarchy *h, HealReport *rep, sd_bus **bus, char ***restarted) {
        _cleanup_free_ char *unit = name_escape(rep->view.unit);
        const char *reason;
        int r;

        if (!stale_restart_allowed(&rep->view, h->restart_units, &reason))
                return asprintf_safe(&rep->outcome, "not restarted: %s", reason);
        /* The unit was read from the process the scan found, by its pidfd: it must still be
         * running now, not another process given its pid meanwhile. */
        if (pidfd_check_alive(rep->view.pidfd) < 0)
                return asprintf_safe(&rep->outcome, "not restarted: its process is gone");
        if (strv_contains(*restarted, rep->view.unit))
                return asprintf_safe(&rep->outcome, "restart of %s requested", unit);
        r = strv_extend(restarted, rep->view.unit);
        if (r < 0)
                return r;
        r = restart_unit(bus, rep->view.unit);
        if (r < 0)
                return asprintf_safe(&rep->outcome, "restart of %s failed: %s", unit, strerror(-r));
        return asprintf_safe(&rep->outcome, "restart of %s requested", unit);
}

/* The outcome in words; under restart, the restart. */
static int describe(const StaleHierarchy *h, HealReport *rep, sd_bus **bus, char ***restarted) {
        if (rep->view.error < 0)
                return asprintf_safe(&rep->outcome, "cannot read its view: %s", namespace_view_error(&rep->view));
        if (rep->result == 0 && rep->finished)
                return asprintf_safe(&rep->outcome, "healed: finished the heal stopped halfway before, the %u "
                                     "mount%s below its top kept", rep->carried, rep->carried == 1 ? "" : "s");
        if (rep->result == 0 && rep->left_halfway)
                return asprintf_safe(&rep->outcome, "healed, %u mount%s of its own carried over; the tree of a heal "
                                     "stopped halfway before stays beneath, holding its generation's images (it "
                                     "lacks flags wanted now; restart the unit to free them)", rep->carried,
                                     rep->carried == 1 ? "" : "s");
        if (rep->result == 0 && rep->carried > 0)
                return asprintf_safe(&rep->outcome, "healed, %u mount%s of its own carried over", rep->carried,
                                     rep->carried == 1 ? "" : "s");
        if (rep->result == 0)
                return asprintf_safe(&rep->outcome, "healed");
        if (rep->result == -ESRCH)
                return asprintf_safe(&rep->outcome, "not healed: its process is gone");
        if (rep->result == -EPERM && rep->reason)
                return asprintf_safe(&rep->outcome, "not healed: %s", rep->reason);
        if (rep->result < 0 && rep->stage == SWAP_HIDDEN)
                return asprintf_safe(&rep->outcome, "heal failed: %s (it still sees the old generation; the next "
                                     "heal finishes it)", rep->reason ?: strerror(-rep->result));
        if (rep->result < 0)
                return asprintf_safe(&rep->outcome, "heal failed, nothing changed there: %s",
                                     rep->reason ?: strerror(-rep->result));
        if (h->policy != STALE_POLICY_RESTART)
                return asprintf_safe(&rep->outcome, "reported");
        return describe_restart(h, rep, bus, restarted);
}

static char *clean_path(const StaleHierarchy *h) {
        _cleanup_free_ char *name = strjoin(h->id, ".clean");

        return name ? path_join(h->run_dir, "namespaces", name) : NULL;
}

/* The wishes file as the last scan left it: any other writer (a hand edit) voids the skip. */
static uint64_t wishes_stamp(const StaleHierarchy *h) {
        _cleanup_free_ char *path = wants_path(h);
        struct stat st;
        uint64_t x = FNV64_INIT;

        if (!path || stat(path, &st) < 0)
                return 0;
        x = fnv64(x, &st.st_ino, sizeof(st.st_ino));
        x = fnv64(x, &st.st_size, sizeof(st.st_size));
        x = fnv64(x, &st.st_mtim, sizeof(st.st_mtim));
        return x;
}

static int dev_compare(const void *a, const void *b) {
        dev_t x = *(const dev_t *) a, y = *(const dev_t *) b;

        return x < y ? -1 : x > y;
}

/*
 * The devices a scan looks for: the record's history may change without a
 * swap (a take-over). As a set: the scan right after a swap lists the
 * replaced top first, a later one finds it in the history, and both look
 * for the same overlays.
 */
static uint64_t ours_stamp(const dev_t *ours, size_t n_ours) {
        dev_t sorted[GENERATION_HISTORY_MAX + 2];
        uint64_t x = FNV64_INIT;
        size_t n = n_ours < ELEMENTSOF(sorted) ? n_ours : ELEMENTSOF(sorted);

        memcpy(sorted, ours, n * sizeof(dev_t));
        qsort(sorted, n, sizeof(dev_t), dev_compare);
        for (size_t i = 0; i < n; i++)
                if (i == 0 || sorted[i] != sorted[i - 1])
                        x = fnv64(x, &sorted[i], sizeof(dev_t));
        return x;
}

bool stale_scan_needed(const StaleHierarchy *h, const Generation *g, dev_t top_dev, uint64_t top_mnt_id,
                       const dev_t *ours, size_t n_ours) {
        _cleanup_free_ char *path = clean_path(h);
        json_object *o = NULL;
        bool same;

        if (!path || !g || !g->merged || json_load(path, &o) < 0)
                return true;
        same = field_u64(o, "generation") == g->number && field_u64(o, "dev") == (uint64_t) g->overlay_dev &&
               field_u64(o, "mnt_id") == g->overlay_mnt_id && top_dev == g->overlay_dev &&
               top_mnt_id == g->overlay_mnt_id && field_u64(o, "wishes") == wishes_stamp(h) &&
               field_u64(o, "ours") == ours_stamp(ours, n_ours);
        json_object_put(o);
        return !same;
}

/* Every namespace the scan found was read and healed: none is behind now. */
static bool all_healed(const HealReport *reports, size_t n) {
        for (size_t i = 0; i < n; i++)
                if (reports[i].view.error < 0 || reports[i].result != 0)
                        return false;
        return true;
}

/* After a complete scan: clean (nothing behind) at @g, or not. */
static void clean_record(const StaleHierarchy *h, const Generation *g, dev_t top_dev, uint64_t top_mnt_id,
                         const dev_t *ours, size_t n_ours, bool clean) {
        _cleanup_free_ char *path = clean_path(h), *dir = path_join(h->run_dir, "namespaces");
        json_object *o;

        if (!path || !dir)
                return;
        if (!clean || !g || !g->merged || top_dev != g->overlay_dev || top_mnt_id != g->overlay_mnt_id) {
                (void) unlink(path);
                return;
        }
        o = json_object_new_object();
        if (!o)
                return;
        json_object_object_add(o, "generation", json_object_new_uint64(g->number));
        json_object_object_add(o, "dev", json_object_new_uint64((uint64_t) g->overlay_dev));
        json_object_object_add(o, "mnt_id", json_object_new_uint64(g->overlay_mnt_id));
        json_object_object_add(o, "wishes", json_object_new_uint64(wishes_stamp(h)));
        json_object_object_add(o, "ours", json_object_new_uint64(ours_stamp(ours, n_ours)));
        if (mkdir_p(dir, 0755) < 0 || json_save(path, o) < 0)
                (void) unlink(path);
        json_object_put(o);
}

int stale_handle(const StaleHierarchy *h, const dev_t *ours, size_t n_ours, StaleSnapshot *before,
                 HealReport **ret, size_t *ret_n) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_strv_free_ char **restarted = NULL;
        _cleanup_free_ NsWant *old = NULL, *want = NULL;
        _cleanup_free_ dev_t *all = NULL;
        _cleanup_close_ int host_fd = -EBADF;
        NamespaceView *now = NULL;
        HealReport *reports = NULL;
        size_t n_old = 0, n_now = 0, n = 0;
        uint64_t host_attr = 0, host_mnt_id = 0;
        struct stat st;
        int r;

        *ret = NULL;
        *ret_n = 0;
        host_fd = open(h->path, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (host_fd < 0 || fstat(host_fd, &st) < 0)
                return -errno;
        (void) path_get_mount_attr(host_fd, "", &host_attr);
        (void) path_get_mnt_id(host_fd, "", &host_mnt_id);

        /* Nothing swapped, and nothing was behind at the last complete scan: nothing can be now. */
        if (!before && !stale_scan_needed(h, h->generation, st.st_dev, host_mnt_id, ours, n_ours)) {
                log_debug("%s: no namespace was behind generation %" PRIu64 " at its last scan, and it is "
                          "still in place: not scanned.", h->path, h->generation->number);
                return 0;
        }

        /* Namespaces on an old overlay of ours, and on the new one (whose flags
         * propagation may have loosened). */
        all = malloc((n_ours + 1) * sizeof(dev_t));
        if (!all)
                return -ENOMEM;
        memcpy(all, ours, n_ours * sizeof(dev_t));
        all[n_ours] = st.st_dev;

        /* What each wants: the snapshot before the swap (its witnesses checked again: a
         * namespace may have died meanwhile and its inode gone to another), or what was recorded. */
        if (before) {
                old = calloc(before->n_views ?: 1, sizeof(NsWant));
                if (!old)
                        return -ENOMEM;
                if (before->wants)
                        memcpy(old, before->wants, before->n_views * sizeof(NsWant));
                n_old = ns_wants_confirm(old, before->n_views, ns_witness_check, NULL);
        } else
                (void) wants_load(h, &old, &n_old);
        r = scan(h, st.st_dev, host_attr, all, n_ours + 1, old, n_old, NULL, before ? &before->followers : NULL,
                 &now, &n_now);
        if (before)
                ns_followers_done(&before->followers);  /* those not found again */
        if (r < 0)
                return r;
        r = wants_update(h, old, n_old, now, n_now, host_attr, &want);
        if (r >= 0)
                r = heal_views(h->root, h->path, host_fd, now, n_now, want, n_now,
                               h->policy == STALE_POLICY_HEAL, h->budget, &reports, &n);
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
        clean_record(h, h->generation, st.st_dev, host_mnt_id, ours, n_ours, all_healed(reports, n));
        *ret = reports;
        *ret_n = n;
        return 0;
}
