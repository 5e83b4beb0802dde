/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <blkid/blkid.h>
#include <dirent.h>
#include <fcntl.h>
#include <ftw.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "layer.h"
#include "trust.h"
#include "log.h"
#include "util.h"
#include "version.h"

static const char * const image_type_table[_IMAGE_TYPE_MAX] = {
        [IMAGE_TYPE_DIRECTORY] = "directory",
        [IMAGE_TYPE_SQUASHFS] = "squashfs",
        [IMAGE_TYPE_EROFS] = "erofs",
        [IMAGE_TYPE_GPT] = "gpt",
        [IMAGE_TYPE_UNSUPPORTED] = "unsupported",
};

static const char * const image_state_table[_IMAGE_STATE_MAX] = {
        [IMAGE_CANDIDATE] = "candidate",
        [IMAGE_SHADOWED] = "shadowed",
        [IMAGE_MASKED] = "masked",
};

const char *image_type_to_string(ImageType t) {
        return t < _IMAGE_TYPE_MAX ? image_type_table[t] : NULL;
}

const char *image_state_to_string(ImageState s) {
        return s < _IMAGE_STATE_MAX ? image_state_table[s] : NULL;
}

Image *image_free(Image *i) {
        if (!i)
                return NULL;
        free(i->name);
        free(i->path);
        free(i->resolved);
        free(i->search_dir);
        free(i->shadowed_by);
        free(i->fstype);
        free(i->fingerprint);
        free(i->partition);
        image_verity_done(&i->verity);
        free(i->signer);
        free(i->verity_note);
        free(i->reason);
        free(i->extension);
        free(i->identity_note);
        free(i->version);
        strv_free(i->release);
        strv_free(i->hierarchies);
        free(i);
        return NULL;
}


void images_free(Image **images, size_t n) {
        for (size_t i = 0; i < n; i++)
                image_free(images[i]);
        free(images);
}

int image_open_file(const char *path) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;
        int flags;

        /* O_NONBLOCK: a FIFO renamed into an image's place after discovery saw a file
         * would block open() until someone writes to it. Then it must be a regular file,
         * or nothing is read from it; reads from here on block as a file's do. */
        fd = open(path, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        flags = fcntl(fd, F_GETFL);
        if (flags < 0 || fcntl(fd, F_SETFL, flags & ~O_NONBLOCK) < 0)
                return -errno;
        return TAKE_FD(fd);
}

/* The file systems tuck mounts (dissect.c accepts no others), and what would make one ambiguous. */
static const char * const mountable_fstypes[] = { "squashfs", "erofs", IMAGE_FOREIGN_SIGNATURES, NULL };

int image_probe_type(const char *path, ImageType *ret, char **ret_fstype) {
        _cleanup_close_ int fd = -EBADF;
        blkid_probe pr;
        const char *type = NULL, *pttype = NULL;
        int r;

        fd = image_open_file(path);
        if (fd < 0)
                return fd;
        pr = blkid_new_probe();
        if (!pr)
                return -ENOMEM;
        if (blkid_probe_set_device(pr, fd, 0, 0) < 0) {
                blkid_free_probe(pr);
                return -EIO;
        }

        blkid_probe_enable_superblocks(pr, 1);
        blkid_probe_set_superblocks_flags(pr, BLKID_SUBLKS_TYPE);
        /* Only the file systems tuck mounts: a raw image of any other kind is refused without a
         * name, and tuck's own probe runs none of libblkid's other superblock parsers on it. */
        if (blkid_probe_filter_superblocks_type(pr, BLKID_FLTR_ONLYIN, (char **) mountable_fstypes) < 0) {
                blkid_free_probe(pr);
                return -ENOMEM;
        }
        blkid_probe_enable_partitions(pr, 1);
        r = blkid_do_fullprobe(pr);
        if (r == 0) {
                (void) blkid_probe_lookup_value(pr, "PTTYPE", &pttype, NULL);
                (void) blkid_probe_lookup_value(pr, "TYPE", &type, NULL);
        }

        /* Any partition table, or a protective MBR whose GPT is gone: ddi.c says what it is. */
        if (pttype)
                *ret = IMAGE_TYPE_GPT;
        else if (streq_ptr(type, "squashfs"))
                *ret = IMAGE_TYPE_SQUASHFS;
        else if (streq_ptr(type, "erofs"))
                *ret = IMAGE_TYPE_EROFS;
        else
                *ret = IMAGE_TYPE_UNSUPPORTED;

        if (ret_fstype)
                *ret_fstype = (type || pttype) ? strdup(type ?: pttype) : NULL;
        blkid_free_probe(pr);
        return r < 0 ? -EIO : 0;
}

/* An empty directory masks same-named images in lower-priority directories. */
static int dir_is_empty_at(int dir_fd, const char *name) {
        _cleanup_closedir_ DIR *d = opendir_at(dir_fd, name);

        if (!d)
                return -errno;
        return !readdir_no_dot(d);
}

/* Images of an untrusted search directory neither shadow nor mask: whoever wrote them is not root. */
static Image *find_by_name(Image **images, size_t n, const char *name) {
        for (size_t i = 0; i < n; i++)
                if (images[i]->state != IMAGE_SHADOWED && !images[i]->untrusted && streq(images[i]->name, name))
                        return images[i];
        return NULL;
}

static int append(Image ***images, size_t *n, Image *i) {
        Image **a = realloc(*images, sizeof(Image *) * (*n + 1));

        if (!a)
                return -ENOMEM;
        a[(*n)++] = i;
        *images = a;
        return 0;
}

/*
 * One directory entry: a *.raw file or a directory, symlinks followed. In a
 * search directory others can write (untrusted: why), it is listed refused.
 */
static int discover_entry(const char *root, ImageClass c, const char *dir, int dir_fd, const char *dir_resolved,
                          const char *untrusted, const char *entry, Image ***images, size_t *n) {
        _cleanup_(image_freep) Image *i = NULL;
        struct stat st;
        Image *winner;
        char *suffix;
        bool symlink;
        int r;

        /* ".#NAME": a file being written (systemd's convention), not an image yet. */
        if (startswith(entry, ".#") || fstatat(dir_fd, entry, &st, AT_SYMLINK_NOFOLLOW) < 0)
                return 0;
        symlink = S_ISLNK(st.st_mode);
        if (symlink && fstatat(dir_fd, entry, &st, 0) < 0)
                return 0;

        i = calloc(1, sizeof(Image));
        if (!i)
                return -ENOMEM;
        i->class = c;

        if (S_ISDIR(st.st_mode)) {
                i->type = IMAGE_TYPE_DIRECTORY;
                i->name = strdup(entry);
        } else if (S_ISREG(st.st_mode) && (suffix = endswith(entry, ".raw")) && suffix != entry) {
                i->type = IMAGE_TYPE_UNSUPPORTED;   /* probed later */
                i->name = strndup(entry, suffix - entry);
        } else
                return 0;

        i->path = path_join(root, dir, entry);
        i->search_dir = strdup(dir);
        if (!i->name || !i->path || !i->search_dir)
                return -ENOMEM;
        /* Only a symlink needs resolving on its own; the directory was, by its trust walk. */
        i->resolved = !symlink && dir_resolved ? path_join(dir_resolved, entry) : realpath(i->path, NULL);
        if (!i->resolved && !(i->resolved = strdup(i->path)))
                return -ENOMEM;

        winner = untrusted ? NULL : find_by_name(*images, *n, i->name);
        if (untrusted) {
                i->untrusted = i->inspected = true;
                i->reason = strjoin("the search directory is not root's alone: ", untrusted);
                if (!i->reason)
                        return -ENOMEM;
        } else if (winner) {
                i->state = IMAGE_SHADOWED;
                i->shadowed_by = strdup(winner->path);
                if (!i->shadowed_by)
                        return -ENOMEM;
        } else if (i->type == IMAGE_TYPE_DIRECTORY) {
                r = dir_is_empty_at(dir_fd, entry);
                if (r > 0)
                        i->state = IMAGE_MASKED;
        }

        if (i->state == IMAGE_CANDIDATE && i->type != IMAGE_TYPE_DIRECTORY) {
                r = image_probe_type(i->path, &i->type, &i->fstype);
                if (r < 0)
                        log_debug_errno(r, "Failed to probe '%s': %m", i->path);
        }

        return append(images, n, TAKE_PTR(i));
}

/* The entries of a search directory, sorted: a stable order within a directory. */
static int list_dir(int dir_fd, char ***ret) {
        _cleanup_closedir_ DIR *d = opendir_at(dir_fd, ".");
        _cleanup_strv_free_ char **entries = calloc(1, sizeof(char *));

        if (!d)
                return -errno;
        if (!entries)
                return -ENOMEM;
        for (struct dirent *de; (de = readdir_no_dot(d)); )
                if (strv_extend(&entries, de->d_name) < 0)
                        return -ENOMEM;
        strv_sort(entries);
        *ret = TAKE_PTR(entries);
        return 0;
}

int images_discover(const char *root, ImageClass c, char * const *search_dirs,
                    Image ***ret, size_t *ret_n) {
        Image **images = NULL;
        size_t n = 0;
        int r = 0;

        STRV_FOREACH(dir, search_dirs) {
                _cleanup_strv_free_ char **entries = NULL;
                _cleanup_free_ char *path = path_join(root, *dir), *untrusted = NULL, *resolved = NULL;
                _cleanup_close_ int fd = -EBADF;

                if (!path) {
                        r = -ENOMEM;
                        goto fail;
                }
                fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
                if (fd < 0) {
                        if (errno != ENOENT)
                                log_debug_errno(errno, "Cannot open search directory '%s', skipping: %m", path);
                        continue;
                }
                r = list_dir(fd, &entries);
                if (r < 0)
                        goto fail;
                /* The walk resolves the directory too: its images are named below what it checked. */
                r = trust_check_path(path, TRUST_SEARCH_DIR, NULL, &resolved, &untrusted);
                if (r < 0)
                        log_debug_errno(r, "Cannot check who may write '%s', refusing its images: %m", path);
                if (r < 0 && !untrusted)
                        (void) asprintf_safe(&untrusted, "cannot be checked: %s", strerror(-r));
                /* Refused, or not checked, and no words for it (out of memory): never taken as trusted. */
                if (r <= 0 && !untrusted) {
                        r = -ENOMEM;
                        goto fail;
                }
                /* The order of the layers is decided later, by version. */
                STRV_FOREACH(e, entries) {
                        r = discover_entry(root, c, *dir, fd, resolved, untrusted, *e, &images, &n);
                        if (r < 0)
                                goto fail;
                }
        }

        *ret = images;
        *ret_n = n;
        return 0;
fail:
        images_free(images, n);
        return r;
}

/* Fingerprint of a directory tree: every entry's path and stat identity. */
static uint64_t tree_hash;
static int tree_hash_one(const char *path, const struct stat *st, int flag, struct FTW *ftw) {
        uint64_t v[5] = { st->st_ino, st->st_mode, st->st_size, st->st_mtim.tv_sec, st->st_mtim.tv_nsec };

        tree_hash = fnv64(tree_hash, path, strlen(path) + 1);
        tree_hash = fnv64(tree_hash, v, sizeof(v));
        return 0;
}

int image_fingerprint(Image *i) {
        struct stat st;

        free(i->fingerprint);
        i->fingerprint = NULL;
        if (stat(i->resolved, &st) < 0)
                return -errno;

        if (i->type == IMAGE_TYPE_DIRECTORY) {
                tree_hash = FNV64_INIT;
                if (nftw(i->resolved, tree_hash_one, 16, FTW_PHYS) < 0)
                        return -errno;
                return asprintf_safe(&i->fingerprint, "dir:%lx:%lu:%016lx",
                                     (unsigned long) st.st_dev, (unsigned long) st.st_ino,
                                     (unsigned long) tree_hash);
        }
        if (i->protection != IMAGE_PROTECTION_UNPROTECTED) {
                _cleanup_free_ char *hash = hexmem(i->verity.root_hash, i->verity.root_hash_size);

                if (!hash)
                        return -ENOMEM;
                return asprintf_safe(&i->fingerprint, "raw:%lx:%lu:%lld:%lld.%09ld:verity:%s",
                                     (unsigned long) st.st_dev, (unsigned long) st.st_ino, (long long) st.st_size,
                                     (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec, hash);
        }
        return asprintf_safe(&i->fingerprint, "raw:%lx:%lu:%lld:%lld.%09ld",
                             (unsigned long) st.st_dev, (unsigned long) st.st_ino,
                             (long long) st.st_size, (long long) st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
}

bool image_fingerprint_same_file(const char *a, const char *b) {
        size_t la, lb;

        if (!a || !b)
                return false;
        la = strstr(a, ":verity:") ? (size_t) (strstr(a, ":verity:") - a) : strlen(a);
        lb = strstr(b, ":verity:") ? (size_t) (strstr(b, ":verity:") - b) : strlen(b);
        return la == lb && memcmp(a, b, la) == 0;
}

int image_set_reason(Image *i, const char *fmt, ...) {
        va_list ap;
        int r;

        i->valid = false;
        va_start(ap, fmt);
        r = free_and_vasprintf(&i->reason, fmt, ap);
        va_end(ap);
        return r;
}

int image_check_trust(Image *i, TrustCache *cache) {
        _cleanup_free_ char *reason = NULL, *resolved = NULL;
        struct stat st;
        int r;

        if (i->untrusted)
                return 0;
        r = trust_check_path_cached(cache, i->path, i->type == IMAGE_TYPE_DIRECTORY ? TRUST_TREE : TRUST_FILE, &st,
                                    &resolved, &reason);
        /* From here on the image is what the walk reached: a symlink flipped since the
         * discovery (sysupdate's CurrentSymlink=) points at another file, not a replaced one. */
        if (r > 0 && !streq(resolved, i->resolved)) {
                free(i->resolved);
                i->resolved = TAKE_PTR(resolved);
                /* What it is was probed through the old target. */
                if (i->type != IMAGE_TYPE_DIRECTORY) {
                        free(i->fstype);
                        i->fstype = NULL;
                        r = image_probe_type(i->resolved, &i->type, &i->fstype);
                        if (r == -ENOMEM)
                                return r;
                        if (r < 0)
                                return image_set_reason(i, "cannot open '%s': %s", i->resolved, strerror(-r));
                        if (i->type == IMAGE_TYPE_UNSUPPORTED)
                                return image_set_reason(i, "no squashfs or erofs file system found");
                        r = 1;
                }
        }
        if (r > 0 && i->type == IMAGE_TYPE_DIRECTORY)
                r = trust_check_tree(i->resolved, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return image_set_reason(i, "cannot check who may write it: %s", strerror(-r));
        if (r == 0) {
                i->inspected = true;
                return image_set_reason(i, "%s", strna(reason));
        }
        i->checked_dev = st.st_dev;
        i->checked_ino = st.st_ino;
        return 1;
}

char *version_from_file_name(const char *extension, const char *file_name) {
        _cleanup_free_ char *base = NULL;
        const char *slash = strrchr(file_name, '/'), *rest;
        char *suffix, *dash;

        base = strdup(slash ? slash + 1 : file_name);
        if (!base)
                return NULL;
        if ((suffix = endswith(base, ".raw")))
                *suffix = 0;
        rest = startswith(base, extension);
        if (!rest || (*rest != '_' && *rest != '-') || rest[1] == 0)
                return NULL;
        rest++;

        /* NAME-1.2-x86-64: drop a trailing architecture (sysext-bakery names). */
        for (dash = strchr(rest, '-'); dash; dash = strchr(dash + 1, '-'))
                if (architecture_from_uname(dash + 1) || streq(dash + 1, "x86-64") || streq(dash + 1, "arm64") ||
                    streq(dash + 1, "x86") || streq(dash + 1, "arm")) {
                        *dash = 0;
                        break;
                }
        return *rest ? strdup(rest) : NULL;
}


/* A confext touches only /etc: anything else at its top is refused. */
static int check_only_top_dir(Image *i, int tree_fd, const char *only) {
        _cleanup_closedir_ DIR *d = opendir_at(tree_fd, ".");

        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir_no_dot(d)); )
                if (!streq(de->d_name, only))
                        return image_set_reason(i, "a %s may only carry /%s, but it has /%s",
                                          image_class_to_string(i->class), only, de->d_name);
        return 0;
}

/* overlayfs refuses a lower layer inside another one (-ELOOP). */
static bool path_is_below(const char *path, const char *dir) {
        const char *rest = startswith(path, dir);

        return rest && (*rest == '/' || *rest == 0);
}

static int collect_hierarchies(Image *i, int tree_fd, const char *root, char * const *hierarchies) {
        STRV_FOREACH(h, hierarchies) {
                _cleanup_free_ char *host_path = path_join(root, *h);
                struct stat st;

                if (!host_path)
                        return -ENOMEM;
                if (image_is_usr_partition(i)) {
                        /* The partition is /usr: nothing else. */
                        if (streq(*h, "/usr") && strv_extend(&i->hierarchies, *h) < 0)
                                return -ENOMEM;
                        continue;
                }
                /* Not followed: a symlink there would replace the host's whole hierarchy. */
                if (fstatat(tree_fd, *h + 1, &st, AT_SYMLINK_NOFOLLOW) < 0)
                        continue;
                if (!S_ISDIR(st.st_mode))
                        return image_set_reason(i, "ships %s as %s, which would replace the host's %s", *h,
                                          S_ISLNK(st.st_mode) ? "a symlink" : "something other than a directory", *h);
                if (i->type == IMAGE_TYPE_DIRECTORY && path_is_below(i->resolved, host_path))
                        return image_set_reason(i, "directory image inside %s cannot extend %s (overlayfs refuses "
                                          "overlapping layers); use a .raw image", *h, *h);
                if (strv_extend(&i->hierarchies, *h) < 0)
                        return -ENOMEM;
        }
        if (strv_length(i->hierarchies) == 0) {
                _cleanup_free_ char *list = strv_join(hierarchies, " ");

                return image_set_reason(i, "carries none of %s", strempty(list));
        }
        return 0;
}

/*
 * The name the image proves, which its version floor and removal protection
 * belong to (versions.h): its own name (the file name without ".raw"), with
 * a release file of that name. A relaxed release file
 * (user.extension-release.strict=false) named for another extension X is X
 * only if the file name carries X with a version, "X_VERSION" or
 * "X-VERSION[-ARCH]" with VERSION starting with a digit, as systemd-sysupdate
 * and sysext-bakery name versioned files. Anything else is the image's own
 * name: an image "aaa" whose relaxed release file says "bar" neither raises
 * nor lowers bar's floor, and bar's protection does not count it as bar.
 */
static int image_identity(Image *i, const char *release_name) {
        _cleanup_free_ char *version = NULL;

        if (streq(release_name, i->name))
                return free_and_strdup(&i->extension, i->name);
        version = version_from_file_name(release_name, i->name);
        if (version && version[0] >= '0' && version[0] <= '9')
                return free_and_strdup(&i->extension, release_name);
        free(i->identity_note);
        i->identity_note = NULL;
        if (asprintf_safe(&i->identity_note, "its relaxed release file names '%s', which its file name does not "
                          "carry: it counts as '%s', never as '%s' (floors and removal protection)",
                          release_name, i->name, release_name) < 0)
                return -ENOMEM;
        return free_and_strdup(&i->extension, i->name);
}

static int validate_version(Image *i) {
        const char *v = extension_release_version(i->class, i->release);

        if (v) {
                i->version = strdup(v);
                i->version_source = "release";
                return i->version ? 0 : -ENOMEM;
        }
        i->version = version_from_file_name(i->extension, i->resolved);
        if (!i->version)
                i->version = version_from_file_name(i->extension, i->path);
        if (i->version)
                i->version_source = "file name";
        return 0;
}

/*
 * A path of the extension ("usr/lib/os-release") in the tree that was
 * mounted: a DDI's usr partition is /usr itself, so there it is
 * "lib/os-release", and "usr" is "." (NULL for anything outside /usr).
 */
static const char *tree_path(const Image *i, const char *path) {
        const char *rest;

        if (!image_is_usr_partition(i))
                return path;
        rest = startswith(path, "usr");
        if (!rest || (*rest && *rest != '/'))
                return NULL;
        return *rest ? rest + 1 : ".";
}

bool image_is_usr_partition(const Image *i) {
        return i->type == IMAGE_TYPE_GPT && i->designator == DDI_USR;
}

static int check_layer(Image *i, int tree_fd) {
        const ImageClassInfo *info = &image_class_info[i->class];
        _cleanup_free_ char *reason = NULL;
        int r;

        if (image_is_usr_partition(i) && i->class != IMAGE_SYSEXT)
                return image_set_reason(i, "a usr partition holds /usr: it cannot be a %s",
                                        image_class_to_string(i->class));
        /* Nothing may hide the host's os-release, nor anyone's release file; a usr
         * partition is the /usr layer itself, so its root counts too. */
        r = image_is_usr_partition(i) ? layer_check_root(tree_fd, "usr", info->forbidden_path, &reason) : 1;
        if (r > 0)
                r = layer_check_paths(tree_fd, (const LayerPath[]) {
                                { tree_path(i, info->forbidden_path), LAYER_ABSENT },
                                { tree_path(i, info->release_dir), LAYER_MERGED_DIR },
                        }, 2, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return image_set_reason(i, "cannot read the image's tree: %s", strerror(-r));
        if (r == 0)
                return image_set_reason(i, "%s", strna(reason));
        return 0;
}

int image_validate(Image *i, int tree_fd, const HostRelease *host, const char *root,
                   char * const *hierarchies) {
        const ImageClassInfo *info = &image_class_info[i->class];
        _cleanup_free_ char *filename = NULL, *reason = NULL;
        int r;

        i->inspected = true;
        i->valid = true;

        if (!image_name_is_valid(i->name))
                return image_set_reason(i, "'%s' is not a valid image name", i->name);

        r = check_layer(i, tree_fd);
        if (r < 0 || !i->valid)
                return r;

        r = extension_release_load(tree_fd, i->class, tree_path(i, info->release_dir), i->name, &i->release,
                                   &filename, &reason);
        if (r == -ENOMEM)
                return r;
        if (r < 0)
                return image_set_reason(i, "%s", strna(reason));
        r = image_identity(i, startswith(filename, "extension-release.") ?: i->name);
        if (r < 0)
                return r;

        r = extension_release_validate(i->name, i->class, host, i->release, &reason);
        if (r < 0)
                return r;
        if (r == 0)
                return image_set_reason(i, "%s", strna(reason));

        if (info->only_top_dir) {
                r = check_only_top_dir(i, tree_fd, info->only_top_dir);
                if (r < 0 || !i->valid)
                        return r;
        }

        r = collect_hierarchies(i, tree_fd, root, hierarchies);
        if (r < 0 || !i->valid)
                return r;

        return validate_version(i);
}

static int compare_images(const void *a, const void *b) {
        const Image *x = *(Image * const *) a, *y = *(Image * const *) b;

        return strverscmp_improved(x->name, y->name);
}

void images_sort(Image **images, size_t n) {
        if (n > 1)
                qsort(images, n, sizeof(Image *), compare_images);
}
