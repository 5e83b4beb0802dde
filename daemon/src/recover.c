/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Crash recovery: what a run killed at any point leaves behind, made whole
 * again. A killed run may leave staged images and half-assembled overlays in
 * the staging namespace (collected by run_prepare() and run_collect()), and,
 * killed between the two halves of the swap, a new overlay attached beneath
 * the old top (finished here). Every mutating verb does this first, and
 * tuckd at start-up (tuck_recover()).
 */

#include <fcntl.h>
#include <inttypes.h>
#include <string.h>

#include "mountinfo.h"
#include "observe.h"
#include "run.h"
#include "swap.h"
#include "util.h"

/*
 * A run killed (or failed) between the two halves of 5d leaves two of our
 * overlays stacked on a hierarchy: the recorded old top, and right beneath it
 * the new one, complete but hidden. Everyone still sees the old generation.
 * Finish that swap as the run would have: unmounting the old top reveals the
 * new overlay everywhere at once. Left alone, the hidden overlay would stay
 * mounted and unreachable, and an unmerge would only reveal it. The new one
 * has no generation record yet: the plan replaces it like a foreign top
 * (TOP_LOST). Only our recorded top (mount ID, overlay source and device all
 * as recorded) over another overlay of ours (another superblock: not a bind
 * of the top onto itself) is taken for this.
 */
static int finish_interrupted_swap(Run *run, const TuckHierarchy *h) {
        _cleanup_(generation_done) Generation g = {};
        _cleanup_mnt_table_ struct libmnt_table *tb = NULL;
        const char *ours = image_class_info[h->class].overlay_source;
        struct libmnt_fs *top, *below;
        uint64_t id;
        int r;

        if (generation_load(run->c->run_dir, h->path, &g, NULL) < 0 || !g.merged)
                return 0;   /* no record: observe and plan say what the top is */
        if (path_get_mnt_id(AT_FDCWD, h->full, &id) < 0 || id != g.overlay_mnt_id)
                return 0;
        r = mount_table_read(0, &tb);
        if (r < 0)
                return r;
        top = mount_table_find_id(tb, (int) id);
        below = top ? mount_table_find_id(tb, mnt_fs_get_parent_id(top)) : NULL;
        /* The ID alone is no proof the top is the recorded overlay: mount IDs are
         * handed out again, lowest free first, once a mount is gone. */
        if (!top || !mount_is_overlay_of(top, ours) || mnt_fs_get_devno(top) != g.overlay_dev)
                return 0;
        if (!below || !streq_ptr(mnt_fs_get_target(below), h->full) || !mount_is_overlay_of(below, ours) ||
            mnt_fs_get_devno(below) == mnt_fs_get_devno(top))
                return 0;

        r = swap_finish(h->full, id);
        if (r < 0)
                return report_set_error(run->report, r, "%s: cannot finish the swap a killed run left half done "
                                        "(unmount the old overlay, mount %" PRIu64 "): %s", h->full, id,
                                        strerror(-r));
        return report_warn(run->report, "%s: finished the swap a killed run left half done: unmounted the old "
                           "overlay (generation %" PRIu64 ", mount %" PRIu64 ") above the new one (mount %d)",
                           h->full, g.number, id, mnt_fs_get_id(below));
}

int run_finish_interrupted_swaps(Run *run) {
        for (size_t i = 0; i < run->c->n_hierarchies; i++) {
                int r;

                if (!class_selected(run->o, run->c->hierarchies[i].class))
                        continue;
                r = finish_interrupted_swap(run, &run->c->hierarchies[i]);
                if (r < 0)
                        return r;
        }
        return 0;
}

int tuck_recover(TuckContext *c) {
        _cleanup_report_ Report *report = report_new("recover");
        Run run = run_new(c, VERB_REFRESH, NULL, report);
        int r;

        if (!report)
                return -ENOMEM;
        r = run_prepare(&run);
        if (r >= 0)
                r = run_finish_interrupted_swaps(&run);
        if (r >= 0)
                r = run_observe(&run);
        if (r >= 0)
                r = run_collect(&run);   /* also what a killed refresh left behind */
        run_done(&run);
        return r;
}
