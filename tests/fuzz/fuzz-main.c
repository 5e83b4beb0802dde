/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The fuzz targets without libFuzzer (a compiler that has none): every file
 * named, or found directly in a directory named, is one input, run once. The
 * fuzz suite runs each target over its corpus this way in the gcc build; a
 * crash found by the fuzzer replays the same way.
 */

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fuzz.h"
#include "util.h"

static unsigned n_inputs;

static void run_file(int dir_fd, const char *path) {
        _cleanup_free_ char *text = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        size_t n = 0;

        fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                fuzz_fail("cannot open %s: %m", path);
        text = malloc((size_t) st.st_size + 1);
        if (!text)
                fuzz_fail("out of memory");
        while (n < (size_t) st.st_size) {
                ssize_t k = read(fd, text + n, (size_t) st.st_size - n);

                if (k <= 0)
                        fuzz_fail("cannot read %s: %m", path);
                n += (size_t) k;
        }
        (void) LLVMFuzzerTestOneInput((const uint8_t *) text, n);
        n_inputs++;
}

static void run_path(const char *path) {
        _cleanup_closedir_ DIR *d = NULL;
        struct stat st;

        if (stat(path, &st) < 0)
                fuzz_fail("cannot stat %s: %m", path);
        if (!S_ISDIR(st.st_mode)) {
                run_file(AT_FDCWD, path);
                return;
        }
        d = opendir(path);
        if (!d)
                fuzz_fail("cannot open %s: %m", path);
        for (struct dirent *de; (de = readdir_no_dot(d)); )
                if (de->d_type == DT_REG || de->d_type == DT_UNKNOWN)
                        run_file(dirfd(d), de->d_name);
}

int main(int argc, char *argv[]) {
        for (int i = 1; i < argc; i++)
                if (argv[i][0] != '-')   /* libFuzzer's options (-dict=, ...) mean nothing here */
                        run_path(argv[i]);
        printf("%s: %u inputs, no crash\n", argv[0], n_inputs);
        return n_inputs > 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}
