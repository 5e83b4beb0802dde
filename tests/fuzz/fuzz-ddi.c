/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * An image file as discovery hands it on (dissect.c): image_probe_type(),
 * then image_dissect(). For a GPT disk image that is the partition table
 * (ddi.c, through libblkid), the file system of the chosen partition, the
 * verity-sig partition's JSON and its PKCS#7 signature (verity.c,
 * signature.c, against fuzz-ca.crt as /etc/verity.d in the root) and the
 * check that the root hash names the partitions. An image that passes must
 * describe a file system inside the file that tuck mounts; one that does not
 * says why.
 *
 * A DDI is megabytes of mostly nothing, so the input describes one sparsely:
 *
 *   byte 0        the host's architecture: x86-64, arm64, x86, riscv64 (by its value mod 4)
 *   bytes 1-4     the file's size in 512-byte sectors (little endian, at most 64 MiB)
 *   then chunks   sector (4 bytes, little endian), length (2), that many bytes
 *
 * The chunks are written at their sectors into a sparse file of that size
 * (a chunk past its end makes it longer, to 64 MiB at most).
 * make-image-seeds cuts the seeds from the image corpus this way.
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "image.h"
#include "util.h"

#define MAX_SIZE (UINT64_C(64) << 20)

static const char * const archs[] = { "x86-64", "arm64", "x86", "riscv64" };

static uint64_t min_u64(uint64_t a, uint64_t b) {
        return a < b ? a : b;
}

static uint64_t le(const uint8_t *p, size_t n) {
        uint64_t x = 0;

        for (size_t i = n; i > 0; i--)
                x = x << 8 | p[i - 1];
        return x;
}

static void write_image(const char *path, const uint8_t *data, size_t size) {
        _cleanup_close_ int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        uint64_t file_size = le(data + 1, 4) * 512;

        fuzz_assert(fd >= 0);
        fuzz_assert(ftruncate(fd, (off_t) min_u64(file_size, MAX_SIZE)) == 0);
        for (size_t at = 5; at + 6 <= size; ) {
                uint64_t off = le(data + at, 4) * 512;
                size_t len = (size_t) min_u64(le(data + at + 4, 2), size - at - 6);

                at += 6;
                if (off < MAX_SIZE && len > 0)
                        fuzz_assert(pwrite(fd, data + at, (size_t) min_u64(len, MAX_SIZE - off), (off_t) off) >= 0);
                at += len;
        }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static const char *root;
        static char *path;
        _cleanup_(image_freep) Image *i = NULL;
        struct stat st;
        int r;

        fuzz_setup();
        if (size < 5)
                return 0;
        if (!root) {
                root = fuzz_trusting_root();
                fuzz_write_file("root/var/lib/extensions/.keep", "", 0);
                path = path_join(root, "var/lib/extensions/fuzz.raw");
                fuzz_assert(path);
        }
        write_image(path, data, size);
        fuzz_assert(stat(path, &st) == 0);

        i = calloc(1, sizeof(Image));
        fuzz_assert(i);
        i->class = IMAGE_SYSEXT;
        i->name = strdup("fuzz");
        i->path = strdup(path);
        i->resolved = strdup(path);
        fuzz_assert(i->name && i->path && i->resolved);
        r = image_probe_type(path, &i->type, &i->fstype);
        if (r < 0)
                return 0;
        i->inspected = i->valid = true;

        r = image_dissect(i, root, archs[data[0] % ELEMENTSOF(archs)]);
        fuzz_assert(r >= -4095 && r <= 1);
        /* What a seed reaches (make-image-seeds): TUCK_FUZZ_VERBOSE=1 fuzz-ddi SEED... */
        if (getenv("TUCK_FUZZ_VERBOSE"))
                fprintf(stderr, "fuzz-ddi: %s: %d, %s, %s\n", image_type_to_string(i->type), r,
                        r > 0 ? image_protection_to_string(i->protection) : "refused", strna(i->reason));
        if (r == 0) {
                fuzz_assert(!i->valid && i->reason);
                return 0;
        }
        if (r < 0)
                return 0;
        fuzz_assert(i->valid);
        fuzz_assert(i->fs_offset <= (uint64_t) st.st_size && i->fs_size <= (uint64_t) st.st_size - i->fs_offset);
        if (i->type == IMAGE_TYPE_GPT) {
                fuzz_assert(i->partition);
                fuzz_assert(streq_ptr(i->fstype, "squashfs") || streq_ptr(i->fstype, "erofs"));
        }
        if (i->verity.hash_tree && !i->verity.hash_file)
                fuzz_assert(i->verity.hash_offset <= (uint64_t) st.st_size &&
                            i->verity.hash_size <= (uint64_t) st.st_size - i->verity.hash_offset);
        switch (i->protection) {
        case IMAGE_PROTECTION_SIGNED:
                fuzz_assert(i->signer && i->verity.sig);
                fuzz_assert(i->verity.root_hash && i->verity.root_hash_size >= 16 && i->verity.hash_tree);
                break;
        case IMAGE_PROTECTION_VERITY:
                fuzz_assert(i->verity.root_hash && i->verity.root_hash_size >= 16 && i->verity.hash_tree);
                break;
        case IMAGE_PROTECTION_UNPROTECTED:
                fuzz_assert(!i->verity.root_hash);
                break;
        case _IMAGE_PROTECTION_MAX:
        default:
                fuzz_fail("protection %d", (int) i->protection);
        }
        return 0;
}
