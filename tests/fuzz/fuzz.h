/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Shared by the fuzz targets (tests/fuzz/README.md). Each target defines
 * LLVMFuzzerTestOneInput(); built with clang it links libFuzzer, built with
 * another compiler it links fuzz-main.c, which feeds it the files it is
 * given (the corpus, a crash to replay).
 *
 * A target that needs its input as a file (the loaders take paths, as tuckd
 * reads them) writes it below fuzz_dir(), a directory of this process's own.
 */

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/*
 * Once per process (each target calls it first; later calls do nothing):
 * every log call formats its message (so a hostile string
 * meets the format code) and goes nowhere; and a private directory, removed
 * at exit.
 */
void fuzz_setup(void);
const char *fuzz_dir(void);

/* A NUL-terminated copy of data (the parsers take C strings, as read_full_file_at() gives them). */
char *fuzz_strndup(const uint8_t *data, size_t size);

/* Writes data to fuzz_dir()/relpath (parents made), replacing the file. Aborts on I/O errors. */
void fuzz_write_file(const char *relpath, const void *data, size_t size);

/*
 * fuzz_dir()/root, made on the first call: a root whose /etc/verity.d trusts
 * the image corpus's test certificate (FUZZ_CA, make-image-seeds), for the
 * targets that verify signatures.
 */
const char *fuzz_trusting_root(void);

/* signature_verify() of sig over the hash, in fuzz_trusting_root(): it returns in range, says why or who. */
void fuzz_check_signature(const uint8_t *root_hash, size_t root_hash_size, const void *sig, size_t sig_size);

/*
 * Splits the input at the first occurrence of sep: the head before it and
 * the tail after it (empty without a separator), pointers into data.
 */
typedef struct FuzzPart {
        const uint8_t *data;
        size_t size;
} FuzzPart;
void fuzz_split(const uint8_t *data, size_t size, const char *sep, FuzzPart *ret_head, FuzzPart *ret_tail);

/* abort() with a message: the fuzzer's way to report a broken invariant. */
_Noreturn void fuzz_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define fuzz_assert(expr)                                                       \
        do {                                                                    \
                if (!(expr))                                                    \
                        fuzz_fail("%s:%d: %s", __FILE__, __LINE__, #expr);      \
        } while (0)
