/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The two kinds of extension images, as one table (like systemd's
 * image_class_info[]): where they are searched, which hierarchies they
 * extend, where their release file lives, which release fields they match
 * on, and how their overlay is mounted.
 */

#include <stdbool.h>
#include <stdint.h>

typedef enum ImageClass {
        IMAGE_SYSEXT,
        IMAGE_CONFEXT,
        _IMAGE_CLASS_MAX,
        _IMAGE_CLASS_INVALID = -1,
} ImageClass;

typedef struct ImageClassInfo {
        const char *name;                 /* "sysext" */
        const char *overlay_source;       /* mount source of our overlays: "tuck-sysext" */
        const char *foreign_source;       /* what systemd-sysext/confext call theirs: "sysext" */
        const char * const *search_dirs;  /* default search path, highest priority first */
        const char * const *hierarchies;  /* default hierarchies */
        const char *hierarchies_env;      /* replaces them: "SYSTEMD_SYSEXT_HIERARCHIES" */
        const char *metadata_dir;         /* in the merged tree, as systemd writes it: ".systemd-sysext" */
        const char *metadata_list;        /* ...its file listing the extensions: "extensions" */
        const char *release_dir;          /* inside the image: "usr/lib/extension-release.d" */
        const char *level_field;          /* "SYSEXT_LEVEL" */
        const char *scope_field;          /* "SYSEXT_SCOPE" */
        const char * const *version_fields; /* the extension's own version, first found wins */
        const char *forbidden_path;       /* may be neither shipped nor hidden: "usr/lib/os-release" */
        const char *only_top_dir;         /* a confext carries nothing but "etc" */
        uint64_t mount_attr;              /* MOUNT_ATTR_* for every overlay of this class */
} ImageClassInfo;

extern const ImageClassInfo image_class_info[_IMAGE_CLASS_MAX];

const char *image_class_to_string(ImageClass c);
ImageClass image_class_from_string(const char *s);
