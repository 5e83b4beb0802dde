/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A root hash signature (signature.c signature_verify()): PKCS#7 (DER) over
 * the root hash in hex, checked against the certificates of verity.d in a
 * root that holds fuzz-ca.crt, and a second time against one whose verity.d
 * is empty. The input is the root hash in hex, a newline, then the DER. A
 * good signature names its signer; anything else says why; with no
 * certificate nothing verifies.
 */

#include <fcntl.h>
#include <stdlib.h>

#include "fuzz.h"
#include "signature.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *root;
        static char *empty_root;
        _cleanup_free_ char *hex = NULL, *signer = NULL, *why = NULL, *signer2 = NULL, *why2 = NULL;
        FuzzPart head, tail;
        int r;

        fuzz_setup();
        if (!root) {
                root = fuzz_trusting_root();
                fuzz_write_file("empty/etc/verity.d/.keep", "", 0);
                empty_root = path_join(fuzz_dir(), "empty");
                fuzz_assert(empty_root);
        }
        fuzz_split(data, size, "\n", &head, &tail);
        hex = fuzz_strndup(head.data, head.size);

        r = signature_verify(root, hex, tail.data, tail.size, &signer, &why);
        fuzz_assert(r >= -4095 && r <= 1);
        fuzz_assert(r != 1 || signer);
        fuzz_assert(r != 0 || why);

        r = signature_verify(empty_root, hex, tail.data, tail.size, &signer2, &why2);
        fuzz_assert(r == 0 || r == -ENOMEM);
        fuzz_assert(r != 0 || why2);
        return 0;
}
