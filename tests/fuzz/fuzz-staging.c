/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * /run/tuck/staging.json, as staging_table_load() reads it before every
 * refresh to reuse the mounts of unchanged images. A table that loads must
 * save and load back the same, and lookups, additions and removals on it
 * must keep it consistent.
 */

#include <stdlib.h>

#include "fuzz.h"
#include "state.h"
#include "util.h"

static bool table_eq(const StagingTable *a, const StagingTable *b) {
        if (a->ns_ino != b->ns_ino || a->next_id != b->next_id || a->n_images != b->n_images)
                return false;
        for (size_t i = 0; i < a->n_images; i++) {
                const StagedImage *x = &a->images[i], *y = &b->images[i];

                if (x->id != y->id || x->class != y->class || !streq(x->path, y->path) ||
                    !streq(x->fingerprint, y->fingerprint) || !streq_ptr(x->loop, y->loop) ||
                    x->usr_root != y->usr_root)
                        return false;
        }
        return true;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *run_dir = NULL, *copy_dir = NULL, *error = NULL;
        StagingTable t = {}, u = {};
        unsigned id;
        int r;

        fuzz_setup();
        fuzz_write_file("run/staging.json", data, size);
        run_dir = path_join(fuzz_dir(), "run");
        copy_dir = path_join(fuzz_dir(), "copy");
        fuzz_assert(run_dir && copy_dir);
        fuzz_assert(mkdir_p(copy_dir, 0755) >= 0);

        r = staging_table_load(run_dir, &t, &error);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                fuzz_assert(error || r == -ENOMEM);
                return 0;
        }
        fuzz_assert(t.next_id > 0);
        for (size_t i = 0; i < t.n_images; i++) {
                const StagedImage *s = &t.images[i];

                fuzz_assert(s->path && s->fingerprint && s->class >= 0 && s->class < _IMAGE_CLASS_MAX);
                fuzz_assert(staging_table_find(&t, s->class, s->fingerprint));
        }

        fuzz_assert(staging_table_save(copy_dir, &t) == 0);
        fuzz_assert(staging_table_load(copy_dir, &u, &error) == 0);
        fuzz_assert(table_eq(&t, &u));
        staging_table_done(&u);

        /* What a refresh does next: stage one more image, drop the first. */
        fuzz_assert(staging_table_add(&t, IMAGE_SYSEXT, "/var/lib/extensions/new.raw", "fp-new", NULL, false, &id) == 0);
        fuzz_assert(staging_table_find(&t, IMAGE_SYSEXT, "fp-new"));
        staging_table_remove(&t, t.images[0].id);
        staging_table_done(&t);
        return 0;
}
