/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * A DDI's verity-sig partition (verity.c verity_load_sig_partition()): a
 * JSON object with "rootHash" (hex) and "signature" (base64 PKCS#7), padded
 * with NULs, read from the image file; then the signature checked against
 * fuzz-ca.crt as /etc/verity.d (signature.c), as image_dissect() does. The
 * input is the partition's content. Loading it a second time over the root
 * hash the first load took must agree with it (a sidecar and the partition
 * naming the same hash); a refusal says why.
 */

#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuzz.h"
#include "signature.h"
#include "util.h"
#include "verity.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *path = NULL, *reason = NULL, *again = NULL;
        _cleanup_close_ int fd = -EBADF;
        DdiPartition p = { .found = true, .partno = 3, .offset = 0, .size = size };
        ImageVerity v = {};
        int r;

        fuzz_setup();
        fuzz_write_file("verity-sig", data, size);
        path = path_join(fuzz_dir(), "verity-sig");
        fuzz_assert(path);
        fd = open(path, O_RDONLY | O_CLOEXEC);
        fuzz_assert(fd >= 0);

        r = verity_load_sig_partition(fd, &p, &v, &reason);
        fuzz_assert(r >= -4095 && r <= 1);
        if (r == 0)
                fuzz_assert(reason);
        if (r <= 0)
                goto finish;
        fuzz_assert(v.root_hash && v.root_hash_size >= 16 && v.root_hash_from && v.sig_from);

        /* The same partition again, over the hash it gave: they agree. */
        fuzz_assert(verity_load_sig_partition(fd, &p, &v, &again) == 1);

        fuzz_check_signature(v.root_hash, v.root_hash_size, v.sig, v.sig_size);
finish:
        image_verity_done(&v);
        return 0;
}
