/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Signatures a host acts on by itself when a block device shows them (udev's
 * md, LVM and bcache rules; cryptsetup): libblkid looks for them beside the
 * file systems tuck mounts, so that an image that also carries one is
 * ambiguous and refused, as before the probing was narrowed, and never
 * attached for udev to assemble.
 */
#define IMAGE_FOREIGN_SIGNATURES \
        "linux_raid_member", "ddf_raid_member", "isw_raid_member", "LVM2_member", "bcache", "crypto_LUKS"

/*
 * Extension images: discovery in the search directories (systemd-sysext's
 * rules: the first directory wins for a name, an empty directory masks it),
 * the kind of each image (by magic, via libblkid), and validation of what is
 * inside (release file, forbidden content, which hierarchies it carries).
 */

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "macro.h"

#include "ddi.h"
#include "extension-release.h"
#include "image-class.h"
#include "image-policy.h"
#include "trust.h"
#include "verity.h"

typedef enum ImageType {
        IMAGE_TYPE_DIRECTORY,
        IMAGE_TYPE_SQUASHFS,
        IMAGE_TYPE_EROFS,
        IMAGE_TYPE_GPT,           /* a partition table: a DDI (ddi.c) */
        IMAGE_TYPE_UNSUPPORTED,   /* some other file system, or none */
        _IMAGE_TYPE_MAX,
} ImageType;

typedef enum ImageState {
        IMAGE_CANDIDATE,   /* first of its name: will be inspected */
        IMAGE_SHADOWED,    /* a same-named image in a higher-priority directory wins */
        IMAGE_MASKED,      /* an empty directory of this name masks it (or is the mask) */
        _IMAGE_STATE_MAX,
} ImageState;

typedef struct Image {
        ImageClass class;
        char *name;             /* image name: file name minus ".raw", or directory name */
        char *path;             /* where it was found (root prefix applied) */
        char *resolved;         /* symlinks resolved */
        char *search_dir;       /* the search directory (without root prefix) */
        ImageType type;
        ImageState state;
        char *shadowed_by;      /* path of the winning image or mask */
        char *fstype;           /* what blkid found ("ext4", ...) for unsupported images */
        char *fingerprint;      /* changes whenever the image's content may have */
        bool untrusted;         /* in a search directory others can write: refused, shadows nothing */
        dev_t checked_dev;      /* what image_check_trust() found at path: mounted only if still that */
        ino_t checked_ino;

        /* Filled by image_dissect(): what is mounted, and how it is protected. */
        char *partition;        /* "root partition 1 (x86-64)" in a DDI; NULL for a bare image */
        DdiDesignator designator; /* root: the tree has usr/...; usr: the file system is /usr */
        uint64_t fs_offset;     /* where the file system lies in the file */
        uint64_t fs_size;
        ImageVerity verity;
        ImageProtection protection;
        char *signer;           /* the certificate that signed the root hash */
        char *verity_note;      /* "a hash tree but no root hash": why verity data goes unused */

        /* Filled when mounted (overlay.c). */
        int kernel_sig;         /* the kernel checked the signature (1), could not (-errno), or none (0) */

        /* Filled by image_validate(). */
        bool inspected;
        bool valid;
        char *reason;           /* why not valid */
        char *extension;        /* identity for versions: the name the image proves (image_validate()) */
        char *identity_note;    /* why a relaxed release file's name was not taken as its identity */
        char *version;          /* NULL: unversioned */
        const char *version_source;   /* "release", "file name" */
        char **release;         /* release file pairs */
        char **hierarchies;     /* class hierarchies the image carries ("/usr", ...) */
} Image;

const char *image_type_to_string(ImageType t);
const char *image_state_to_string(ImageState s);

Image *image_free(Image *i);
DEFINE_TRIVIAL_CLEANUP_FUNC(Image *, image_free);
void images_free(Image **images, size_t n);

/*
 * Lists every image in the class's search directories below root, in
 * priority order, and marks shadowed and masked ones. Unreadable directories
 * are skipped (logged at debug level).
 */
int images_discover(const char *root, ImageClass c, char * const *search_dirs,
                    Image ***ret, size_t *ret_n);

/* Finds the kind of a regular file by its magic. */
int image_probe_type(const char *path, ImageType *ret, char **ret_fstype);
/*
 * An image file, opened for reading without blocking on what is not one (a
 * FIFO swapped in after discovery): -EBADFD unless it is a regular file.
 */
int image_open_file(const char *path);

/*
 * The trust model (trust.h) for the image at i->path: returns 1 if only root
 * can change it (and records what it found there), 0 with i->valid false and
 * the reason if not. cache: the run's (trust_check_path_cached()).
 */
int image_check_trust(Image *i, TrustCache *cache);

/* A DDI whose file system is its usr partition: the mounted tree is /usr itself. */
bool image_is_usr_partition(const Image *i);

/* Marks the image not valid, for the reason given; returns 0 (or -ENOMEM). */
int image_set_reason(Image *i, const char *fmt, ...) _printf_(2, 3);

/*
 * What the image file holds (a DDI's partitions or a bare file system), its
 * verity data and signature (checked against verity.d below root), and so
 * how it is protected, for a host of architecture arch. Reads files only.
 * Returns 1, or 0 with i->valid false and the reason, or a negative errno.
 */
int image_dissect(Image *i, const char *root, const char *arch);

/* Refuses (0, with the reason) an image the class's ImagePolicy= does not allow; 1 if allowed. */
int image_check_policy(Image *i, ImagePolicy policy);

/*
 * Fills i->fingerprint from stat data (and for directories, the whole
 * tree's). An image mounted under dm-verity (image_dissect() first) adds
 * its root hash: sidecars added, removed or replaced change how the same
 * file is mounted, so its staged mount must not be reused for it, nor its
 * layer taken as unchanged.
 */
int image_fingerprint(Image *i);

/* Do two fingerprints name the same file (or tree), however it is mounted? */
bool image_fingerprint_same_file(const char *a, const char *b);

/*
 * Validates the image whose tree is open at tree_fd against the host and the
 * class's hierarchies (root-less, e.g. "/usr"). Sets i->valid and i->reason
 * (an invalid image is not an error: returns 0), and version, extension,
 * hierarchies.
 */
int image_validate(Image *i, int tree_fd, const HostRelease *host, const char *root,
                   char * const *hierarchies);

/* The version encoded in a file name like NAME_1.2.raw or NAME-1.2-x86-64.raw, or NULL. */
char *version_from_file_name(const char *extension, const char *file_name);

/* Sorts by strverscmp_improved() of the image name: the last one is the top layer. */
void images_sort(Image **images, size_t n);
