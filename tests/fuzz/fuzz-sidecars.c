/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The verity sidecars of a bare image (verity.c verity_load_sidecars()): the
 * image's user.verity.roothash xattr, NAME.roothash (NAME.usrhash for a usr
 * partition), NAME.roothash.p7s and NAME.verity, each only if root alone
 * may write it (trust.h); then, with a root hash and a signature, the check
 * against fuzz-ca.crt as /etc/verity.d (signature.c). The input:
 *
 *   byte 0   which files exist: 1 NAME.roothash, 2 its .p7s, 4 NAME.verity,
 *            8 a usr partition (NAME.usrhash and user.verity.usrhash),
 *            16 the xattr, 32 the sidecars writable by their group (to be refused)
 *   then     XATTR "\n#--\n" ROOTHASH "\n#--\n" P7S
 *
 * A load that succeeds holds what the files said; two sources of a root hash
 * that disagree are refused, naming both; a refusal says why.
 */

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "fuzz.h"
#include "signature.h"
#include "util.h"
#include "verity.h"

#define SEP "\n#--\n"

enum {
        HAS_HASH = 1 << 0,
        HAS_SIG = 1 << 1,
        HAS_TREE = 1 << 2,
        USR = 1 << 3,
        HAS_XATTR = 1 << 4,
        GROUP_WRITABLE = 1 << 5,
};

static void sidecar(const char *name, const FuzzPart *p, bool present, bool group_writable) {
        _cleanup_free_ char *path = path_join(fuzz_dir(), name);

        fuzz_assert(path);
        if (!present) {
                fuzz_assert(unlink(path) == 0 || errno == ENOENT);
                return;
        }
        fuzz_write_file(name, p->data, p->size);
        fuzz_assert(chmod(path, group_writable ? 0664 : 0644) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *image = NULL, *reason = NULL;
        _cleanup_close_ int fd = -EBADF;
        FuzzPart xattr, hash, sig, rest;
        ImageVerity v = {};
        uint8_t flags;
        bool usr;
        int r;

        fuzz_setup();
        if (size < 1)
                return 0;
        flags = data[0];
        usr = flags & USR;
        fuzz_split(data + 1, size - 1, SEP, &xattr, &rest);
        fuzz_split(rest.data, rest.size, SEP, &hash, &sig);

        fuzz_write_file("x.raw", "", 0);
        image = path_join(fuzz_dir(), "x.raw");
        fuzz_assert(image);
        fd = open(image, O_RDONLY | O_CLOEXEC);
        fuzz_assert(fd >= 0);
        if ((flags & HAS_XATTR) && xattr.size > 0)
                (void) fsetxattr(fd, usr ? "user.verity.usrhash" : "user.verity.roothash", xattr.data, xattr.size, 0);
        sidecar("x.roothash", &hash, (flags & HAS_HASH) && !usr, flags & GROUP_WRITABLE);
        sidecar("x.usrhash", &hash, (flags & HAS_HASH) && usr, flags & GROUP_WRITABLE);
        sidecar(usr ? "x.usrhash.p7s" : "x.roothash.p7s", &sig, flags & HAS_SIG, flags & GROUP_WRITABLE);
        sidecar(usr ? "x.roothash.p7s" : "x.usrhash.p7s", &sig, false, false);
        sidecar("x.verity", &sig, flags & HAS_TREE, flags & GROUP_WRITABLE);

        r = verity_load_sidecars(image, fd, usr ? DDI_USR : DDI_ROOT, &v, &reason);
        fuzz_assert(r >= -4095 && r <= 1);
        if (r == 0)
                fuzz_assert(reason);
        if (r <= 0)
                goto finish;
        if (flags & GROUP_WRITABLE)
                /* Any sidecar there was refused, so none was taken. */
                fuzz_assert(!(flags & (HAS_HASH | HAS_SIG | HAS_TREE)));
        fuzz_assert(!v.root_hash || (v.root_hash_size >= 16 && v.root_hash_from));
        fuzz_assert(!!v.sig == !!(flags & HAS_SIG) && (!v.sig || v.sig_size == sig.size));
        fuzz_assert(v.hash_tree == !!(flags & HAS_TREE));
        if (!v.root_hash || !v.sig)
                goto finish;
        fuzz_check_signature(v.root_hash, v.root_hash_size, v.sig, v.sig_size);
finish:
        image_verity_done(&v);
        return 0;
}
