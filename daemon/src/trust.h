/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The trust model: whoever can change what tuck mounts is root, since an
 * extension may ship set-uid binaries and every service runs what /usr
 * holds. So everything an image depends on must be writable by root alone:
 *
 *   - the search directory itself: owned by root, not writable by its group
 *     or others (not even with the sticky bit: anyone could add an image);
 *   - the image (a file, or a directory tree and everything in it), its
 *     verity sidecars and the certificates in verity.d: owned by root, not
 *     writable by group or others;
 *   - every directory on the way to any of them, from "/" down, symlink
 *     targets included: owned by root, and not writable by group or others
 *     unless the sticky bit keeps them from renaming or removing root's
 *     entries (/tmp is fine on the way, a 0777 directory is not);
 *   - every symlink followed on the way, if it is in a directory others may
 *     add names to (sticky): owned by root. Its owner could swap it for a
 *     link to any of root's images, and the kernel's protected_symlinks does
 *     not apply: tuck reads links itself. Elsewhere only root can replace a
 *     link, whoever owns it;
 *   - every file system entered on the way: one whose owners can be believed.
 *     A FUSE server reports owners and modes itself, so only a FUSE mount
 *     root made counts (user_id=0 in its options, or none: virtiofs); a
 *     user's (fusermount3, user_allow_other) is refused, whatever it says.
 *
 * Flatcar's /etc/extensions/NAME.raw -> /opt/extensions/NAME/NAME-V.raw
 * passes when /opt/extensions is root's. Paths are walked one component at
 * a time (O_PATH|O_NOFOLLOW), symlinks read and their targets walked the
 * same way, so what was checked is what the kernel would resolve.
 */

#include <stdbool.h>
#include <sys/stat.h>

typedef enum TrustKind {
        TRUST_SEARCH_DIR,   /* a search directory: a directory nobody else may write */
        TRUST_FILE,         /* an image file, a sidecar, a certificate */
        TRUST_TREE,         /* a directory image: its top, nobody else may write */
} TrustKind;

/*
 * Walks path from "/" and checks it as kind says. Returns 1 if trusted (and
 * *ret_st, if given, is what the path resolved to, *ret_resolved the path
 * the walk ended at: every symlink followed, the name the checks hold for),
 * 0 and a reason naming the offending path if not, a negative errno if it
 * cannot be walked.
 */
int trust_check_path(const char *path, TrustKind kind, struct stat *ret_st, char **ret_resolved, char **ret_reason);

/*
 * Within one run, images sit side by side in a few search directories: a
 * cache holds the last directory a walk passed through, so that the next
 * name in it is one openat() from there, not a walk from "/". Only root can
 * change what was checked, but root can; keep a cache for one run, no
 * longer. A name that is a symlink, and any other path, is walked in full
 * (and that walk's directory is the one cached then). Same returns.
 */
typedef struct TrustCache {
        char *dir;   /* no trailing "/", no symlink, ".", ".." or "//" in it */
        int fd;      /* O_PATH on dir */
        dev_t dev;   /* its st_dev: a name on another file system is walked in full */
} TrustCache;

#define TRUST_CACHE_INIT ((TrustCache) { .fd = -EBADF })

void trust_cache_done(TrustCache *cache);
int trust_check_path_cached(TrustCache *cache, const char *path, TrustKind kind, struct stat *ret_st,
                            char **ret_resolved, char **ret_reason);

/* Every entry of the directory tree at path: owned by root, not writable by group or others. Same returns. */
int trust_check_tree(const char *path, char **ret_reason);

/* The rule for one entry, for unit tests: NULL if st passes, else why not ("owned by uid 1000"). */
const char *trust_refusal(const struct stat *st, bool on_the_way, char buf[static 64]);
