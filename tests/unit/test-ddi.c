/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Partition discovery (ddi.c) on the DDIs of the image corpus, which
 * systemd-repart made (tests/corpus/mkcorpus): which partition is the
 * extension, its verity partitions, and why an image is no usable DDI.
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ddi.h"
#include "tap.h"
#include "util.h"

static const char *corpus;

/* Dissects corpus image NAME for arch; returns what ddi_dissect() did, with d and reason. */
static int dissect(const char *name, const char *arch, Ddi *d, char **reason) {
        _cleanup_free_ char *p = NULL;
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        if (asprintf_safe(&p, "%s/%s.raw", corpus, name) < 0)
                return -ENOMEM;
        fd = open(p, O_RDONLY | O_CLOEXEC);
        if (fd < 0 || fstat(fd, &st) < 0)
                return -errno;
        *d = (Ddi) {};
        return ddi_dissect(fd, (uint64_t) st.st_size, arch, d, reason);
}

static const struct {
        const char *image;
        const char *arch;
        int result;               /* 1 usable, 0 refused */
        DdiDesignator designator;
        bool verity, verity_sig;
        const char *fstype_or_reason;
} cases[] = {
        { "c-ddi-root", "x86-64", 1, DDI_ROOT, false, false, "squashfs" },
        { "c-ddi-usr", "x86-64", 1, DDI_USR, false, false, "squashfs" },
        { "c-ddi-generic", "x86-64", 1, DDI_ROOT, false, false, "squashfs" },
        { "c-ddi-ext4", "x86-64", 1, DDI_ROOT, false, false, "ext4" },
        { "c-ddi-verity", "x86-64", 1, DDI_ROOT, true, false, "squashfs" },
        { "c-ddi-signed", "x86-64", 1, DDI_ROOT, true, true, "squashfs" },
        { "c-ddi-usr-signed", "x86-64", 1, DDI_USR, true, true, "squashfs" },
        /* The corpus is x86-64's: on arm64 it is another architecture's, arm64's image is. */
        { "c-ddi-root", "arm64", 0, 0, false, false, "another architecture: a root-x86-64 partition, and none "
          "for this host's arm64 or arm" },
        { "r-ddi-arm64", "arm64", 1, DDI_ROOT, true, false, "squashfs" },
        { "r-ddi-arm64", "x86-64", 0, 0, false, false, "another architecture: a root-arm64 partition, and none "
          "for this host's x86-64 or x86" },
        /* x86 takes x86-64's image as nothing, and x86-64 takes x86's as its secondary (not in the corpus). */
        { "r-ddi-two", "x86-64", 0, 0, false, false, "two candidates for root-x86-64 (partitions 1 and 2)" },
        { "r-ddi-truncated", "x86-64", 0, 0, false, false, "no valid GPT behind it" },
        { "r-ddi-garbage", "x86-64", 0, 0, false, false, "no valid GPT behind it" },
        { "r-mbr", "x86-64", 0, 0, false, false, "a 'dos' partition table" },
        { "c-squashfs", "x86-64", 0, 0, false, false, "no partition table" },
};

static void test_cases(void) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *reason = NULL;
                Ddi d;
                int r = dissect(cases[i].image, cases[i].arch, &d, &reason);

                if (!tap_ok(r == cases[i].result, "%s on %s: %s", cases[i].image, cases[i].arch,
                            cases[i].result ? "usable" : "refused"))
                        tap_diag("r=%d, reason '%s'", r, tap_str(reason));
                if (r == 1) {
                        tap_ok(d.designator == cases[i].designator && d.verity.found == cases[i].verity &&
                               d.verity_sig.found == cases[i].verity_sig,
                               "%s: the %s partition %d, verity %s, verity-sig %s", cases[i].image,
                               ddi_designator_to_string(d.designator), d.data.partno, d.verity.found ? "yes" : "no",
                               d.verity_sig.found ? "yes" : "no");
                        tap_streq(d.fstype, cases[i].fstype_or_reason, "%s: file system", cases[i].image);
                        ddi_done(&d);
                } else if (r == 0)
                        tap_ok(reason && strstr(reason, cases[i].fstype_or_reason), "%s: says why (%s)",
                               cases[i].image, tap_str(reason));
        }
}

/* Where the partitions are: what sfdisk reads in the same table. */
static void test_offsets(void) {
        _cleanup_free_ char *reason = NULL;
        Ddi d;

        if (dissect("c-ddi-signed", "x86-64", &d, &reason) != 1) {
                tap_ok(false, "c-ddi-signed dissects");
                return;
        }
        /* mkddi's fixed layout: 1 MiB partitions from sector 40 on, in order. */
        tap_ok(d.data.offset == 40 * 512 && d.data.size == 1024 * 1024, "data partition at %llu, %llu bytes",
               (unsigned long long) d.data.offset, (unsigned long long) d.data.size);
        tap_ok(d.verity.offset == d.data.offset + d.data.size && d.verity.size == 1024 * 1024,
               "verity partition right after it (%llu)", (unsigned long long) d.verity.offset);
        tap_ok(d.verity_sig.found && d.verity_sig.offset == d.verity.offset + d.verity.size,
               "verity-sig partition after that (%llu)", (unsigned long long) d.verity_sig.offset);
        tap_streq(d.data.architecture, "x86-64", "its architecture");
        ddi_done(&d);

        tap_streq(architecture_secondary("x86-64"), "x86", "x86-64's secondary is x86");
        tap_streq(architecture_secondary("arm64"), "arm", "arm64's secondary is arm");
        tap_streq(architecture_secondary("riscv64"), NULL, "riscv64 has none");
}

int main(void) {
        corpus = getenv("TUCK_CORPUS");
        if (!corpus) {
                printf("Bail out! TUCK_CORPUS is not set (meson sets it: tests/corpus)\n");
                return 1;
        }
        test_cases();
        test_offsets();
        return tap_done();
}
