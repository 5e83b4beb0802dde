/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * /run/tuck/generations/<hierarchy>.json, as generation_load() reads it
 * before every merge, refresh and unmerge, at tuckd's start and in status.
 * A record that loads must come back the same through generation_to_json()
 * and generation_from_json() (what the next run reads is what this one
 * understood), and its history must stay bounded.
 */

#include <stdlib.h>

#include "fuzz.h"
#include "state.h"
#include "util.h"
#include "versions.h"

static bool layer_eq(const Layer *a, const Layer *b) {
        return streq_ptr(a->name, b->name) && streq_ptr(a->extension, b->extension) &&
               streq_ptr(a->version, b->version) && streq_ptr(a->image, b->image) &&
               streq_ptr(a->fingerprint, b->fingerprint);
}

static void check_round_trip(const Generation *g) {
        json_object *o = generation_to_json(g);
        _cleanup_free_ char *error = NULL;
        Generation h = {};

        fuzz_assert(o);
        fuzz_assert(generation_from_json(o, &h, &error) == 0);
        fuzz_assert(streq(g->hierarchy, h.hierarchy) && g->class == h.class && g->merged == h.merged);
        fuzz_assert(g->number == h.number && g->since_usec == h.since_usec);
        fuzz_assert(g->overlay_dev == h.overlay_dev && g->overlay_mnt_id == h.overlay_mnt_id);
        fuzz_assert(g->base_dev == h.base_dev && g->attr == h.attr && g->window == h.window);
        fuzz_assert(g->n_layers == h.n_layers && g->n_history == h.n_history);
        fuzz_assert(holds_equal(g->held, g->n_held, h.held, h.n_held));
        for (size_t i = 0; i < g->n_layers; i++)
                fuzz_assert(layer_eq(&g->layers[i], &h.layers[i]));
        for (size_t i = 0; i < g->n_history; i++)
                fuzz_assert(g->history[i].number == h.history[i].number && g->history[i].dev == h.history[i].dev);
        generation_done(&h);
        json_object_put(o);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *run_dir = NULL, *error = NULL;
        _cleanup_free_ PastOverlay *history = NULL;
        Generation g = {};
        size_t n;
        int r;

        fuzz_setup();
        fuzz_write_file("run/generations/usr.json", data, size);
        run_dir = path_join(fuzz_dir(), "run");
        fuzz_assert(run_dir);

        r = generation_load(run_dir, "/usr", &g, &error);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                fuzz_assert(error || r == -ENOMEM);
                return 0;
        }
        fuzz_assert(g.hierarchy && g.class >= 0 && g.class < _IMAGE_CLASS_MAX);
        fuzz_assert(g.n_history <= GENERATION_HISTORY_MAX);
        check_round_trip(&g);

        fuzz_assert(generation_history_after(&g, &history, &n) == 0);
        fuzz_assert(n <= GENERATION_HISTORY_MAX);
        generation_done(&g);
        return 0;
}
