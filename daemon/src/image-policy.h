/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * ImagePolicy=: how well an extension image must be protected to be used,
 * per class, in the words of systemd's image policies (systemd.image-
 * policy(7)) for the one partition an extension has:
 *
 *   signed       dm-verity with a root hash signed by a certificate in
 *                verity.d (checked in userspace; by the kernel too where it
 *                has the key)
 *   verity       dm-verity with a known root hash, unsigned
 *   unprotected  no verity: a plain file system, or a directory
 *   absent       no image at all
 *
 * joined by '+', or "*" for all of them. An image offering at least the
 * weakest protection listed is used, with the strongest protection it
 * offers (a signed image under "verity" is still checked as signed); one
 * below it is refused with the reason. "absent" alone refuses every image.
 *
 * The default, "signed+verity+unprotected+absent", verifies whatever can
 * be verified and accepts unprotected images, as systemd does for
 * /var/lib/extensions. A fleet that signs its images sets "signed".
 */

#include <stdbool.h>

typedef enum ImageProtection {
        IMAGE_PROTECTION_UNPROTECTED,
        IMAGE_PROTECTION_VERITY,
        IMAGE_PROTECTION_SIGNED,
        _IMAGE_PROTECTION_MAX,
} ImageProtection;

typedef unsigned ImagePolicy;   /* 1 << ImageProtection, and IMAGE_POLICY_ABSENT */

#define IMAGE_POLICY_ABSENT (1u << _IMAGE_PROTECTION_MAX)
#define IMAGE_POLICY_ALL (((1u << _IMAGE_PROTECTION_MAX) - 1) | IMAGE_POLICY_ABSENT)
#define IMAGE_POLICY_DEFAULT IMAGE_POLICY_ALL

const char *image_protection_to_string(ImageProtection p);

/* "signed+verity", "*": -EINVAL for an unknown word or an empty policy. */
int image_policy_from_string(const char *s, ImagePolicy *ret);
/* "signed+verity+unprotected+absent" (static buffer of the caller's). */
const char *image_policy_to_string(ImagePolicy p, char buf[static 64]);

/* Is an image protected as p good enough for the policy? */
bool image_policy_allows(ImagePolicy policy, ImageProtection p);
