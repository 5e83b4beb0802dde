/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * extension-release: finding an image's release file and deciding whether the
 * image fits this host, with systemd-sysext's rules (src/shared/
 * extension-util.c extension_release_validate(), src/basic/os-util.c
 * open_extension_release()), so existing images behave the same.
 */

#include "image-class.h"

typedef struct HostRelease {
        char *id;
        char *version_id;
        char *level[_IMAGE_CLASS_MAX];   /* SYSEXT_LEVEL, CONFEXT_LEVEL of the host */
        const char *architecture;        /* systemd's name: "x86-64", "arm64", ... */
        const char *scope;               /* "system", or "initrd" when etc/initrd-release exists */
} HostRelease;

/* Reads <root>/etc/os-release, else <root>/usr/lib/os-release. */
int host_release_load(const char *root, HostRelease *ret);
void host_release_done(HostRelease *h);

/* systemd's name for the architecture uname(2) reports, or NULL. */
const char *architecture_from_uname(const char *machine);
const char *architecture_native(void);

/* Image names as systemd accepts them: a file name in UTF-8, no control characters, not ".#...". */
bool image_name_is_valid(const char *name);

/*
 * Opens and parses the release file of image 'name' in the image tree at
 * image_fd: <release_dir>/extension-release.<name> (release_dir NULL: the
 * class's, e.g. usr/lib/extension-release.d), else the single
 * extension-release.* file whose user.extension-release.strict xattr is
 * false. Returns 0 and the pairs, or a negative errno and a reason:
 * -ENOENT (no release file), -ENOTUNIQ (several relaxed candidates),
 * -EBADMSG (malformed).
 */
int extension_release_load(int image_fd, ImageClass c, const char *release_dir, const char *name,
                           char ***ret_pairs, char **ret_filename, char **ret_reason);

/*
 * Returns 1 if an extension with these release fields may be merged on this
 * host, 0 and a human-readable reason if not. A NULL @host (--force) matches
 * any non-empty release file.
 */
int extension_release_validate(const char *name, ImageClass c, const HostRelease *host,
                               char * const *pairs, char **ret_reason);

/* The extension's own version from its release fields (class table order), or NULL. */
const char *extension_release_version(ImageClass c, char * const *pairs);
