/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * env_file_parse(): os-release and extension-release files, as an image
 * author writes them. Checks what the parser promises: an even list of
 * valid keys, each key's value is its last assignment, an error names a line.
 */

#include <stdlib.h>

#include "env-file.h"
#include "fuzz.h"
#include "util.h"

static bool key_is_valid(const char *k) {
        if (!((*k >= 'A' && *k <= 'Z') || (*k >= 'a' && *k <= 'z') || *k == '_'))
                return false;
        return strspn(k, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz_0123456789") == strlen(k);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        _cleanup_strv_free_ char **pairs = NULL;
        unsigned skipped = 0;
        size_t n;
        int r;

        fuzz_setup();
        text = fuzz_strndup(data, size);
        r = env_file_parse(text, &pairs, &skipped, &error);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -ENOMEM);
                fuzz_assert(r != -EBADMSG || (error && startswith(error, "line ")));
                return 0;
        }
        n = strv_length(pairs);
        fuzz_assert(n % 2 == 0);
        for (size_t i = 0; i < n; i += 2) {
                const char *last = NULL;

                fuzz_assert(key_is_valid(pairs[i]));
                if (i >= 32)
                        continue;   /* the lookups of the first keys: the rest would make this quadratic */
                for (size_t k = i; k < n; k += 2)
                        if (streq(pairs[k], pairs[i]))
                                last = pairs[k + 1];
                fuzz_assert(env_pairs_get(pairs, pairs[i]) == last);
        }
        return 0;
}
