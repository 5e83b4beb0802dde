/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * extension-release matching exactly as systemd-sysext/confext decide it
 * (ID/_any, *_LEVEL else VERSION_ID, ARCHITECTURE, *_SCOPE), and finding the
 * release file (by name, or the single one marked
 * user.extension-release.strict=0).
 */

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "env-file.h"
#include "extension-release.h"
#include "tap.h"
#include "util.h"

static const HostRelease debian = {
        .id = (char *) "debian",
        .version_id = (char *) "12",
        .level = { [IMAGE_SYSEXT] = (char *) "1.0", [IMAGE_CONFEXT] = NULL },
        .architecture = "x86-64",
        .scope = "system",
};

static const HostRelease rolling = {
        .id = (char *) "arch",
        .architecture = "x86-64",
        .scope = "system",
};

static const HostRelease initrd = {
        .id = (char *) "debian",
        .version_id = (char *) "12",
        .architecture = "x86-64",
        .scope = "initrd",
};

static const struct {
        const char *name;
        const HostRelease *host;
        ImageClass class;
        const char *release;
        int valid;
        const char *reason_contains;
} cases[] = {
        { "ID=_any matches any OS",            &debian, IMAGE_SYSEXT, "ID=_any\n", 1, NULL },
        { "ID=_any needs no VERSION_ID",       &debian, IMAGE_SYSEXT, "ID=_any\nVERSION_ID=99\n", 1, NULL },
        { "same ID and VERSION_ID",            &debian, IMAGE_SYSEXT, "ID=debian\nVERSION_ID=12\n", 1, NULL },
        { "other VERSION_ID",                  &debian, IMAGE_SYSEXT, "ID=debian\nVERSION_ID=11\n", 0, "VERSION_ID '11'" },
        { "other ID",                          &debian, IMAGE_SYSEXT, "ID=fedora\nVERSION_ID=12\n", 0, "OS 'fedora'" },
        { "missing ID",                        &debian, IMAGE_SYSEXT, "VERSION_ID=12\n", 0, "no ID=" },
        { "empty ID",                          &debian, IMAGE_SYSEXT, "ID=\nVERSION_ID=12\n", 0, "no ID=" },
        { "missing VERSION_ID",                &debian, IMAGE_SYSEXT, "ID=debian\n", 0, "no VERSION_ID" },
        { "SYSEXT_LEVEL matches, VERSION_ID ignored", &debian, IMAGE_SYSEXT, "ID=debian\nSYSEXT_LEVEL=1.0\nVERSION_ID=11\n", 1, NULL },
        { "SYSEXT_LEVEL differs",              &debian, IMAGE_SYSEXT, "ID=debian\nSYSEXT_LEVEL=2.0\n", 0, "SYSEXT_LEVEL '2.0'" },
        { "CONFEXT_LEVEL unset on host: VERSION_ID decides", &debian, IMAGE_CONFEXT, "ID=debian\nCONFEXT_LEVEL=5\nVERSION_ID=12\n", 1, NULL },
        { "confext ignores SYSEXT_LEVEL",      &debian, IMAGE_CONFEXT, "ID=debian\nSYSEXT_LEVEL=1.0\nVERSION_ID=11\n", 0, "VERSION_ID '11'" },
        { "ARCHITECTURE matches",              &debian, IMAGE_SYSEXT, "ID=_any\nARCHITECTURE=x86-64\n", 1, NULL },
        { "ARCHITECTURE=_any",                 &debian, IMAGE_SYSEXT, "ID=_any\nARCHITECTURE=_any\n", 1, NULL },
        { "ARCHITECTURE differs",              &debian, IMAGE_SYSEXT, "ID=_any\nARCHITECTURE=arm64\n", 0, "architecture 'arm64'" },
        { "ARCHITECTURE checked before ID",    &debian, IMAGE_SYSEXT, "ID=fedora\nARCHITECTURE=arm64\n", 0, "architecture" },
        { "default scope includes system",     &debian, IMAGE_SYSEXT, "ID=_any\n", 1, NULL },
        { "SYSEXT_SCOPE=initrd on a system",   &debian, IMAGE_SYSEXT, "ID=_any\nSYSEXT_SCOPE=initrd\n", 0, "scope 'system'" },
        { "SYSEXT_SCOPE list with system",     &debian, IMAGE_SYSEXT, "ID=_any\nSYSEXT_SCOPE=initrd system\n", 1, NULL },
        { "default scope excludes initrd",     &initrd, IMAGE_SYSEXT, "ID=_any\n", 0, "scope 'initrd'" },
        { "CONFEXT_SCOPE for confext",         &debian, IMAGE_CONFEXT, "ID=_any\nCONFEXT_SCOPE=portable\n", 0, "CONFEXT_SCOPE" },
        { "confext ignores SYSEXT_SCOPE",      &debian, IMAGE_CONFEXT, "ID=_any\nSYSEXT_SCOPE=initrd\n", 1, NULL },
        { "rolling host: ID alone",            &rolling, IMAGE_SYSEXT, "ID=arch\n", 1, NULL },
        { "rolling host: other ID",            &rolling, IMAGE_SYSEXT, "ID=debian\nVERSION_ID=12\n", 0, "OS 'debian'" },
        { "empty release file",                &debian, IMAGE_SYSEXT, "# nothing\n", 0, "empty" },
        { "malformed lines skipped, rest counts", &debian, IMAGE_SYSEXT, "garbage\nID=debian\nVERSION_ID=12\n", 1, NULL },
};

static void test_validate(void) {
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_strv_free_ char **pairs = NULL;
                _cleanup_free_ char *reason = NULL;
                int r;

                r = env_file_parse(cases[i].release, &pairs, NULL, NULL);
                if (r < 0) {
                        tap_ok(false, "%s: parse failed %d", cases[i].name, r);
                        continue;
                }
                r = extension_release_validate("test", cases[i].class, cases[i].host, pairs, &reason);
                if (!tap_ok(r == cases[i].valid &&
                            (!cases[i].reason_contains || (reason && strstr(reason, cases[i].reason_contains))),
                            "%s", cases[i].name))
                        tap_diag("r=%d reason='%s'", r, tap_str(reason));
        }
}

static void write_file(const char *dir, const char *name, const char *content) {
        _cleanup_free_ char *p = path_join(dir, name);
        FILE *f = fopen(p, "we");

        if (f) {
                fputs(content, f);
                fclose(f);
        }
}

static int load(const char *tree, ImageClass c, const char *name, char **ret_file, char **ret_reason) {
        _cleanup_strv_free_ char **pairs = NULL;
        _cleanup_close_ int fd = open(tree, O_PATH | O_DIRECTORY | O_CLOEXEC);

        return extension_release_load(fd, c, NULL, name, &pairs, ret_file, ret_reason);
}

static void test_load(void) {
        char tmpl[] = "/tmp/tuck-test-release-XXXXXX";
        const char *tree = mkdtemp(tmpl);
        _cleanup_free_ char *dir = NULL, *file = NULL, *reason = NULL, *cmd = NULL;
        int r;

        if (!tap_ok(tree != NULL, "temporary tree"))
                return;
        dir = path_join(tree, "usr/lib/extension-release.d");
        (void) mkdir_p(dir, 0755);

        r = load(tree, IMAGE_SYSEXT, "foo", &file, &reason);
        tap_ok(r == -ENOENT && reason && strstr(reason, "extension-release.foo"), "no release file: -ENOENT, names the file");
        free(reason), reason = NULL;

        write_file(dir, "extension-release.foo", "ID=_any\n");
        r = load(tree, IMAGE_SYSEXT, "foo", &file, &reason);
        tap_ok(r == 0 && streq_ptr(file, "extension-release.foo"), "release file found by name");
        free(file), file = NULL;

        r = load(tree, IMAGE_SYSEXT, "foo_1.2", &file, &reason);
        tap_ok(r == -ENOENT, "name mismatch without the xattr is refused");
        free(reason), reason = NULL;

        /* Relaxed: the file says user.extension-release.strict=0. */
        {
                _cleanup_free_ char *p = path_join(dir, "extension-release.foo");

                r = setxattr(p, "user.extension-release.strict", "0", 1, 0);
        }
        if (r < 0) {
                tap_ok(false, "user xattrs unsupported on /tmp: cannot test the relaxed match (errno %d)", errno);
        } else {
                r = load(tree, IMAGE_SYSEXT, "foo_1.2", &file, &reason);
                tap_ok(r == 0 && streq_ptr(file, "extension-release.foo"), "relaxed: the one file marked strict=0 is used");
                free(file), file = NULL;

                write_file(dir, "extension-release.bar", "ID=_any\n");
                r = load(tree, IMAGE_SYSEXT, "foo_1.2", &file, &reason);
                tap_ok(r == 0, "an unmarked second file does not make it ambiguous");
                free(file), file = NULL;

                {
                        _cleanup_free_ char *p = path_join(dir, "extension-release.bar");
                        (void) setxattr(p, "user.extension-release.strict", "false", 5, 0);
                }
                r = load(tree, IMAGE_SYSEXT, "foo_1.2", &file, &reason);
                tap_ok(r == -ENOTUNIQ && reason, "two relaxed files: -ENOTUNIQ (%s)", tap_str(reason));
                free(reason), reason = NULL;
        }

        r = load(tree, IMAGE_CONFEXT, "foo", &file, &reason);
        tap_ok(r == -ENOENT && reason && strstr(reason, "etc/extension-release.d"),
               "confext looks in etc/extension-release.d only");
        free(reason), reason = NULL;

        {
                /* A 300 KB line, as systemd-sysext 252 reads it; over the 1 MiB limit: refused. */
                size_t big = 300 * 1024, huge = 1024 * 1024;
                _cleanup_free_ char *text = malloc(huge + 64);

                if (text) {
                        memcpy(text, "ID=_any\nX=", 10);
                        memset(text + 10, 'a', big);
                        strcpy(text + 10 + big, "\n");
                        write_file(dir, "extension-release.long", text);
                        r = load(tree, IMAGE_SYSEXT, "long", &file, &reason);
                        tap_ok(r == 0, "a release file with a 300 KB line is read (%s)", tap_str(reason));
                        free(file), file = NULL;
                        free(reason), reason = NULL;

                        memset(text + 10, 'a', huge);
                        strcpy(text + 10 + huge, "\n");
                        write_file(dir, "extension-release.huge", text);
                        r = load(tree, IMAGE_SYSEXT, "huge", &file, &reason);
                        tap_ok(r == -EFBIG && reason && strstr(reason, "too large"),
                               "a release file over 1 MiB is refused (%s)", tap_str(reason));
                        free(reason), reason = NULL;
                }
        }

        write_file(dir, "extension-release.bad", "ID=\"unterminated\n");
        r = load(tree, IMAGE_SYSEXT, "bad", &file, &reason);
        tap_ok(r == -EBADMSG && reason && strstr(reason, "unterminated"), "malformed release file: -EBADMSG (%s)",
               tap_str(reason));

        if (asprintf_safe(&cmd, "rm -rf '%s'", tree) == 0)
                (void) !system(cmd);
}

static void test_names(void) {
        static const struct { const char *name; bool valid; } names[] = {
                /* What systemd-sysext 252 merges (and refuses) as image names. */
                { "foo", true }, { "foo-bar_1.2", true }, { "", false }, { ".hidden", true },
                { "a/b", false }, { "sp ace", true }, { "ü", true }, { "x#y", true }, { ".#tmp", false },
                { ".", false }, { "..", false }, { "tab\tx", false }, { "del\x7f", false },
                { "bad\xff", false }, { "\xc0\xaf", false }, { "\xed\xa0\x80", false },
                { "\xf0\x9f\x98\x80", true },
        };

        for (size_t i = 0; i < ELEMENTSOF(names); i++)
                tap_ok(image_name_is_valid(names[i].name) == names[i].valid, "image name '%s' is %s",
                       names[i].name, names[i].valid ? "valid" : "invalid");

        tap_streq(architecture_from_uname("x86_64"), "x86-64", "uname x86_64 is systemd's x86-64");
        tap_streq(architecture_from_uname("aarch64"), "arm64", "uname aarch64 is arm64");
        tap_streq(architecture_from_uname("pdp11"), NULL, "unknown machine: NULL");
}

int main(void) {
        test_validate();
        test_load();
        test_names();
        return tap_done();
}
