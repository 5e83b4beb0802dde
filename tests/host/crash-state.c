/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * crash-state ROOT HIERARCHY: what tuck's state files under ROOT say, read
 * by libtuck's own loaders, for tuckd-crash.sh to judge after every kill.
 * One line:
 *
 *   merged=0|1 generation=N layers=NAME:VERSION,... staged=N mounted=N temps=N
 *   floors=NAME:FLOOR[:allowed],...
 *
 * (merged=- generation=0 layers= when the hierarchy has no record). floors
 * are the sysext floors versions.json holds, ":allowed" where the floor is
 * a rollback an operator allowed (a recorded decision). staged
 * counts the images staging.json records, mounted the image mounts (/i/ID)
 * in the staging namespace, temps the write_file_atomic() temporaries left
 * behind (NAME.tmp.PID). Exit
 * status 1, with the reason on stderr, if any state file does not load:
 * the generation record, staging.json, versions.json, the namespace wishes.
 */

#include <dirent.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>

#include "staging.h"
#include "stale.h"
#include "state.h"
#include "util.h"
#include "versions.h"

static int fail(const char *what, int r, const char *error) {
        fprintf(stderr, "crash-state: %s does not load: %s\n", what, error ?: strerror(-r));
        return EXIT_FAILURE;
}

/* Temporaries in dir, and the wishes files' loads if check_wishes. */
static int scan_dir(const char *dir, bool check_wishes, unsigned *temps) {
        _cleanup_closedir_ DIR *d = opendir(dir);

        if (!d)
                return 0;
        for (struct dirent *de; (de = readdir_no_dot(d)); ) {
                _cleanup_free_ char *p = path_join(dir, de->d_name);
                _cleanup_free_ NsWant *w = NULL;
                json_object *o = NULL;
                size_t n;
                int r;

                if (!p)
                        return -ENOMEM;
                if (strstr(de->d_name, ".tmp.")) {
                        (*temps)++;
                        continue;
                }
                if (!check_wishes || !endswith(de->d_name, ".json"))
                        continue;
                r = json_load(p, &o);
                if (r >= 0)
                        r = ns_wants_from_json(o, &w, &n);
                json_object_put(o);
                if (r < 0) {
                        fprintf(stderr, "crash-state: %s does not load: %s\n", p, strerror(-r));
                        return r;
                }
        }
        return 0;
}

/* Image mounts in the staging namespace (no /proc in there: read ours from inside). */
static int staging_image_mounts(const char *run_dir) {
        _cleanup_close_ int proc = open("/proc/thread-self", O_PATH | O_DIRECTORY | O_CLOEXEC);
        _cleanup_free_ char *text = NULL;
        Staging s = STAGING_INIT;
        int n = 0, r;

        if (proc < 0)
                return -errno;
        r = staging_open(run_dir, &s);
        if (r < 0)
                return r == -ENOENT ? 0 : r;
        r = staging_enter(&s);
        if (r >= 0) {
                r = read_full_file_at(proc, "mountinfo", 64 * 1024 * 1024, &text);
                (void) staging_leave(&s);
        }
        staging_close(&s);
        if (r < 0)
                return r;
        for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
                const char *f = l;

                for (int k = 0; k < 4 && f; k++)   /* the fifth field: the mount point */
                        f = strchr(f, ' ') ? strchr(f, ' ') + 1 : NULL;
                if (f && startswith(f, "/i/"))
                        n++;
        }
        return n;
}

int main(int argc, char *argv[]) {
        _cleanup_free_ char *run_dir = NULL, *state_dir = NULL, *gens = NULL, *ns = NULL;
        _cleanup_(generation_done) Generation g = {};
        StagingTable t = {};
        _cleanup_free_ char *error = NULL;
        _cleanup_(versions_done) Versions v = {};
        unsigned temps = 0;
        size_t staged;
        int mounted;
        int r;

        if (argc != 3) {
                fprintf(stderr, "usage: crash-state ROOT HIERARCHY\n");
                return EXIT_FAILURE;
        }
        run_dir = path_join(argv[1], "run/tuck");
        state_dir = path_join(argv[1], "var/lib/tuck");
        gens = path_join(argv[1], "run/tuck/generations");
        ns = path_join(argv[1], "run/tuck/namespaces");
        if (!run_dir || !state_dir || !gens || !ns)
                return fail("memory", -ENOMEM, NULL);

        r = generation_load(run_dir, argv[2], &g, &error);
        if (r < 0 && r != -ENOENT)
                return fail("the generation record", r, error);
        r = staging_table_load(run_dir, &t, &error);
        if (r < 0)
                return fail("staging.json", r, error);
        staged = t.n_images;
        staging_table_done(&t);
        r = versions_load(state_dir, &v, &error);
        if (r < 0)
                return fail("versions.json", r, error);
        mounted = staging_image_mounts(run_dir);
        if (mounted < 0)
                return fail("the staging namespace", mounted, NULL);
        if (scan_dir(run_dir, false, &temps) < 0 || scan_dir(gens, false, &temps) < 0 ||
            scan_dir(ns, true, &temps) < 0 || scan_dir(state_dir, false, &temps) < 0)
                return EXIT_FAILURE;

        printf("merged=%s generation=%" PRIu64 " layers=", g.hierarchy ? (g.merged ? "1" : "0") : "-", g.number);
        for (size_t i = 0; g.merged && i < g.n_layers; i++)
                printf("%s%s:%s", i ? "," : "", g.layers[i].name, strna(g.layers[i].version));
        printf(" staged=%zu mounted=%d temps=%u floors=", staged, mounted, temps);
        for (size_t i = 0, n = 0; i < v.n_entries; i++) {
                const VersionEntry *e = v.entries + i;

                if (e->class != IMAGE_SYSEXT || !e->floor)
                        continue;
                printf("%s%s:%s%s", n++ ? "," : "", e->extension, e->floor,
                       e->decision.kind == DECISION_DOWNGRADE_ALLOWED ? ":allowed" : "");
        }
        putchar('\n');
        return EXIT_SUCCESS;
}
