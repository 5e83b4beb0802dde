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
 *                  refuse (plan.c: policy, no-op); an extension whose version
 *                  or whose loss is refused is held back alone (its staged
 *                  layer kept, or left out) and the rest goes ahead
 *      floors      the version floors, decisions and removal protection the
 *                  plan allows go to /var/lib/tuck/versions.json *before* any
 *                  swap (versions.h): killed at any point, the floor is the
 *                  old one or the new one
 *   5. execute     per hierarchy, independently (execute_swap()):
 *        a. base     capture it once, before the first merge: a private clone,
 *                    peeled out from under systemd-sysext's overlay if needed
 *        b. stage    attach new images in the staging namespace (staging.c)
 *        c. assemble the overlay there (its top layer the metadata layer
 *                    systemd-sysext writes; past one overlay's capacity,
 *                    groups of layers nested), clone it out detached and
 *                    private with its flags (overlay.c)
 *        d. swap     the mounts below the live top (nested mounts) carried
 *                    onto it (carry.c), then first merge: on top; otherwise
 *                    MOVE_MOUNT_BENEATH beneath the live top, then unmount
 *                    the old top through its fd (swap.c)
 *        e. record   the generation (/run/tuck), with what is held back
 *        f. stale    the namespaces that did not follow: healed, reported or
 *                    restarted as StalePolicy= says (stale.c; a snapshot is
 *                    taken before 5d, loosenable namespaces pinned)
 *   6. collect     unmount staged images no generation uses any more
 *   7. stale       the same for every merged hierarchy that did not change:
 *                  what a killed run or StalePolicy=report left behind
 *   8. floors      once more, for what was done: a swap that failed neither
 *                  raises a floor nor spends a decision
 *   9. manager     one daemon-reload and the unit restarts the extensions that
 *                  entered, changed or left ask for (reload.c)
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
#include "verity.h"
#include "version.h"
#include "versions.h"

static const TuckOptions no_options = {};

Run run_new(TuckContext *c, TuckVerb verb, const TuckOptions *o, Report *report) {
        const TuckOptions *opts = o ?: &no_options;

        return (Run) {
                .c = c,
                .o = opts,
                .verb = verb,
                .report = report,
                .staging = STAGING_INIT,
                .trust = TRUST_CACHE_INIT,
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
        for (size_t i = 0; run->record_errors && i < run->c->n_hierarchies; i++)
                free(run->record_errors[i]);
        free(run->record_errors);
        for (size_t i = 0; i < run->n_inputs; i++)
                free(run->inputs[i].live.description);
        free(run->inputs);
        free(run->input_index);
        plan_done(&run->plan);
        manager_request_done(&run->manager);
        staging_close(&run->staging);
        staging_table_done(&run->table);
        trust_cache_done(&run->trust);
        versions_done(&run->versions);
        versions_done(&run->written);
        for (size_t i = 0; run->staged && i < run->n_inputs; i++)
                free(run->staged[i]);
        free(run->staged);
        host_release_done(&run->host);
        tuck_unlock(run->c);
}

bool class_selected(const TuckOptions *o, ImageClass k) {
        return o->classes == 0 || (o->classes & (1u << k));
}

/*
 * The staging table. One that cannot be read is started afresh, never a
 * reason to stop: the images it listed are orphans then, detached, and
 * staged again where still needed (the live overlay keeps its own references).
 */
static int load_staging_table(Run *run) {
        _cleanup_free_ char *error = NULL;
        int r;

        r = staging_table_load(run->c->run_dir, &run->table, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                (void) report_warn(run->report, "Ignoring %s/staging.json: %s; staged images are mounted afresh",
                                   run->c->run_dir, error ?: strerror(-r));
                run->table = (StagingTable) { .next_id = 1 };
        }
        return 0;
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
        r = load_staging_table(run);
        if (r < 0)
                return r;
        if (run->table.ns_ino != run->staging.ns_ino) {
                /* A new staging namespace: whatever the table listed is not mounted there. */
                staging_table_done(&run->table);
                run->table = (StagingTable) { .ns_ino = run->staging.ns_ino, .next_id = 1 };
        }
        if (staging_enter(&run->staging) >= 0) {
                /* What a killed run left in the staging namespace goes before anything is staged
                 * again (not when only looking: a lost table would make every image an orphan). */
                if (!run->listing)
                        staging_detach_orphans(&run->staging, &run->table);
                staging_table_drop_unmounted(&run->staging, &run->table);
        }
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
        /* dm-verity devices a killed run left unmounted go now; those in use go with their last mount. */
        r = verity_sweep();
        if (r < 0 && r != -ENOENT)
                log_debug_errno(r, "Cannot look for dm-verity devices left behind: %m");
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
                if (n > 0)   /* found is NULL when nothing was found: memcpy(_, NULL, 0) is undefined */
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
static int image_tree_fd(Run *run, size_t idx, int *ret_fd, char **ret_reason) {
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

        r = image_mount_detached(img, &x->mount_fd, &x->loop, ret_reason);
        if (r < 0)
                return r;
        *ret_fd = fcntl(x->mount_fd, F_DUPFD_CLOEXEC, 3);
        return *ret_fd < 0 ? -errno : 0;
}

/*
 * Is the image usable: who may write it (trust.c), what it holds and how it
 * is protected (dissect.c), whether ImagePolicy= takes that, whether it
 * mounts (with dm-verity: verified in full first), what its release file
 * says? An unusable one is marked with the reason, not an error.
 */
static int inspect_image(Run *run, size_t idx) {
        Image *img = run->images[idx];
        _cleanup_free_ char *reason = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        if (img->type == IMAGE_TYPE_UNSUPPORTED)
                return img->fstype ?
                        mark_invalid(img, "file system '%s' is not supported (squashfs and erofs only)", img->fstype) :
                        mark_invalid(img, "no squashfs or erofs file system found");
        img->inspected = true;
        img->valid = true;
        r = image_check_trust(img, &run->trust);
        if (r <= 0)
                return r;
        r = image_dissect(img, run->c->root, run->host.architecture);
        if (r <= 0)
                return r;
        r = image_check_policy(img, run->c->config.image_policy[img->class]);
        if (r <= 0)
                return r;
        r = image_fingerprint(img);
        if (r < 0)
                return mark_invalid(img, "cannot read: %s", strerror(-r));
        r = image_tree_fd(run, idx, &fd, &reason);
        if (r < 0)
                return reason ? mark_invalid(img, "%s", reason) : mark_invalid(img, "cannot mount: %s", strerror(-r));
        if (img->kernel_sig > 0)
                log_info("%s: the kernel checked the root hash signature too.", img->path);
        else if (img->kernel_sig < 0)
                log_info("%s: the kernel could not check the root hash signature (activating with it failed: "
                         "%s; it has no key for it, or no DM_VERITY_VERIFY_ROOTHASH_SIG); it was checked in "
                         "userspace against verity.d.", img->path, strerror(-img->kernel_sig));
        /* --force: no host to match the release file against, as systemd-sysext skips the check. */
        return image_validate(img, fd, run->o->ignore_release ? NULL : &run->host, run->c->root,
                              run->c->config.hierarchies[img->class]);
}

static int run_inspect(Run *run) {
        for (size_t i = 0; i < run->n_images; i++) {
                Image *img = run->images[i];
                int r;

                if (img->state != IMAGE_CANDIDATE)
                        continue;
                if (!img->inspected)
                        r = inspect_image(run, i);
                else
                        r = 0;   /* refused at discovery (an untrusted search directory) */
                if (r < 0)
                        return r;
                if (!img->valid)
                        (void) report_warn(run->report, "Skipped %s image '%s': %s", image_class_to_string(img->class),
                                           img->path, img->reason);
                else if (img->identity_note)
                        (void) report_warn(run->report, "%s image '%s' ('%s'): %s", image_class_to_string(img->class),
                                           img->name, img->path, img->identity_note);
        }
        return 0;
}

/* 3. observe */

/* The generation record of hierarchy i; none yet is generation 0. */
static int load_generation(Run *run, size_t i) {
        const TuckHierarchy *h = &run->c->hierarchies[i];
        Generation *g = &run->generations[i];
        _cleanup_free_ char *error = NULL, *path = NULL;
        int r;

        r = generation_load(run->c->run_dir, h->path, g, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0 && r != -ENOENT) {
                path = generation_path(run->c->run_dir, h->path);
                (void) asprintf_safe(&run->record_errors[i], "cannot use the generation record %s: %s",
                                     strna(path), error ?: strerror(-r));
        }
        if (r < 0)
                *g = (Generation) { .class = h->class, .hierarchy = strdup(h->path) };
        return g->hierarchy ? 0 : -ENOMEM;
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
        if (run->record_errors[i]) {
                HierarchyReport *hr;

                /* Unmerge and list go on as if there were no record: unmerge takes our overlay
                 * down all the same and writes a fresh one. Nothing else acts on a hierarchy
                 * whose state it cannot read; the others go ahead. */
                if (run->verb == VERB_UNMERGE || run->listing) {
                        r = report_warn(run->report, "%s: %s; taken as no record", h->path, run->record_errors[i]);
                        if (r < 0)
                                return r;
                } else {
                        hr = report_add(run->report, h->path, h->class);
                        if (!hr)
                                return -ENOMEM;
                        (void) hierarchy_report_set(hr, OUTCOME_FAILED, -EBADMSG, "%s; left as it is (tuckctl "
                                                    "unmerge takes it down and writes a fresh record)",
                                                    run->record_errors[i]);
                        return 0;
                }
        }
        in = &run->inputs[run->n_inputs];
        run->input_index[run->n_inputs++] = i;
        *in = (PlanHierarchyInput) {
                .hierarchy = h->path,
                .class = h->class,
                .current = g->number > 0 ? g : NULL,
        };
        /* Which layers of the current generation could stay if held back: those still staged. */
        run->staged[run->n_inputs - 1] = calloc(g->n_layers ?: 1, sizeof(bool));
        if (!run->staged[run->n_inputs - 1])
                return -ENOMEM;
        for (size_t k = 0; k < g->n_layers; k++)
                run->staged[run->n_inputs - 1][k] = staging_table_find(&run->table, g->class,
                                                                       g->layers[k].fingerprint) != NULL;
        in->staged = run->staged[run->n_inputs - 1];
        r = observe_live(h, g, &in->live);
        if (r < 0)
                return report_set_error(run->report, r, "Failed to look at %s: %s", h->full, strerror(-r));
        return 0;
}

/* Every hierarchy's generation record (unprivileged: files in /run/tuck anyone may read). */
static int run_load_generations(Run *run) {
        run->generations = calloc(run->c->n_hierarchies ?: 1, sizeof(Generation));
        run->record_errors = calloc(run->c->n_hierarchies ?: 1, sizeof(char *));
        if (!run->generations || !run->record_errors)
                return -ENOMEM;
        for (size_t i = 0; i < run->c->n_hierarchies; i++) {
                int r = load_generation(run, i);

                if (r < 0)
                        return r;
        }
        return 0;
}

int run_observe(Run *run) {
        int r;

        r = run_load_generations(run);
        if (r < 0)
                return r;
        run->inputs = calloc(run->c->n_hierarchies ?: 1, sizeof(PlanHierarchyInput));
        run->input_index = calloc(run->c->n_hierarchies ?: 1, sizeof(size_t));
        run->staged = calloc(run->c->n_hierarchies ?: 1, sizeof(bool *));
        if (!run->inputs || !run->input_index || !run->staged)
                return -ENOMEM;

        for (size_t i = 0; i < run->c->n_hierarchies; i++) {
                if (!class_selected(run->o, run->c->hierarchies[i].class))
                        continue;
                r = observe_hierarchy(run, i);
                if (r < 0)
                        return r;
        }
        return 0;
}

/* 4. plan: the floors first. A versions.json that cannot be read stops merge and refresh, whose
 * floors it holds; unmerge, status and list never read it. */
static int load_versions(Run *run) {
        _cleanup_free_ char *error = NULL;
        int r;

        if (run->verb == VERB_UNMERGE)
                return 0;
        r = versions_load(run->c->state_dir, &run->versions, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return report_set_error(run->report, r, "cannot use %s/versions.json: %s; refusing to %s without "
                                        "the version floors it holds (unmerge, status and list still work; "
                                        "fix the file, or move it aside to start every floor afresh)",
                                        run->c->state_dir, error ?: strerror(-r), verb_to_string(run->verb));
        return versions_copy(&run->written, &run->versions);
}

static int run_plan(Run *run) {
        PlanInput in = {
                .verb = run->verb,
                .images = run->images,
                .n_images = run->n_images,
                .hierarchies = run->inputs,
                .n_hierarchies = run->n_inputs,
                .versions = &run->versions,
                .always_refresh = run->o->always_refresh,
                .allow_downgrade = run->o->allow_downgrade || run->c->config.allow_downgrade,
                .allow_downgrade_names = run->o->allow_downgrade_names,
                .remove = run->o->remove,
                .boot_id = boot_id_current(),
        };
        int r;

        r = load_versions(run);
        if (r < 0)
                return r;
        return plan_build(&in, &run->plan);
}

/* Who decided, for versions.json: the caller's words, and tuck.conf's if it allowed downgrades. */
static char *run_via(Run *run) {
        char *s = NULL;

        if (run->c->config.allow_downgrade && !run->o->allow_downgrade)
                (void) asprintf_safe(&s, "%s, with AllowDowngrade=yes in %s", run->o->via ?: "libtuck",
                                     run->c->config_path);
        else
                s = strdup(run->o->via ?: "libtuck");
        return s;
}

/*
 * The floors once the hierarchies marked in @done are done as planned, into
 * versions.json if they differ from what it holds. Called before any swap
 * with every hierarchy (what the swaps allow is on disk first), and after,
 * with those that succeeded.
 */
static int save_floors(Run *run, const bool *done) {
        _cleanup_(versions_done) Versions after = {};
        _cleanup_free_ char *via = run_via(run);
        int r;

        if (run->verb == VERB_UNMERGE)
                return 0;
        if (!via)
                return -ENOMEM;
        r = plan_versions_after(&run->plan, &run->versions, done, now_usec(CLOCK_REALTIME), via, &after);
        if (r < 0)
                return r;
        if (versions_equal(&after, &run->written))
                return 0;
        r = versions_save(run->c->state_dir, &after);
        if (r < 0)
                return r;
        versions_done(&run->written);
        run->written = after;
        after = (Versions) {};
        return 1;
}

/* 4, floors: before any swap. If they cannot be written, no swap happens (see execute_one()). */
static int run_save_floors(Run *run) {
        int r;

        if (run->verb == VERB_UNMERGE)
                return 0;
        r = save_floors(run, NULL);
        if (r == -ENOMEM)
                return r;
        if (r < 0) {
                run->floors_unsaved = r;
                (void) report_warn(run->report, "cannot write %s/versions.json: %s; no swap in this run",
                                   run->c->state_dir, strerror(-r));
        }
        return 0;
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
        SwapStage stage;             /* how far the swap got (swap.h) */
        unsigned carried;            /* mounts below the old top carried onto the new one */
        StaleSnapshot stale;         /* namespaces before the swap */
        char **preserved;            /* taking systemd-sysext's overlay over: the extensions it had */
} SwapJob;

static void swap_job_done(SwapJob *j) {
        stale_snapshot_done(&j->stale);
        free(j->base_rel);
        strv_free(j->lowers);
        strv_free(j->preserved);
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
        r = staging_table_add(&run->table, img->class, img->path, img->fingerprint, x->loop,
                              image_is_usr_partition(img), &id);
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

/*
 * Inside: where layer @l is staged. A new image is staged now; a kept layer
 * (held back) is the staged mount of the image that was active, found by its
 * fingerprint: the file on disk may hold another image by now.
 */
static int layer_staged_id(Run *run, ImageClass class, const PlanLayer *l, unsigned *ret, bool *ret_usr_root,
                           char **ret_error) {
        Inspected *x;
        int r;

        if (l->kept) {
                const StagedImage *s = staging_table_find(&run->table, class, l->kept->fingerprint);

                if (!s) {
                        (void) asprintf_safe(ret_error, "the staged image of '%s' %s (held back) is gone",
                                             l->kept->name, l->kept->version ?: "(unversioned)");
                        return -ENOENT;
                }
                *ret = s->id;
                *ret_usr_root = s->usr_root;
                return 0;
        }
        x = &run->inspected[image_index(run, l->image)];
        r = stage_image(run, l->image, x, ret_error);
        if (r < 0)
                return r;
        *ret = x->staged_id;
        *ret_usr_root = image_is_usr_partition(l->image);
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
                const PlanLayer *l = &j->p->layers[k - 1];
                unsigned id = 0;
                bool usr_root = false;
                char *lower = NULL;

                r = layer_staged_id(run, j->p->class, l, &id, &usr_root, &j->error);
                /* A DDI's usr partition is /usr itself: the layer is its root. */
                if (r >= 0 && (usr_root ? asprintf_safe(&lower, "i/%u", id) :
                                          asprintf_safe(&lower, "i/%u/%s", id, j->h->path + 1)) < 0)
                        r = -ENOMEM;
                if (r >= 0 && strv_consume(&lowers, lower) < 0)
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

/* The layers' names bottom to top (the metadata layer's list) and their images top first (messages). */
static int layer_names(const HierarchyPlan *p, char ***ret_names, char ***ret_images) {
        _cleanup_strv_free_ char **names = calloc(1, sizeof(char *)), **images = calloc(1, sizeof(char *));

        if (!names || !images)
                return -ENOMEM;
        for (size_t k = 0; k < p->n_layers; k++) {
                const PlanLayer *bottom = &p->layers[k], *top = &p->layers[p->n_layers - 1 - k];

                /* A kept (held back) layer is the current generation's: its record names it. */
                if (strv_extend(&names, bottom->image ? bottom->image->name : bottom->kept->name) < 0 ||
                    strv_extend(&images, top->image ? top->image->path : strna(top->kept->image)) < 0)
                        return -ENOMEM;
        }
        *ret_names = TAKE_PTR(names);
        *ret_images = TAKE_PTR(images);
        return 0;
}

/* 5c. Assemble the overlay in the staging namespace and clone it out. */
static int assemble(Run *run, SwapJob *j) {
        _cleanup_strv_free_ char **names = NULL, **images = NULL;
        struct stat st;
        int r;

        r = layer_names(j->p, &names, &images);
        if (r < 0)
                return r;
        r = staging_enter(&run->staging);
        if (r >= 0) {
                OverlaySpec spec = {
                        .hid = j->h->id,
                        .hierarchy = j->h->path,
                        .class = j->h->class,
                        .lowers = j->lowers,
                        .layer_images = images,
                        .extensions = names,
                        .source = image_class_info[j->h->class].overlay_source,
                        .attr = j->attr,
                };

                r = j->tree = overlay_assemble(&run->staging, &spec, &j->error);
        }
        (void) staging_leave(&run->staging);
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
                        StaleSnapshot *before, HierarchyReport *hr) {
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

/* 5d. The swap: the new overlay in place of the top, the mounts below it carried over (swap.h). */
static int swap_into_place(Run *run, SwapJob *j) {
        _cleanup_(swap_result_done) SwapResult res = {};
        uint64_t now_attr = 0;
        int r;

        r = swap_replace_top(&(SwapSpec) {
                                .proc_fd = -EBADF,
                                .path = j->h->full,
                                .top_id = j->p->live.top_mnt_id,
                                .tree_fd = j->tree,
                                .how = j->p->action == PLAN_MERGE ? SWAP_ON_TOP :
                                       j->window ? SWAP_WINDOW : SWAP_BENEATH,
                                .budget = &run->budget,
                             }, &res);
        j->stage = res.stage;
        j->carried = res.carried;
        if (r < 0) {
                j->error = TAKE_PTR(res.error);
                return r;
        }
        /* The new top must carry at least the flags we set (the kernel copies them; check anyway). */
        if (path_get_mount_attr(AT_FDCWD, j->h->full, &now_attr) >= 0 && (now_attr & j->attr) != j->attr)
                log_warning("%s: the new overlay's flags are 0x%" PRIx64 ", expected at least 0x%" PRIx64 ".",
                            j->h->full, now_attr, j->attr);
        return 0;
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
                r = plan_layer_to_layer(&j->p->layers[i], &g.layers[i]);
                if (r >= 0)
                        g.n_layers++;
        }
        if (r >= 0 && j->p->n_held > 0) {
                r = holds_copy(j->p->held, j->p->n_held, &g.held);
                if (r >= 0)
                        g.n_held = j->p->n_held;
        }
        if (r < 0) {
                generation_done(&g);
                return r;
        }
        *ret = g;
        return 0;
}

/* 5e. Record the generation (/run/tuck); the floors it allows are in /var/lib/tuck already. */
static int record(Run *run, const SwapJob *j, Generation *ret) {
        Generation g;
        int r;

        r = new_generation(j, &g);
        if (r < 0)
                return r;
        r = generation_save(run->c->run_dir, &g);
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

        /* What systemd-sysext had merged stays merged: not new to the service manager. */
        if (p->live.top == TOP_SYSTEMD)
                (void) observe_foreign_extensions(j.h, &j.preserved);
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
                r = swap_into_place(run, &j);
        if (r < 0 && j.stage == SWAP_UNTOUCHED) {
                /* Nothing moved: what was pinned for this swap goes again. */
                StaleHierarchy sh = stale_hierarchy(run, j.h);

                stale_unpin(&sh, &j.stale);
        }
        if (r < 0 && j.stage == SWAP_EXPOSED)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "%s; %s shows the base (--allow-window)",
                                            j.error ?: strerror(-r), j.h->full);
        if (r < 0 && j.stage == SWAP_HIDDEN)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "%s; everyone still sees generation %" PRIu64
                                            ", the new overlay waits beneath it: the next run finishes the swap",
                                            j.error ?: strerror(-r), j.old->number);
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "%s; generation %" PRIu64 " left in place",
                                            j.error ?: strerror(-r), j.old->number);

        r = record(run, &j, &new);
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "the new generation is in place but could not "
                                            "be recorded: %s", strerror(-r));
        report_swapped(hr, &j, &new);
        r = manager_request_add_swap(&run->manager, j.old, &new, j.preserved);
        if (r < 0)
                (void) report_warn(run->report, "%s: cannot tell what the service manager is to do: %s",
                                   j.h->path, strerror(-r));
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
        Hold *held;
        int r;

        if (!base_rel)
                return -ENOMEM;
        /* Our overlay, if it is still the top, through its fd (swap.h). */
        r = swap_finish(h->full, p->live.top_mnt_id);
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "cannot unmount the overlay: %s", strerror(-r));

        if (manager_request_add_all(&run->manager, g) < 0)
                (void) report_warn(run->report, "%s: cannot tell what the service manager is to do", h->path);

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
        /* What the plan holds back: none for the verb unmerge; a refresh left with no extension
         * but one held back (out: nothing of it staged) is degraded, and must say so. */
        r = holds_copy(p->held, p->n_held, &held);
        if (r < 0)
                return r;
        holds_free(g->held, g->n_held);
        g->held = held;
        g->n_held = p->n_held;
        r = generation_save(run->c->run_dir, g);
        if (r < 0)
                return hierarchy_report_set(hr, OUTCOME_FAILED, r, "unmounted, but the record could not be "
                                            "written: %s", strerror(-r));
        hierarchy_report_set(hr, OUTCOME_UNMERGED, 0, "%s", p->reason ?: "the base is visible again");
        return 1;
}

/*
 * Without a swap, what is held back may still change (held back now, or no
 * longer): the record says it, for status and tuckd. A hierarchy never merged
 * gets a record of generation 0 only when it has something to say.
 */
static void record_held(Run *run, size_t idx, const HierarchyPlan *p, HierarchyReport *hr) {
        Generation *g = &run->generations[idx];
        Hold *held = NULL;
        int r;

        if (holds_equal(g->held, g->n_held, p->held, p->n_held) || (g->number == 0 && p->n_held == 0))
                return;
        r = holds_copy(p->held, p->n_held, &held);
        if (r >= 0) {
                holds_free(g->held, g->n_held);
                g->held = held;
                g->n_held = p->n_held;
                r = generation_save(run->c->run_dir, g);
        }
        if (r < 0)
                (void) report_warn(run->report, "%s: cannot record what is held back: %s", p->hierarchy,
                                   strerror(-r));
        (void) hr;
}

/* One hierarchy's plan; a failure is in its report. -EINVAL only for a plan that makes no sense. */
static int execute_one(Run *run, const HierarchyPlan *p, size_t idx, HierarchyReport *hr) {
        const Generation *g = &run->generations[idx];

        if (run->floors_unsaved < 0 && (p->action == PLAN_MERGE || p->action == PLAN_REFRESH ||
                                        p->action == PLAN_TAKEOVER)) {
                hierarchy_report_set(hr, OUTCOME_FAILED, run->floors_unsaved, "cannot write the version floors "
                                     "this swap allows to %s/versions.json: %s; generation %" PRIu64 " left in place",
                                     run->c->state_dir, strerror(-run->floors_unsaved), g->number);
                (void) hierarchy_report_set_layers(hr, g);
                return 0;
        }

        switch (p->action) {
        case PLAN_NOTHING:
                hierarchy_report_set(hr, OUTCOME_NOTHING, 0, "%s", strna(p->reason));
                record_held(run, idx, p, hr);
                return 0;
        case PLAN_KEEP:
                hierarchy_report_set(hr, OUTCOME_UNCHANGED, 0, "%s", strna(p->reason));
                record_held(run, idx, p, hr);
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

/* Held back: in the report, and a refusal by policy (exit status 3) whatever else went ahead. */
static int report_held(HierarchyReport *hr, const HierarchyPlan *p) {
        int r;

        if (p->n_held == 0 || p->action == PLAN_REFUSE)
                return 0;
        r = holds_copy(p->held, p->n_held, &hr->held);
        if (r < 0)
                return r;
        hr->n_held = p->n_held;
        if (hr->error == 0)
                hr->error = -EPERM;
        return 0;
}

/* Each hierarchy on its own: a failure is in its report, and the others go ahead. */
static int run_execute(Run *run) {
        _cleanup_free_ bool *done = calloc(run->plan.n_hierarchies ?: 1, sizeof(bool));
        int r;

        if (!done)
                return -ENOMEM;
        for (size_t i = 0; i < run->plan.n_hierarchies; i++) {
                const HierarchyPlan *p = &run->plan.hierarchies[i];
                size_t idx = run->input_index[i];
                HierarchyReport *hr;
                
                hr = report_add(run->report, p->hierarchy, p->class);
                if (!hr)
                        return -ENOMEM;
                hr->old_generation = run->generations[idx].merged ? run->generations[idx].number : 0;
                r = execute_one(run, p, idx, hr);
                if (r < 0)
                        return r;
                done[i] = hr->outcome != OUTCOME_FAILED && hr->outcome != OUTCOME_REFUSED;
                r = report_held(hr, p);
                if (r < 0)
                        return r;
                stale_unchanged(run, i, hr);
                if (hr->error < 0)
                        log_debug("%s: %s", p->hierarchy, strna(hr->message));
        }
        /* 8. The floors of what was done (a failed swap raises none); the same as before if all went. */
        r = run->floors_unsaved < 0 ? 0 : save_floors(run, done);
        if (r < 0 && r != -ENOMEM)
                return report_set_error(run->report, r, "cannot write %s/versions.json after the swaps: %s; "
                                        "it holds the floors they allowed", run->c->state_dir, strerror(-r));
        return r < 0 ? r : 0;
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

/* 8. The service manager: daemon-reload and unit restarts, as the extensions that changed ask (reload.h). */
static void run_manager(Run *run) {
        ManagerReport *m = &run->report->manager;
        int policy = run->c->config.reload_manager;
        const char *skip = NULL;

        if (!run->manager.reload)
                return;
        m->asked_by = strv_copy(run->manager.asked_by);
        if (run->o->no_reload)
                skip = "--no-reload";
        else if (policy == 0)
                skip = "ReloadManager=no";
        else if (policy < 0 && !streq(run->c->root, "/"))
                skip = "--root: the host's service manager is not this tree's";
        if (skip) {
                m->skipped = strdup(skip);
                return;
        }
        manager_request_execute(&run->manager, m);
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
                r = run_save_floors(run);
        if (r >= 0)
                r = run_execute(run);
        if (r >= 0)
                run_manager(run);
        return r;
}

/* Whatever happened: release what is no longer used. */
static int run_finish(Run *run, int r) {
        int k;

        if (run->staging.ns_fd >= 0 && run->c->lock_fd >= 0) {
                k = run_collect(run);
                if (k < 0)
                        (void) report_warn(run->report, "Failed to release unused staged images: %s", strerror(-k));
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
/*
 * list: as root, the images are inspected under the lock (the staged ones
 * where they are staged, the others mounted detached); otherwise only what
 * discovery and the generation records tell: no lock, nothing mounted, and
 * an image is known by its record if it is active.
 */
static int list_steps(Run *run, bool privileged) {
        int r;

        if (!privileged) {
                r = run_discover(run);
                for (size_t i = 0; r >= 0 && i < run->n_images; i++)
                        if (run->images[i]->state == IMAGE_CANDIDATE)
                                (void) image_fingerprint(run->images[i]);
                return r < 0 ? r : run_load_generations(run);
        }
        r = run_prepare(run);
        if (r >= 0)
                r = run_discover(run);
        if (r >= 0)
                r = run_inspect(run);
        if (r >= 0)
                r = run_observe(run);
        return r;
}

int tuck_list(TuckContext *c, const TuckOptions *o, ImageList **ret, char **ret_error) {
        _cleanup_report_ Report *report = report_new("list");
        Run run = run_new(c, VERB_REFRESH, o, report);
        bool privileged = geteuid() == 0;
        ImageList *l;
        int r;

        if (!report)
                return -ENOMEM;
        run.listing = true;
        l = calloc(1, sizeof(ImageList));
        if (!l)
                return -ENOMEM;
        r = list_steps(&run, privileged);
        if (r >= 0) {
                l->images = TAKE_PTR(run.images);
                l->n_images = run.n_images;
                l->generations = TAKE_PTR(run.generations);
                l->n_generations = c->n_hierarchies;
                l->inspected = privileged;
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
