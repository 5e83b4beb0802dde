/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "crypto-dl.h"
#include "log.h"
#include "trust.h"
#include "util.h"
#include "verity.h"

/* A root hash file or an xattr: a few hex digits and whitespace. */
#define ROOT_HASH_FILE_MAX 4096
/* systemd refuses verity-sig partitions over 4 MiB; so do we. */
#define SIG_PARTITION_MAX (4 * 1024 * 1024)
#define SIG_FILE_MAX (1024 * 1024)

void image_verity_done(ImageVerity *v) {
        free(v->root_hash);
        free(v->root_hash_from);
        free(v->sig);
        free(v->sig_from);
        free(v->hash_file);
        *v = (ImageVerity) {};
}

void verity_device_done(VerityDevice *d) {
        free(d->name);
        free(d->node);
        *d = (VerityDevice) {};
}

/* Takes the root hash hex from where; if v has one already, they must be the same. */
static int set_root_hash(ImageVerity *v, const char *hex, const char *where, char **ret_reason) {
        _cleanup_free_ char *copy = strdup(hex);
        _cleanup_free_ uint8_t *h = NULL;
        size_t n;
        int r;

        if (!copy)
                return -ENOMEM;
        r = unhexmem(strstrip(copy), &h, &n);
        if (r == -ENOMEM)
                return r;
        if (r < 0 || n < 16)
                return refuse_with(ret_reason, "%s holds no root hash (hex digits, at least 128 bits)", where);
        if (v->root_hash) {
                if (n != v->root_hash_size || memcmp(h, v->root_hash, n) != 0) {
                        _cleanup_free_ char *other = hexmem(v->root_hash, v->root_hash_size);

                        return refuse_with(ret_reason, "the root hash in %s (%s) is not the one in %s (%s)", where,
                                      strstrip(copy), v->root_hash_from, strna(other));
                }
                return 1;
        }
        v->root_hash_from = strdup(where);
        if (!v->root_hash_from)
                return -ENOMEM;
        v->root_hash = TAKE_PTR(h);
        v->root_hash_size = n;
        return 1;
}

/* NAME.raw -> NAME<suffix>, beside it. */
static char *sidecar_path(const char *path, const char *suffix) {
        _cleanup_free_ char *base = strdup(path);
        char *e;

        if (!base)
                return NULL;
        if ((e = endswith(base, ".raw")))
                *e = 0;
        return strjoin(base, suffix);
}

static int read_sidecar(const char *path, size_t max, char **ret) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        struct stat st;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        return read_full_fd(fd, max, ret);
}

/* A binary sidecar (the .p7s): read_full_fd() refuses NUL bytes, so read it here. */
static int read_binary(const char *path, size_t max, uint8_t **ret, size_t *ret_size) {
        _cleanup_close_ int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
        _cleanup_free_ uint8_t *buf = NULL;
        struct stat st;
        ssize_t k;

        if (fd < 0)
                return -errno;
        if (fstat(fd, &st) < 0)
                return -errno;
        if (!S_ISREG(st.st_mode))
                return -EBADFD;
        if ((uint64_t) st.st_size > max)
                return -EFBIG;
        buf = malloc(st.st_size ?: 1);
        if (!buf)
                return -ENOMEM;
        k = pread(fd, buf, st.st_size, 0);
        if (k < 0)
                return -errno;
        if (k != st.st_size)
                return -EIO;
        *ret = TAKE_PTR(buf);
        *ret_size = (size_t) k;
        return 0;
}

/* A sidecar decides what the image is checked against: only root may write it (trust.h). */
static int check_sidecar(const char *path, char **ret_reason) {
        _cleanup_free_ char *reason = NULL;
        int r;

        r = trust_check_path(path, TRUST_FILE, NULL, NULL, &reason);
        if (r < 0)
                return refuse_with(ret_reason, "cannot check who may write '%s': %s", path, strerror(-r));
        if (r == 0)
                return refuse_with(ret_reason, "%s", strna(reason));
        return 1;
}

int verity_load_sidecars(const char *path, int fd, DdiDesignator d, ImageVerity *v, char **ret_reason) {
        const char *hash_suffix = d == DDI_USR ? ".usrhash" : ".roothash";
        _cleanup_free_ char *hash_path = sidecar_path(path, hash_suffix), *text = NULL, *where = NULL;
        _cleanup_free_ char *sig_path = strjoin(strempty(hash_path), ".p7s"), *tree_path = NULL;
        char xattr[256];
        ssize_t n;
        int r;

        tree_path = sidecar_path(path, ".verity");
        if (!hash_path || !sig_path || !tree_path)
                return -ENOMEM;

        /* As systemd: the xattr first, then the file; both there, they must agree. */
        n = fgetxattr(fd, d == DDI_USR ? "user.verity.usrhash" : "user.verity.roothash", xattr, sizeof(xattr) - 1);
        if (n > 0) {
                xattr[n] = 0;
                r = set_root_hash(v, xattr, "the image's user.verity.roothash xattr", ret_reason);
                if (r <= 0)
                        return r;
        }
        r = read_sidecar(hash_path, ROOT_HASH_FILE_MAX, &text);
        if (r >= 0) {
                r = check_sidecar(hash_path, ret_reason);
                if (r <= 0)
                        return r;
                if (asprintf_safe(&where, "'%s'", hash_path) < 0)
                        return -ENOMEM;
                r = set_root_hash(v, text, where, ret_reason);
                if (r <= 0)
                        return r;
        } else if (r != -ENOENT)
                return refuse_with(ret_reason, "cannot read '%s': %s", hash_path, strerror(-r));

        r = read_binary(sig_path, SIG_FILE_MAX, &v->sig, &v->sig_size);
        if (r >= 0) {
                r = check_sidecar(sig_path, ret_reason);
                if (r <= 0)
                        return r;
                v->sig_from = strjoin("'", sig_path, "'");
                if (!v->sig_from)
                        return -ENOMEM;
        } else if (r != -ENOENT)
                return refuse_with(ret_reason, "cannot read '%s': %s", sig_path, strerror(-r));

        if (access(tree_path, F_OK) == 0) {
                r = check_sidecar(tree_path, ret_reason);
                if (r <= 0)
                        return r;
                v->hash_file = TAKE_PTR(tree_path);
                v->hash_tree = true;
        }
        return 1;
}

int verity_load_sig_partition(int fd, const DdiPartition *p, ImageVerity *v, char **ret_reason) {
        _cleanup_free_ char *buf = NULL;
        _cleanup_free_ uint8_t *sig = NULL;
        json_object *j = NULL, *hash = NULL, *sigb64 = NULL;
        const char *b64;
        ssize_t k;
        int n, r;

        if (p->size > SIG_PARTITION_MAX)
                return refuse_with(ret_reason, "the verity-sig partition is larger than 4 MiB");
        buf = calloc(1, p->size + 1);
        if (!buf)
                return -ENOMEM;
        k = pread(fd, buf, p->size, (off_t) p->offset);
        if (k < 0)
                return -errno;
        if ((uint64_t) k != p->size)
                return refuse_with(ret_reason, "the verity-sig partition is cut short");
        /* The JSON object, padded with NULs to the partition's end. */
        j = json_tokener_parse(buf);
        if (!j || !json_object_is_type(j, json_type_object)) {
                json_object_put(j);
                return refuse_with(ret_reason, "the verity-sig partition holds no JSON object");
        }
        if (!json_object_object_get_ex(j, "rootHash", &hash) || !json_object_is_type(hash, json_type_string) ||
            !json_object_object_get_ex(j, "signature", &sigb64) || !json_object_is_type(sigb64, json_type_string)) {
                json_object_put(j);
                return refuse_with(ret_reason, "the verity-sig partition's JSON lacks \"rootHash\" or \"signature\"");
        }
        r = set_root_hash(v, json_object_get_string(hash), "the verity-sig partition", ret_reason);
        if (r > 0)
                r = dlopen_libcrypto(ret_reason);
        b64 = json_object_get_string(sigb64);
        n = (int) strlen(b64);
        sig = r > 0 ? malloc(n / 4 * 3 + 3) : NULL;
        if (r > 0 && !sig)
                r = -ENOMEM;
        if (r > 0) {
                /* EVP_DecodeBlock() counts the padding as zero bytes: take them off. */
                int m = n % 4 == 0 ? sym_EVP_DecodeBlock(sig, (const unsigned char *) b64, n) : -1;

                if (m < 0)
                        r = refuse_with(ret_reason, "the verity-sig partition's signature is not base64");
                else {
                        m -= (n > 0 && b64[n - 1] == '=') + (n > 1 && b64[n - 2] == '=');
                        free(v->sig);
                        v->sig = TAKE_PTR(sig);
                        v->sig_size = (size_t) m;
                        free(v->sig_from);
                        v->sig_from = strdup("the verity-sig partition");
                        r = v->sig_from ? 1 : -ENOMEM;
                }
        }
        json_object_put(j);
        return r;
}

char *verity_device_name(const ImageVerity *v) {
        _cleanup_free_ char *hex = hexmem(v->root_hash, v->root_hash_size);

        return hex ? strjoin(VERITY_DM_PREFIX, hex) : NULL;
}

/* libcryptsetup's messages go to our debug log, never to stderr. */
static void crypt_log_to_debug(int level, const char *msg, void *userdata) {
        char **last_error = userdata;
        _cleanup_free_ char *m = strdup(msg);

        if (!m)
                return;
        strstrip(m);
        log_debug("libcryptsetup: %s", m);
        if (level == CRYPT_LOG_ERROR && last_error) {
                /* All of them: "Verification failed at position N." comes before the summary. */
                char *all = *last_error ? strjoin(*last_error, " ", m) : strdup(m);

                if (all) {
                        free(*last_error);
                        *last_error = all;
                }
        }
}

/*
 * The device-mapper devices in sysfs whose name starts with prefix: calls f
 * for each (if given), returns how many, and in *ret_dm (if given) the
 * "dm-N" of the last one.
 */
static int for_each_device(const char *prefix, void (*f)(const char *name, void *userdata), void *userdata,
                           char **ret_dm) {
        _cleanup_closedir_ DIR *d = opendir("/sys/block");
        int n = 0;

        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir_no_dot(d)); ) {
                _cleanup_free_ char *p = NULL, *name = NULL;

                if (!startswith(de->d_name, "dm-"))
                        continue;
                if (asprintf_safe(&p, "/sys/block/%s/dm/name", de->d_name) < 0)
                        return -ENOMEM;
                if (read_full_file_at(AT_FDCWD, p, 256, &name) < 0 || !startswith(strstrip(name), prefix))
                        continue;
                n++;
                if (f)
                        f(name, userdata);
                if (ret_dm) {
                        free(*ret_dm);
                        *ret_dm = strdup(de->d_name);
                        if (!*ret_dm)
                                return -ENOMEM;
                }
        }
        return n;
}

/* /dev/dm-N of the device-mapper device called name, from sysfs. */
static int dm_node_by_name(const char *name, char **ret) {
        _cleanup_free_ char *dm = NULL;
        int r = for_each_device(name, NULL, NULL, &dm);

        if (r < 0)
                return r;
        if (!dm)
                return -ENOENT;
        *ret = strjoin("/dev/", dm);
        return *ret ? 0 : -ENOMEM;
}

/* The device of that name exists already: is it for this very root hash? */
static int reuse(const char *name, const ImageVerity *v, VerityDevice *ret, char **ret_reason) {
        struct crypt_device *cd = NULL;
        char key[128];
        size_t key_size = sizeof(key);
        int r;

        r = sym_crypt_init_by_name(&cd, name);
        if (r >= 0)
                r = sym_crypt_volume_key_get(cd, CRYPT_ANY_SLOT, key, &key_size, NULL, 0);
        sym_crypt_free(cd);
        if (r < 0)
                return refuse_with(ret_reason, "a device '%s' exists but cannot be read: %s", name, strerror(-r));
        if (key_size != v->root_hash_size || memcmp(key, v->root_hash, key_size) != 0)
                return refuse_with(ret_reason, "a device '%s' exists with another root hash", name);
        r = dm_node_by_name(name, &ret->node);
        if (r < 0)
                return refuse_with(ret_reason, "cannot find the device node of '%s': %s", name, strerror(-r));
        ret->shared = true;
        return 1;
}

/*
 * Read-only, and private: udev's general rules (blkid, by-uuid links,
 * systemd device units) skip it. The device is tuck's alone, found by name
 * and used through /dev/dm-N; nobody else is to mount it.
 */
#define ACTIVATE_FLAGS (CRYPT_ACTIVATE_READONLY | CRYPT_ACTIVATE_PRIVATE)

static int activate(struct crypt_device *cd, const char *name, const ImageVerity *v, int *ret_kernel_sig,
                    char **last_error) {
        int r;

        *ret_kernel_sig = 0;
        if (v->sig) {
                /* The kernel checks the signature where it has a key for it; where it cannot
                 * (no DM_VERITY_VERIFY_ROOTHASH_SIG, no trusted key: ENOKEY), the userspace
                 * check (signature.c) is what stands, as in systemd. */
                r = sym_crypt_activate_by_signed_key(cd, name, (const char *) v->root_hash, v->root_hash_size,
                                                 (const char *) v->sig, v->sig_size, ACTIVATE_FLAGS);
                if (r >= 0) {
                        *ret_kernel_sig = 1;
                        return r;
                }
                if (r == -EEXIST)
                        return r;   /* the same image is mounted already */
                log_debug_errno(r, "The kernel did not check the signature of '%s' (%m), activating without.", name);
                *ret_kernel_sig = r;
                free(*last_error);
                *last_error = NULL;
        }
        return sym_crypt_activate_by_volume_key(cd, name, (const char *) v->root_hash, v->root_hash_size,
                                            ACTIVATE_FLAGS);
}

/* Is there device-mapper in this kernel at all? (The build machines' 6.18 has none.) */
static bool dm_available(void) {
        return access("/sys/class/misc/device-mapper", F_OK) == 0;
}

/* A crypt context for the hash tree on hash_dev over data_dev, checked against v. */
static int load(const ImageVerity *v, const char *data_dev, const char *hash_dev, uint32_t flags,
                struct crypt_device **ret, char **last_error, char **ret_reason) {
        struct crypt_params_verity params = { .flags = flags };
        struct crypt_device *cd = NULL;
        int r;

        r = sym_crypt_init_data_device(&cd, hash_dev, data_dev);
        if (r < 0)
                return refuse_with(ret_reason, "cannot open the image for dm-verity: %s", strerror(-r));
        sym_crypt_set_log_callback(cd, crypt_log_to_debug, last_error);
        r = sym_crypt_load(cd, CRYPT_VERITY, &params);
        if (r < 0) {
                sym_crypt_free(cd);
                return refuse_with(ret_reason, "no dm-verity hash tree (superblock) in %s: %s",
                              v->hash_file ?: "the verity partition", *last_error ?: strerror(-r));
        }
        if ((size_t) sym_crypt_get_volume_key_size(cd) != v->root_hash_size) {
                r = sym_crypt_get_volume_key_size(cd);
                sym_crypt_free(cd);
                return refuse_with(ret_reason, "the root hash from %s has %zu bytes, the hash tree's algorithm makes %d",
                              v->root_hash_from, v->root_hash_size, r);
        }
        *ret = cd;
        return 1;
}

/*
 * Every data block against the hash tree, in userspace, before anyone can
 * read the image (libcryptsetup's CRYPT_VERITY_CHECK_HASH with no device
 * name: check only). dm-verity alone would let a tampered image merge and
 * fail reads of its bad blocks with EIO later, after the swap.
 */
static int verify_all(const ImageVerity *v, const char *data_dev, const char *hash_dev, char **ret_reason) {
        _cleanup_free_ char *last_error = NULL;
        struct crypt_device *cd = NULL;
        int r;

        r = load(v, data_dev, hash_dev, CRYPT_VERITY_CHECK_HASH, &cd, &last_error, ret_reason);
        if (r <= 0)
                return r;
        r = sym_crypt_activate_by_volume_key(cd, NULL, (const char *) v->root_hash, v->root_hash_size, 0);
        sym_crypt_free(cd);
        if (r == -EPERM || r == -EFAULT)
                return refuse_with(ret_reason, "the image does not match its root hash (%s): tampered or corrupt",
                              last_error ?: "verification failed");
        if (r < 0)
                return refuse_with(ret_reason, "cannot verify the image against its root hash: %s",
                              last_error ?: strerror(-r));
        return 1;
}

int verity_activate(const ImageVerity *v, const char *data_dev, const char *hash_dev, VerityDevice *ret,
                    char **ret_reason) {
        _cleanup_free_ char *name = verity_device_name(v), *last_error = NULL;
        struct crypt_device *cd = NULL;
        VerityDevice d = {};
        int r;

        if (!name)
                return -ENOMEM;
        r = dlopen_libcryptsetup(ret_reason);
        if (r <= 0)
                return r;
        sym_crypt_set_log_callback(NULL, crypt_log_to_debug, &last_error);
        r = verify_all(v, data_dev, hash_dev, ret_reason);
        if (r <= 0)
                goto finish;
        if (!dm_available()) {
                r = refuse_with(ret_reason, "verified against its root hash, but this kernel has no device-mapper: "
                           "it cannot be mounted under dm-verity");
                goto finish;
        }
        r = load(v, data_dev, hash_dev, 0, &cd, &last_error, ret_reason);
        if (r <= 0)
                goto finish;

        r = activate(cd, name, v, &d.kernel_sig, &last_error);
        if (r == -EEXIST) {
                r = reuse(name, v, &d, ret_reason);
                if (r <= 0)
                        goto finish;
        } else if (r < 0) {
                r = refuse_with(ret_reason, "cannot set up dm-verity: %s", last_error ?: strerror(-r));
                goto finish;
        } else {
                r = dm_node_by_name(name, &d.node);
                if (r < 0) {
                        (void) verity_release(name);
                        r = refuse_with(ret_reason, "cannot find the device node of '%s': %s", name, strerror(-r));
                        goto finish;
                }
                r = 1;
        }
        d.name = TAKE_PTR(name);
        *ret = d;
        d = (VerityDevice) {};
finish:
        verity_device_done(&d);
        sym_crypt_free(cd);
        sym_crypt_set_log_callback(NULL, NULL, NULL);
        return r;
}

int verity_release(const char *name) {
        if (dlopen_libcryptsetup(NULL) <= 0)
                return -ELIBACC;
        sym_crypt_set_log_callback(NULL, crypt_log_to_debug, NULL);
        return sym_crypt_deactivate_by_name(NULL, name, CRYPT_DEACTIVATE_DEFERRED);
}


static void release_one(const char *name, void *userdata) {
        int r = verity_release(name);

        if (r < 0)
                log_debug_errno(r, "Cannot release dm-verity device '%s': %m", name);
}

int verity_sweep(void) {
        return for_each_device(VERITY_DM_PREFIX, release_one, NULL, NULL);
}

int verity_count_devices(void) {
        int n = for_each_device(VERITY_DM_PREFIX, NULL, NULL, NULL);

        return n < 0 ? 0 : n;
}
