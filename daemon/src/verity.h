/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * dm-verity for extension images, as systemd sets it up (src/shared/
 * dissect-image.c verity_settings_load(), dissected_image_load_verity_sig_
 * partition(), verity_dissect_and_mount()):
 *
 *   - where the root hash comes from: the image's verity-sig partition (a
 *     JSON object: "rootHash", "signature"), the sidecar NAME.roothash
 *     (NAME.usrhash for a usr partition) or the image's user.verity.roothash
 *     xattr; given twice, the two must agree;
 *   - its PKCS#7 signature: in the verity-sig partition or NAME.roothash.p7s;
 *   - the hash tree: the DDI's verity partition, or NAME.verity beside a
 *     bare image.
 *
 * Activation goes through libcryptsetup: the whole image is first verified
 * in userspace against the root hash (CRYPT_VERITY_CHECK_HASH: a tampered
 * image is refused before anyone can read it), then the read-only dm-verity
 * device is made, with the signature handed to the kernel where there is
 * one (crypt_activate_by_signed_key(): the kernel checks it too when it has
 * a key for it, DM_VERITY_VERIFY_ROOTHASH_SIG). The device is named
 * "tuck-<root hash>": the same image shares one device across generations
 * and staging areas, and whatever a killed tuck left is found by name.
 * Once mounted it is marked for deferred removal: it goes away with the
 * last mount of it, like a loop device with autoclear.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ddi.h"

#define VERITY_DM_PREFIX "tuck-"

typedef struct ImageVerity {
        uint8_t *root_hash;
        size_t root_hash_size;
        char *root_hash_from;        /* "the verity-sig partition", "'NAME.roothash'" */
        uint8_t *sig;                /* PKCS#7, DER */
        size_t sig_size;
        char *sig_from;
        char *hash_file;             /* NAME.verity; NULL: the image's verity partition */
        uint64_t hash_offset, hash_size;   /* in the image file, for a DDI */
        bool hash_tree;              /* a hash tree was found */
} ImageVerity;

void image_verity_done(ImageVerity *v);

/*
 * The sidecars of the image at path (NAME.raw): NAME.roothash (or
 * NAME.usrhash for a usr partition) and its .p7s, NAME.verity, and the
 * user.verity.roothash xattr of the file open at fd. Returns 1 if all that
 * is there parses, 0 and a reason if not, negative errno.
 */
int verity_load_sidecars(const char *path, int fd, DdiDesignator d, ImageVerity *v, char **ret_reason);

/*
 * The DDI's verity-sig partition p of the image file at fd: its root hash
 * (which must agree with one already in v) and signature. Same returns.
 */
int verity_load_sig_partition(int fd, const DdiPartition *p, ImageVerity *v, char **ret_reason);

/* "tuck-<hex root hash>". */
char *verity_device_name(const ImageVerity *v);

typedef struct VerityDevice {
        char *name;                  /* tuck-<root hash> */
        char *node;                  /* /dev/dm-N */
        bool shared;                 /* it existed already (the same image, mounted elsewhere) */
        int kernel_sig;              /* 1: the kernel checked the signature; <0: why it could not; 0: none */
} VerityDevice;

void verity_device_done(VerityDevice *d);

/*
 * Verifies the data on data_dev against v's hash tree on hash_dev (block
 * devices: loop devices of the image and its hash tree) and activates it
 * read-only, or finds the device this root hash already has. Returns 1 and
 * the device, 0 and a reason if the data does not match (tampered,
 * corrupt) or verity cannot be set up, negative errno.
 */
int verity_activate(const ImageVerity *v, const char *data_dev, const char *hash_dev, VerityDevice *ret,
                    char **ret_reason);

/* Removes the device once nothing holds it any more (now, if nothing does). */
int verity_release(const char *name);

/* Every tuck-* device: released as above (what a killed tuck left goes now). Returns how many there were. */
int verity_sweep(void);

/* The number of tuck-* dm devices (for status and leak checks); 0 without device-mapper. */
int verity_count_devices(void);
