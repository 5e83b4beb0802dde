/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <ftw.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "log.h"
#include "signature.h"
#include "util.h"

static char *dir;

static void discard(int level, int error, const char *message, void *userdata) {
}

static int remove_one(const char *path, const struct stat *st, int type, struct FTW *ftw) {
        (void) remove(path);
        return 0;
}

static void remove_dir(void) {
        (void) nftw(dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
}

void fuzz_setup(void) {
        struct stat st;

        if (dir)
                return;
        log_set_max_level(LOG_DEBUG);
        log_set_sink(discard, NULL);
        /* On tmpfs if there is one: the loaders' targets write a file per input. */
        dir = strdup(stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) ? "/dev/shm/tuck-fuzz.XXXXXX"
                                                                       : "/tmp/tuck-fuzz.XXXXXX");
        if (!dir || !mkdtemp(dir))
                fuzz_fail("mkdtemp: %m");
        atexit(remove_dir);
}

const char *fuzz_dir(void) {
        fuzz_setup();
        return dir;
}

char *fuzz_strndup(const uint8_t *data, size_t size) {
        char *s = malloc(size + 1);

        if (!s)
                fuzz_fail("out of memory");
        if (size > 0)
                memcpy(s, data, size);
        s[size] = 0;
        return s;
}

void fuzz_write_file(const char *relpath, const void *data, size_t size) {
        _cleanup_free_ char *path = path_join(fuzz_dir(), relpath);
        _cleanup_free_ char *parent = NULL;
        _cleanup_close_ int fd = -EBADF;
        char *slash;

        if (!path || !(parent = strdup(path)))
                fuzz_fail("out of memory");
        slash = strrchr(parent, '/');
        *slash = 0;
        if (mkdir_p(parent, 0755) < 0)
                fuzz_fail("mkdir %s: %m", parent);
        fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
        if (fd < 0)
                fuzz_fail("open %s: %m", path);
        for (const uint8_t *p = data; size > 0; ) {
                ssize_t n = write(fd, p, size);

                if (n < 0)
                        fuzz_fail("write %s: %m", path);
                p += n;
                size -= (size_t) n;
        }
}

const char *fuzz_trusting_root(void) {
        static char *root;

        if (!root) {
                _cleanup_free_ char *ca = NULL;
                int n = read_full_file_at(AT_FDCWD, FUZZ_CA, 64 * 1024, &ca);

                fuzz_assert(n > 0);
                fuzz_write_file("root/etc/verity.d/fuzz-ca.crt", ca, (size_t) n);
                root = path_join(fuzz_dir(), "root");
                fuzz_assert(root);
        }
        return root;
}

void fuzz_check_signature(const uint8_t *root_hash, size_t root_hash_size, const void *sig, size_t sig_size) {
        _cleanup_free_ char *hex = hexmem(root_hash, root_hash_size), *signer = NULL, *why = NULL;
        int r;

        fuzz_assert(hex);
        r = signature_verify(fuzz_trusting_root(), hex, sig, sig_size, &signer, &why);
        fuzz_assert(r >= -4095 && r <= 1);
        fuzz_assert(r != 1 || signer);
        fuzz_assert(r != 0 || why);
}

void fuzz_split(const uint8_t *data, size_t size, const char *sep, FuzzPart *ret_head, FuzzPart *ret_tail) {
        size_t k = strlen(sep);

        for (size_t i = 0; k > 0 && i + k <= size; i++)
                if (memcmp(data + i, sep, k) == 0) {
                        *ret_head = (FuzzPart) { data, i };
                        *ret_tail = (FuzzPart) { data + i + k, size - i - k };
                        return;
                }
        *ret_head = (FuzzPart) { data, size };
        *ret_tail = (FuzzPart) { data + size, 0 };
}

void fuzz_fail(const char *fmt, ...) {
        va_list ap;

        fputs("fuzz: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputc('\n', stderr);
        abort();
}
