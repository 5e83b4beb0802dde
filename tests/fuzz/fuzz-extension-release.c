/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * An image's extension-release file and the host's os-release, as
 * extension_release_load() and host_release_load() read them from a tree,
 * then extension_release_validate() and extension_release_version(), the
 * way image inspection decides whether an image fits. The input is the
 * extension-release text, optionally followed by "\n#os-release\n" and the
 * host's os-release text (without one the host is Debian 12).
 *
 * The release file sits in a sysext and a confext tree under the image's
 * name, and once more in a sysext tree under another name, marked
 * user.extension-release.strict=false (the relaxed fallback).
 */

#include <fcntl.h>
#include <stdlib.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "extension-release.h"
#include "fuzz.h"
#include "image-class.h"
#include "util.h"

static void check_one(int image_fd, ImageClass c, const char *name, const HostRelease *host) {
        _cleanup_strv_free_ char **pairs = NULL;
        _cleanup_free_ char *filename = NULL, *reason = NULL, *why = NULL;
        const char *v;
        int r;

        r = extension_release_load(image_fd, c, NULL, name, &pairs, &filename, &reason);
        if (r < 0) {
                fuzz_assert(reason || r == -ENOMEM);
                return;
        }
        fuzz_assert(filename && startswith(filename, "extension-release."));
        r = extension_release_validate(name, c, host, pairs, &why);
        fuzz_assert(r == 0 || r == 1 || r == -ENOMEM);
        fuzz_assert(r != 0 || why);
        v = extension_release_version(c, pairs);
        fuzz_assert(!v || *v);
}

static int open_dir(const char *rel) {
        _cleanup_free_ char *p = path_join(fuzz_dir(), rel);
        int fd = p ? open(p, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;

        if (fd < 0)
                fuzz_fail("open %s: %m", rel);
        return fd;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static bool marked = false;
        _cleanup_free_ char *host_dir = NULL;
        _cleanup_close_ int image_fd = -EBADF, relaxed_fd = -EBADF;
        HostRelease host = {};
        FuzzPart release, os_release;
        int r;

        fuzz_setup();
        fuzz_split(data, size, "\n#os-release\n", &release, &os_release);
        fuzz_write_file("image/usr/lib/extension-release.d/extension-release.foo", release.data, release.size);
        fuzz_write_file("image/etc/extension-release.d/extension-release.foo", release.data, release.size);
        fuzz_write_file("relaxed/usr/lib/extension-release.d/extension-release.anything", release.data, release.size);
        if (!marked) {   /* once: O_TRUNC keeps the xattr */
                _cleanup_free_ char *p = path_join(fuzz_dir(), "relaxed/usr/lib/extension-release.d/"
                                                   "extension-release.anything");

                if (!p || setxattr(p, "user.extension-release.strict", "false", 5, 0) < 0)
                        fuzz_fail("setxattr: %m");
                marked = true;
        }
        if (os_release.size > 0)
                fuzz_write_file("host/etc/os-release", os_release.data, os_release.size);
        else
                fuzz_write_file("host/etc/os-release", "ID=debian\nVERSION_ID=12\n", 25);

        host_dir = path_join(fuzz_dir(), "host");
        fuzz_assert(host_dir);
        r = host_release_load(host_dir, &host);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                host = (HostRelease) { .architecture = architecture_native(), .scope = "system" };
                host.id = strdup("debian");
                fuzz_assert(host.id);
        } else
                fuzz_assert(!isempty(host.id));

        image_fd = open_dir("image");
        relaxed_fd = open_dir("relaxed");
        for (ImageClass c = 0; c < _IMAGE_CLASS_MAX; c++)
                check_one(image_fd, c, "foo", &host);
        check_one(relaxed_fd, IMAGE_SYSEXT, "other", &host);
        host_release_done(&host);
        return 0;
}
