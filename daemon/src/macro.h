/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Small helpers every libtuck file uses: scoped cleanup of fds and
 * allocations (systemd's _cleanup_ idiom), ownership transfer, array size.
 */

#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

#define _cleanup_(f) __attribute__((cleanup(f)))
#define _unused_ __attribute__((unused))
#define _printf_(a, b) __attribute__((format(printf, a, b)))
#define _public_ __attribute__((visibility("default")))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))

/* Return the value of a variable and reset it, so cleanup does not free it. */
#define TAKE_GENERIC(var, type, nullvalue)                      \
        ({                                                      \
                type *_pvar_ = &(var);                          \
                type _var_ = *_pvar_;                           \
                type _nullvalue_ = nullvalue;                   \
                *_pvar_ = _nullvalue_;                          \
                _var_;                                          \
        })
#define TAKE_PTR(ptr) TAKE_GENERIC(ptr, typeof(ptr), NULL)
#define TAKE_FD(fd) TAKE_GENERIC(fd, int, -EBADF)
#define TAKE_STRUCT(s) TAKE_GENERIC(s, typeof(s), (typeof(s)) {})

/* close() that keeps errno and tolerates -EBADF; returns -EBADF for reassignment. */
static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}

static inline void closep(int *fd) {
        safe_close(*fd);
}

static inline void freep(void *p) {
        free(*(void **) p);
}

#define _cleanup_close_ _cleanup_(closep)

/* For pipe2() and socketpair() results: int p[2] = { -EBADF, -EBADF }. */
static inline void close_pairp(int (*p)[2]) {
        safe_close((*p)[0]);
        safe_close((*p)[1]);
}

#define _cleanup_close_pair_ _cleanup_(close_pairp)
#define _cleanup_free_ _cleanup_(freep)

/* Define a cleanup function for a pointer type with a free function. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)                 \
        static inline void func##p(type *p) {                   \
                if (*p)                                         \
                        func(*p);                               \
        }

/* Negative errno of the last failed libc call, never 0. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

#define RET_NERRNO(expr)                                        \
        ({                                                      \
                int _r_ = (expr);                               \
                _r_ < 0 ? negative_errno() : _r_;               \
        })
