/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * /var/lib/tuck/versions.json, the anti-downgrade high-water marks, as a
 * refresh uses them: versions_load(), versions_get() of each extension and
 * the version compare against an image's version (plan.c), versions_set()
 * of a newer one and versions_save() (refresh.c). A file that loads must
 * take a new mark and give it back after a save and a load.
 */

#include <stdlib.h>

#include "fuzz.h"
#include "image-class.h"
#include "state.h"
#include "util.h"
#include "version.h"

static void use_marks(json_object *v, ImageClass c, const char *copy_dir) {
        json_object *cls, *w = NULL;
        const char *names[64];
        size_t n = 0;

        names[n++] = "foo";
        if (json_object_object_get_ex(v, image_class_to_string(c), &cls) && json_object_is_type(cls, json_type_object)) {
                json_object_object_foreach(cls, key, value) {
                        (void) value;
                        if (n < ELEMENTSOF(names))
                                names[n++] = key;
                }
        }
        for (size_t i = 0; i < n; i++) {
                const char *hw = versions_get(v, c, names[i]);

                if (hw)
                        (void) strverscmp_improved("1.0", hw);
        }
        /* A refresh activating a newer foo. */
        fuzz_assert(versions_set(v, c, "foo", "99.1") == 0);
        fuzz_assert(streq_ptr(versions_get(v, c, "foo"), "99.1"));
        fuzz_assert(versions_save(copy_dir, v) == 0);
        fuzz_assert(versions_load(copy_dir, &w) == 0);
        fuzz_assert(streq_ptr(versions_get(w, c, "foo"), "99.1"));
        json_object_put(w);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *state_dir = NULL, *copy_dir = NULL;
        json_object *v = NULL;
        int r;

        fuzz_setup();
        fuzz_write_file("state/versions.json", data, size);
        state_dir = path_join(fuzz_dir(), "state");
        copy_dir = path_join(fuzz_dir(), "copy");
        fuzz_assert(state_dir && copy_dir);

        r = versions_load(state_dir, &v);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                return 0;
        }
        for (ImageClass c = 0; c < _IMAGE_CLASS_MAX; c++)
                use_marks(v, c, copy_dir);
        json_object_put(v);
        return 0;
}
