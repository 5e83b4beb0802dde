/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What an image file holds and how it is protected: the step between
 * finding an image (image.c) and mounting it (overlay.c). A DDI's partitions
 * (ddi.c), its verity data and sidecars (verity.c), the root hash signature
 * (signature.c), and the consistency of it all, decided from the files
 * alone: no loop device, no privileges, so every refusal here can be tested
 * on images systemd-repart and veritysetup made.
 */

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "signature.h"
#include "util.h"

/* The file systems tuck mounts: read-only by design, so nobody writes through the block device. */
static bool fstype_supported(const char *fstype) {
        return streq_ptr(fstype, "squashfs") || streq_ptr(fstype, "erofs");
}

static void uuid_from_bytes(const uint8_t *b, char buf[static 37]) {
        snprintf(buf, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                 b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14],
                 b[15]);
}

/*
 * A root hash given beside a DDI picks its partitions, as in systemd: the
 * data partition's UUID is the hash's first 128 bits, the verity
 * partition's its last (systemd-repart makes them so).
 */
static int check_uuids(Image *i, const Ddi *d) {
        const ImageVerity *v = &i->verity;
        char data[37], hash[37];

        uuid_from_bytes(v->root_hash, data);
        uuid_from_bytes(v->root_hash + v->root_hash_size - 16, hash);
        if (!streq(d->data.uuid, data) || (d->verity.found && !streq(d->verity.uuid, hash)))
                return image_set_reason(i, "the root hash from %s is not this image's: its %s partition is %s, the "
                                        "hash names %s", v->root_hash_from, ddi_designator_to_string(d->designator),
                                        d->data.uuid, data);
        return 1;
}

static int describe_partition(Image *i, const Ddi *d) {
        free(i->partition);
        i->partition = NULL;
        if (d->data.architecture)
                return asprintf_safe(&i->partition, "%s partition %d (%s)", ddi_designator_to_string(d->designator),
                                     d->data.partno, d->data.architecture);
        return asprintf_safe(&i->partition, "Linux generic partition %d", d->data.partno);
}

static int dissect_ddi(Image *i, int fd, uint64_t size, const char *arch, Ddi *ret) {
        _cleanup_free_ char *reason = NULL;
        int r;

        r = ddi_dissect(fd, size, arch, ret, &reason);
        if (r <= 0)
                return r < 0 ? r : image_set_reason(i, "GPT disk image: %s", strna(reason));
        r = describe_partition(i, ret);
        if (r < 0)
                return r;
        if (!fstype_supported(ret->fstype))
                return image_set_reason(i, "the %s holds %s%s%s: tuck mounts squashfs and erofs only (read-only "
                                        "by design)", i->partition, ret->fstype ? "file system '" : "no file system",
                                        strempty(ret->fstype), ret->fstype ? "'" : "");
        i->designator = ret->designator;
        i->fs_offset = ret->data.offset;
        i->fs_size = ret->data.size;
        free(i->fstype);
        i->fstype = strdup(ret->fstype);
        return i->fstype ? 1 : -ENOMEM;
}

/* The DDI's own verity data, after the sidecars: a root hash from both must agree. */
static int ddi_verity(Image *i, int fd, const Ddi *d) {
        _cleanup_free_ char *reason = NULL;
        int r;

        if (i->verity.hash_file)
                return image_set_reason(i, "'%s' beside a GPT disk image: a DDI carries its hash tree in a "
                                        "partition", i->verity.hash_file);
        if (i->verity.root_hash) {
                r = check_uuids(i, d);
                if (r <= 0)
                        return r;
        }
        if (d->verity.found) {
                i->verity.hash_offset = d->verity.offset;
                i->verity.hash_size = d->verity.size;
                i->verity.hash_tree = true;
        }
        if (d->verity_sig.found) {
                r = verity_load_sig_partition(fd, &d->verity_sig, &i->verity, &reason);
                if (r <= 0)
                        return r < 0 ? r : image_set_reason(i, "%s", strna(reason));
        }
        return 1;
}

/* With a signature: checked against verity.d, whatever the policy. A bad one is never ignored. */
static int check_signature(Image *i, const char *root) {
        _cleanup_free_ char *hex = hexmem(i->verity.root_hash, i->verity.root_hash_size), *reason = NULL;
        int r;

        if (!hex)
                return -ENOMEM;
        r = signature_verify(root, hex, i->verity.sig, i->verity.sig_size, &i->signer, &reason);
        if (r <= 0)
                return r < 0 ? r : image_set_reason(i, "root hash signature from %s: %s", i->verity.sig_from,
                                                    strna(reason));
        return 1;
}

/* What the verity data found amounts to. */
static int decide_protection(Image *i, const char *root) {
        ImageVerity *v = &i->verity;

        i->protection = IMAGE_PROTECTION_UNPROTECTED;
        if (v->sig && !v->root_hash)
                return image_set_reason(i, "a root hash signature (%s) but no root hash", v->sig_from);
        if (v->root_hash && !v->hash_tree)
                return image_set_reason(i, "a root hash (from %s) but no hash tree (%s)", v->root_hash_from,
                                        i->type == IMAGE_TYPE_GPT ? "no verity partition" : "no NAME.verity");
        if (!v->root_hash) {
                if (v->hash_tree)
                        return asprintf_safe(&i->verity_note, "a hash tree but no root hash: nothing to verify "
                                             "against, mounted unprotected") < 0 ? -ENOMEM : 1;
                return 1;
        }
        if (v->sig) {
                int r = check_signature(i, root);

                if (r <= 0)
                        return r;
                i->protection = IMAGE_PROTECTION_SIGNED;
                return 1;
        }
        i->protection = IMAGE_PROTECTION_VERITY;
        return 1;
}

int image_dissect(Image *i, const char *root, const char *arch) {
        _cleanup_free_ char *reason = NULL;
        _cleanup_close_ int fd = -EBADF;
        Ddi d = {};
        struct stat st;
        int r;

        i->protection = IMAGE_PROTECTION_UNPROTECTED;
        if (i->type == IMAGE_TYPE_DIRECTORY)
                return 1;

        fd = image_open_file(i->resolved);
        if (fd == -EBADFD)
                return image_set_reason(i, "not a regular file");
        if (fd < 0)
                return image_set_reason(i, "cannot open: %s", strerror(-fd));
        if (fstat(fd, &st) < 0)
                return -errno;
        if (i->checked_ino != 0 && (st.st_dev != i->checked_dev || st.st_ino != i->checked_ino))
                return image_set_reason(i, "replaced while being inspected");

        i->fs_offset = 0;
        i->fs_size = (uint64_t) st.st_size;
        if (i->type == IMAGE_TYPE_GPT) {
                r = dissect_ddi(i, fd, (uint64_t) st.st_size, arch, &d);
                if (r <= 0)
                        goto finish;
        }
        r = verity_load_sidecars(i->path, fd, i->designator, &i->verity, &reason);
        if (r == 0)
                r = image_set_reason(i, "%s", strna(reason));
        if (r > 0 && i->type == IMAGE_TYPE_GPT)
                r = ddi_verity(i, fd, &d);
        if (r > 0 && i->valid)
                r = decide_protection(i, root);
finish:
        ddi_done(&d);
        return r < 0 ? r : i->valid;
}

int image_check_policy(Image *i, ImagePolicy policy) {
        char buf[64];

        if (image_policy_allows(policy, i->protection))
                return 1;
        if (policy == IMAGE_POLICY_ABSENT)
                return image_set_reason(i, "ImagePolicy=absent: no %s image is used", image_class_to_string(i->class));
        return image_set_reason(i, "%s, and ImagePolicy=%s asks for more%s%s",
                                i->protection == IMAGE_PROTECTION_UNPROTECTED ?
                                        (i->type == IMAGE_TYPE_DIRECTORY ? "a directory cannot be verified" :
                                                                           "not protected by dm-verity") :
                                i->protection == IMAGE_PROTECTION_VERITY ? "dm-verity, but its root hash is not signed" :
                                "signed",
                                image_policy_to_string(policy, buf), i->verity_note ? ": " : "",
                                strempty(i->verity_note));
}
