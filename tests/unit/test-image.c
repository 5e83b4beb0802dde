/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Image discovery with systemd-sysext's directory rules, validation of
 * directory images (no privileges needed), the name an image proves,
 * versions from file names, tuck.conf.
 */

#include <fcntl.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include <sys/xattr.h>

#include "config.h"
#include "nsscan.h"
#include "image.h"
#include "overlay.h"
#include "layer.h"
#include "trust.h"
#include "tap.h"
#include "util.h"

static char *root;

static void put(const char *path, const char *content) {
        _cleanup_free_ char *p = path_join(root, path), *dir = strdup(p);
        FILE *f;

        *strrchr(dir, '/') = 0;
        (void) mkdir_p(dir, 0755);
        f = fopen(p, "we");
        if (f) {
                fputs(content, f);
                fclose(f);
        }
}

static void dir(const char *path) {
        _cleanup_free_ char *p = path_join(root, path);

        (void) mkdir_p(p, 0755);
}

static Image *find(Image **l, size_t n, const char *name, const char *search_dir) {
        for (size_t i = 0; i < n; i++)
                if (streq(l[i]->name, name) && streq(l[i]->search_dir, search_dir))
                        return l[i];
        return NULL;
}

static void test_discover(void) {
        char *dirs[] = { (char *) "/etc/extensions", (char *) "/run/extensions", (char *) "/var/lib/extensions", NULL };
        Image **l = NULL, *i;
        size_t n = 0;
        int r;

        dir("etc/extensions/masked");                               /* empty: masks */
        put("run/extensions/masked/usr/lib/x", "x");
        put("run/extensions/foo/usr/lib/extension-release.d/extension-release.foo", "ID=_any\n");
        put("var/lib/extensions/foo/usr/lib/extension-release.d/extension-release.foo", "ID=_any\n");
        put("var/lib/extensions/notraw.img", "x");
        put("var/lib/extensions/.hidden.raw", "x");
        put("var/lib/extensions/.#partial.raw", "x");
        put("var/lib/extensions/bar.raw", "not a file system");

        r = images_discover(root, IMAGE_SYSEXT, dirs, &l, &n);
        tap_ok(r == 0, "discover");
        i = find(l, n, "masked", "/etc/extensions");
        tap_ok(i && i->state == IMAGE_MASKED, "an empty directory is a mask");
        i = find(l, n, "masked", "/run/extensions");
        tap_ok(i && i->state == IMAGE_SHADOWED && i->shadowed_by && strstr(i->shadowed_by, "/etc/extensions/masked"),
               "the masked image names its mask");
        i = find(l, n, "foo", "/run/extensions");
        tap_ok(i && i->state == IMAGE_CANDIDATE && i->type == IMAGE_TYPE_DIRECTORY, "the first directory wins");
        i = find(l, n, "foo", "/var/lib/extensions");
        tap_ok(i && i->state == IMAGE_SHADOWED, "a same-named image further down is shadowed");
        tap_ok(!find(l, n, "notraw.img", "/var/lib/extensions") && !find(l, n, "notraw", "/var/lib/extensions"),
               "files not ending in .raw are ignored");
        i = find(l, n, ".hidden", "/var/lib/extensions");
        tap_ok(i && i->state == IMAGE_CANDIDATE, "a hidden .raw is an image, as systemd-sysext 252 takes it");
        tap_ok(!find(l, n, ".#partial", "/var/lib/extensions"), "a .#NAME.raw being written is not");
        i = find(l, n, "bar", "/var/lib/extensions");
        tap_ok(i && i->type == IMAGE_TYPE_UNSUPPORTED, "a .raw without a file system is unsupported (probed by magic)");
        images_free(l, n);

        /* Where an image is: its directory resolved once, a symlink on its own. */
        {
                char *sym_dirs[] = { (char *) "/etc/sym-extensions", NULL };
                _cleanup_free_ char *link = path_join(root, "etc/sym-extensions"), *img = NULL;
                _cleanup_free_ char *want_plain = path_join(root, "srv/exts/baz.raw");
                _cleanup_free_ char *want_link = path_join(root, "srv/other/qux-2.raw");

                put("srv/exts/baz.raw", "x");
                put("srv/other/qux-2.raw", "x");
                (void) !symlink("../srv/exts", link);
                img = path_join(root, "srv/exts/qux.raw");
                (void) !symlink("../other/qux-2.raw", img);
                l = NULL;
                n = 0;
                r = images_discover(root, IMAGE_SYSEXT, sym_dirs, &l, &n);
                i = find(l, n, "baz", "/etc/sym-extensions");
                tap_streq(i ? i->resolved : NULL, want_plain, "an image in a symlinked search directory: resolved");
                i = find(l, n, "qux", "/etc/sym-extensions");
                tap_streq(i ? i->resolved : NULL, want_link, "a symlinked image: its target");
                images_free(l, n);
        }
}

static const struct {
        const char *name;
        ImageClass class;
        const char *files[4][2];
        bool valid;
        const char *reason_or_version;
        const char *hierarchies;
} validations[] = {
        { "v-ok", IMAGE_SYSEXT, { { "usr/lib/extension-release.d/extension-release.v-ok", "ID=_any\nSYSEXT_VERSION_ID=1.2\n" },
          { "opt/x", "x" } }, true, "1.2", "/usr /opt" },
        { "v-osrel", IMAGE_SYSEXT, { { "usr/lib/extension-release.d/extension-release.v-osrel", "ID=_any\n" },
          { "usr/lib/os-release", "ID=evil\n" } }, false, "ships /usr/lib/os-release" },
        { "v-nohier", IMAGE_SYSEXT, { { "etc/extension-release.d/extension-release.v-nohier", "ID=_any\n" } },
          false, "no usr/lib/extension-release.d/ directory" },
        { "c-ok", IMAGE_CONFEXT, { { "etc/extension-release.d/extension-release.c-ok", "ID=_any\nCONFEXT_VERSION_ID=3\n" } },
          true, "3", "/etc" },
        { "c-usr", IMAGE_CONFEXT, { { "etc/extension-release.d/extension-release.c-usr", "ID=_any\n" },
          { "usr/lib/x", "x" } }, false, "may only carry /etc, but it has /usr" },
        { "v-imgver", IMAGE_SYSEXT, { { "usr/lib/extension-release.d/extension-release.v-imgver",
          "ID=_any\nIMAGE_VERSION=7\nSYSEXT_IMAGE_VERSION=8\n" } }, true, "8", "/usr" },
        { "v-noversion", IMAGE_SYSEXT, { { "usr/lib/extension-release.d/extension-release.v-noversion", "ID=_any\n" } },
          true, NULL, "/usr" },
        { "v-wrongos", IMAGE_SYSEXT, { { "usr/lib/extension-release.d/extension-release.v-wrongos", "ID=plan9\n" } },
          false, "built for OS 'plan9'" },
        { "v-malformed", IMAGE_SYSEXT, { { "usr/lib/extension-release.d/extension-release.v-malformed", "ID='_any\n" } },
          false, "unterminated quote" },
};

static void test_validate(void) {
        HostRelease host = { .id = (char *) "debian", .version_id = (char *) "12", .architecture = "x86-64", .scope = "system" };
        char *hier[_IMAGE_CLASS_MAX][3] = { { (char *) "/usr", (char *) "/opt", NULL }, { (char *) "/etc", NULL } };

        for (size_t k = 0; k < ELEMENTSOF(validations); k++) {
                _cleanup_free_ char *base = path_join("images", validations[k].name), *full = NULL, *h = NULL;
                _cleanup_close_ int fd = -EBADF;
                Image i = { .class = validations[k].class, .name = (char *) validations[k].name, .type = IMAGE_TYPE_DIRECTORY };
                bool ok;

                for (size_t f = 0; f < 4 && validations[k].files[f][0]; f++) {
                        _cleanup_free_ char *p = path_join(base, validations[k].files[f][0]);

                        put(p, validations[k].files[f][1]);
                }
                full = path_join(root, base);
                i.resolved = full;
                i.path = full;
                fd = open(full, O_PATH | O_DIRECTORY | O_CLOEXEC);
                if (image_validate(&i, fd, &host, "/nonexistent-root", hier[i.class]) < 0) {
                        tap_ok(false, "%s: validate", validations[k].name);
                        continue;
                }
                h = strv_join(i.hierarchies, " ");
                ok = i.valid == validations[k].valid;
                if (i.valid)
                        ok = ok && streq_ptr(i.version, validations[k].reason_or_version) &&
                             streq_ptr(h, validations[k].hierarchies);
                else
                        ok = ok && i.reason && strstr(i.reason, validations[k].reason_or_version);
                if (!tap_ok(ok, "%s: %s", validations[k].name, i.valid ? "valid" : "invalid"))
                        tap_diag("valid=%d version=%s hierarchies='%s' reason=%s", i.valid, tap_str(i.version),
                                 tap_str(h), tap_str(i.reason));
                free(i.reason);
                free(i.extension);
                free(i.version);
                strv_free(i.release);
                strv_free(i.hierarchies);
        }
}

/* What an image's layer would do to the host beneath (layer.c), on plain trees. */
static void test_layers(void) {
        static const struct {
                const char *name;
                const char *path;       /* checked */
                LayerRule rule;
                int want;               /* 1: leaves the host alone */
                const char *reason;
        } cases[] = {
                { "plain", "usr/lib/os-release", LAYER_ABSENT, 1, NULL },
                { "plain", "usr/lib/extension-release.d", LAYER_MERGED_DIR, 1, NULL },
                { "absent", "usr/lib/os-release", LAYER_ABSENT, 1, NULL },
                { "osrel", "usr/lib/os-release", LAYER_ABSENT, 0, "ships /usr/lib/os-release as a file" },
                { "osrel-link", "usr/lib/os-release", LAYER_ABSENT, 0, "ships /usr/lib/os-release as a symlink" },
                { "lib-link", "usr/lib/os-release", LAYER_ABSENT, 0,
                  "ships /usr/lib as a symlink, which would hide the host's /usr/lib/os-release" },
                { "lib-file", "usr/lib/extension-release.d", LAYER_MERGED_DIR, 0, "ships /usr/lib as a file" },
                { "rel-link", "usr/lib/extension-release.d", LAYER_MERGED_DIR, 0,
                  "ships /usr/lib/extension-release.d as a symlink" },
                { "opaque", "usr/lib/os-release", LAYER_ABSENT, 0,
                  "ships /usr/lib as an opaque directory (overlay.opaque=y)" },
                { "opaque-x", "usr/lib/os-release", LAYER_ABSENT, 1, NULL },   /* "x": xattr whiteouts inside, not opaque */
                /* Behind xattrs of other names: the list is read to its end. */
                { "redirect", "usr/lib/os-release", LAYER_ABSENT, 0, "ships /usr/lib with an overlay redirect" },
                /* More names than one read of the list takes: looked up one by one. */
                { "crowded", "usr/lib/os-release", LAYER_ABSENT, 0, "ships /usr/lib as an opaque directory" },
                { "crowded-plain", "usr/lib/os-release", LAYER_ABSENT, 1, NULL },
        };
        _cleanup_free_ char *p = NULL;

        put("layers/plain/usr/lib/extension-release.d/extension-release.plain", "ID=_any\n");
        dir("layers/absent/usr");
        put("layers/osrel/usr/lib/os-release", "ID=x\n");
        dir("layers/osrel-link/usr/lib");
        p = path_join(root, "layers/osrel-link/usr/lib/os-release");
        (void) !symlink("/etc/os-release", p);
        free(p);
        dir("layers/lib-link/usr");
        p = path_join(root, "layers/lib-link/usr/lib");
        (void) !symlink("/usr/lib", p);
        free(p);
        put("layers/lib-file/usr/lib", "x");
        dir("layers/rel-link/usr/lib");
        p = path_join(root, "layers/rel-link/usr/lib/extension-release.d");
        (void) !symlink("/usr/lib/extension-release.d", p);
        free(p);
        dir("layers/opaque/usr/lib");
        dir("layers/opaque-x/usr/lib");
        /* user.overlay.*: what an unprivileged test can set (trusted.* is root's: tests/host). */
        p = path_join(root, "layers/opaque/usr/lib");
        tap_ok(setxattr(p, "user.overlay.opaque", "y", 1, 0) == 0, "user.overlay.opaque set on %s", p);
        free(p);
        p = path_join(root, "layers/opaque-x/usr/lib");
        tap_ok(setxattr(p, "user.overlay.opaque", "x", 1, 0) == 0, "user.overlay.opaque=x set");
        free(p);
        dir("layers/redirect/usr/lib");
        p = path_join(root, "layers/redirect/usr/lib");
        tap_ok(setxattr(p, "user.a", "1", 1, 0) == 0 && setxattr(p, "user.overlay.redirect", "/x", 2, 0) == 0 &&
               setxattr(p, "user.z", "1", 1, 0) == 0, "user.overlay.redirect set among others");
        free(p);
        dir("layers/crowded/usr/lib");
        dir("layers/crowded-plain/usr/lib");
        for (unsigned k = 0; k < 2; k++) {
                bool ok = true;

                p = path_join(root, k ? "layers/crowded-plain/usr/lib" : "layers/crowded/usr/lib");
                for (unsigned j = 0; j < 40; j++) {
                        char name[64];

                        snprintf(name, sizeof(name), "user.padding-padding-padding-padding-%02u", j);
                        ok = ok && setxattr(p, name, "1", 1, 0) == 0;
                }
                if (k == 0)
                        ok = ok && setxattr(p, "user.overlay.opaque", "y", 1, 0) == 0;
                tap_ok(ok, "40 xattrs (over 1,600 bytes of names) on %s", p);
                free(p);
        }
        p = NULL;

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_free_ char *t = path_join(root, "layers", cases[k].name), *reason = NULL;
                _cleanup_close_ int fd = open(t, O_PATH | O_DIRECTORY | O_CLOEXEC);
                int r = layer_check(fd, cases[k].path, cases[k].rule, &reason);

                if (cases[k].want)
                        tap_ok(r == 1, "layer %s, %s: leaves the host alone (%d, %s)", cases[k].name, cases[k].path,
                               r, tap_str(reason));
                else
                        tap_ok(r == 0 && reason && strstr(reason, cases[k].reason), "layer %s, %s: refused (%s)",
                               cases[k].name, cases[k].path, tap_str(reason));
        }

        /* Several paths, shared directories walked once: each path still judged in full. */
        {
                static const struct {
                        const char *name;
                        const char *second;     /* checked after usr/lib/os-release */
                        const char *reason;     /* NULL: leaves the host alone */
                } multi[] = {
                        { "plain", "usr/lib/extension-release.d", NULL },
                        { "rel-link", "usr/lib/extension-release.d", "ships /usr/lib/extension-release.d as a symlink" },
                        { "osrel", "usr/lib/extension-release.d", "ships /usr/lib/os-release as a file" },
                        /* Not below usr/lib: walked from the top, not looked up in usr/lib. */
                        { "multi-etc", "etc/extension-release.d", "ships /etc as an opaque directory" },
                        { "multi-libx", "usr/libx/extension-release.d", "ships /usr/libx as a symlink" },
                        { "absent", "usr/lib/extension-release.d", NULL },
                };

                dir("layers/multi-etc/usr/lib");
                dir("layers/multi-etc/etc");
                p = path_join(root, "layers/multi-etc/etc");
                tap_ok(setxattr(p, "user.overlay.opaque", "y", 1, 0) == 0, "user.overlay.opaque set on %s", p);
                free(p);
                dir("layers/multi-libx/usr/lib");
                p = path_join(root, "layers/multi-libx/usr/libx");
                (void) !symlink("lib", p);
                free(p);
                p = NULL;

                for (size_t k = 0; k < ELEMENTSOF(multi); k++) {
                        _cleanup_free_ char *t = path_join(root, "layers", multi[k].name), *reason = NULL;
                        _cleanup_close_ int fd = open(t, O_PATH | O_DIRECTORY | O_CLOEXEC);
                        int r = layer_check_paths(fd, (const LayerPath[]) {
                                        { "usr/lib/os-release", LAYER_ABSENT },
                                        { multi[k].second, LAYER_MERGED_DIR },
                                }, 2, &reason);

                        if (!multi[k].reason)
                                tap_ok(r == 1, "layer %s, os-release then %s: leaves the host alone (%d, %s)",
                                       multi[k].name, multi[k].second, r, tap_str(reason));
                        else
                                tap_ok(r == 0 && reason && strstr(reason, multi[k].reason),
                                       "layer %s, os-release then %s: refused (%s)", multi[k].name, multi[k].second,
                                       tap_str(reason));
                }
        }

        /* A DDI's usr partition is the /usr layer itself: its root counts. */
        {
                _cleanup_free_ char *t = path_join(root, "layers/opaque/usr/lib"), *reason = NULL;
                _cleanup_free_ char *u = path_join(root, "layers/plain/usr");
                _cleanup_close_ int fd = open(t, O_PATH | O_DIRECTORY | O_CLOEXEC);
                _cleanup_close_ int fd2 = open(u, O_PATH | O_DIRECTORY | O_CLOEXEC);

                tap_ok(layer_check_root(fd, "usr", "usr/lib/os-release", &reason) == 0 && reason &&
                       strstr(reason, "ships /usr as an opaque directory"), "an opaque usr partition root is refused (%s)",
                       tap_str(reason));
                tap_ok(layer_check_root(fd2, "usr", "usr/lib/os-release", NULL) == 1, "a plain one is not");
        }
}

/* The trust model's rule for one entry (trust.c), table-driven. */
static void test_trust_rules(void) {
        static const struct {
                uid_t uid;
                mode_t mode;
                bool on_the_way;
                const char *refusal;    /* NULL: fine */
        } cases[] = {
                { 0, S_IFDIR | 0755, true, NULL },
                { 0, S_IFDIR | 0755, false, NULL },
                { 0, S_IFDIR | 01777, true, NULL },             /* /tmp on the way */
                { 0, S_IFDIR | 01777, false, "writable by others (mode 1777)" },   /* a search directory in it */
                { 0, S_IFDIR | 0775, true, "writable by its group (mode 0775)" },
                { 0, S_IFDIR | 0777, true, "writable by others (mode 0777)" },
                { 1000, S_IFDIR | 0755, true, "owned by uid 1000, not root" },
                { 0, S_IFREG | 0644, false, NULL },
                { 0, S_IFREG | 0664, false, "writable by its group (mode 0664)" },
                { 0, S_IFREG | 0666, false, "writable by others (mode 0666)" },
                { 1000, S_IFREG | 0444, false, "owned by uid 1000, not root" },
                { 0, S_IFLNK | 0777, true, NULL },              /* its directory and target count */
        };

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                struct stat st = { .st_uid = cases[k].uid, .st_mode = cases[k].mode };
                char buf[64];
                const char *why = trust_refusal(&st, cases[k].on_the_way, buf);

                tap_streq(why, cases[k].refusal, "uid %u mode %06o%s: %s", (unsigned) cases[k].uid,
                          (unsigned) cases[k].mode, cases[k].on_the_way ? " on the way" : "",
                          cases[k].refusal ?: "trusted");
        }
}

/*
 * A run's trust cache (trust_check_path_cached()) says what a walk from "/"
 * says, for every kind of path: a name in the cached directory, one that is
 * refused, a symlink out of it (walked in full), a missing one, one given
 * through "..", one in another directory.
 */
static void test_trust_cache(void) {
        static const struct {
                const char *path;
                TrustKind kind;
        } cases[] = {
                { "trust/imgs/a.raw", TRUST_FILE },
                { "trust/imgs/b.raw", TRUST_FILE },          /* 0666: refused */
                { "trust/imgs/a.raw", TRUST_FILE },          /* again, from the cache */
                { "trust/imgs/link.raw", TRUST_FILE },       /* a symlink to ../open/c.raw: refused on the way */
                { "trust/imgs/good-link.raw", TRUST_FILE },  /* a symlink to ../other/d.raw: fine, another name */
                { "trust/imgs/a.raw", TRUST_FILE },          /* the cache is trust/other now */
                { "trust/imgs/tree", TRUST_FILE },           /* a directory: not a regular file */
                { "trust/imgs/tree", TRUST_TREE },
                { "trust/imgs/missing.raw", TRUST_FILE },
                { "trust/imgs/../imgs/a.raw", TRUST_FILE },
                { "trust/imgs//a.raw", TRUST_FILE },
                { "trust/other/d.raw", TRUST_FILE },
                { "trust/imgs/owned.raw", TRUST_FILE },      /* uid 1000 (as root) */
                { "trust/imgs/their-link.raw", TRUST_FILE }, /* a symlink of uid 1000's (as root) to a.raw */
                { "trust/sticky/their-link.raw", TRUST_FILE },   /* the same in a sticky 1777 directory */
        };
        char *p;
        TrustCache cache = TRUST_CACHE_INIT;

        put("trust/imgs/a.raw", "a");
        put("trust/imgs/b.raw", "b");
        put("trust/imgs/owned.raw", "o");
        put("trust/open/c.raw", "c");
        put("trust/other/d.raw", "d");
        dir("trust/imgs/tree");
        p = path_join(root, "trust/imgs/b.raw");
        (void) chmod(p, 0666);
        free(p);
        p = path_join(root, "trust/open");
        (void) chmod(p, 0777);
        free(p);
        p = path_join(root, "trust/imgs/owned.raw");
        if (geteuid() == 0)
                (void) !chown(p, 1000, 0);
        free(p);
        p = path_join(root, "trust/imgs/link.raw");
        (void) !symlink("../open/c.raw", p);
        free(p);
        p = path_join(root, "trust/imgs/good-link.raw");
        (void) !symlink("../other/d.raw", p);
        free(p);
        dir("trust/sticky");
        p = path_join(root, "trust/sticky");
        (void) chmod(p, 01777);
        free(p);
        for (unsigned k = 0; k < 2; k++) {
                p = path_join(root, k ? "trust/sticky/their-link.raw" : "trust/imgs/their-link.raw");
                (void) !symlink(k ? "../imgs/a.raw" : "a.raw", p);
                if (geteuid() == 0)
                        (void) !lchown(p, 1000, 1000);
                free(p);
        }

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_free_ char *path = path_join(root, cases[k].path);
                _cleanup_free_ char *why = NULL, *why_c = NULL, *res = NULL, *res_c = NULL;
                struct stat st = {}, st_c = {};
                int r, r_c;

                r = trust_check_path(path, cases[k].kind, &st, &res, &why);
                r_c = trust_check_path_cached(&cache, path, cases[k].kind, &st_c, &res_c, &why_c);
                tap_ok(r == r_c && streq_ptr(why, why_c) && streq_ptr(res, res_c) &&
                       (r <= 0 || st.st_ino == st_c.st_ino),
                       "%s: cached as walked (%d, %s)", cases[k].path, r_c, why_c ?: res_c ?: "-");
                if (r != r_c || !streq_ptr(why, why_c) || !streq_ptr(res, res_c))
                        tap_diag("walked: %d, '%s', '%s'", r, tap_str(why), tap_str(res));
        }
        if (geteuid() == 0) {
                /* Where others may add names its owner could swap it for a link to any image of
                 * root's: not followed. Elsewhere only root can replace it. */
                _cleanup_free_ char *path = path_join(root, "trust/sticky/their-link.raw"), *why = NULL;
                _cleanup_free_ char *path2 = path_join(root, "trust/imgs/their-link.raw"), *why2 = NULL;
                int r = trust_check_path(path, TRUST_FILE, NULL, NULL, &why);
                int r2 = trust_check_path(path2, TRUST_FILE, NULL, NULL, &why2);

                tap_ok(r == 0 && why &&
                       strstr(why, "sticky/their-link.raw' is owned by uid 1000, in a directory others can add to"),
                       "a symlink of someone else's in a sticky directory is not followed (%s)", tap_str(why));
                tap_ok(r2 == 1, "nor is it refused in a directory only root can write (%d, %s)", r2, tap_str(why2));
        }
        p = path_join(root, "trust/other");
        tap_streq(cache.dir, p, "the cache holds the last directory walked");
        free(p);
        {
                /* That directory removed and made anew: its name is walked again, not refused. */
                _cleanup_free_ char *d = path_join(root, "trust/other/d.raw"), *o = path_join(root, "trust/other");
                _cleanup_free_ char *res = NULL, *why = NULL;
                int r;

                tap_ok(unlink(d) == 0 && rmdir(o) == 0, "trust/other removed");
                put("trust/other/d.raw", "d");
                r = trust_check_path_cached(&cache, d, TRUST_FILE, NULL, &res, &why);
                tap_ok(r == 1 && streq_ptr(res, d), "and made anew: trusted, walked again (%d, %s)", r,
                       tap_str(why ?: res));
        }
        trust_cache_done(&cache);
        tap_ok(!cache.dir && cache.fd < 0, "the cache is let go");
}

/* A fingerprint names the file and, under dm-verity, the root hash it is mounted with. */
static void test_fingerprint(void) {
        uint8_t hash[32] = { 0xab, 0xcd };
        _cleanup_free_ char *plain = NULL, *p = NULL;
        Image i = { .class = IMAGE_SYSEXT, .type = IMAGE_TYPE_SQUASHFS };
        int r;

        put("fingerprint/a.raw", "a");
        i.resolved = p = path_join(root, "fingerprint/a.raw");
        r = image_fingerprint(&i);
        tap_ok(r == 0 && startswith(i.fingerprint, "raw:") && !strstr(i.fingerprint, "verity"),
               "a plain image: its file (%s)", tap_str(i.fingerprint));
        plain = TAKE_PTR(i.fingerprint);
        i.protection = IMAGE_PROTECTION_VERITY;
        i.verity.root_hash = hash;
        i.verity.root_hash_size = sizeof(hash);
        r = image_fingerprint(&i);
        tap_ok(r == 0 && startswith(i.fingerprint, plain) &&
               endswith(i.fingerprint, ":verity:abcd000000000000000000000000000000000000000000000000000000000000"),
               "under dm-verity: its file and root hash (%s)", tap_str(i.fingerprint));
        tap_ok(!streq(plain, i.fingerprint), "so sidecars added to a staged file change its fingerprint");
        tap_ok(image_fingerprint_same_file(plain, i.fingerprint) && image_fingerprint_same_file(i.fingerprint, plain),
               "but it is the same file");
        tap_ok(!image_fingerprint_same_file(plain, "raw:1:2:3:4.5") && !image_fingerprint_same_file(plain, NULL),
               "another file is not");
        free(i.fingerprint);
}

/* A directory image is mounted only if it is still the directory the trust check walked. */
static void test_dir_replaced(void) {
        _cleanup_free_ char *a = path_join(root, "replaced/a"), *b = path_join(root, "replaced/b");
        struct stat st_a, st_b;

        if (geteuid() != 0) {
                tap_diag("not root: open_tree() of a directory image not tried");
                return;
        }
        /* Privileged: in a mount namespace of its own, although a detached clone touches no table. */
        tap_ok(unshare(CLONE_NEWNS) == 0 && mount(NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) == 0,
               "a private mount namespace");
        dir("replaced/a");
        dir("replaced/b");
        tap_ok(stat(a, &st_a) == 0 && stat(b, &st_b) == 0, "two directories");
        for (unsigned k = 0; k < 2; k++) {
                _cleanup_free_ char *reason = NULL, *loop = NULL;
                Image i = {
                        .class = IMAGE_SYSEXT, .type = IMAGE_TYPE_DIRECTORY, .resolved = a,
                        .checked_dev = k ? st_b.st_dev : st_a.st_dev, .checked_ino = k ? st_b.st_ino : st_a.st_ino,
                };
                int fd = -EBADF, r;

                r = image_mount_detached(&i, &fd, &loop, &reason);
                if (k == 0)
                        tap_ok(r == 0 && fd >= 0, "the directory checked is mounted (%d)", r);
                else
                        tap_ok(r == -ESTALE && reason && strstr(reason, "was replaced while being inspected"),
                               "another one at its path is not (%d, %s)", r, tap_str(reason));
                safe_close(fd);
        }
}

/* Which name a relaxed release file makes an image (issue 9): only one its file name carries. */
static void test_identity(void) {
        static const struct {
                const char *name, *release, *identity;
                bool note;
        } cases[] = {
                { "foo", "foo", "foo", false },               /* strict: its own name */
                { "aaa", "bar", "aaa", true },                /* relaxed, another name: never bar */
                { "foo_1.2", "foo", "foo", false },           /* NAME_VERSION: foo */
                { "docker-24.0.5-x86-64", "docker", "docker", false },   /* NAME-VERSION-ARCH */
                { "bar-evil", "bar", "bar-evil", true },      /* no version after the name: its own */
                { "barn_2", "bar", "barn_2", true },          /* "bar" is not "barn" */
        };
        HostRelease host = { .id = (char *) "debian", .version_id = (char *) "12", .architecture = "x86-64", .scope = "system" };
        char *hier[] = { (char *) "/usr", NULL };

        for (size_t k = 0; k < ELEMENTSOF(cases); k++) {
                _cleanup_free_ char *base = NULL, *rel = NULL, *full = NULL, *file = NULL;
                _cleanup_close_ int fd = -EBADF;
                Image i = { .class = IMAGE_SYSEXT, .name = (char *) cases[k].name, .type = IMAGE_TYPE_DIRECTORY };
                int r;

                base = strjoin("identity/", cases[k].name);
                rel = strjoin(base, "/usr/lib/extension-release.d/extension-release.", cases[k].release);
                put(rel, "ID=_any\nSYSEXT_VERSION_ID=999\n");
                file = path_join(root, rel);
                if (!streq(cases[k].name, cases[k].release) &&
                    setxattr(file, "user.extension-release.strict", "false", 5, 0) < 0) {
                        tap_ok(false, "identity %s: user xattrs unsupported on /tmp (errno %d)", cases[k].name, errno);
                        continue;
                }
                full = path_join(root, base);
                i.path = i.resolved = full;
                fd = open(full, O_PATH | O_DIRECTORY | O_CLOEXEC);
                r = image_validate(&i, fd, &host, "/nonexistent-root", hier);
                if (!tap_ok(r == 0 && i.valid && streq_ptr(i.extension, cases[k].identity) &&
                            (i.identity_note != NULL) == cases[k].note,
                            "identity: image '%s' with release file '%s' counts as '%s'", cases[k].name,
                            cases[k].release, cases[k].identity))
                        tap_diag("valid=%d extension=%s note=%s reason=%s", i.valid, tap_str(i.extension),
                                 tap_str(i.identity_note), tap_str(i.reason));
                free(i.reason);
                free(i.extension);
                free(i.identity_note);
                free(i.version);
                strv_free(i.release);
                strv_free(i.hierarchies);
        }
}

static void test_version_from_file_name(void) {
        static const struct { const char *ext, *file, *want; } t[] = {
                { "foo", "/x/foo_1.2.raw", "1.2" },
                { "foo", "/x/foo-1.2.raw", "1.2" },
                { "foo", "/opt/extensions/foo/foo-1.2.3-x86-64.raw", "1.2.3" },
                { "foo", "foo-2~rc1-arm64.raw", "2~rc1" },
                { "foo", "foo.raw", NULL },
                { "foo", "foobar-1.raw", NULL },
                { "foo", "foo_.raw", NULL },
                { "kubernetes", "kubernetes-v1.30.4-x86-64.raw", "v1.30.4" },
        };

        for (size_t i = 0; i < ELEMENTSOF(t); i++) {
                _cleanup_free_ char *v = version_from_file_name(t[i].ext, t[i].file);

                tap_streq(v, t[i].want, "version of '%s' from '%s'", t[i].ext, t[i].file);
        }
}

static int count_assignments(const char *s, const char *k, const char *v, unsigned line, void *userdata) {
        (*(unsigned *) userdata)++;
        return 0;
}

static void test_config(void) {
        static const struct { const char *text; int r; const char *error; } ini[] = {
                { "[Sysext]\nSearchPaths=/a /b\n", 0, NULL },
                { "# comment\n\n[Daemon]\nSomething=else\n", 0, NULL },
                { "Key=outside\n", -EBADMSG, "line 1: assignment outside of a section" },
                { "[Sysext\n", -EBADMSG, "line 1: malformed section header" },
                { "[]\n", -EBADMSG, "malformed section header" },
                { "[Policy]\nno equals sign\n", -EBADMSG, "line 2: expected KEY=VALUE" },
                { "[Policy]\n=value\n", -EBADMSG, "line 2: expected KEY=VALUE" },
        };
        TuckConfig c;
        int r;

        for (size_t i = 0; i < ELEMENTSOF(ini); i++) {
                _cleanup_free_ char *error = NULL;
                unsigned n = 0;

                r = ini_parse(ini[i].text, count_assignments, &n, &error);
                if (!tap_ok(r == ini[i].r && (!ini[i].error || (error && strstr(error, ini[i].error))),
                            "ini case %zu: %s", i, ini[i].error ?: "parses"))
                        tap_diag("r=%d error=%s", r, tap_str(error));
        }

        put("etc/tuck/tuck.conf", "[Sysext]\nSearchPaths=/srv/ext /run/extensions\nHierarchies=/usr\n"
            "[Policy]\nAllowDowngrade=yes\n[Daemon]\nUnknownToUs=1\n");
        {
                _cleanup_free_ char *p = path_join(root, "etc/tuck/tuck.conf"), *error = NULL;

                r = config_load(&c, p, &error);
                tap_ok(r == 0, "tuck.conf loads (%s)", tap_str(error));
                tap_ok(r == 0 && strv_length(c.search_dirs[IMAGE_SYSEXT]) == 2 &&
                       streq(c.search_dirs[IMAGE_SYSEXT][0], "/srv/ext"), "SearchPaths= replaces the default");
                tap_ok(r == 0 && strv_length(c.hierarchies[IMAGE_SYSEXT]) == 1, "Hierarchies=");
                tap_ok(r == 0 && strv_length(c.search_dirs[IMAGE_CONFEXT]) == 5, "confext keeps its defaults");
                tap_ok(r == 0 && c.allow_downgrade && !c.allow_window, "[Policy] booleans");
                if (r == 0)
                        config_done(&c);
        }
        put("etc/tuck/bad.conf", "[Sysext]\nSearchPaths=relative/path\n");
        {
                _cleanup_free_ char *p = path_join(root, "etc/tuck/bad.conf"), *error = NULL;

                r = config_load(&c, p, &error);
                tap_ok(r == -EINVAL && error && strstr(error, "line 2: 'relative/path' is not a normalized absolute path"),
                       "a relative search path is refused with its line (%s)", tap_str(error));
        }
        put("etc/tuck/bad2.conf", "[Policy]\nAllowWindow=perhaps\n");
        {
                _cleanup_free_ char *p = path_join(root, "etc/tuck/bad2.conf"), *error = NULL;

                r = config_load(&c, p, &error);
                tap_ok(r == -EINVAL && error && strstr(error, "AllowWindow= takes a boolean"), "a bad boolean is refused");
        }
        put("etc/tuck/scan.conf", "[Scan]\nNamespaceBudgetSec=200ms\nRefreshBudgetSec=30s\nHealBudgetSec=2s\n"
            "MaxMounts=500\n");
        {
                _cleanup_free_ char *p = path_join(root, "etc/tuck/scan.conf"), *error = NULL;

                r = config_load(&c, p, &error);
                tap_ok(r == 0 && c.scan_namespace_usec == 200000 && c.scan_refresh_usec == 30000000 &&
                       c.scan_heal_usec == 2000000 && c.scan_max_mounts == 500, "[Scan] budgets (%s)",
                       tap_str(error));
                if (r == 0)
                        config_done(&c);
        }
        put("etc/tuck/scan-bad.conf", "[Scan]\nHealBudgetSec=0\n");
        {
                _cleanup_free_ char *p = path_join(root, "etc/tuck/scan-bad.conf"), *error = NULL;

                r = config_load(&c, p, &error);
                tap_ok(r == -EINVAL && error && strstr(error, "line 2: HealBudgetSec= takes a time span above zero"),
                       "a zero heal budget is refused with its line (%s)", tap_str(error));
        }
        {
                r = config_load(&c, "/nonexistent/tuck.conf", NULL);
                tap_ok(r == 0 && c.scan_heal_usec == SCAN_HEAL_USEC_DEFAULT, "no file: the heal budget's default");
                if (r == 0)
                        config_done(&c);
        }
        {
                r = config_load(&c, "/nonexistent/tuck.conf", NULL);
                tap_ok(r == 0 && strv_length(c.search_dirs[IMAGE_SYSEXT]) == 5, "no file: the defaults (5 sysext dirs)");
                if (r == 0)
                        config_done(&c);
        }
}

int main(void) {
        char tmpl[] = "/tmp/tuck-test-image-XXXXXX";
        _cleanup_free_ char *cmd = NULL;

        root = mkdtemp(tmpl);
        if (!tap_ok(root != NULL, "temporary root"))
                return tap_done();
        test_discover();
        test_validate();
        test_identity();
        test_version_from_file_name();
        test_config();
        test_layers();
        test_trust_rules();
        test_trust_cache();
        test_fingerprint();
        test_dir_replaced();
        if (asprintf_safe(&cmd, "rm -rf '%s'", root) == 0)
                (void) !system(cmd);
        return tap_done();
}
