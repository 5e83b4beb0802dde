/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dlfcn.h>
#include <stdbool.h>
#include <sys/stat.h>

#include "crypto-dl.h"
#include "macro.h"
#include "util.h"

#define DL_DEFINE_SYM(s) typeof(s) *sym_##s = NULL;
LIBCRYPTO_SYMBOLS(DL_DEFINE_SYM)
LIBCRYPTSETUP_SYMBOLS(DL_DEFINE_SYM)

typedef struct DlSymbol {
        void **fn;
        const char *name;
} DlSymbol;

#define DL_SYMBOL(s) { (void **) &sym_##s, #s },
static const DlSymbol libcrypto_symbols[] = { LIBCRYPTO_SYMBOLS(DL_SYMBOL) };
static const DlSymbol libcryptsetup_symbols[] = { LIBCRYPTSETUP_SYMBOLS(DL_SYMBOL) };

typedef struct DlLibrary {
        const char *soname;
        const char *needed_for;
        const DlSymbol *symbols;
        size_t n_symbols;
        void *handle;
} DlLibrary;

static DlLibrary libcrypto = {
        LIBCRYPTO_SONAME, "to check signatures", libcrypto_symbols, ELEMENTSOF(libcrypto_symbols), NULL,
};
static DlLibrary libcryptsetup = {
        LIBCRYPTSETUP_SONAME, "for dm-verity", libcryptsetup_symbols, ELEMENTSOF(libcryptsetup_symbols), NULL,
};

/* The mount namespace and root the process started in, taken before main(). */
static struct {
        struct stat ns, root;
        bool known;
} start;

static bool same_file(const struct stat *a, const struct stat *b) {
        return a->st_dev == b->st_dev && a->st_ino == b->st_ino;
}

__attribute__((constructor)) static void remember_start(void) {
        start.known = stat("/proc/self/ns/mnt", &start.ns) == 0 && stat("/", &start.root) == 0;
}

static bool where_we_started(void) {
        struct stat ns, root;

        return stat("/proc/self/ns/mnt", &ns) == 0 && stat("/", &root) == 0 &&
               same_file(&ns, &start.ns) && same_file(&root, &start.root);
}

static void forget(const DlLibrary *l) {
        for (size_t i = 0; i < l->n_symbols; i++)
                *l->symbols[i].fn = NULL;
}

static int load(DlLibrary *l, char **ret_reason) {
        void *h;

        if (l->handle)
                return 1;
        /* The first load is the one that counts: OpenSSL reads its configuration and providers
         * on first use, libcryptsetup its backend. Every caller is in the host namespace. */
        if (!start.known)
                return refuse_with(ret_reason, "%s is needed %s and is not loaded: /proc was not mounted "
                                   "when tuck started, so where it started is not known", l->soname,
                                   l->needed_for);
        if (!where_we_started())
                return refuse_with(ret_reason, "%s is needed %s and is not loaded here: only in the mount "
                                   "namespace and root tuck started in", l->soname, l->needed_for);
        h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (!h)
                return refuse_with(ret_reason, "%s is needed %s and cannot be loaded: %s", l->soname,
                                   l->needed_for, dlerror());
        for (size_t i = 0; i < l->n_symbols; i++) {
                *l->symbols[i].fn = dlsym(h, l->symbols[i].name);
                if (!*l->symbols[i].fn) {
                        forget(l);
                        (void) dlclose(h);
                        return refuse_with(ret_reason, "%s is needed %s and lacks %s: another version than "
                                           "tuck was built for", l->soname, l->needed_for, l->symbols[i].name);
                }
        }
        l->handle = h;
        return 1;
}

int dlopen_libcrypto(char **ret_reason) {
        return load(&libcrypto, ret_reason);
}

int dlopen_libcryptsetup(char **ret_reason) {
        return load(&libcryptsetup, ret_reason);
}

bool libcrypto_loaded(void) {
        return libcrypto.handle;
}

bool libcryptsetup_loaded(void) {
        return libcryptsetup.handle;
}
