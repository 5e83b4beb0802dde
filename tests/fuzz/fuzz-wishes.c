/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * /run/tuck/namespaces/<hierarchy>.json, what each mount namespace wants
 * (stale.h), as a refresh loads it: json_load(), ns_wants_from_json(), the
 * witness check (here a stand-in that confirms every other witness), the
 * lookup of a namespace's flags, and ns_wants_to_json() for the next save,
 * which must load back the confirmed entries, witnesses and all.
 */

#include <stdlib.h>

#include "fuzz.h"
#include "mountinfo.h"
#include "state.h"
#include "stale.h"
#include "util.h"

static bool every_other(const NsWant *w, void *userdata) {
        return w->pid % 2 == 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *path = NULL;
        _cleanup_free_ NsWant *w = NULL, *back = NULL;
        json_object *o = NULL, *saved;
        size_t n = 0, k, m = 0;
        int r;

        fuzz_setup();
        fuzz_write_file("run/namespaces/usr.json", data, size);
        path = path_join(fuzz_dir(), "run/namespaces/usr.json");
        fuzz_assert(path);

        r = json_load(path, &o);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                return 0;
        }
        r = ns_wants_from_json(o, &w, &n);
        json_object_put(o);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -ENOMEM);
                return 0;
        }
        for (size_t i = 0; i < n; i++) {
                fuzz_assert(w[i].ns_ino > 0);
                fuzz_assert((w[i].attr & ~(uint64_t) TUCK_ATTR_MASK) == 0);
                fuzz_assert(w[i].pid >= 0);
        }

        k = ns_wants_confirm(w, n, every_other, NULL);
        fuzz_assert(k <= n);
        for (size_t i = 0; i < k; i++) {
                fuzz_assert(w[i].pid > 0 && w[i].pid % 2 == 1);
                (void) ns_wanted(w, k, w[i].ns_ino);
        }

        saved = ns_wants_to_json(w, k);
        fuzz_assert(saved);
        fuzz_assert(ns_wants_from_json(saved, &back, &m) == 0);
        json_object_put(saved);
        /* Duplicate inodes in the input collapse to one key in the saved object. */
        fuzz_assert(m <= k);
        for (size_t i = 0; i < m; i++)
                fuzz_assert(back[i].pid > 0 && back[i].ns_ino > 0);
        return 0;
}
