/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * /var/lib/tuck/versions.json, the floors and the decisions behind them, as
 * a refresh uses them: versions_load(), the floor of each extension and the
 * version compare against an image's version (plan.c), then what a run
 * records (versions.c): a newer version activated, an older one allowed, an
 * extension retired, and versions_save(). A file that loads must come back
 * the same after a save and a load, and keep what was recorded into it. A
 * file that does not load says why.
 */

#include <stdlib.h>

#include "fuzz.h"
#include "image-class.h"
#include "util.h"
#include "version.h"
#include "versions.h"

static void round_trip(const Versions *v, const char *copy_dir) {
        _cleanup_free_ char *error = NULL;
        Versions w = {};

        fuzz_assert(versions_save(copy_dir, v) == 0);
        fuzz_assert(versions_load(copy_dir, &w, &error) == 0);
        /* Saved, a format-1 file is format 2: the same floors, no longer legacy. */
        fuzz_assert(!w.legacy);
        w.legacy = v->legacy;
        fuzz_assert(versions_equal(v, &w));
        versions_done(&w);
}

static void use_floors(Versions *v, ImageClass c, const char *copy_dir) {
        const char *floor;

        for (size_t i = 0; i < v->n_entries; i++) {
                const VersionEntry *e = &v->entries[i];

                fuzz_assert(e->extension && e->class >= 0 && e->class < _IMAGE_CLASS_MAX);
                fuzz_assert(versions_find(v, e->class, e->extension) == e);
                if (e->floor)
                        (void) strverscmp_improved("1.0", e->floor);
        }
        round_trip(v, copy_dir);

        /* A refresh activating a newer foo in /usr: the floor rises, foo is protected there. */
        fuzz_assert(versions_activate(v, c, "foo", "/usr", "99.1", 1, "fuzz") == 0);
        floor = versions_floor(v, c, "foo");
        fuzz_assert(floor && strverscmp_improved(floor, "99.1") >= 0);
        fuzz_assert(versions_protected(v, c, "foo", "/usr", NULL));
        /* An operator's rollback: the floor goes to what was allowed. */
        fuzz_assert(versions_allow(v, c, "foo", "1.0", 2, "fuzz --allow-downgrade=foo") == 0);
        fuzz_assert(streq_ptr(versions_floor(v, c, "foo"), "1.0"));
        round_trip(v, copy_dir);
        /* Retired on purpose: gone. */
        fuzz_assert(versions_forget(v, c, "foo") == 0);
        fuzz_assert(!versions_find(v, c, "foo"));
        round_trip(v, copy_dir);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *state_dir = NULL, *copy_dir = NULL, *error = NULL;
        Versions v = {};
        int r;

        fuzz_setup();
        fuzz_write_file("state/versions.json", data, size);
        state_dir = path_join(fuzz_dir(), "state");
        copy_dir = path_join(fuzz_dir(), "copy");
        fuzz_assert(state_dir && copy_dir);

        r = versions_load(state_dir, &v, &error);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                fuzz_assert(error || r == -ENOMEM);
                return 0;
        }
        for (ImageClass c = 0; c < _IMAGE_CLASS_MAX; c++)
                use_floors(&v, c, copy_dir);
        versions_done(&v);
        return 0;
}
