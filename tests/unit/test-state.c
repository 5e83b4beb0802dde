/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Generation records: the history of overlays a namespace may still show
 * (newest first, capped, the oldest dropped), and the JSON round trip.
 */

#include <inttypes.h>
#include <stdlib.h>
#include <sys/sysmacros.h>

#include "state.h"
#include "tap.h"
#include "util.h"

static void test_history_after(bool merged, size_t n_old) {
        PastOverlay old_history[GENERATION_HISTORY_MAX];
        Generation g = {
                .merged = merged, .number = 100, .overlay_dev = makedev(0, 100),
                .history = old_history, .n_history = n_old,
        };
        PastOverlay *h = NULL;
        size_t n = 0, want = merged + n_old;
        int r;

        for (size_t i = 0; i < n_old; i++)
                old_history[i] = (PastOverlay) { .number = 99 - i, .dev = makedev(0, 99 - i) };
        if (want > GENERATION_HISTORY_MAX)
                want = GENERATION_HISTORY_MAX;

        r = generation_history_after(&g, &h, &n);
        tap_ok(r == 0 && n == want,
               "%s, %zu old: %zu after (want %zu)", merged ? "merged" : "unmerged", n_old, n, want);
        if (n > 0)
                tap_ok(h[0].number == (merged ? 100 : 99) && h[n - 1].number == (merged ? 101 : 100) - n,
                       "newest first, oldest dropped: %" PRIu64 " .. %" PRIu64, h[0].number, h[n - 1].number);
        free(h);
}

static void test_json_round_trip(void) {
        Layer layers[] = { { "foo", "foo", "1.2", "/run/extensions/foo.raw", "raw:1:2:3:4.5" } };
        PastOverlay history[] = { { 6, makedev(0, 47) } };
        Generation g = {
                .hierarchy = (char *) "/usr", .class = IMAGE_SYSEXT, .merged = true, .number = 7,
                .overlay_dev = makedev(0, 48), .overlay_mnt_id = 123, .base_dev = makedev(0, 40),
                .attr = 5, .layers = layers, .n_layers = 1, .history = history, .n_history = 1,
        }, back = {};
        json_object *o = generation_to_json(&g);

        tap_ok(o && generation_from_json(o, &back) == 0, "generation to JSON and back");
        tap_ok(streq_ptr(back.hierarchy, "/usr") && back.number == 7 && back.overlay_dev == g.overlay_dev &&
               back.overlay_mnt_id == 123 && back.base_dev == g.base_dev && back.attr == 5,
               "the record survives");
        tap_ok(back.n_layers == 1 && streq_ptr(back.layers[0].version, "1.2") && back.n_history == 1 &&
               back.history[0].dev == makedev(0, 47), "layers and history survive");
        json_object_put(o);
        generation_done(&back);
}

int main(void) {
        test_history_after(true, 0);
        test_history_after(true, 5);
        test_history_after(false, 5);
        /* A full history: the overlay being retired goes first, the oldest goes. */
        test_history_after(true, GENERATION_HISTORY_MAX);
        test_history_after(false, GENERATION_HISTORY_MAX);
        test_json_round_trip();
        return tap_done();
}
