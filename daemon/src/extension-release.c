/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "config.h"
#include "env-file.h"
#include "extension-release.h"
#include "log.h"
#include "util.h"

/* systemd reads env files line by line, each up to LONG_LINE_MAX (1 MiB):
 * a release file of 1 MiB in all covers every file systemd-sysext 252 reads. */
#define RELEASE_FILE_MAX (1024 * 1024)

/* Parses the env file open at fd; what went wrong is said about path. */
static int load_env_fd(int fd, const char *path, char ***ret, char **ret_reason) {
        _cleanup_free_ char *text = NULL, *error = NULL;
        struct stat st;
        int r;

        if (fstat(fd, &st) < 0)
                r = -errno;
        else
                r = S_ISREG(st.st_mode) ? read_full_fd(fd, RELEASE_FILE_MAX, &text) : -EBADFD;
        if (r < 0) {
                if (ret_reason)
                        (void) asprintf_safe(ret_reason, "cannot read %s: %s", path,
                                             r == -EBADFD ? "not a regular file" : strerror(-r));
                return r;
        }
        r = env_file_parse(text, ret, NULL, &error);
        if (r < 0 && ret_reason)
                (void) asprintf_safe(ret_reason, "%s: %s", path, error ?: strerror(-r));
        return r;
}

/*
 * path below root_fd, resolved as if root_fd were "/": an absolute symlink in
 * an image (usr/lib -> /usr/lib) never reaches the host's files.
 */
static int load_env_file_in_root(int root_fd, const char *path, char ***ret, char **ret_reason) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat_in_root(root_fd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
        if (fd < 0) {
                if (ret_reason)
                        (void) asprintf_safe(ret_reason, "cannot read %s: %s", path, strerror(-fd));
                return fd;
        }
        return load_env_fd(fd, path, ret, ret_reason);
}

int host_release_load(const char *root, HostRelease *ret) {
        _cleanup_strv_free_ char **pairs = NULL;
        _cleanup_close_ int root_fd = -EBADF;
        struct stat st;
        int r;

        root_fd = open(root ?: "/", O_PATH | O_DIRECTORY | O_CLOEXEC);
        if (root_fd < 0)
                return -errno;

        r = load_env_file_in_root(root_fd, "etc/os-release", &pairs, NULL);
        if (r == -ENOENT)
                r = load_env_file_in_root(root_fd, "usr/lib/os-release", &pairs, NULL);
        if (r < 0)
                return r;

        *ret = (HostRelease) {
                .architecture = architecture_native(),
                .scope = fstatat(root_fd, "etc/initrd-release", &st, 0) == 0 ? "initrd" : "system",
        };
#define DUP(field, key)                                                         \
        do {                                                                    \
                const char *_v_ = env_pairs_get(pairs, key);                    \
                if (_v_ && !(ret->field = strdup(_v_))) {                       \
                        host_release_done(ret);                                 \
                        return -ENOMEM;                                         \
                }                                                               \
        } while (0)
        DUP(id, "ID");
        DUP(version_id, "VERSION_ID");
        for (ImageClass c = 0; c < _IMAGE_CLASS_MAX; c++)
                DUP(level[c], image_class_info[c].level_field);
#undef DUP
        if (isempty(ret->id)) {
                host_release_done(ret);
                return -EBADMSG;   /* os-release must carry ID (systemd 251+) */
        }
        return 0;
}

void host_release_done(HostRelease *h) {
        free(h->id);
        free(h->version_id);
        for (ImageClass c = 0; c < _IMAGE_CLASS_MAX; c++)
                free(h->level[c]);
        *h = (HostRelease) {};
}

static const struct {
        const char *machine;
        const char *name;
} architectures[] = {
        { "x86_64",      "x86-64" },
        { "i686",        "x86" },
        { "i586",        "x86" },
        { "i486",        "x86" },
        { "i386",        "x86" },
        { "aarch64",     "arm64" },
        { "aarch64_be",  "arm64-be" },
        { "armv7l",      "arm" },
        { "armv8l",      "arm" },
        { "riscv64",     "riscv64" },
        { "ppc64le",     "ppc64-le" },
        { "ppc64",       "ppc64" },
        { "s390x",       "s390x" },
        { "loongarch64", "loongarch64" },
        { "mips64",      "mips64" },
};

const char *architecture_from_uname(const char *machine) {
        for (size_t i = 0; i < ELEMENTSOF(architectures); i++)
                if (streq(machine, architectures[i].machine))
                        return architectures[i].name;
        return NULL;
}

const char *architecture_native(void) {
        static struct utsname u;

        if (uname(&u) < 0)
                return NULL;
        return architecture_from_uname(u.machine);
}

/*
 * systemd's image_name_is_valid(): a valid file name (not empty, "." or "..",
 * no '/', at most NAME_MAX bytes) in valid UTF-8 without control characters,
 * and not ".#..." (a temporary file being written). So "sp ace", ".hidden"
 * and "ü" are images, as systemd-sysext 252 merges them.
 */
bool image_name_is_valid(const char *name) {
        if (isempty(name) || streq(name, ".") || streq(name, "..") || strlen(name) > NAME_MAX)
                return false;
        if (strchr(name, '/') || startswith(name, ".#"))
                return false;
        for (const char *p = name; *p; p++)
                if ((unsigned char) *p < ' ' || *p == 0x7f)
                        return false;
        return utf8_is_valid(name);
}

/* Is this relaxed release file tagged user.extension-release.strict=false? */
static bool relaxed(int dir_fd, const char *filename) {
        _cleanup_close_ int fd = -EBADF;
        char value[32];
        ssize_t n;

        fd = openat(dir_fd, filename, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return false;
        n = fgetxattr(fd, "user.extension-release.strict", value, sizeof(value) - 1);
        if (n < 0)
                return false;   /* missing means strict */
        value[n] = 0;
        return config_parse_boolean(strstrip(value)) == 0;
}

/*
 * The name-relaxed fallback: exactly one regular extension-release.* file
 * marked non-strict. Ambiguity is an error, not a guess.
 */
static int find_relaxed(int release_fd, char **ret_filename) {
        _cleanup_closedir_ DIR *d = opendir_at(release_fd, ".");
        _cleanup_free_ char *found = NULL;

        if (!d)
                return -errno;
        for (struct dirent *de; (de = readdir_no_dot(d)); ) {
                const char *suffix = startswith(de->d_name, "extension-release.");
                struct stat st;

                if (!suffix || !image_name_is_valid(suffix))
                        continue;
                if (fstatat(release_fd, de->d_name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISREG(st.st_mode))
                        continue;
                if (!relaxed(release_fd, de->d_name))
                        continue;
                if (found)
                        return -ENOTUNIQ;
                found = strdup(de->d_name);
                if (!found)
                        return -ENOMEM;
        }
        if (!found)
                return -ENOENT;
        *ret_filename = TAKE_PTR(found);
        return 0;
}

int extension_release_load(int image_fd, ImageClass c, const char *release_dir, const char *name,
                           char ***ret_pairs, char **ret_filename, char **ret_reason) {
        const ImageClassInfo *info = &image_class_info[c];
        _cleanup_free_ char *filename = NULL, *path = NULL;
        _cleanup_close_ int release_fd = -EBADF, fd = -EBADF;
        int r;

        if (!release_dir)
                release_dir = info->release_dir;
        /* Inside the image root, as systemd's chase_symlinks(CHASE_PREFIX_ROOT) does. */
        release_fd = openat_in_root(image_fd, release_dir, O_PATH | O_DIRECTORY);
        if (release_fd < 0) {
                (void) asprintf_safe(ret_reason, "no %s/ directory (not a %s image?)", release_dir, info->name);
                return release_fd;
        }

        filename = strjoin("extension-release.", name);
        if (!filename)
                return -ENOMEM;
        path = path_join(release_dir, filename);
        if (!path)
                return -ENOMEM;
        fd = openat_in_root(image_fd, path, O_RDONLY | O_NOCTTY | O_NONBLOCK);
        if (fd == -ENOENT) {
                free(filename);
                filename = NULL;
                r = find_relaxed(release_fd, &filename);
                if (r == -ENOTUNIQ) {
                        (void) asprintf_safe(ret_reason, "no %s/extension-release.%s, and several files marked "
                                             "user.extension-release.strict=0", release_dir, name);
                        return r;
                }
                if (r < 0) {
                        (void) asprintf_safe(ret_reason, "no %s/extension-release.%s (the release file must "
                                             "carry the image's name)", release_dir, name);
                        return r;
                }
                free(path);
                path = path_join(release_dir, filename);
                if (!path)
                        return -ENOMEM;
                /* find_relaxed() took a regular file, no symlink: open that very one. */
                fd = RET_NERRNO(openat(release_fd, filename, O_RDONLY | O_NOCTTY | O_NONBLOCK | O_NOFOLLOW |
                                       O_CLOEXEC));
        }
        if (fd < 0) {
                (void) asprintf_safe(ret_reason, "cannot read %s: %s", path, strerror(-fd));
                return fd;
        }
        r = load_env_fd(fd, path, ret_pairs, ret_reason);
        if (r < 0)
                return r;
        if (ret_filename)
                *ret_filename = TAKE_PTR(filename);
        return 0;
}

#define REFUSE(...)                                                             \
        ({                                                                      \
                if (ret_reason)                                                 \
                        (void) asprintf_safe(ret_reason, __VA_ARGS__);          \
                0;                                                              \
        })

int extension_release_validate(const char *name, ImageClass c, const HostRelease *host,
                               char * const *pairs, char **ret_reason) {
        const ImageClassInfo *info = &image_class_info[c];
        const char *id, *level, *arch, *scope;

        if (strv_length(pairs) == 0)
                return REFUSE("release file is empty");
        /* --force: merged whatever host it was made for, as systemd-sysext's --force does. */
        if (!host)
                return 1;

        /* Scope: by default an extension is good for the system and portable services. */
        scope = env_pairs_get(pairs, info->scope_field);
        if (host->scope) {
                _cleanup_strv_free_ char **scopes = strv_split(scope ?: "system portable", WHITESPACE);

                if (!scopes)
                        return -ENOMEM;
                if (!strv_contains(scopes, host->scope))
                        return REFUSE("%s=%s does not include this host's scope '%s'",
                                      info->scope_field, strempty(scope), host->scope);
        }

        arch = env_pairs_get(pairs, "ARCHITECTURE");
        if (!isempty(arch) && !streq(arch, "_any") && !streq_ptr(arch, host->architecture))
                return REFUSE("built for architecture '%s', host is '%s'", arch, strna(host->architecture));

        id = env_pairs_get(pairs, "ID");
        if (isempty(id))
                return REFUSE("release file has no ID= (use ID=_any for any OS)");
        if (streq(id, "_any"))
                return 1;   /* no OS dependency: no version match needed */
        if (!streq_ptr(id, host->id))
                return REFUSE("built for OS '%s', host is '%s'", id, strna(host->id));

        /* A rolling release without version info matches on ID alone. */
        if (isempty(host->version_id) && isempty(host->level[c]))
                return 1;

        /* If both declare an API level it must match; otherwise the OS version must. */
        level = env_pairs_get(pairs, info->level_field);
        if (!isempty(host->level[c]) && !isempty(level)) {
                if (!streq(level, host->level[c]))
                        return REFUSE("built for %s '%s', host has '%s'", info->level_field, level, host->level[c]);
                return 1;
        }
        if (!isempty(host->version_id)) {
                const char *v = env_pairs_get(pairs, "VERSION_ID");

                if (isempty(v))
                        return REFUSE("release file has no VERSION_ID= (nor a matching %s=) to match host "
                                      "VERSION_ID '%s'", info->level_field, host->version_id);
                if (!streq(v, host->version_id))
                        return REFUSE("built for VERSION_ID '%s', host is '%s'", v, host->version_id);
        }
        return 1;
}

const char *extension_release_version(ImageClass c, char * const *pairs) {
        for (const char * const *f = image_class_info[c].version_fields; *f; f++) {
                const char *v = env_pairs_get(pairs, *f);

                if (!isempty(v))
                        return v;
        }
        return NULL;
}
