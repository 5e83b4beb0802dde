/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Mounting images, and assembling an overlay from them in the staging
 * namespace.
 *
 * Why a staged mount(2) and not fsconfig(): on Linux 6.1 fsconfig() string
 * values are capped at 256 bytes and overlayfs has no "lowerdir+" (6.8), so
 * a lowerdir= of 128 layers cannot go through it. Legacy mount(2) data is one
 * page; with the staging root as working directory every layer has a short
 * relative name ("i/17/usr"), so ~350 layers fit (overlayfs allows 500).
 * The staged overlay is then cloned out (open_tree OPEN_TREE_CLONE) as the
 * detached tree the swap moves into place.
 *
 * More layers than one overlay takes are grouped: each group of extension
 * layers is an overlay of its own ("o/usr+1", ...), and those are the lower
 * layers of the overlay that goes on top. overlayfs allows exactly that
 * much nesting (FILESYSTEM_MAX_STACK_DEPTH is 2: images and the base are
 * depth 0, a group 1, the top 2). A mounted overlay shows no whiteouts, so a
 * whiteout or opaque directory in one group could not hide what a lower
 * group or the base has: with groups, such a layer is refused.
 *
 * The top layer of every overlay is its metadata layer, as systemd-sysext
 * writes it (src/sysext/sysext.c): /.systemd-sysext/extensions (confext:
 * /.systemd-confext/confexts) lists the extensions, bottom to top, so tools
 * that read it see tuck's merge; and /.systemd-sysext/dev, which for
 * systemd-sysext holds the overlay's MAJ:MIN. tuck writes a line there that
 * is no device number, on purpose: systemd-sysext takes an overlay whose
 * dev file matches its st_dev for its own and unmounts it on unmerge and on
 * every refresh, which is the window tuck exists to close. With tuck's line
 * a systemd-sysext run by old tooling fails ("Failed to parse device
 * major/minor stored in 'merged by tuck, see tuckctl(8)'") and changes
 * nothing. tuck tells its own overlays by their mount source and generation
 * record, never by this file.
 */

#include <stdint.h>

#include "image.h"
#include "staging.h"

/*
 * A detached read-only mount of an image as image_dissect() found it: a
 * loop device (a DDI's partition by offset and size) under dm-verity when
 * the image is protected, and squashfs/erofs on top; a bind clone for
 * directories. The class decides the flags (ro,nodev; confext also
 * nosuid,noexec). *ret_loop is the loop device or NULL; i->kernel_sig says
 * whether the kernel checked the signature too. On failure *ret_reason may
 * say why (a tampered image, no dm-verity).
 */
int image_mount_detached(Image *i, int *ret_fd, char **ret_loop, char **ret_reason);

/* What systemd-sysext 252 fails to parse in .systemd-sysext/dev, and shows in its error. */
#define OVERLAY_METADATA_DEV "merged by tuck, see tuckctl(8)"

typedef struct OverlaySpec {
        const char *hid;             /* assembled at o/<hid> */
        const char *hierarchy;       /* "/usr": what each extension layer's root is */
        ImageClass class;
        char **lowers;               /* relative to the staging root, top first, base last */
        char **layer_images;         /* the image of each extension layer, top first (for messages) */
        char **extensions;           /* for the metadata layer: extension names, bottom to top */
        const char *source;          /* "tuck-sysext" */
        uint64_t attr;               /* MOUNT_ATTR_* for the overlay's root */
} OverlaySpec;

/*
 * Inside the staging namespace: assemble, clone out as a detached private
 * tree with spec->attr, and clean up the staged mount. On failure nothing
 * is left mounted. Returns the tree fd. What is mounted below the
 * hierarchy comes along at the swap (carry.h).
 */
int overlay_assemble(Staging *s, const OverlaySpec *spec, char **ret_error);

/* The lowerdir= option for a list of layers, or -E2BIG if it exceeds a page or overlayfs's 500 layers. */
int overlay_options(char * const *lowers, char **ret);

/*
 * Does the tree at @dir_fd carry what a nested overlay cannot pass on: a
 * whiteout (a 0:0 character device) or an opaque directory
 * (trusted.overlay.opaque)? 1 and its path in *ret_path, 0, or <0.
 */
int tree_find_whiteout(int dir_fd, char **ret_path);
