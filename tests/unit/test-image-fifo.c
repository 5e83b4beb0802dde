/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * An image path that is a FIFO by the time tuck opens it (renamed into
 * place after discovery saw a regular file): probing and mounting it fail
 * at once with -EBADFD, instead of blocking in open() until someone writes
 * to the FIFO (which hung tuckd). Nothing here needs privileges: the check
 * comes before any loop device or mount.
 *
 * A watchdog alarm turns a hang into a failure with a message, not a
 * timeout of the suite.
 */

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "image.h"
#include "overlay.h"
#include "tap.h"
#include "util.h"

static void on_alarm(int sig) {
        static const char msg[] = "not ok - blocked opening a FIFO as an image\nBail out! hung\n";

        (void) !write(STDOUT_FILENO, msg, sizeof(msg) - 1);
        _exit(EXIT_FAILURE);
}

int main(void) {
        char dir[] = "/tmp/tuck-test-fifo.XXXXXX";
        _cleanup_free_ char *fifo = NULL, *file = NULL;
        ImageType type = IMAGE_TYPE_SQUASHFS;
        Image img = { .type = IMAGE_TYPE_SQUASHFS, .class = IMAGE_SYSEXT };
        int fd, mnt = -EBADF, r;
        char *loop = NULL, *reason = NULL;
        FILE *f;

        signal(SIGALRM, on_alarm);
        if (!mkdtemp(dir))
                return tap_ok(false, "mkdtemp: %m"), tap_done();
        fifo = path_join(dir, "foo.raw");
        file = path_join(dir, "file.raw");
        if (!fifo || !file || mkfifo(fifo, 0600) < 0 || !(f = fopen(file, "we")))
                return tap_ok(false, "setup: %m"), tap_done();
        fputs("not an image\n", f);
        fclose(f);

        alarm(10);
        fd = image_open_file(fifo);
        tap_ok(fd == -EBADFD, "a FIFO is not opened as an image: %s", strerror(-fd));
        r = image_probe_type(fifo, &type, NULL);
        tap_ok(r == -EBADFD, "probing a FIFO fails at once: %s", strerror(-r));
        img.resolved = fifo;
        r = image_mount_detached(&img, &mnt, &loop, &reason);
        tap_ok(r == -EBADFD && mnt < 0 && !loop, "mounting a FIFO fails at once: %s", strerror(-r));
        free(reason);
        alarm(0);

        fd = image_open_file(file);
        tap_ok(fd >= 0, "a regular file opens");
        if (fd >= 0) {
                tap_ok(!(fcntl(fd, F_GETFL) & O_NONBLOCK), "... for blocking reads, as a file is read");
                close(fd);
        }
        r = image_probe_type(file, &type, NULL);
        tap_ok(r == 0 && type == IMAGE_TYPE_UNSUPPORTED, "a regular file that is no image is probed: unsupported");

        (void) unlink(fifo);
        (void) unlink(file);
        (void) rmdir(dir);
        return tap_done();
}
