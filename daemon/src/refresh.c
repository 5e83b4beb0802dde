/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The refresh: how tuck replaces the extension overlay of /usr, /opt and /etc
 * without a moment where anyone sees the bare base. merge, refresh and
 * unmerge are one algorithm (run_steps()):
 *
 *   0. prepare     take the lock, open the staging namespace (staging.c) and
 *                  drop what a killed run left there, read what is recorded;
 *                  finish a swap a killed run left half done (an old top
 *                  still above the new overlay moved beneath it: recover.c)
 *   1. discover    images in the search directories (image.c)
 *   2. inspect     mount each new image detached and read its release file;
 *                  unchanged images are read where they are already staged
 *   3. observe     each hierarchy: our generation record, and what is on top now
 *                  (observe.c: whose the top mount is)
 *   4. plan        per hierarchy, keep / merge / refresh / take over / unmerge /
 *                  refuse (plan.c: policy, anti-downgrade, no-op)
 *   5. execute     per hierarchy, independently (execute_swap()):
 *        a. base     capture it once, before the first merge: a private clone,
 *                    peeled out from under systemd-sysext's overlay if needed
 *        b. stage    attach new images in the staging namespace (staging.c)
 *        c. assemble the overlay there, re-attach clones of nested mounts,
 *                    clone it out detached and private with its flags (overlay.c)
 *        d. swap     first merge: on top; otherwise MOVE_MOUNT_BENEATH beneath
 *                    the live top, then unmount the old top (swap.c)
 *        e. record   the generation (/run/tuck) and versions (/var/lib/tuck)
 *        f. stale    the namespaces that did not follow: healed, reported or
 *                    restarted as StalePolicy= says (stale.c; a snapshot is
 *                    taken before 5d, loosenable namespaces pinned)
 *   6. collect     unmount staged images no generation uses any more
 *   7. stale       the same for every merged hierarchy that did not change:
 *                  what a killed run or StalePolicy=report left behind
 *
 * Every step before 5d works in the staging namespace or on detached mounts:
 * if one fails, the host's mount table is exactly as it was.
 */

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
#include "observe.h"
#include "overlay.h"
#include "plan.h"
#include "run.h"
#include "stale.h"
#include "staging.h"
#include "status.h"
#include "swap.h"
#include "util.h"
#include "version.h"

static const TuckOptions no_options = {};

Run run_new(TuckContext *c, TuckVerb verb, const TuckOptions *o, Report *report) {
        const TuckOptions *opts = o ?: &no_options;

        return (Run) {
                .c = c,
                .o = opts,
                .verb = verb,
                .report = report,
                .staging = STAGING_INIT,
                .beneath = -1,
                .budget = context_scan_budget(c, opts->hooks),
        };
}

void run_done(Run *run) {
        for (size_t i = 0; run->inspected && i < run->n_images; i++) {
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
        tuck_unlock(run->c);
}

bool class_selected(const TuckOptions *o, ImageClass k) {
        return o->classes == 0 || (o->classes & (1u << k));
}

/* 0. prepare: the lock, the staging namespace and its table, what is recorded. */
static int open_staging(Run *run) {
        int r;

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
                staging_detach_orphans(&run->staging, &run->table);
        (void) staging_leave(&run->staging);
        return 0;
}

int run_prepare(Run *run) {
        int r;

        r = tuck_lock(run->c, !run->o->no_block);
        if (r == -EBUSY)
                return report_set_error(run->report, r, "another tuck operation holds %s/lock; not waiting "
                                        "(--no-block)", run->c->run_dir);
        if (r < 0)
                return report_set_error(run->report, r, "cannot take %s/lock: %s", run->c->run_dir, strerror(-r));
        r = open_staging(run);
        if (r < 0)
                return r;
        r = versions_load(run->c->state_dir, &run->versions);
        if (r < 0)
                return report_set_error(run->report, r, "cannot read %s/versions.json: %s", run->c->state_dir,
                                        strerror(-r));
        if (run->verb == VERB_UNMERGE)
                return 0;
        r = host_release_load(run->c->root, &run->host);
        if (r < 0)
                return report_set_error(run->report, r, "cannot read the host's os-release below '%s': %s",
                                        run->c->root, strerror(-r));
        return 0;
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

/* 2. inspect */
static int mark_invalid(Image *i, const char *fmt, ...) _printf_(2, 3);
static int mark_invalid(Image *i, const char *fmt, ...) {
        va_list ap;
        int r;

        i->inspected = true;
        i->valid = false;
        va_start(ap, fmt);
        r = free_and_vasprintf(&i->reason, fmt, ap);
        va_end(ap);
        return r;
}

/* A tree fd for reading the image: where it is staged, or a fresh detached mount. */
static int image_tree_fd(Run *run, size_t idx, int *ret_fd) {
        Image *img = run->images[idx];
        Inspected *x = &run->inspected[idx];
        StagedImage *s;
        int r;

        s = staging_table_find(&run->table, img->class, img->fingerprint);
        if (s) {
                char rel[STAGING_PATH_MAX];

                r = staging_open_mounted(&run->staging, staging_image_path(rel, s->id));
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

/* Is the image usable (kind, readable, mountable, release file)? An unusable one is marked, not an error. */
static int inspect_image(Run *run, size_t idx) {
        Image *img = run->images[idx];
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (img->type == IMAGE_TYPE_GPT)
                return mark_invalid(img, "GPT disk images (DDIs) are not supported yet; use a bare squashfs "
                                    "or erofs .raw image");
        if (img->type == IMAGE_TYPE_UNSUPPORTED)
                return img->fstype ?
                        mark_invalid(img, "file system '%s' is not supported (squashfs and erofs only)", img->fstype) :
                        mark_invalid(img, "no squashfs or erofs file system found");
        r = image_fingerprint(img);
        if (r < 0)
                return mark_invalid(img, "cannot read: %s", strerror(-r));
        r = image_tree_fd(run, idx, &fd);
        if (r < 0)
                return mark_invalid(img, "cannot mount: %s", strerror(-r));
        return image_validate(img, fd, &run->host, run->c->root, run->c->config.hierarchies[img->class]);
}

static int run_inspect(Run *run) {
        for (size_t i = 0; i < run->n_images; i++) {
                Image *img = run->images[i];
                int r;

                if (img->state != IMAGE_CANDIDATE)
                        continue;
                r = inspect_image(run, i);
                if (r < 0)
                        return r;
                if (!img->valid)
                        (void) report_warn(run->report, "Skipped %s image '%s': %s", image_class_to_string(img->class),
                                           img->path, img->reason);
        }
        return 0;
}

/* 3. observe */

/* The generation record of hierarchy i; none yet is generation 0. */
static int load_generation(Run *run, size_t i) {
        const TuckHierarchy *h = &run->c->hierarchies[i];
        Generation *g = &run->generations[i];
        int r;

        r = generation_load(run->c->run_dir, h->path, g);
        if (r == -ENOENT) {
                *g = (Generation) { .class = h->class, .hierarchy = strdup(h->path) };
                return g->hierarchy ? 0 : -ENOMEM;
        }
        if (r < 0)
                return report_set_error(run->report, r, "Failed to read the generation record of %s: %s",
                                        h->path, strerror(-r));
        return 0;
}

/* The plan's input for hierarchy i: its record and what is on top now. */
static int observe_hierarchy(Run *run, size_t i) {
        const TuckHierarchy *h = &run->c->hierarchies[i];
        const Generation *g = &run->generations[i];
        PlanHierarchyInput *in;
        int r;

        if (access(h->full, F_OK) < 0 && errno == ENOENT) {
                /* Like systemd-sysext: a hierarchy that does not exist here is skipped. */
                HierarchyReport *hr = report_add(run->report, h->path, h->class);

                if (!hr)
                        return -ENOMEM;
                return hierarchy_report_set(hr, OUTCOME_NOTHING, 0, "%s does not exist here, skipped", h->full);
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
        return 0;
}

int run_observe(Run *run) {
        run->generations = calloc(run->c->n_hierarchies ?: 1, sizeof(Generation));
        run->inputs = calloc(run->c->n_hierarchies ?: 1, sizeof(PlanHierarchyInput));
        run->input_index = calloc(run->c->n_hierarchies ?: 1, sizeof(size_t));
        if (!run->generations || !run->inputs || !run->input_index)
                return -ENOMEM;

        for (size_t i = 0; i < run->c->n_hierarchies; i++) {
                int r;

                r = load_generation(run, i);
                if (r < 0)
                        return r;
                if (!class_selected(run->o, run->c->hierarchies[i].class))
                        continue;
                r = observe_hierarchy(run, i);
                if (r < 0)
                        return r;
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

/* 5. execute: one hierarchy's swap, step by step. */
typedef struct SwapJob {
        const TuckHierarchy *h;
        const HierarchyPlan *p;
        Generation *old;
        bool window;                 /* no MOVE_MOUNT_BENEATH: unmount, then mount */
        dev_t base_dev;
        char *base_rel;              /* b/<hid> in the staging namespace */
        char **lowers;               /* the overlay's layers, top first, base last */
        uint64_t attr;               /* flags of the new overlay */
        int tree;                    /* the new overlay, detached */
        dev_t tree_dev;
        char *error;                 /* why a step failed */
        bool exposed;                /* the window opened and stayed open: the base shows */
        StaleSnapshot stale;         /* namespaces before the swap */
} SwapJob;

static void swap_job_done(SwapJob *j) {
        stale_snapshot_done(&j->stale);
        free(j->base_rel);
        strv_free(j->lowers);
        safe_close(j->tree);
        free(j->error);
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

/*
 * 5a. The base: a private clone of the hierarchy as it was before the first
 * merge, kept at b/<hid>. Beneath systemd's overlay (or ours, after a lost
 * staging area) it is peeled out.
 */
static int ensure_base(Run *run, SwapJob *j) {
        _cleanup_close_ int fd = -EBADF;
        unsigned peel = j->p->action == PLAN_MERGE ? 0 : 1;
        struct stat st;
        int r;

        j->base_rel = path_join("b", j->h->id);
        if (!j->base_rel)
                return -ENOMEM;
        fd = staging_open_mounted(&run->staging, j->base_rel);
        if (fd == -ENOENT) {
                r = base_capture(j->h->full, peel, &fd);
                if (r < 0) {
                        (void) asprintf_safe(&j->error, "cannot capture the base of %s%s: %s", j->h->full,
                                             peel ? " from beneath the overlay on top" : "", strerror(-r));
                        return r;
                }
                r = staging_enter(&run->staging);
                if (r >= 0)
                        r = staging_attach(&run->staging, fd, j->base_rel);
                (void) staging_leave(&run->staging);
                if (r < 0) {
                        (void) asprintf_safe(&j->error, "cannot keep the base of %s: %s", j->h->full, strerror(-r));
                        return r;
                }
        }
        if (fd < 0)
                return fd;
        if (fstat(fd, &st) < 0)
                return -errno;
        j->base_dev = st.st_dev;
        return 0;
}

static size_t image_index(Run *run, const Image *img) {
        for (size_t i = 0; i < run->n_images; i++)
                if (run->images[i] == img)
                        return i;
        return SIZE_MAX;
}

/* Inside: stage one layer's image (if it is not yet) at i/<id>. */
static int stage_image(Run *run, const Image *img, Inspected *x, char **ret_error) {
        char rel[STAGING_PATH_MAX];
        unsigned id;
        int r;

        if (x->staged_id != 0)
                return 0;
        r = staging_table_add(&run->table, img->class, img->path, img->fingerprint, x->loop, &id);
        if (r < 0)
                return r;
        r = staging_attach(&run->staging, x->mount_fd, staging_image_path(rel, id));
        if (r < 0) {
                staging_table_remove(&run->table, id);
                (void) asprintf_safe(ret_error, "cannot stage image '%s': %s", img->path, strerror(-r));
                return r;
        }
        x->mount_fd = safe_close(x->mount_fd);
        x->staged_id = id;
        return 0;
}

/* 5b. Attach the layers' images in the staging namespace; the lowerdirs, top first, base last. */
static int stage_layers(Run *run, SwapJob *j) {
        _cleanup_strv_free_ char **lowers = calloc(1, sizeof(char *));
        int r;

        if (!lowers)
                return -ENOMEM;
        r = staging_enter(&run->staging);
        for (size_t k = j->p->n_layers; r >= 0 && k > 0; k--) {
                const Image *img = j->p->layers[k - 1];
                Inspected *x = &run->inspected[image_index(run, img)];
                char *lower = NULL;

                r = stage_image(run, img, x, &j->error);
                if (r >= 0 && (asprintf_safe(&lower, "i/%u/%s", x->staged_id, j->h->path + 1) < 0 ||
                               strv_consume(&lowers, lower) < 0))
                        r = -ENOMEM;
        }
        (void) staging_leave(&run->staging);
        if (r < 0)
                return r;
        if (strv_extend(&lowers, j->base_rel) < 0)
                return -ENOMEM;
        j->lowers = TAKE_PTR(lowers);
        return 0;
}

/* 5c. Assemble the overlay in the staging namespace, nested mounts re-attached, and clone it out. */
static int assemble(Run *run, SwapJob *j) {
        Submount *subs = NULL;
        size_t n_subs = 0;
        struct stat st;
        int r;

        r = submounts_clone(j->h->full, &subs, &n_subs, &j->error);
        if (r < 0)
                return r;
        r = staging_enter(&run->staging);
        if (r >= 0) {
                OverlaySpec spec = {
                        .hid = j->h->id,
                        .lowers = j->lowers,
                        .source = image_class_info[j->h->class].overlay_source,
                        .attr = j->attr,
                        .submounts = subs,
                        .n_submounts = n_subs,
                };

                r = j->tree = overlay_assemble(&run->staging, &spec, &j->error);
        }
        (void) staging_leave(&run->staging);
        submounts_free(subs, n_subs);
        if (r < 0)
                return r;
        if (fstat(j->tree, &st) < 0)
                return -errno;
        j->tree_dev = st.st_dev;
        return 0;
}

/* 5f and 7: the namespaces of a hierarchy, as StalePolicy= says (stale.c). */
static StaleHierarchy stale_hierarchy(Run *run, const TuckHierarchy *h) {
        return (StaleHierarchy) {
                .root = run->c->root,
                .path = h->full,
                .run_dir = run->c->run_dir,
                .id = h->id,
                .class = h->class,
                .policy = run->o->stale_policy ? *run->o->stale_policy : run->c->config.stale_policy,
                .restart_units = run->c->config.restart_units,
                .budget = &run->budget,
        };
}

static dev_t replaced_top(const HierarchyPlan *p) {
        return p->live.top == TOP_BASE ? 0 : p->live.top_dev;
}

/* Before the swap: who sees our overlays, and pin those it would loosen. Never stops the swap. */
static void stale_before(Run *run, SwapJob *j, HierarchyReport *hr) {
        StaleHierarchy sh = stale_hierarchy(run, j->h);

        sh.foreign = j->p->live.top == TOP_SYSTEMD;
        dev_t ours[GENERATION_HISTORY_MAX + 2];
        size_t n = stale_ours(j->old->number > 0 ? j->old : NULL, replaced_top(j->p), ours, ELEMENTSOF(ours));
        int r;

        r = stale_before_swap(&sh, ours, n, j->attr, &j->stale);
        if (r < 0)
                (void) report_warn(run->report, "Failed to look for mount namespaces that see %s: %s", j->h->full,
                                   strerror(-r));
        hr->pinned = j->stale.pinned > 0 ? (unsigned) j->stale.pinned : 0;
}

/* After a swap (@before) or without one: the namespaces behind @g, into @hr. */
static void stale_after(Run *run, const TuckHierarchy *h, const Generation *g, dev_t replaced, bool foreign,
                        const StaleSnapshot *before, HierarchyReport *hr) {
        StaleHierarchy sh = stale_hierarchy(run, h);

        sh.foreign = foreign;
        sh.generation = g;
        dev_t ours[GENERATION_HISTORY_MAX + 2];
        size_t n = stale_ours(g, replaced, ours, ELEMENTSOF(ours));
        int r;

        r = stale_handle(&sh, ours, n, before, &hr->namespaces, &hr->n_namespaces);
        if (r < 0)
                (void) report_warn(run->report, "Failed to look for mount namespaces that did not follow %s: %s",
                                   h->full, strerror(-r));
}

static TuckSwapEvent swap_event(const SwapJob *j, uint64_t generation, int fd) {
        return (TuckSwapEvent) {
                .hierarchy = j->h,
                .generation = generation,
                .old_dev = j->p->live.top == TOP_BASE ? 0 : j->p->live.top_dev,
                .new_dev = j->tree_dev,
                .attr = j->attr,
                .fd = fd,
                .window = j->window,
        };
}

static int call_before_swap(Run *run, SwapJob *j) {
        TuckSwapEvent e = swap_event(j, j->old->number + 1, j->tree);
        int r;

        if (!run->o->hooks || !run->o->hooks->before_swap)
                return 0;
        r = run->o->hooks->before_swap(&e, run->o->hooks->userdata);
        if (r < 0)
                (void) asprintf_safe(&j->error, "aborted before the swap: %s", strerror(-r));
        return r;
}

/* 5d. The swap. */
static int swap_into_place(SwapJob *j) {
        const char *what;
        uint64_t now_attr = 0;
        int r;

        if (j->p->action == PLAN_MERGE) {
                r = swap_on_top(j->tree, j->h->full);
                what = "cannot attach the overlay";
        } else if (j->window) {
                r = swap_window(j->tree, j->h->full, j->p->live.top_mnt_id, &j->exposed);
                what = j->exposed ? "unmounted the old overlay but cannot mount the new one" :
                                    "cannot replace the overlay";
        } else {
                r = swap_beneath(j->tree, j->h->full, j->p->live.top_mnt_id);
                what = "cannot move the new overlay beneath the live one";
        }
        if (r < 0) {
                (void) asprintf_safe(&j->error, "%s: %s", what, strerror(-r));
                return r;
        }
        /* The new top must carry at least the flags we set (the kernel copies them; check anyway). */
        if (path_get_mount_attr(AT_FDCWD, j->h->full, &now_attr) >= 0 && (now_attr & j->attr) != j->attr)
                log_warning("%s: the new overlay's flags are 0x%" PRIx64 ", expected at least 0x%" PRIx64 ".",
                            j->h->full, now_attr, j->attr);
        return 0;
}

static int layer_from_image(Layer *l, const Image *img) {
        return layer_copy(l, &(const Layer) {
                .name = img->name,
                .extension = img->extension,
                .version = img->version,
                .image = img->path,
                .fingerprint = img->fingerprint,
        });
}

/* The record of the generation now in place at the hierarchy. */
static int new_generation(const SwapJob *j, Generation *ret) {
        Generation g = {
                .class = j->p->class,
                .merged = true,
                .number = j->old->number + 1,
                .since_usec = now_usec(CLOCK_REALTIME),
                .overlay_dev = j->tree_dev,
                .base_dev = j->base_dev,
                .attr = j->attr,
                .window = j->window,
        };
        int r;

        r = path_get_mnt_id(AT_FDCWD, j->h->full, &g.overlay_mnt_id);
        if (r >= 0)
                r = generation_history_after(j->old, &g.history, &g.n_history);
        g.hierarchy = strdup(j->old->hierarchy);
        g.layers = calloc(j->p->n_layers ?: 1, sizeof(Layer));
        if (r >= 0 && (!g.hierarchy || !g.layers))
                r = -ENOMEM;
        for (size_t i = 0; r >= 0 && i < j->p->n_layers; i++) {
                r = layer_from_image(&g.layers[i], j->p->layers[i]);
                if (r >= 0)
                        g.n_layers++;
        }
        if (r < 0) {
                generation_done(&g);
                return r;
        }
        *ret = g;
        return 0;
}

/* New high-water marks: --allow-downgrade activates an older version but keeps the mark. */
static int update_versions(Run *run, const HierarchyPlan *p) {
        for (size_t i = 0; i < p->n_layers; i++) {
                const Image *img = p->layers[i];
                const char *hw = versions_get(run->versions, img->class, img->extension);

                if (!img->version || (hw && strverscmp_improved(img->version, hw) <= 0))
                        continue;
                if (versions_set(run->versions, img->class, img->extension, img->version) < 0)
                        return -ENOMEM;
        }
        return 0;
}

/* 5e. Record the generation (/run/tuck) and the versions (/var/lib/tuck, saved at the end of the run). */
static int record(Run *run, const SwapJob *j, Generation *ret) {
        Generation g;
        int r;

        r = new_generation(j, &g);
        if (r < 0)
                return r;
        r = generation_save(run->c->run_dir, &g);
        if (r >= 0)
                r = update_versions(run, j->p);
        if (r < 0) {
                generation_done(&g);
                return r;
        }
        *ret = g;
        return 0;
}

static void call_after_swap(Run *run, const SwapJob *j) {
        _cleanup_close_ int top = -EBADF;
        TuckSwapEvent e;

        if (!run->o->hooks || !run->o->hooks->after_swap)
                return;
        top = open(j->h->full, O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (top < 0)
                return;
        e = swap_event(j, j->old->number, top);
        run->o->hooks->after_swap(&e, run->o->hooks->userdata);
}

static void report_swapped(HierarchyReport *hr, const SwapJob *j, const Generation *new) {
        PlanAction a = j->p->action;
        const char *note = NULL;

        hr->old_generation = j->old->number;
        hr->new_generation = new->number;
        hr->window = j->window;
        (void) hierarchy_report_set_layers(hr, new);
        if (a == PLAN_TAKEOVER)
                note = j->p->live.top == TOP_LOST ? "replaced an overlay of ours that a killed run left unrecorded" :
                                                    "replaced systemd-sysext's overlay";
        if (note)
                hierarchy_report_set(hr, OUTCOME_TAKEN_OVER, 0, "%s", note);
        else
                hierarchy_report_set(hr, a == PLAN_MERGE ? OUTCOME_MERGED : OUTCOME_REFRESHED, 0, NULL);
}

/* 5. One hierarchy: merge, refresh or take over. Every step before the swap leaves the host as it was. */
static int execute_swap(Run *run, size_t idx, const HierarchyPlan *p, HierarchyReport *hr) {
        _cleanup_(swap_job_done) SwapJob j = {
                .h = &run->c->hierarchies[idx],
                .p = p,
                .old = &run->generations[idx],
                /* Never loosen the flags the hierarchy has now. */
                .attr = image_class_info[p->class].mount_attr | (p->live.attr & TUCK_ATTR_MASK),
                .tree = -EBADF,
        };
        Generation new;
        int r = 0;

        if (p->action != PLAN_MERGE)
                r = check_beneath(run, j.h, hr, &j.window);
        if (r < 0)
                return r;

        r = ensure_base(run, &j);
        if (r >= 0)
                r = stage_layers(run, &j);
        if (r >= 0)
                r = assemble(run, &j);
        if (r >= 0)
                stale_before(run, &j, hr);
        if (r >= 0)
                r = call_before_swap(run, &j);
        if (r >= 0)
                r = swap_into_place(&j);
        if (r < 0 && j.exposed)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "%s; %s shows the base (--allow-window)",
                                            j.error ?: strerror(-r), j.h->full);
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "%s; generation %" PRIu64 " left in place",
                                            j.error ?: strerror(-r), j.old->number);

        r = record(run, &j, &new);
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "the new generation is in place but could not "
                                            "be recorded: %s", strerror(-r));
        report_swapped(hr, &j, &new);
        generation_done(j.old);
        *j.old = new;
        stale_after(run, j.h, j.old, replaced_top(p), p->live.top == TOP_SYSTEMD, &j.stale, hr);
        call_after_swap(run, &j);
        return 1;
}

/* The one deliberate way back: unmount our overlay, the base shows again. */
static int execute_unmerge(Run *run, size_t idx, const HierarchyPlan *p, HierarchyReport *hr) {
        const TuckHierarchy *h = &run->c->hierarchies[idx];
        Generation *g = &run->generations[idx];
        _cleanup_free_ char *base_rel = path_join("b", h->id);
        PastOverlay *history;
        size_t n_history;
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
        if (generation_history_after(g, &history, &n_history) >= 0) {
                free(g->history);
                g->history = history;
                g->n_history = n_history;
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

/* One hierarchy's plan; a failure is in its report. -EINVAL only for a plan that makes no sense. */
static int execute_one(Run *run, const HierarchyPlan *p, size_t idx, HierarchyReport *hr) {
        const Generation *g = &run->generations[idx];

        switch (p->action) {
        case PLAN_NOTHING:
                hierarchy_report_set(hr, OUTCOME_NOTHING, 0, "%s", strna(p->reason));
                return 0;
        case PLAN_KEEP:
                hierarchy_report_set(hr, OUTCOME_UNCHANGED, 0, "%s", strna(p->reason));
                (void) hierarchy_report_set_layers(hr, g);
                return 0;
        case PLAN_REFUSE:
                hierarchy_report_set(hr, OUTCOME_REFUSED, p->error, "%s", strna(p->reason));
                (void) hierarchy_report_set_layers(hr, g);
                return 0;
        case PLAN_MERGE:
        case PLAN_REFRESH:
        case PLAN_TAKEOVER:
                if (execute_swap(run, idx, p, hr) < 0)
                        (void) hierarchy_report_set_layers(hr, g);
                return 0;
        case PLAN_UNMERGE:
                (void) execute_unmerge(run, idx, p, hr);
                return 0;
        case _PLAN_ACTION_MAX:
                break;
        }
        return -EINVAL;
}

/* 7. A merged hierarchy that did not change may still have namespaces behind it. */
static void stale_unchanged(Run *run, size_t input, HierarchyReport *hr) {
        size_t idx = run->input_index[input];
        const Generation *g = &run->generations[idx];

        if (run->verb == VERB_UNMERGE || !g->merged || run->inputs[input].live.top != TOP_OURS)
                return;
        if (hr->outcome == OUTCOME_MERGED || hr->outcome == OUTCOME_REFRESHED || hr->outcome == OUTCOME_TAKEN_OVER)
                return;         /* handled right after its swap */
        stale_after(run, &run->c->hierarchies[idx], g, 0, false, NULL, hr);
}

/* Each hierarchy on its own: a failure is in its report, and the others go ahead. */
static int run_execute(Run *run) {
        for (size_t i = 0; i < run->plan.n_hierarchies; i++) {
                const HierarchyPlan *p = &run->plan.hierarchies[i];
                size_t idx = run->input_index[i];
                HierarchyReport *hr;
                int r;

                hr = report_add(run->report, p->hierarchy, p->class);
                if (!hr)
                        return -ENOMEM;
                hr->old_generation = run->generations[idx].merged ? run->generations[idx].number : 0;
                r = execute_one(run, p, idx, hr);
                if (r < 0)
                        return r;
                stale_unchanged(run, i, hr);
                if (hr->error < 0)
                        log_debug("%s: %s", p->hierarchy, strna(hr->message));
        }
        return 0;
}

/* 6. Unmount staged images that no merged generation uses (and what a killed run left). */
int run_collect(Run *run) {
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
        staging_detach_orphans(&run->staging, &run->table);
        for (size_t i = 0; i < run->table.n_images; ) {
                StagedImage *s = &run->table.images[i];
                char rel[STAGING_PATH_MAX];

                if (s->used) {
                        i++;
                        continue;
                }
                (void) staging_detach(&run->staging, staging_image_path(rel, s->id));
                staging_table_remove(&run->table, s->id);
        }
        (void) staging_leave(&run->staging);
        return staging_table_save(run->c->run_dir, &run->table);
}

/* The steps of merge, refresh and unmerge (see the top of this file). */
static int run_steps(Run *run) {
        int r;

        r = run_prepare(run);
        if (r >= 0)
                r = run_finish_interrupted_swaps(run);
        if (r >= 0 && run->verb != VERB_UNMERGE) {
                r = run_discover(run);
                if (r >= 0)
                        r = run_inspect(run);
        }
        if (r >= 0)
                r = run_observe(run);
        if (r >= 0)
                r = run_plan(run);
        if (r >= 0)
                r = run_execute(run);
        return r;
}

/* Whatever happened: release what is no longer used, keep the high-water marks. */
static int run_finish(Run *run, int r) {
        int k;

        if (run->staging.ns_fd >= 0 && run->c->lock_fd >= 0) {
                k = run_collect(run);
                if (k < 0)
                        (void) report_warn(run->report, "Failed to release unused staged images: %s", strerror(-k));
        }
        if (run->versions) {
                k = versions_save(run->c->state_dir, run->versions);
                if (k < 0 && r >= 0)
                        report_set_error(run->report, k, "cannot write %s/versions.json: %s", run->c->state_dir,
                                         strerror(-k));
        }
        if (r < 0 && run->report->error == 0)
                report_set_error(run->report, r, "%s failed: %s", verb_to_string(run->verb), strerror(-r));
        return report_result(run->report);
}

static int tuck_run(TuckContext *c, TuckVerb verb, const TuckOptions *o, Report **ret) {
        _cleanup_report_ Report *report = report_new(verb_to_string(verb));
        Run run = run_new(c, verb, o, report);
        int r;

        if (!report)
                return -ENOMEM;
        r = run_finish(&run, run_steps(&run));
        run_done(&run);
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
int tuck_list(TuckContext *c, const TuckOptions *o, ImageList **ret, char **ret_error) {
        _cleanup_report_ Report *report = report_new("list");
        Run run = run_new(c, VERB_REFRESH, o, report);
        ImageList *l;
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
        if (r < 0) {
                image_list_free(l);
                if (ret_error)
                        *ret_error = TAKE_PTR(report->message);
                return r;
        }
        *ret = l;
        return 0;
}
