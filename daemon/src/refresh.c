/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The refresh: how tuck replaces the extension overlay of /usr, /opt and /etc
 * without a moment where anyone sees the bare base. merge, refresh and
 * unmerge are one algorithm:
 *
 *   1. discover    images in the search directories (image.c)
 *   2. inspect     mount each new image detached and read its release file;
 *                  unchanged images are read where they are already staged
 *   3. observe     each hierarchy: our generation record, and what is on top now
 *   4. plan        per hierarchy, keep / merge / refresh / take over / unmerge /
 *                  refuse (plan.c: policy, anti-downgrade, no-op)
 *   5. execute     per hierarchy, independently:
 *        a. base     capture it once, before the first merge: a private clone,
 *                    peeled out from under systemd-sysext's overlay if needed
 *        b. stage    attach new images in the staging namespace (staging.c)
 *        c. assemble the overlay there, re-attach clones of nested mounts,
 *                    clone it out detached and private with its flags (overlay.c)
 *        d. swap     first merge: on top; otherwise MOVE_MOUNT_BENEATH beneath
 *                    the live top, then unmount the old top (swap.c)
 *        e. record   the generation (/run/tuck) and versions (/var/lib/tuck)
 *   6. collect     unmount staged images no generation uses any more
 *
 * Every step before 5d works in the staging namespace or on detached mounts:
 * if one fails, the host's mount table is exactly as it was.
 */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "context.h"
#include "log.h"
#include "mount-api.h"
#include "mountinfo.h"
#include "overlay.h"
#include "plan.h"
#include "staging.h"
#include "status.h"
#include "swap.h"
#include "util.h"
#include "version.h"

typedef struct Inspected {
        int mount_fd;        /* a new image, mounted detached, not yet staged */
        char *loop;
        unsigned staged_id;  /* already in the staging namespace at i/<id> */
} Inspected;

typedef struct Run {
        TuckContext *c;
        const TuckOptions *o;
        TuckVerb verb;
        Report *report;
        HostRelease host;
        Staging staging;
        StagingTable table;
        json_object *versions;
        Image **images;
        size_t n_images;
        Inspected *inspected;        /* parallel to images */
        Generation *generations;     /* parallel to c->hierarchies; number 0 if none */
        PlanHierarchyInput *inputs;
        size_t n_inputs;
        size_t *input_index;         /* input -> index in c->hierarchies */
        Plan plan;
        int beneath;                 /* -1: not probed yet */
} Run;

static bool class_selected(const TuckOptions *o, ImageClass k) {
        return o->classes == 0 || (o->classes & (1u << k));
}

static void run_done(Run *run) {
        for (size_t i = 0; i < run->n_images; i++) {
                safe_close(run->inspected[i].mount_fd);
                free(run->inspected[i].loop);
        }
        free(run->inspected);
        if (run->images)
                images_free(run->images, run->n_images);
        for (size_t i = 0; run->generations && i < run->c->n_hierarchies; i++)
                generation_done(&run->generations[i]);
        free(run->generations);
        for (size_t i = 0; i < run->n_inputs; i++)
                free(run->inputs[i].live.description);
        free(run->inputs);
        free(run->input_index);
        plan_done(&run->plan);
        staging_close(&run->staging);
        staging_table_done(&run->table);
        json_object_put(run->versions);
        host_release_done(&run->host);
}

/* 1. discover */
static int run_discover(Run *run) {
        for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                Image **found = NULL, **a;
                size_t n = 0;
                int r;

                if (!class_selected(run->o, k))
                        continue;
                r = images_discover(run->c->root, k, run->c->config.search_dirs[k], &found, &n);
                if (r < 0)
                        return report_set_error(run->report, r, "Failed to look for %s images: %s",
                                                image_class_to_string(k), strerror(-r));
                /* Never realloc(p, 0): glibc frees p and returns NULL (then freed twice). */
                a = realloc(run->images, sizeof(Image *) * (run->n_images + n ?: 1));
                if (!a) {
                        images_free(found, n);
                        return -ENOMEM;
                }
                run->images = a;
                memcpy(run->images + run->n_images, found, sizeof(Image *) * n);
                run->n_images += n;
                free(found);
        }
        run->inspected = calloc(run->n_images ?: 1, sizeof(Inspected));
        if (!run->inspected)
                return -ENOMEM;
        for (size_t i = 0; i < run->n_images; i++)
                run->inspected[i].mount_fd = -EBADF;
        return 0;
}

static int mark_invalid(Image *i, const char *fmt, ...) _printf_(2, 3);
static int mark_invalid(Image *i, const char *fmt, ...) {
        va_list ap;
        int r;

        i->inspected = true;
        i->valid = false;
        free(i->reason);
        va_start(ap, fmt);
        r = vasprintf(&i->reason, fmt, ap);
        va_end(ap);
        return r < 0 ? -ENOMEM : 0;
}

/* A tree fd for reading the image: where it is staged, or a fresh detached mount. */
static int image_tree_fd(Run *run, size_t idx, int *ret_fd) {
        Image *img = run->images[idx];
        Inspected *x = &run->inspected[idx];
        StagedImage *s;
        int r;

        s = staging_table_find(&run->table, img->class, img->fingerprint);
        if (s) {
                _cleanup_free_ char *rel = NULL;

                if (asprintf_safe(&rel, "i/%u", s->id) < 0)
                        return -ENOMEM;
                r = staging_enter(&run->staging);
                if (r >= 0)
                        r = staging_open_path(&run->staging, rel);
                (void) staging_leave(&run->staging);
                if (r >= 0) {
                        x->staged_id = s->id;
                        *ret_fd = r;
                        return 0;
                }
                /* Gone from the staging namespace: forget it and mount afresh. */
                staging_table_remove(&run->table, s->id);
        }

        r = image_mount_detached(img, &x->mount_fd, &x->loop);
        if (r < 0)
                return r;
        *ret_fd = fcntl(x->mount_fd, F_DUPFD_CLOEXEC, 3);
        return *ret_fd < 0 ? -errno : 0;
}

/* 2. inspect */
static int run_inspect(Run *run) {
        int r;

        for (size_t i = 0; i < run->n_images; i++) {
                Image *img = run->images[i];
                _cleanup_close_ int fd = -EBADF;
                char * const *hierarchies = run->c->config.hierarchies[img->class];

                if (img->state != IMAGE_CANDIDATE)
                        continue;
                if (img->type == IMAGE_TYPE_GPT)
                        r = mark_invalid(img, "GPT disk images (DDIs) are not supported yet; use a bare squashfs "
                                         "or erofs .raw image");
                else if (img->type == IMAGE_TYPE_UNSUPPORTED)
                        r = mark_invalid(img, "%s%s%s", img->fstype ? "file system '" : "no squashfs or erofs "
                                         "file system found", strempty(img->fstype),
                                         img->fstype ? "' is not supported (squashfs and erofs only)" : "");
                else if ((r = image_fingerprint(img)) < 0)
                        r = mark_invalid(img, "cannot read: %s", strerror(-r));
                else if ((r = image_tree_fd(run, i, &fd)) < 0)
                        r = mark_invalid(img, "cannot mount: %s", strerror(-r));
                else
                        r = image_validate(img, fd, &run->host, run->c->root, hierarchies);
                if (r < 0)
                        return r;
                if (!img->valid)
                        (void) report_warn(run->report, "Skipped %s image '%s': %s", image_class_to_string(img->class),
                                           img->path, img->reason);
        }
        return 0;
}

/* What sits on top of a hierarchy now. */
static int observe_live(const TuckHierarchy *h, const Generation *g, LiveState *ret) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        struct libmnt_fs *top, *fs;
        struct stat st;
        uint64_t id;
        int r;

        *ret = (LiveState) { .top = TOP_BASE };
        r = mount_table_read(0, &tb);
        if (r < 0)
                return r;
        if (stat(h->full, &st) < 0)
                return -errno;
        r = path_get_mnt_id(AT_FDCWD, h->full, &id);
        if (r < 0)
                return r;
        r = path_get_mount_attr(AT_FDCWD, h->full, &ret->attr);
        if (r < 0)
                return r;
        ret->top_mnt_id = id;
        ret->top_dev = st.st_dev;

        top = mount_table_find_id(tb, (int) id);
        if (!top || !streq_ptr(mnt_fs_get_target(top), h->full))
                return 0;   /* not a mount point: the base, part of its parent */

        (void) asprintf_safe(&ret->description, "%s '%s' (mount %" PRIu64 ")", strna(mnt_fs_get_fstype(top)),
                             strna(mnt_fs_get_source(top)), id);

        if (g && g->merged && g->overlay_dev == st.st_dev && g->overlay_mnt_id == id) {
                ret->top = TOP_OURS;
                return 0;
        }
        if (g && g->merged) {
                /* Our overlay below something else? Then someone stacked on it: hands off. */
                for (fs = top; fs; fs = mount_table_find_id(tb, mnt_fs_get_parent_id(fs))) {
                        if (!streq_ptr(mnt_fs_get_target(fs), h->full))
                                break;
                        if ((uint64_t) mnt_fs_get_id(fs) == g->overlay_mnt_id) {
                                ret->top = TOP_OTHER;
                                return 0;
                        }
                }
        }
        if (streq_ptr(mnt_fs_get_fstype(top), "overlay") &&
            (streq_ptr(mnt_fs_get_source(top), "sysext") || streq_ptr(mnt_fs_get_source(top), "confext")))
                ret->top = TOP_SYSTEMD;
        /* Ours, but not the recorded one: a refresh was killed between its swap
         * and its record. Replace it the same way (beneath, base peeled out);
         * taken for the base, it would be stacked on and leak. */
        if (streq_ptr(mnt_fs_get_fstype(top), "overlay") &&
            streq_ptr(mnt_fs_get_source(top), image_class_info[h->class].overlay_source))
                ret->top = TOP_SYSTEMD;
        return 0;
}

/* 3. observe */
static int run_observe(Run *run) {
        run->generations = calloc(run->c->n_hierarchies ?: 1, sizeof(Generation));
        run->inputs = calloc(run->c->n_hierarchies ?: 1, sizeof(PlanHierarchyInput));
        run->input_index = calloc(run->c->n_hierarchies ?: 1, sizeof(size_t));
        if (!run->generations || !run->inputs || !run->input_index)
                return -ENOMEM;

        for (size_t i = 0; i < run->c->n_hierarchies; i++) {
                const TuckHierarchy *h = &run->c->hierarchies[i];
                Generation *g = &run->generations[i];
                PlanHierarchyInput *in;
                int r;

                r = generation_load(run->c->run_dir, h->path, g);
                if (r == -ENOENT) {
                        *g = (Generation) { .class = h->class };
                        g->hierarchy = strdup(h->path);
                        if (!g->hierarchy)
                                return -ENOMEM;
                } else if (r < 0)
                        return report_set_error(run->report, r, "Failed to read the generation record of %s: %s",
                                                h->path, strerror(-r));

                if (!class_selected(run->o, h->class))
                        continue;
                if (access(h->full, F_OK) < 0 && errno == ENOENT) {
                        /* Like systemd-sysext: a hierarchy that does not exist here is skipped. */
                        HierarchyReport *hr = report_add(run->report, h->path, h->class);

                        if (!hr)
                                return -ENOMEM;
                        hierarchy_report_set(hr, OUTCOME_NOTHING, 0, "%s does not exist here, skipped", h->full);
                        continue;
                }
                in = &run->inputs[run->n_inputs];
                run->input_index[run->n_inputs++] = i;
                *in = (PlanHierarchyInput) {
                        .hierarchy = h->path,
                        .class = h->class,
                        .current = g->number > 0 ? g : NULL,
                };
                r = observe_live(h, g, &in->live);
                if (r < 0)
                        return report_set_error(run->report, r, "Failed to look at %s: %s", h->full, strerror(-r));
        }
        return 0;
}

/* 4. plan */
static int run_plan(Run *run) {
        PlanInput in = {
                .verb = run->verb,
                .images = run->images,
                .n_images = run->n_images,
                .hierarchies = run->inputs,
                .n_hierarchies = run->n_inputs,
                .versions = run->versions,
                .force = run->o->force,
                .allow_downgrade = run->o->allow_downgrade || run->c->config.allow_downgrade,
                .remove = run->o->remove,
        };

        return plan_build(&in, &run->plan);
}

static int copy_layers(HierarchyReport *hr, const Generation *g) {
        if (!g || !g->merged || g->n_layers == 0)
                return 0;
        hr->layers = calloc(g->n_layers, sizeof(Layer));
        if (!hr->layers)
                return -ENOMEM;
        for (size_t i = 0; i < g->n_layers; i++) {
                const Layer *l = &g->layers[i];

                hr->layers[i] = (Layer) {
                        .name = strdup(l->name),
                        .extension = strdup(l->extension),
                        .version = l->version ? strdup(l->version) : NULL,
                        .image = l->image ? strdup(l->image) : NULL,
                        .fingerprint = strdup(l->fingerprint),
                };
                hr->n_layers++;
        }
        return 0;
}

static int staging_is_mounted(Staging *s, const char *rel) {
        _cleanup_free_ char *parent = strdup(rel);
        uint64_t a, b;
        char *slash;

        if (!parent)
                return -ENOMEM;
        slash = strrchr(parent, '/');
        if (slash)
                *slash = 0;
        if (path_get_mnt_id(AT_FDCWD, rel, &a) < 0)
                return 0;
        if (path_get_mnt_id(AT_FDCWD, slash ? parent : ".", &b) < 0)
                return 0;
        return a != b;
}

/* 5a. The base: a private clone of the hierarchy as it was before the first merge. */
static int ensure_base(Run *run, const TuckHierarchy *h, unsigned peel, dev_t *ret_dev, char **ret_rel,
                       char **ret_error) {
        _cleanup_free_ char *rel = path_join("b", h->id);
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int r;

        if (!rel)
                return -ENOMEM;
        r = staging_enter(&run->staging);
        if (r < 0)
                return r;
        r = staging_is_mounted(&run->staging, rel);
        if (r > 0)
                fd = staging_open_path(&run->staging, rel);
        (void) staging_leave(&run->staging);

        if (fd < 0) {
                r = base_capture(h->full, peel, &fd);
                if (r < 0) {
                        (void) asprintf_safe(ret_error, "cannot capture the base of %s%s: %s", h->full,
                                             peel ? " from beneath the overlay on top" : "", strerror(-r));
                        return r;
                }
                r = staging_enter(&run->staging);
                if (r >= 0)
                        r = staging_attach(&run->staging, fd, rel);
                (void) staging_leave(&run->staging);
                if (r < 0) {
                        (void) asprintf_safe(ret_error, "cannot keep the base of %s: %s", h->full, strerror(-r));
                        return r;
                }
        }
        if (fstat(fd, &st) < 0)
                return -errno;
        *ret_dev = st.st_dev;
        *ret_rel = TAKE_PTR(rel);
        return 0;
}

static size_t image_index(Run *run, const Image *img) {
        for (size_t i = 0; i < run->n_images; i++)
                if (run->images[i] == img)
                        return i;
        return SIZE_MAX;
}

/* 5b. Attach the layers' images in the staging namespace; returns lowerdirs, top first. */
static int stage_layers(Run *run, const TuckHierarchy *h, const HierarchyPlan *p, const char *base_rel,
                        char ***ret_lowers, char **ret_error) {
        _cleanup_strv_free_ char **lowers = calloc(1, sizeof(char *));
        int r;

        if (!lowers)
                return -ENOMEM;
        r = staging_enter(&run->staging);
        if (r < 0)
                return r;
        for (size_t k = p->n_layers; k > 0; k--) {
                const Image *img = p->layers[k - 1];
                size_t idx = image_index(run, img);
                Inspected *x = &run->inspected[idx];
                char *lower = NULL;

                if (x->staged_id == 0) {
                        char rel[32];
                        unsigned id;

                        r = staging_table_add(&run->table, img->class, img->path, img->fingerprint, x->loop, &id);
                        if (r < 0)
                                break;
                        snprintf(rel, sizeof(rel), "i/%u", id);
                        r = staging_attach(&run->staging, x->mount_fd, rel);
                        if (r < 0) {
                                staging_table_remove(&run->table, id);
                                (void) asprintf_safe(ret_error, "cannot stage image '%s': %s", img->path, strerror(-r));
                                break;
                        }
                        x->mount_fd = safe_close(x->mount_fd);
                        x->staged_id = id;
                }
                if (asprintf_safe(&lower, "i/%u/%s", x->staged_id, h->path + 1) < 0 || strv_consume(&lowers, lower) < 0) {
                        r = -ENOMEM;
                        break;
                }
        }
        (void) staging_leave(&run->staging);
        if (r < 0)
                return r;
        if (strv_extend(&lowers, base_rel) < 0)
                return -ENOMEM;
        *ret_lowers = TAKE_PTR(lowers);
        return 0;
}

static void submounts_free(Submount *s, size_t n) {
        for (size_t i = 0; i < n; i++) {
                free(s[i].relative);
                safe_close(s[i].fd);
        }
        free(s);
}

/* Nested mounts below the hierarchy (/opt/foo): recursive clones, to re-attach on the new tree. */
static int clone_submounts(const TuckHierarchy *h, Submount **ret, size_t *ret_n, char **ret_error) {
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        _cleanup_strv_free_ char **rels = NULL;
        Submount *s = NULL;
        size_t n = 0;
        uint64_t id;
        int r;

        r = mount_table_read(0, &tb);
        if (r < 0)
                return r;
        r = path_get_mnt_id(AT_FDCWD, h->full, &id);
        if (r < 0)
                return r;
        r = mount_table_submounts(tb, (int) id, h->full, &rels);
        if (r < 0)
                return r;
        s = calloc(strv_length(rels) ?: 1, sizeof(Submount));
        if (!s)
                return -ENOMEM;
        STRV_FOREACH(rel, rels) {
                _cleanup_free_ char *path = path_join(h->full, *rel);

                if (!path) {
                        r = -ENOMEM;
                        break;
                }
                s[n].fd = open_tree(AT_FDCWD, path, OPEN_TREE_CLONE | OPEN_TREE_CLOEXEC | AT_RECURSIVE);
                /*
                 * Private while it waits in the staging namespace; attached beneath a
                 * shared parent, the new tree gets fresh peer groups and propagates
                 * to the slaves like any new mount.
                 */
                if (s[n].fd >= 0 && mount_make_private(s[n].fd, true) < 0)
                        s[n].fd = safe_close(s[n].fd);
                if (s[n].fd < 0) {
                        r = -errno;
                        (void) asprintf_safe(ret_error, "cannot clone nested mount '%s': %s", path, strerror(errno));
                        break;
                }
                s[n].relative = strdup(*rel);
                n++;
                if (!s[n - 1].relative) {
                        r = -ENOMEM;
                        break;
                }
        }
        if (r < 0) {
                submounts_free(s, n);
                return r;
        }
        *ret = s;
        *ret_n = n;
        return 0;
}

static int fill_generation(Generation *new, const Generation *old, const HierarchyPlan *p, int tree_fd,
                           uint64_t mnt_id, dev_t base_dev, uint64_t attr, bool window) {
        struct stat st;

        if (fstat(tree_fd, &st) < 0)
                return -errno;
        *new = (Generation) {
                .hierarchy = strdup(old->hierarchy),
                .class = p->class,
                .merged = true,
                .number = old->number + 1,
                .since_usec = now_usec(CLOCK_REALTIME),
                .overlay_dev = st.st_dev,
                .overlay_mnt_id = mnt_id,
                .base_dev = base_dev,
                .attr = attr,
                .window = window,
        };
        new->layers = calloc(p->n_layers ?: 1, sizeof(Layer));
        new->history = calloc(GENERATION_HISTORY_MAX, sizeof(PastOverlay));
        if (!new->hierarchy || !new->layers || !new->history)
                return -ENOMEM;
        for (size_t i = 0; i < p->n_layers; i++) {
                const Image *img = p->layers[i];

                new->layers[i] = (Layer) {
                        .name = strdup(img->name),
                        .extension = strdup(img->extension),
                        .version = img->version ? strdup(img->version) : NULL,
                        .image = strdup(img->path),
                        .fingerprint = strdup(img->fingerprint),
                };
                new->n_layers++;
                if (!new->layers[i].name || !new->layers[i].extension || !new->layers[i].fingerprint)
                        return -ENOMEM;
        }
        if (old->merged)
                new->history[new->n_history++] = (PastOverlay) { .number = old->number, .dev = old->overlay_dev };
        for (size_t i = 0; i < old->n_history && new->n_history < GENERATION_HISTORY_MAX; i++)
                new->history[new->n_history++] = old->history[i];
        return 0;
}

static int update_versions(Run *run, const HierarchyPlan *p) {
        for (size_t i = 0; i < p->n_layers; i++) {
                const Image *img = p->layers[i];
                const char *hw = versions_get(run->versions, img->class, img->extension);

                if (!img->version)
                        continue;
                /* A high-water mark: --allow-downgrade activates an older version but keeps the mark. */
                if (hw && strverscmp_improved(img->version, hw) <= 0)
                        continue;
                if (versions_set(run->versions, img->class, img->extension, img->version) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* Is the kernel able to swap beneath? Decides refuse / window for this hierarchy. */
static int check_beneath(Run *run, const TuckHierarchy *h, HierarchyReport *hr, bool *ret_window) {
        if (run->beneath < 0) {
                run->beneath = mount_beneath_supported(run->c->run_dir);
                if (run->beneath < 0)
                        return hierarchy_report_set(hr, OUTCOME_FAILED, run->beneath,
                                                    "cannot probe the kernel for MOVE_MOUNT_BENEATH: %s",
                                                    strerror(-run->beneath));
        }
        *ret_window = false;
        if (run->beneath > 0)
                return 0;
        if (!run->o->allow_window && !run->c->config.allow_window)
                return hierarchy_report_set(hr, OUTCOME_REFUSED, -EOPNOTSUPP,
                                            "the kernel lacks MOVE_MOUNT_BENEATH (Linux 6.5, or the tuck backport "
                                            "for 6.1): replacing the overlay of %s would open a window in which "
                                            "every namespace sees the bare base; refusing (--allow-window does it "
                                            "anyway)", h->full);
        log_warning("The kernel lacks MOVE_MOUNT_BENEATH: refreshing %s by unmount-then-mount "
                    "(--allow-window). Every namespace sees the bare base in between.", h->full);
        *ret_window = true;
        return 0;
}

/* 5. One hierarchy: merge, refresh or take over. */
static int execute_swap(Run *run, size_t idx, const HierarchyPlan *p, HierarchyReport *hr) {
        const TuckHierarchy *h = &run->c->hierarchies[idx];
        Generation *old = &run->generations[idx], new = {};
        _cleanup_free_ char *base_rel = NULL, *error = NULL;
        _cleanup_strv_free_ char **lowers = NULL;
        _cleanup_close_ int tree = -EBADF, top = -EBADF;
        Submount *subs = NULL;
        size_t n_subs = 0;
        bool window = false;
        uint64_t attr, mnt_id;
        dev_t base_dev = 0;
        struct stat st;
        int r;

        if (p->action != PLAN_MERGE) {
                r = check_beneath(run, h, hr, &window);
                if (r < 0)
                        return r;
        }

        /* a. base. Beneath systemd's overlay (or ours, after a lost staging area) it is peeled out. */
        r = ensure_base(run, h, p->action == PLAN_MERGE ? 0 : 1, &base_dev, &base_rel, &error);
        if (r < 0)
                goto fail;
        /* b. stage */
        r = stage_layers(run, h, p, base_rel, &lowers, &error);
        if (r < 0)
                goto fail;
        /* c. assemble, never loosening the flags the hierarchy has now */
        r = clone_submounts(h, &subs, &n_subs, &error);
        if (r < 0)
                goto fail;
        attr = image_class_info[h->class].mount_attr | (p->live.attr & TUCK_ATTR_MASK);
        r = staging_enter(&run->staging);
        if (r >= 0) {
                OverlaySpec spec = {
                        .hid = h->id,
                        .lowers = lowers,
                        .source = image_class_info[h->class].overlay_source,
                        .attr = attr,
                        .submounts = subs,
                        .n_submounts = n_subs,
                };

                r = tree = overlay_assemble(&run->staging, &spec, &error);
        }
        (void) staging_leave(&run->staging);
        submounts_free(subs, n_subs);
        if (r < 0)
                goto fail;
        if (fstat(tree, &st) < 0) {
                r = -errno;
                goto fail;
        }

        if (run->o->hooks && run->o->hooks->before_swap) {
                TuckSwapEvent e = { h, old->number + 1, p->live.top == TOP_BASE ? 0 : p->live.top_dev,
                                    st.st_dev, attr, tree, window };

                r = run->o->hooks->before_swap(&e, run->o->hooks->userdata);
                if (r < 0) {
                        (void) asprintf_safe(&error, "aborted before the swap: %s", strerror(-r));
                        goto fail;
                }
        }

        /* d. swap */
        if (p->action == PLAN_MERGE)
                r = swap_on_top(tree, h->full);
        else if (window)
                r = swap_window(tree, h->full, p->live.top_mnt_id);
        else
                r = swap_beneath(tree, h->full, p->live.top_mnt_id);
        if (r < 0) {
                (void) asprintf_safe(&error, "%s: %s", p->action == PLAN_MERGE ? "cannot attach the overlay" :
                                     window ? "cannot replace the overlay" :
                                     "cannot move the new overlay beneath the live one", strerror(-r));
                goto fail;
        }

        /* The new top must carry at least the flags we set (the kernel copies them; check anyway). */
        {
                uint64_t now_attr = 0;

                if (path_get_mount_attr(AT_FDCWD, h->full, &now_attr) >= 0 && (now_attr & attr) != attr)
                        log_warning("%s: the new overlay's flags are 0x%" PRIx64 ", expected at least 0x%" PRIx64 ".",
                                    h->full, now_attr, attr);
        }

        /* e. record */
        r = path_get_mnt_id(AT_FDCWD, h->full, &mnt_id);
        if (r < 0)
                goto fail_after;
        r = fill_generation(&new, old, p, tree, mnt_id, base_dev, attr, window);
        if (r < 0)
                goto fail_after;
        r = generation_save(run->c->run_dir, &new);
        if (r < 0)
                goto fail_after;
        r = update_versions(run, p);
        if (r < 0)
                goto fail_after;

        hr->old_generation = old->number;
        hr->new_generation = new.number;
        hr->window = window;
        (void) copy_layers(hr, &new);
        hierarchy_report_set(hr, p->action == PLAN_MERGE ? OUTCOME_MERGED :
                             p->action == PLAN_TAKEOVER ? OUTCOME_TAKEN_OVER : OUTCOME_REFRESHED, 0,
                             p->action == PLAN_TAKEOVER ? "replaced systemd-sysext's overlay" : NULL);
        generation_done(old);
        *old = new;

        if (run->o->hooks && run->o->hooks->after_swap) {
                top = open(h->full, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (top >= 0) {
                        TuckSwapEvent e = { h, old->number, p->live.top == TOP_BASE ? 0 : p->live.top_dev,
                                            st.st_dev, attr, top, window };

                        run->o->hooks->after_swap(&e, run->o->hooks->userdata);
                }
        }
        return 1;

fail_after:
        generation_done(&new);
        return hierarchy_report_set(hr, OUTCOME_FAILED, r, "the new generation is in place but could not be "
                                    "recorded: %s", strerror(-r));
fail:
        return hierarchy_report_set(hr, OUTCOME_FAILED, r, "%s; generation %" PRIu64 " left in place",
                                    error ?: strerror(-r), old->number);
}

static int execute_unmerge(Run *run, size_t idx, const HierarchyPlan *p, HierarchyReport *hr) {
        const TuckHierarchy *h = &run->c->hierarchies[idx];
        Generation *g = &run->generations[idx];
        _cleanup_free_ char *base_rel = path_join("b", h->id);
        uint64_t id;
        int r;

        if (!base_rel)
                return -ENOMEM;
        r = path_get_mnt_id(AT_FDCWD, h->full, &id);
        if (r >= 0 && id != p->live.top_mnt_id)
                r = -ESTALE;
        if (r >= 0 && umount2(h->full, MNT_DETACH | UMOUNT_NOFOLLOW) < 0)
                r = -errno;
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "cannot unmount the overlay: %s", strerror(-r));

        /* The base goes too: the next merge captures the hierarchy as it is then. */
        if (staging_enter(&run->staging) >= 0)
                (void) staging_detach(&run->staging, base_rel);
        (void) staging_leave(&run->staging);

        hr->old_generation = g->number;
        if (g->n_history < GENERATION_HISTORY_MAX) {
                PastOverlay *a = realloc(g->history, sizeof(PastOverlay) * (g->n_history + 1));

                if (a) {
                        memmove(a + 1, a, sizeof(PastOverlay) * g->n_history);
                        a[0] = (PastOverlay) { .number = g->number, .dev = g->overlay_dev };
                        g->history = a;
                        g->n_history++;
                }
        }
        g->merged = false;
        g->since_usec = now_usec(CLOCK_REALTIME);
        r = generation_save(run->c->run_dir, g);
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "unmounted, but the record could not be "
                                            "written: %s", strerror(-r));
        hierarchy_report_set(hr, OUTCOME_UNMERGED, 0, "%s", p->reason ?: "the base is visible again");
        return 1;
}

static int run_execute(Run *run) {
        for (size_t i = 0; i < run->plan.n_hierarchies; i++) {
                const HierarchyPlan *p = &run->plan.hierarchies[i];
                size_t idx = run->input_index[i];
                const Generation *g = &run->generations[idx];
                HierarchyReport *hr;

                hr = report_add(run->report, p->hierarchy, p->class);
                if (!hr)
                        return -ENOMEM;
                hr->old_generation = g->merged ? g->number : 0;

                switch (p->action) {
                case PLAN_NOTHING:
                        hierarchy_report_set(hr, OUTCOME_NOTHING, 0, "%s", strna(p->reason));
                        break;
                case PLAN_KEEP:
                        hierarchy_report_set(hr, OUTCOME_UNCHANGED, 0, "%s", strna(p->reason));
                        (void) copy_layers(hr, g);
                        break;
                case PLAN_REFUSE:
                        hierarchy_report_set(hr, OUTCOME_REFUSED, p->error, "%s", strna(p->reason));
                        (void) copy_layers(hr, g);
                        break;
                case PLAN_MERGE:
                case PLAN_REFRESH:
                case PLAN_TAKEOVER:
                        if (execute_swap(run, idx, p, hr) < 0)
                                (void) copy_layers(hr, g);
                        break;
                case PLAN_UNMERGE:
                        (void) execute_unmerge(run, idx, p, hr);
                        break;
                case _PLAN_ACTION_MAX:
                        return -EINVAL;
                }
                if (hr->error < 0)
                        log_debug("%s: %s", p->hierarchy, strna(hr->message));
        }
        return 0;
}

/*
 * Inside the staging namespace: image mounts no table entry knows (a refresh
 * killed between staging an image and saving the table) and overlays left
 * half-assembled. Both would otherwise stay until reboot.
 */
static void detach_orphans(Run *run) {
        static const char * const dirs[] = { "i", "o" };

        for (size_t k = 0; k < ELEMENTSOF(dirs); k++) {
                DIR *d = opendir(dirs[k]);

                if (!d)
                        continue;
                for (struct dirent *de; (de = readdir(d)); ) {
                        char rel[300];
                        bool known = false;

                        if (de->d_name[0] == '.')
                                continue;
                        for (size_t i = 0; k == 0 && i < run->table.n_images; i++)
                                if ((unsigned) atoi(de->d_name) == run->table.images[i].id)
                                        known = true;
                        if (known)
                                continue;
                        snprintf(rel, sizeof(rel), "%s/%s", dirs[k], de->d_name);
                        log_debug("Detaching orphaned staging mount %s.", rel);
                        (void) staging_detach(&run->staging, rel);
                }
                closedir(d);
        }
}

/* 6. Unmount staged images that no merged generation uses (and orphans). */
static int run_collect(Run *run) {
        int r;

        for (size_t i = 0; i < run->table.n_images; i++)
                run->table.images[i].used = false;
        for (size_t i = 0; run->generations && i < run->c->n_hierarchies; i++) {
                const Generation *g = &run->generations[i];

                for (size_t k = 0; g->merged && k < g->n_layers; k++) {
                        StagedImage *s = staging_table_find(&run->table, g->class, g->layers[k].fingerprint);

                        if (s)
                                s->used = true;
                }
        }
        r = staging_enter(&run->staging);
        if (r < 0)
                return r;
        detach_orphans(run);
        for (size_t i = 0; i < run->table.n_images; ) {
                StagedImage *s = &run->table.images[i];
                char rel[32];

                if (s->used) {
                        i++;
                        continue;
                }
                snprintf(rel, sizeof(rel), "i/%u", s->id);
                (void) staging_detach(&run->staging, rel);
                staging_table_remove(&run->table, s->id);
        }
        (void) staging_leave(&run->staging);
        return staging_table_save(run->c->run_dir, &run->table);
}

static int run_prepare(Run *run) {
        int r;

        r = tuck_lock(run->c, !run->o->no_block);
        if (r == -EBUSY)
                return report_set_error(run->report, r, "another tuck operation holds %s/lock; not waiting "
                                        "(--no-block)", run->c->run_dir);
        if (r < 0)
                return report_set_error(run->report, r, "cannot take %s/lock: %s", run->c->run_dir, strerror(-r));

        r = run_dir_make_private(run->c->run_dir);
        if (r < 0)
                return report_set_error(run->report, r, "cannot make %s a private mount: %s", run->c->run_dir,
                                        strerror(-r));
        r = staging_open(run->c->run_dir, &run->staging);
        if (r < 0)
                return report_set_error(run->report, r, "cannot set up the staging namespace in %s: %s",
                                        run->c->run_dir, strerror(-r));
        r = staging_table_load(run->c->run_dir, &run->table);
        if (r < 0)
                return report_set_error(run->report, r, "cannot read %s/staging.json: %s", run->c->run_dir,
                                        strerror(-r));
        if (run->table.ns_ino != run->staging.ns_ino) {
                /* A new staging namespace: whatever the table listed is not mounted there. */
                staging_table_done(&run->table);
                run->table = (StagingTable) { .ns_ino = run->staging.ns_ino, .next_id = 1 };
        }
        /* What a killed run left in the staging namespace goes before anything is staged again. */
        if (staging_enter(&run->staging) >= 0)
                detach_orphans(run);
        (void) staging_leave(&run->staging);

        r = versions_load(run->c->state_dir, &run->versions);
        if (r < 0)
                return report_set_error(run->report, r, "cannot read %s/versions.json: %s", run->c->state_dir,
                                        strerror(-r));
        if (run->verb != VERB_UNMERGE) {
                r = host_release_load(run->c->root, &run->host);
                if (r < 0)
                        return report_set_error(run->report, r, "cannot read the host's os-release below '%s': %s",
                                                run->c->root, strerror(-r));
        }
        return 0;
}

static int tuck_run(TuckContext *c, TuckVerb verb, const TuckOptions *o, Report **ret) {
        static const TuckOptions defaults = {};
        _cleanup_report_ Report *report = report_new(verb_to_string(verb));
        Run run = {
                .c = c,
                .o = o ?: &defaults,
                .verb = verb,
                .report = report,
                .staging = STAGING_INIT,
                .beneath = -1,
        };
        int r;

        if (!report)
                return -ENOMEM;

        r = run_prepare(&run);
        if (r >= 0 && verb != VERB_UNMERGE) {
                r = run_discover(&run);
                if (r >= 0)
                        r = run_inspect(&run);
        }
        if (r >= 0)
                r = run_observe(&run);
        if (r >= 0)
                r = run_plan(&run);
        if (r >= 0)
                r = run_execute(&run);
        if (run.staging.ns_fd >= 0 && run.c->lock_fd >= 0) {
                int k = run_collect(&run);

                if (k < 0)
                        (void) report_warn(report, "Failed to release unused staged images: %s", strerror(-k));
        }
        if (run.versions) {
                int k = versions_save(c->state_dir, run.versions);

                if (k < 0 && r >= 0)
                        report_set_error(report, k, "cannot write %s/versions.json: %s", c->state_dir, strerror(-k));
        }
        if (r < 0 && report->error == 0)
                report_set_error(report, r, "%s failed: %s", verb_to_string(verb), strerror(-r));

        run_done(&run);
        tuck_unlock(c);
        r = report_result(report);
        if (ret)
                *ret = TAKE_PTR(report);
        return r;
}

int tuck_merge(TuckContext *c, const TuckOptions *o, Report **ret) {
        return tuck_run(c, VERB_MERGE, o, ret);
}

int tuck_refresh(TuckContext *c, const TuckOptions *o, Report **ret) {
        return tuck_run(c, VERB_REFRESH, o, ret);
}

int tuck_unmerge(TuckContext *c, const TuckOptions *o, Report **ret) {
        return tuck_run(c, VERB_UNMERGE, o, ret);
}

int tuck_recover(TuckContext *c) {
        _cleanup_report_ Report *report = report_new("recover");
        Run run = {
                .c = c,
                .o = &(TuckOptions) {},
                .verb = VERB_REFRESH,
                .report = report,
                .staging = STAGING_INIT,
                .beneath = -1,
        };
        int r;

        if (!report)
                return -ENOMEM;
        r = run_prepare(&run);
        if (r >= 0)
                r = run_observe(&run);
        if (r >= 0)
                r = run_collect(&run);   /* also what a killed refresh left behind */
        run_done(&run);
        tuck_unlock(c);
        return r;
}

int tuck_list(TuckContext *c, const TuckOptions *o, ImageList **ret) {
        _cleanup_report_ Report *report = report_new("list");
        ImageList *l;
        Run run = {
                .c = c,
                .o = o ?: &(TuckOptions) {},
                .verb = VERB_REFRESH,
                .report = report,
                .staging = STAGING_INIT,
                .beneath = -1,
        };
        int r;

        if (!report)
                return -ENOMEM;
        l = calloc(1, sizeof(ImageList));
        if (!l)
                return -ENOMEM;
        r = run_prepare(&run);
        if (r >= 0)
                r = run_discover(&run);
        if (r >= 0)
                r = run_inspect(&run);
        if (r >= 0)
                r = run_observe(&run);
        if (r >= 0) {
                l->images = TAKE_PTR(run.images);
                l->n_images = run.n_images;
                l->generations = TAKE_PTR(run.generations);
                l->n_generations = c->n_hierarchies;
        }
        /* Nothing was staged: newly mounted images go when run_done() closes their fds. */
        run_done(&run);
        tuck_unlock(c);
        if (r < 0) {
                image_list_free(l);
                if (report->message)
                        log_error("%s", report->message);
                return r;
        }
        *ret = l;
        return 0;
}
