/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#include "image-policy.h"
#include "util.h"

static const char * const protection_table[_IMAGE_PROTECTION_MAX] = {
        [IMAGE_PROTECTION_UNPROTECTED] = "unprotected",
        [IMAGE_PROTECTION_VERITY] = "verity",
        [IMAGE_PROTECTION_SIGNED] = "signed",
};

const char *image_protection_to_string(ImageProtection p) {
        return p >= 0 && p < _IMAGE_PROTECTION_MAX ? protection_table[p] : NULL;
}

int image_policy_from_string(const char *s, ImagePolicy *ret) {
        _cleanup_strv_free_ char **words = NULL;
        ImagePolicy p = 0;

        if (isempty(s))
                return -EINVAL;
        if (streq(s, "*")) {
                *ret = IMAGE_POLICY_ALL;
                return 0;
        }
        words = strv_split(s, "+");
        if (!words)
                return -ENOMEM;
        STRV_FOREACH(w, words) {
                ImageProtection k;

                if (streq(*w, "absent")) {
                        p |= IMAGE_POLICY_ABSENT;
                        continue;
                }
                for (k = 0; k < _IMAGE_PROTECTION_MAX; k++)
                        if (streq(*w, protection_table[k]))
                                break;
                if (k == _IMAGE_PROTECTION_MAX)
                        return -EINVAL;
                p |= 1u << k;
        }
        if (p == 0)
                return -EINVAL;
        *ret = p;
        return 0;
}

const char *image_policy_to_string(ImagePolicy p, char buf[static 64]) {
        buf[0] = 0;
        for (ImageProtection k = _IMAGE_PROTECTION_MAX; k-- > 0; )
                if (p & (1u << k))
                        snprintf(buf + strlen(buf), 64 - strlen(buf), "%s%s", buf[0] ? "+" : "", protection_table[k]);
        if (p & IMAGE_POLICY_ABSENT)
                snprintf(buf + strlen(buf), 64 - strlen(buf), "%sabsent", buf[0] ? "+" : "");
        return buf;
}

bool image_policy_allows(ImagePolicy policy, ImageProtection p) {
        /* The weakest level listed is the floor: a stronger image is as good. */
        for (ImageProtection k = 0; k <= p && k < _IMAGE_PROTECTION_MAX; k++)
                if (policy & (1u << k))
                        return true;
        return false;
}
