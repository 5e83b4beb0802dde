/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * What an image's tree would do to the layers beneath it once overlayfs
 * stacks it: an entry hides what is below at the same path. A whiteout (a
 * character device 0/0, or since Linux 6.7 a file with overlay.whiteout)
 * removes it, an opaque directory (overlay.opaque=y) hides everything below
 * it, a non-directory replaces a directory, and redirect/metacopy xattrs
 * make overlayfs look elsewhere. tuck refuses images that would do any of
 * that to the host's os-release or to the extension-release directory: the
 * next refresh could no longer tell which host it runs on, and one
 * extension could hide another's release file.
 *
 * Both the trusted.overlay.* and the user.overlay.* (userxattr mounts)
 * spellings count. Reading trusted.* needs CAP_SYS_ADMIN: without it they
 * read as absent (unit tests run unprivileged and cannot make them either).
 */

#include <stddef.h>

typedef enum LayerRule {
        LAYER_ABSENT,       /* nothing at this path: not a file, link, whiteout */
        LAYER_MERGED_DIR,   /* absent, or a plain directory merged with those below */
} LayerRule;

/*
 * Checks path (relative to the image's root, e.g. "usr/lib/os-release")
 * and every directory on the way to it in the tree open at tree_fd. Returns
 * 1 if the layer leaves what is beneath path alone, 0 and a reason if not,
 * or a negative errno if the tree cannot be read.
 */
int layer_check(int tree_fd, const char *path, LayerRule rule, char **ret_reason);

typedef struct LayerPath {
        const char *path;
        LayerRule rule;
} LayerPath;

/*
 * layer_check() of each path in turn; the first refusal or error ends it. A
 * path below the directory the walk before it reached goes on from there:
 * that directory and those above it passed as directories on the way, which
 * is all they could be judged as for this path too.
 */
int layer_check_paths(int tree_fd, const LayerPath *paths, size_t n, char **ret_reason);

/*
 * The root of a tree that is itself a layer of hierarchy as ("usr": a DDI's
 * usr partition): not opaque, no redirect, so nothing of the host's
 * protected (its path, for the reason) is hidden. Same returns.
 */
int layer_check_root(int tree_fd, const char *as, const char *protected, char **ret_reason);
