/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <limits.h>
#include <linux/openat2.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "util.h"

char *startswith(const char *s, const char *prefix) {
        size_t l = strlen(prefix);

        return strncmp(s, prefix, l) == 0 ? (char *) s + l : NULL;
}

char *endswith(const char *s, const char *suffix) {
        size_t sl = strlen(s), pl = strlen(suffix);

        if (sl < pl)
                return NULL;
        return streq(s + sl - pl, suffix) ? (char *) s + sl - pl : NULL;
}

char *strjoin_real(const char *first, ...) {
        va_list ap;
        size_t n = 0;
        char *r, *p;

        va_start(ap, first);
        for (const char *s = first; s; s = va_arg(ap, const char *))
                n += strlen(s);
        va_end(ap);

        r = malloc(n + 1);
        if (!r)
                return NULL;

        p = r;
        va_start(ap, first);
        for (const char *s = first; s; s = va_arg(ap, const char *))
                p = stpcpy(p, s);
        va_end(ap);
        *p = 0;
        return r;
}

char *path_join_real(const char *first, ...) {
        va_list ap;
        size_t n = 1;
        char *r, *p;

        va_start(ap, first);
        for (const char *s = first; s; s = va_arg(ap, const char *))
                n += strlen(s) + 1;
        va_end(ap);

        r = p = malloc(n);
        if (!r)
                return NULL;

        va_start(ap, first);
        for (const char *s = first; s; s = va_arg(ap, const char *)) {
                if (isempty(s))
                        continue;
                if (p > r && p[-1] != '/' && *s != '/')
                        *p++ = '/';
                if (p > r && p[-1] == '/')
                        while (*s == '/' && s[1] != 0)
                                s++;
                if (p > r && p[-1] == '/' && streq(s, "/"))
                        continue;
                p = stpcpy(p, s);
        }
        va_end(ap);
        *p = 0;
        return r;
}

int path_canonicalize(const char *path, char **ret) {
        _cleanup_free_ char *c = NULL;
        char *q;

        if (!path || path[0] != '/')
                return -EINVAL;
        c = malloc(strlen(path) + 1);
        if (!c)
                return -ENOMEM;
        q = c;
        for (const char *p = path; *p; ) {
                size_t n;

                p += strspn(p, "/");
                n = strcspn(p, "/");
                if (n == 0)
                        break;
                /* "." and ".." name other directories than they seem to: refused, never guessed. */
                if ((n == 1 && p[0] == '.') || (n == 2 && p[0] == '.' && p[1] == '.'))
                        return -EINVAL;
                *q++ = '/';
                memcpy(q, p, n);
                q += n;
                p += n;
        }
        if (q == c)
                *q++ = '/';
        *q = 0;
        *ret = TAKE_PTR(c);
        return 0;
}

char *strstrip(char *s) {
        char *e;

        s += strspn(s, WHITESPACE);
        for (e = s + strlen(s); e > s && strchr(WHITESPACE, e[-1]); e--)
                ;
        *e = 0;
        return s;
}

int asprintf_safe(char **ret, const char *format, ...) {
        va_list ap;
        int r;

        va_start(ap, format);
        r = vasprintf(ret, format, ap);
        va_end(ap);
        if (r < 0) {
                *ret = NULL;
                return -ENOMEM;
        }
        return 0;
}

int free_and_vasprintf(char **p, const char *format, va_list ap) {
        free(*p);
        if (vasprintf(p, format, ap) < 0) {
                *p = NULL;
                return -ENOMEM;
        }
        return 0;
}

int free_and_strdup(char **p, const char *s) {
        char *c = NULL;

        if (s && !(c = strdup(s)))
                return -ENOMEM;
        free(*p);
        *p = c;
        return 0;
}

void strv_free(char **l) {
        STRV_FOREACH(s, l)
                free(*s);
        free(l);
}

size_t strv_length(char * const *l) {
        size_t n = 0;

        while (l && l[n])
                n++;
        return n;
}

bool strv_contains(char * const *l, const char *s) {
        for (size_t i = 0; l && l[i]; i++)
                if (streq(l[i], s))
                        return true;
        return false;
}

int strv_consume(char ***l, char *value) {
        size_t n = strv_length(*l);
        char **c;

        if (!value)
                return -ENOMEM;
        c = realloc(*l, sizeof(char *) * (n + 2));
        if (!c) {
                free(value);
                return -ENOMEM;
        }
        c[n] = value;
        c[n + 1] = NULL;
        *l = c;
        return 0;
}

int strv_extend(char ***l, const char *value) {
        return strv_consume(l, strdup(value));
}

char **strv_copy(char * const *l) {
        _cleanup_strv_free_ char **c = calloc(1, sizeof(char *));

        if (!c)
                return NULL;
        for (size_t i = 0; l && l[i]; i++)
                if (strv_extend(&c, l[i]) < 0)
                        return NULL;
        return TAKE_PTR(c);
}

char **strv_split(const char *s, const char *separators) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));

        if (!l)
                return NULL;
        for (;;) {
                size_t n;

                s += strspn(s, separators);
                n = strcspn(s, separators);
                if (n == 0)
                        break;
                if (strv_consume(&l, strndup(s, n)) < 0)
                        return NULL;
                s += n;
        }
        return TAKE_PTR(l);
}

static int compare_strings(const void *a, const void *b) {
        return strcmp(*(const char * const *) a, *(const char * const *) b);
}

void strv_sort(char **l) {
        /* qsort() must not see NULL, even for no elements (an empty directory's list). */
        if (!l)
                return;
        qsort(l, strv_length(l), sizeof(char *), compare_strings);
}

int refuse_with(char **ret_reason, const char *fmt, ...) {
        va_list ap;

        if (ret_reason) {
                va_start(ap, fmt);
                (void) free_and_vasprintf(ret_reason, fmt, ap);
                va_end(ap);
        }
        return 0;
}

char *hexmem(const void *p, size_t n) {
        static const char digits[] = "0123456789abcdef";
        const uint8_t *b = p;
        char *s = malloc(n * 2 + 1), *q = s;

        if (!s)
                return NULL;
        for (size_t i = 0; i < n; i++) {
                *q++ = digits[b[i] >> 4];
                *q++ = digits[b[i] & 15];
        }
        *q = 0;
        return s;
}

static int unhex_char(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        if (c >= 'A' && c <= 'F')
                return c - 'A' + 10;
        return -EINVAL;
}

int unhexmem(const char *s, uint8_t **ret, size_t *ret_size) {
        size_t l = strlen(s);
        uint8_t *b;

        if (l == 0 || l % 2 != 0)
                return -EINVAL;
        b = malloc(l / 2);
        if (!b)
                return -ENOMEM;
        for (size_t i = 0; i < l / 2; i++) {
                int hi = unhex_char(s[2 * i]), lo = unhex_char(s[2 * i + 1]);

                if (hi < 0 || lo < 0) {
                        free(b);
                        return -EINVAL;
                }
                b[i] = (uint8_t) (hi << 4 | lo);
        }
        *ret = b;
        *ret_size = l / 2;
        return 0;
}

bool utf8_is_valid(const char *s) {
        const unsigned char *p = (const unsigned char *) s;

        while (*p) {
                unsigned n, c;

                if (*p < 0x80) {
                        p++;
                        continue;
                }
                n = *p >= 0xf0 && *p <= 0xf4 ? 3 : *p >= 0xe0 ? (*p < 0xf0 ? 2 : 0) : *p >= 0xc2 ? 1 : 0;
                if (n == 0)
                        return false;
                c = *p & (0x3f >> n);
                for (unsigned k = 1; k <= n; k++) {
                        if ((p[k] & 0xc0) != 0x80)
                                return false;
                        c = (c << 6) | (p[k] & 0x3f);
                }
                /* Overlong forms, UTF-16 surrogates and anything past U+10FFFF. */
                if ((n == 2 && c < 0x800) || (n == 3 && (c < 0x10000 || c > 0x10ffff)) ||
                    (c >= 0xd800 && c <= 0xdfff))
                        return false;
                p += n + 1;
        }
        return true;
}

char *strv_join(char * const *l, const char *separator) {
        size_t n = 1, sl = strlen(separator);
        char *r, *p;

        for (size_t i = 0; l && l[i]; i++)
                n += strlen(l[i]) + sl;
        r = p = malloc(n);
        if (!r)
                return NULL;
        *p = 0;
        for (size_t i = 0; l && l[i]; i++) {
                if (i > 0)
                        p = stpcpy(p, separator);
                p = stpcpy(p, l[i]);
        }
        return r;
}

DIR *opendir_at(int dir_fd, const char *path) {
        _cleanup_close_ int fd = openat(dir_fd, path, O_RDONLY | O_DIRECTORY | O_CLOEXEC | O_NOCTTY);
        DIR *d;

        if (fd < 0)
                return NULL;
        d = fdopendir(fd);
        if (d)
                TAKE_FD(fd);
        return d;
}

struct dirent *readdir_no_dot(DIR *d) {
        struct dirent *de;

        while ((de = readdir(d)))
                if (!streq(de->d_name, ".") && !streq(de->d_name, ".."))
                        return de;
        return NULL;
}

int read_full_fd(int fd, size_t max_size, char **ret) {
        _cleanup_free_ char *buf = NULL;
        size_t n = 0, allocated = 0;

        for (;;) {
                ssize_t k;

                if (n + 1 >= allocated) {
                        char *b;

                        if (allocated > max_size)
                                return -EFBIG;
                        allocated = allocated ? allocated * 2 : 4096;
                        b = realloc(buf, allocated);
                        if (!b)
                                return -ENOMEM;
                        buf = b;
                }
                k = read(fd, buf + n, allocated - n - 1);
                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (k == 0)
                        break;
                n += k;
        }
        if (n > max_size)
                return -EFBIG;
        buf[n] = 0;
        if (memchr(buf, 0, n))
                return -EBADMSG;
        *ret = TAKE_PTR(buf);
        return (int) n;
}

int read_full_file_at(int dir_fd, const char *path, size_t max_size, char **ret) {
        _cleanup_close_ int fd = -EBADF;

        fd = openat(dir_fd, path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
        if (fd < 0)
                return -errno;
        return read_full_fd(fd, max_size, ret);
}

/* fsync() of the directory @path is in, so a rename into it is durable. */
static int fsync_parent(const char *path) {
        _cleanup_free_ char *dir = strdup(path);
        _cleanup_close_ int fd = -EBADF;
        char *slash;

        if (!dir)
                return -ENOMEM;
        slash = strrchr(dir, '/');
        if (slash == dir)
                slash[1] = 0;
        else if (slash)
                *slash = 0;
        else
                strcpy(dir, ".");
        fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
                return -errno;
        return RET_NERRNO(fsync(fd));
}

static int write_all(int fd, const char *p, size_t n) {
        while (n > 0) {
                ssize_t k = write(fd, p, n);

                if (k < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                p += k;
                n -= (size_t) k;
        }
        return 0;
}

/*
 * The temporaries of path that writers killed before their rename() left
 * behind (PATH.tmp.PID, whose PID is gone): removed, or every crash at that
 * moment would leave one more for good.
 */
static void remove_dead_temporaries(const char *path) {
        _cleanup_free_ char *dir = strdup(path), *prefix = NULL;
        _cleanup_closedir_ DIR *d = NULL;
        char *slash;

        if (!dir || !(slash = strrchr(dir, '/')))
                return;
        *slash = 0;
        if (asprintf_safe(&prefix, "%s.tmp.", slash + 1) < 0)
                return;
        d = opendir(*dir ? dir : "/");
        if (!d)
                return;
        for (struct dirent *de; (de = readdir_no_dot(d)); ) {
                const char *pid = startswith(de->d_name, prefix);
                char *end;
                long v;

                if (!pid || !*pid)
                        continue;
                errno = 0;
                v = strtol(pid, &end, 10);
                if (errno != 0 || *end != 0 || v <= 0 || v > INT32_MAX || v == getpid())
                        continue;
                if (kill((pid_t) v, 0) < 0 && errno == ESRCH)
                        (void) unlinkat(dirfd(d), de->d_name, 0);
        }
}

int write_file_atomic(const char *path, const char *contents, mode_t mode) {
        _cleanup_free_ char *tmp = NULL;
        _cleanup_close_ int fd = -EBADF;
        int r;

        /* A temporary of our own: two writers of one file never write into each other's. */
        remove_dead_temporaries(path);
        if (asprintf_safe(&tmp, "%s.tmp.%d", path, (int) getpid()) < 0)
                return -ENOMEM;
        fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, mode);
        if (fd < 0)
                return -errno;
        r = write_all(fd, contents, strlen(contents));
        if (r >= 0 && fsync(fd) < 0)
                r = -errno;
        if (r >= 0 && rename(tmp, path) < 0)
                r = -errno;
        if (r < 0) {
                (void) unlink(tmp);
                return r;
        }
        return fsync_parent(path);
}

int mkdir_p(const char *path, mode_t mode) {
        _cleanup_free_ char *p = strdup(path);

        if (!p)
                return -ENOMEM;
        for (char *s = p + 1; ; s++) {
                bool end = *s == 0;

                if (*s != '/' && !end)
                        continue;
                *s = 0;
                if (mkdir(p, mode) < 0 && errno != EEXIST)
                        return -errno;
                if (end)
                        break;
                *s = '/';
        }
        return 0;
}

/* Up to this many symlinks on the way, like the kernel's MAXSYMLINKS. */
#define IN_ROOT_MAX_SYMLINKS 40

typedef struct DirStack {
        int *fds;               /* fds[0]: the root; fds[n - 1]: where we are */
        size_t n, cap;
        /* With names: ends[i] is where fds[i]'s name ends in name ("" is the root). */
        bool named;
        size_t *ends;
        char *name;
        size_t name_cap;
} DirStack;

static void dir_stack_done(DirStack *s) {
        for (size_t i = 0; i < s->n; i++)
                safe_close(s->fds[i]);
        free(s->fds);
        free(s->ends);
        free(s->name);
}

/* fd, reached from where we are by component c ("" for the root). */
static int dir_stack_push(DirStack *s, int fd, const char *c) {
        size_t start, need;

        if (s->n == s->cap) {
                size_t cap = s->cap ? 2 * s->cap : 16;
                int *a = realloc(s->fds, sizeof(int) * cap);
                size_t *e;

                if (!a) {
                        safe_close(fd);
                        return -ENOMEM;
                }
                s->fds = a;
                if (s->named) {
                        e = realloc(s->ends, sizeof(size_t) * cap);
                        if (!e) {
                                safe_close(fd);
                                return -ENOMEM;
                        }
                        s->ends = e;
                }
                s->cap = cap;
        }
        if (s->named) {
                start = s->n > 0 ? s->ends[s->n - 1] : 0;
                need = start + (*c ? 1 + strlen(c) : 0) + 1;
                if (need > s->name_cap) {
                        size_t name_cap = need < 256 ? 256 : 2 * need;
                        char *b = realloc(s->name, name_cap);

                        if (!b) {
                                safe_close(fd);
                                return -ENOMEM;
                        }
                        s->name = b;
                        s->name_cap = name_cap;
                }
                if (*c) {
                        s->name[start] = '/';
                        strcpy(s->name + start + 1, c);
                }
                s->ends[s->n] = need - 1;
        }
        s->fds[s->n++] = fd;
        return 0;
}

/* Back to the root (an absolute symlink), or one up (".."): never above the root. */
static void dir_stack_pop(DirStack *s, bool to_root) {
        while (s->n > 1) {
                safe_close(s->fds[--s->n]);
                if (!to_root)
                        break;
        }
}

/*
 * The file type behind an O_PATH fd, from what the kernel has cached: a
 * plain fstat() asks the file system, and FUSE or NFS may answer slowly, or
 * never (a FUSE server that hung).
 */
static int fd_type(int fd, mode_t *ret) {
        struct statx sx;

        if (statx(fd, "", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, STATX_TYPE, &sx) < 0)
                return -errno;
        if (!(sx.stx_mask & STATX_TYPE))
                return -EOPNOTSUPP;
        *ret = sx.stx_mode & S_IFMT;
        return 0;
}

/*
 * openat_in_root() without openat2(): one component at a time, each opened
 * O_PATH|O_NOFOLLOW below the directory before it, so the kernel never
 * resolves anything outside root_fd. A symlink is read and its target walked
 * the same way (an absolute one from root_fd again); ".." goes back one
 * directory on our own stack, never above root_fd. With ret_name, the name
 * of what it reached below root_fd ("/var/opt" for "/opt" -> var/opt, ""
 * for the root itself), spelled from the components walked, as chase()
 * does: not read back from the fd, whose name is where its mount is now,
 * and a mount on top moves (and may come back) while one looks.
 */
int openat_in_root_by_hand_named(int root_fd, const char *path, int flags, char **ret_name) {
        _cleanup_(dir_stack_done) DirStack s = { .named = ret_name != NULL };
        _cleanup_free_ char *todo = strdup(path);
        unsigned links = 0;
        const char *rest;
        mode_t mode;
        char proc[64];
        int fd, r;

        if (!todo)
                return -ENOMEM;
        /* As the kernel: "" names nothing (no AT_EMPTY_PATH here), it is not the root. */
        if (isempty(path))
                return -ENOENT;
        fd = RET_NERRNO(openat(root_fd, ".", O_PATH | O_DIRECTORY | O_CLOEXEC));
        if (fd < 0)
                return fd;
        r = dir_stack_push(&s, fd, "");
        if (r < 0)
                return r;

        for (rest = todo; *(rest += strspn(rest, "/")); ) {
                char c[NAME_MAX + 1], target[PATH_MAX], *next;
                size_t n = strcspn(rest, "/");
                ssize_t k;

                if (n > NAME_MAX)
                        return -ENAMETOOLONG;
                memcpy(c, rest, n);
                c[n] = 0;
                rest += n;
                if (streq(c, "."))
                        continue;
                if (streq(c, "..")) {
                        dir_stack_pop(&s, false);
                        continue;
                }

                fd = RET_NERRNO(openat(s.fds[s.n - 1], c, O_PATH | O_NOFOLLOW | O_CLOEXEC));
                if (fd < 0)
                        return fd;
                r = fd_type(fd, &mode);
                if (r < 0) {
                        safe_close(fd);
                        return r;
                }
                if (!S_ISLNK(mode)) {
                        /* As the kernel: "file/", "file/." and "file/.." are ENOTDIR
                         * (our ".." would otherwise go back to the directory). */
                        if (!S_ISDIR(mode) && *rest) {
                                safe_close(fd);
                                return -ENOTDIR;
                        }
                        r = dir_stack_push(&s, fd, c);
                        if (r < 0)
                                return r;
                        continue;
                }

                /* A symlink: its target, then what was left of the path. */
                k = readlinkat(fd, "", target, sizeof(target) - 1);
                r = k < 0 ? -errno : 0;
                safe_close(fd);
                if (r < 0)
                        return r;
                if (++links > IN_ROOT_MAX_SYMLINKS)
                        return -ELOOP;
                if (k == 0)
                        return -ENOENT;         /* an empty symlink, as the kernel says */
                target[k] = 0;
                if (target[0] == '/')
                        dir_stack_pop(&s, true);
                next = strjoin(target, rest);   /* rest is "" or starts with '/' */
                if (!next)
                        return -ENOMEM;
                free(todo);
                rest = todo = next;
        }

        fd = s.fds[s.n - 1];
        r = fd_type(fd, &mode);
        if (r < 0)
                return r;
        if ((flags & O_DIRECTORY) && !S_ISDIR(mode))
                return -ENOTDIR;
        if (flags & O_PATH)
                fd = RET_NERRNO(fcntl(fd, F_DUPFD_CLOEXEC, 3));
        else {
                /* Opened for real through our own O_PATH fd: what we reached, no further lookup. */
                snprintf(proc, sizeof(proc), "/proc/self/fd/%d", fd);
                fd = RET_NERRNO(open(proc, flags | O_CLOEXEC));
        }
        if (fd >= 0 && ret_name) {
                s.name[s.ends[s.n - 1]] = 0;
                *ret_name = TAKE_PTR(s.name);
        }
        return fd;
}

int openat_in_root_by_hand(int root_fd, const char *path, int flags) {
        return openat_in_root_by_hand_named(root_fd, path, flags, NULL);
}

int openat_in_root(int root_fd, const char *path, int flags) {
        /* Refused by seccomp (systemd's RestrictSUIDSGID= answers ENOSYS for
         * every openat2(): its mode hides in a struct seccomp cannot see) or
         * missing (Linux < 5.6): remembered, and resolved by hand from then on. */
        static bool openat2_refused = false;
        struct open_how how = {
                .flags = flags | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS,
        };
        int fd;

        if (!openat2_refused) {
                fd = RET_NERRNO((int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how)));
                /* EAGAIN: a rename or mount anywhere on the machine raced a ".." of
                 * this lookup (RESOLVE_IN_ROOT refuses what it cannot prove stayed
                 * inside; openat2(2) says retry). The walk by hand keeps ".." on its
                 * own stack and needs no such proof: this once, by hand. */
                if (fd == -EAGAIN)
                        return openat_in_root_by_hand(root_fd, path, flags);
                if (fd != -ENOSYS && fd != -EPERM)
                        return fd;
                openat2_refused = true;
        }
        return openat_in_root_by_hand(root_fd, path, flags);
}

int openat_in_root_cached(int root_fd, const char *path, int flags) {
        /* The same rule as openat_in_root(): refused once, refused for good. */
        static bool refused = false;
        struct open_how how = {
                .flags = flags | O_CLOEXEC,
                .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS | RESOLVE_CACHED,
        };
        int fd;

        if (refused)
                return -EOPNOTSUPP;
        fd = RET_NERRNO((int) syscall(SYS_openat2, root_fd, path, &how, sizeof(how)));
        /* ENOSYS/EPERM: seccomp or Linux < 5.6; EINVAL: RESOLVE_CACHED unknown (< 5.12). */
        if (fd == -ENOSYS || fd == -EPERM || fd == -EINVAL) {
                refused = true;
                return -EOPNOTSUPP;
        }
        return fd;
}

int proc_open(pid_t pid, const char *what, int flags) {
        char p[64];

        snprintf(p, sizeof(p), "/proc/%d/%s", (int) pid, what);
        return RET_NERRNO(open(p, flags | O_CLOEXEC));
}

uint64_t now_usec(clockid_t clock) {
        struct timespec ts;

        (void) clock_gettime(clock, &ts);
        return (uint64_t) ts.tv_sec * 1000000 + (uint64_t) ts.tv_nsec / 1000;
}

char *format_timestamp(uint64_t realtime_usec) {
        time_t t = (time_t) (realtime_usec / 1000000);
        struct tm tm;
        char buf[64];

        if (realtime_usec == 0 || !localtime_r(&t, &tm))
                return strdup("n/a");
        if (strftime(buf, sizeof(buf), "%Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                return strdup("n/a");
        return strdup(buf);
}

uint64_t fnv64(uint64_t h, const void *data, size_t n) {
        const uint8_t *p = data;

        for (size_t i = 0; i < n; i++) {
                h ^= p[i];
                h *= UINT64_C(0x100000001b3);
        }
        return h;
}

char *name_escape(const char *s) {
        static const char hex[] = "0123456789abcdef";
        char *r, *p;

        if (!s)
                return NULL;
        r = p = malloc(strlen(s) * 4 + 1);
        if (!r)
                return NULL;
        for (; *s; s++) {
                unsigned char c = (unsigned char) *s;

                if (c < 0x20 || c >= 0x7f || c == '\\') {
                        *p++ = '\\';
                        *p++ = 'x';
                        *p++ = hex[c >> 4];
                        *p++ = hex[c & 0xf];
                } else
                        *p++ = (char) c;
        }
        *p = 0;
        return r;
}

const char *boot_id_current(void) {
        static char id[64];
        static int state = 0;   /* 0: not read yet, 1: read, -1: unreadable */
        _cleanup_free_ char *text = NULL;

        if (state == 0) {
                state = read_full_file_at(AT_FDCWD, "/proc/sys/kernel/random/boot_id", sizeof(id) - 1, &text) < 0 ?
                        -1 : 1;
                if (state > 0)
                        snprintf(id, sizeof(id), "%s", strstrip(text));
        }
        return state > 0 && id[0] ? id : NULL;
}

int pidfd_open_above_stdio(pid_t pid) {
        int fd, moved;

        fd = RET_NERRNO((int) syscall(SYS_pidfd_open, pid, 0));
        if (fd < 0 || fd > 2)
                return fd;
        /* Never hold a pidfd as 0, 1 or 2 (a daemon started with them closed). */
        moved = RET_NERRNO(fcntl(fd, F_DUPFD_CLOEXEC, 3));
        safe_close(fd);
        return moved;
}

static struct rlimit nofile_saved;
static bool nofile_bumped;

void rlimit_nofile_bump(void) {
        struct rlimit rl;

        if (nofile_bumped || getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur >= rl.rlim_max)
                return;
        nofile_saved = rl;
        rl.rlim_cur = rl.rlim_max;
        if (setrlimit(RLIMIT_NOFILE, &rl) >= 0)
                nofile_bumped = true;
}

void rlimit_nofile_safe(void) {
        if (nofile_bumped)
                (void) setrlimit(RLIMIT_NOFILE, &nofile_saved);
}

int pidfd_check_alive(int pidfd) {
        if (pidfd < 0)
                return -ESRCH;
        /* Signal 0: no signal, only the check that the process is still there. */
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0)
                return errno == EPERM ? 0 : -errno;
        return 0;
}
