/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Image directory watching. Operators drop images in by writing them under a
 * name that is not an image name (a dotfile, or one not ending in ".raw") and
 * rename(2)-ing them into place; the rename is one IN_MOVED_TO, so a
 * half-written image is never seen under its final name. A file created in
 * place under its final name (IN_CREATE) is not acted on until its writer
 * closes it (IN_CLOSE_WRITE). Every relevant event re-arms the quiet-period
 * timer, so a burst of drops gives one refresh.
 *
 * And when the quiet period ends while some "*.raw" file is still open for
 * writing by anyone (a writer that ignored the rule, or one still copying
 * in place), the refresh waits: a read lease (F_SETLEASE, F_RDLCK) cannot be
 * taken on a file open for writing, which tells without scanning /proc.
 *
 * A directory that does not exist yet is covered by watching its nearest
 * existing ancestor for the creation of the next path component, that name
 * only: on Debian 12 most search directories are missing, and their
 * ancestors (/etc, /run, /var/lib) change all the time (passwd, a login's
 * /run/user/UID) without any of it being an image. When the component
 * appears all watches are rebuilt and a refresh follows.
 */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "macro.h"
#include "manager.h"
#include "util.h"

#define IMAGE_DIR_MASK                                                          \
        (IN_CREATE | IN_CLOSE_WRITE | IN_MOVED_TO | IN_MOVED_FROM | IN_DELETE | \
         IN_ATTRIB | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)
#define ANCESTOR_MASK (IN_CREATE | IN_MOVED_TO | IN_DELETE_SELF | IN_MOVE_SELF | IN_ONLYDIR)

static bool name_is_image(const char *name, bool is_dir) {
        size_t l = strlen(name);

        if (name[0] == '.')
                return false;                   /* temporaries and hidden files */
        if (is_dir)
                return true;                    /* a directory image */
        /* Symlinks (sysupdate's CurrentSymlink=) and regular files: only *.raw. */
        return l > 4 && streq(name + l - 4, ".raw");
}

static void rewatch_later(Manager *m);

static int on_image_dir(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        Manager *m = userdata;
        bool is_dir = ev->mask & IN_ISDIR;

        if (ev->mask & IN_Q_OVERFLOW) {
                manager_schedule_refresh(m, "inotify queue overflow");
                return 0;
        }
        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED)) {
                rewatch_later(m);
                manager_schedule_refresh(m, "image directory went away");
                return 0;
        }
        if (ev->len == 0 || !name_is_image(ev->name, is_dir))
                return 0;
        /* A regular file created under its final name is still being written:
         * wait for IN_CLOSE_WRITE. */
        if ((ev->mask & IN_CREATE) && !is_dir) {
                log_debug("'%s' created in place, waiting for its writer to close it.", ev->name);
                return 0;
        }
        manager_schedule_refresh(m, ev->name);
        return 0;
}

/* An ancestor of a missing image directory, and the one name in it that matters. */
typedef struct AncestorWatch {
        Manager *manager;
        char *component;        /* "extensions" for /etc/extensions under /etc */
} AncestorWatch;

static void ancestor_watch_free(void *userdata) {
        AncestorWatch *a = userdata;

        free(a->component);
        free(a);
}

static int on_ancestor(sd_event_source *s, const struct inotify_event *ev, void *userdata) {
        AncestorWatch *a = userdata;
        Manager *m = a->manager;

        if (ev->mask & (IN_DELETE_SELF | IN_MOVE_SELF | IN_IGNORED | IN_Q_OVERFLOW)) {
                rewatch_later(m);       /* the ancestor itself went: find the next one */
                return 0;
        }
        /* /etc/passwd, /run/user/1000: not on the way to an image directory. */
        if (ev->len == 0 || !streq(ev->name, a->component))
                return 0;
        log_debug("'%s' appeared on the way to an image directory.", ev->name);
        rewatch_later(m);
        manager_schedule_refresh(m, "image directory appeared");
        return 0;
}

static int add_watch(Manager *m, const char *path, uint32_t mask, sd_event_inotify_handler_t cb,
                     void *userdata, sd_event_destroy_t destroy) {
        sd_event_source **w;
        int r;

        w = realloc(m->watches, (m->n_watches + 1) * sizeof *w);
        if (!w)
                return -ENOMEM;
        m->watches = w;
        r = sd_event_add_inotify(m->event, &m->watches[m->n_watches], path, mask, cb, userdata);
        if (r < 0)
                return r;
        if (destroy)
                (void) sd_event_source_set_destroy_callback(m->watches[m->n_watches], destroy);
        m->n_watches++;
        return 0;
}

static int add_ancestor_watch(Manager *m, const char *ancestor, const char *component) {
        AncestorWatch *a = calloc(1, sizeof *a);
        int r;

        if (!a)
                return -ENOMEM;
        a->manager = m;
        a->component = strdup(component);
        if (!a->component) {
                free(a);
                return -ENOMEM;
        }
        r = add_watch(m, ancestor, ANCESTOR_MASK, on_ancestor, a, ancestor_watch_free);
        if (r < 0)
                ancestor_watch_free(a);
        return r;
}

/* Watch @dir, or its nearest existing ancestor if it does not exist yet. */
static int watch_dir(Manager *m, const char *dir) {
        char p[PATH_MAX], component[NAME_MAX + 1] = "";
        struct stat st;
        int r;

        if (strlen(dir) >= sizeof p)
                return -ENAMETOOLONG;
        strcpy(p, dir);

        if (stat(p, &st) == 0 && S_ISDIR(st.st_mode)) {
                r = add_watch(m, p, IMAGE_DIR_MASK, on_image_dir, m, NULL);
                if (r < 0)
                        return log_error_errno(r, "Failed to watch '%s': %m", p);
                log_debug("Watching '%s'.", p);
                return 0;
        }

        /* Up to the nearest directory that exists; @component is the name below it. */
        for (;;) {
                char *slash = strrchr(p, '/');

                if (!slash)
                        return 0;
                if (slash[1] != 0)
                        snprintf(component, sizeof component, "%s", slash + 1);
                if (slash == p)
                        slash[1] = 0;           /* "/" */
                else
                        *slash = 0;
                if (stat(p, &st) == 0 && S_ISDIR(st.st_mode))
                        break;
                if (slash == p)
                        return 0;
        }
        r = add_ancestor_watch(m, p, component);
        if (r < 0)
                return log_error_errno(r, "Failed to watch '%s' for '%s' to appear: %m", p, dir);
        log_debug("Watching '%s' for '%s' to appear (for '%s').", p, component, dir);
        return 0;
}

void manager_unwatch_images(Manager *m) {
        for (size_t i = 0; i < m->n_watches; i++)
                sd_event_source_disable_unref(m->watches[i]);
        free(m->watches);
        m->watches = NULL;
        m->n_watches = 0;
}

int manager_watch_images(Manager *m) {
        const char *const *dirs;
        size_t n = engine_image_dirs(m->engine, &dirs);
        int r = 0;

        for (size_t i = 0; i < n; i++) {
                int k = watch_dir(m, dirs[i]);

                if (k < 0 && r == 0)
                        r = k;
        }
        return r;
}

/* Rebuilding watches from inside an inotify callback would free the source
 * that is running: defer it to a one-shot event. */
static int on_rewatch(sd_event_source *s, void *userdata) {
        Manager *m = userdata;

        manager_unwatch_images(m);
        (void) manager_watch_images(m);
        return 0;
}

static void rewatch_later(Manager *m) {
        int r;

        if (!m->rewatch) {
                r = sd_event_add_defer(m->event, &m->rewatch, on_rewatch, m);
                if (r < 0) {
                        log_warning_errno(r, "Failed to schedule re-watching image directories: %m");
                        return;
                }
        }
        (void) sd_event_source_set_enabled(m->rewatch, SD_EVENT_ONESHOT);
}

/* Is @name in @dir_fd a regular file someone has open for writing? */
static bool file_open_for_writing(int dir_fd, const char *name) {
        _cleanup_close_ int fd = -EBADF;
        struct stat st;

        fd = openat(dir_fd, name, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW | O_NOCTTY);
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
                return false;
        if (fcntl(fd, F_SETLEASE, F_RDLCK) < 0)
                return errno == EAGAIN;         /* a writer has it open */
        (void) fcntl(fd, F_SETLEASE, F_UNLCK);
        return false;
}

int manager_images_busy(Manager *m, char **ret_path) {
        const char *const *dirs;
        size_t n = engine_image_dirs(m->engine, &dirs);

        for (size_t i = 0; i < n; i++) {
                _cleanup_closedir_ DIR *d = opendir_at(AT_FDCWD, dirs[i]);

                for (struct dirent *de; d && (de = readdir_no_dot(d)); )
                        if (name_is_image(de->d_name, false) && file_open_for_writing(dirfd(d), de->d_name)) {
                                if (ret_path)
                                        *ret_path = path_join(dirs[i], de->d_name);
                                return 1;
                        }
        }
        return 0;
}
