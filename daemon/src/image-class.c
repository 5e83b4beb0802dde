/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <sys/mount.h>

#include "image-class.h"
#include "mount-api.h"
#include "util.h"

/*
 * Search directories: systemd-sysext 252 (Debian 12) still reads
 * /usr/lib/extensions and /usr/local/lib/extensions (dropped in 254), so we
 * keep them for images that work there today. confext directories are
 * systemd-confext's (254+), which reads /etc/confexts first only as the
 * admin's override; we put it first like /etc/extensions.
 */
static const char * const sysext_dirs[] = {
        "/etc/extensions",
        "/run/extensions",
        "/var/lib/extensions",
        "/usr/local/lib/extensions",
        "/usr/lib/extensions",
        NULL,
};

static const char * const confext_dirs[] = {
        "/etc/confexts",
        "/run/confexts",
        "/var/lib/confexts",
        "/usr/local/lib/confexts",
        "/usr/lib/confexts",
        NULL,
};

static const char * const sysext_hierarchies[] = { "/usr", "/opt", NULL };
static const char * const confext_hierarchies[] = { "/etc", NULL };

static const char * const sysext_version_fields[] = {
        "SYSEXT_IMAGE_VERSION", "SYSEXT_VERSION_ID", "IMAGE_VERSION", NULL,
};
static const char * const confext_version_fields[] = {
        "CONFEXT_IMAGE_VERSION", "CONFEXT_VERSION_ID", "IMAGE_VERSION", NULL,
};

const ImageClassInfo image_class_info[_IMAGE_CLASS_MAX] = {
        [IMAGE_SYSEXT] = {
                .name = "sysext",
                .overlay_source = "tuck-sysext",
                .foreign_source = "sysext",
                .search_dirs = sysext_dirs,
                .hierarchies = sysext_hierarchies,
                .hierarchies_env = "SYSTEMD_SYSEXT_HIERARCHIES",
                .metadata_dir = ".systemd-sysext",
                .metadata_list = "extensions",
                .release_dir = "usr/lib/extension-release.d",
                .level_field = "SYSEXT_LEVEL",
                .scope_field = "SYSEXT_SCOPE",
                .version_fields = sysext_version_fields,
                .forbidden_path = "usr/lib/os-release",
                .only_top_dir = NULL,
                .mount_attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV,
        },
        [IMAGE_CONFEXT] = {
                .name = "confext",
                .overlay_source = "tuck-confext",
                .foreign_source = "confext",
                .search_dirs = confext_dirs,
                .hierarchies = confext_hierarchies,
                .hierarchies_env = "SYSTEMD_CONFEXT_HIERARCHIES",
                .metadata_dir = ".systemd-confext",
                .metadata_list = "confexts",
                .release_dir = "etc/extension-release.d",
                .level_field = "CONFEXT_LEVEL",
                .scope_field = "CONFEXT_SCOPE",
                .version_fields = confext_version_fields,
                .forbidden_path = "etc/os-release",
                .only_top_dir = "etc",
                .mount_attr = MOUNT_ATTR_RDONLY | MOUNT_ATTR_NODEV | MOUNT_ATTR_NOSUID | MOUNT_ATTR_NOEXEC,
        },
};

const char *image_class_to_string(ImageClass c) {
        return c >= 0 && c < _IMAGE_CLASS_MAX ? image_class_info[c].name : NULL;
}

ImageClass image_class_from_string(const char *s) {
        for (ImageClass c = 0; c < _IMAGE_CLASS_MAX; c++)
                if (streq_ptr(s, image_class_info[c].name))
                        return c;
        return _IMAGE_CLASS_INVALID;
}
