/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The drop-in's pure parts, table-driven: hierarchy paths in canonical form
 * (and what is refused), unit names as systemd accepts them, the release
 * fields an extension asks the service manager with, and what a swap from
 * one generation to another asks (only the extensions that entered, changed
 * or left; restart wins over reload-or-restart; sorted, unique).
 */

#include "config.h"
#include "env-file.h"
#include "reload.h"
#include "tap.h"
#include "util.h"

static void test_hierarchy_paths(void) {
        static const struct {
                const char *in, *want;   /* want NULL: refused */
        } cases[] = {
                { "/usr", "/usr" },
                { "/usr/", "/usr" },
                { "/usr//", "/usr" },
                { "//usr///local/", "/usr/local" },
                { "/opt", "/opt" },
                { "/", NULL },
                { "//", NULL },
                { "usr", NULL },
                { "", NULL },
                { "/usr/../etc", NULL },
                { "/usr/./lib", NULL },
                { "/..", NULL },
                { "/usr/..", NULL },
                { "/us,r", NULL },
                { "/o:pt", NULL },
                { "/usr/.hidden", "/usr/.hidden" },
                { "/usr/..x", "/usr/..x" },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                _cleanup_free_ char *got = NULL, *why = NULL;
                int r = hierarchy_path_canonicalize(cases[i].in, &got, &why);

                if (cases[i].want)
                        tap_streq(r >= 0 ? got : NULL, cases[i].want, "hierarchy '%s' is '%s'", cases[i].in,
                                  cases[i].want);
                else
                        tap_ok(r == -EINVAL && why, "hierarchy '%s' refused (%s)", cases[i].in, tap_str(why));
        }
}

static void test_unit_names(void) {
        static const struct {
                const char *name;
                bool valid;
        } cases[] = {
                { "foo.service", true },
                { "foo-bar_baz:1.socket", true },
                { "getty@tty1.service", true },
                { "a.timer", true },
                { "x.mount", true },
                { "foo@.service", false },        /* a template, not a unit */
                { "@foo.service", false },
                { "foo@a@b.service", false },
                { "foo", false },
                { ".service", false },
                { "foo.frobnicator", false },
                { "bad/name.service", false },
                { "with space.service", false },
                { "", false },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++)
                tap_ok(unit_name_is_valid(cases[i].name) == cases[i].valid, "unit name '%s' is %svalid",
                       cases[i].name, cases[i].valid ? "" : "in");
}

/* A layer as a generation record has it, its fields from an extension-release text. */
static Layer layer(const char *name, const char *fingerprint, const char *release) {
        _cleanup_strv_free_ char **pairs = NULL;
        Layer l = { .name = strdup(name), .extension = strdup(name), .fingerprint = strdup(fingerprint) };

        if (env_file_parse(release, &pairs, NULL, NULL) >= 0)
                (void) layer_set_manager_fields(&l, pairs);
        return l;
}

static void generation_with(Generation *g, Layer *layers, size_t n) {
        *g = (Generation) { .merged = true, .layers = calloc(n, sizeof(Layer)), .n_layers = n };
        for (size_t i = 0; i < n; i++)
                g->layers[i] = layers[i];
}

static char *joined(char * const *l) {
        return strv_join(l, " ") ?: strdup("");
}

static void expect_request(const ManagerRequest *m, bool reload, const char *asked, const char *restart,
                           const char *reload_or_restart, const char *what) {
        _cleanup_free_ char *a = joined(m->asked_by), *r = joined(m->restart), *o = joined(m->reload_or_restart);

        tap_ok(m->reload == reload, "%s: daemon-reload %s", what, reload ? "asked" : "not asked");
        tap_streq(a, asked, "%s: asked by '%s'", what, asked);
        tap_streq(r, restart, "%s: restart '%s'", what, restart);
        tap_streq(o, reload_or_restart, "%s: reload-or-restart '%s'", what, reload_or_restart);
}

static void test_release_fields(void) {
        Layer l = layer("app", "f1",
                        "ID=_any\nEXTENSION_RELOAD_MANAGER=yes\n"
                        "EXTENSION_RESTART_UNITS=b.service a.service bad/x a.service\n"
                        "EXTENSION_RELOAD_OR_RESTART_UNITS=c.socket foo@.service");
        _cleanup_free_ char *r = joined(l.restart_units), *o = joined(l.reload_or_restart_units);

        tap_ok(l.reload_manager, "EXTENSION_RELOAD_MANAGER=yes is a reload");
        tap_streq(r, "a.service b.service", "restart units: valid ones, unique, sorted");
        tap_streq(o, "c.socket", "reload-or-restart units: the template left out");
        layer_done(&l);

        l = layer("x", "f", "EXTENSION_RELOAD_MANAGER=maybe");
        tap_ok(!l.reload_manager, "EXTENSION_RELOAD_MANAGER=maybe is no reload");
        layer_done(&l);
        l = layer("x", "f", "EXTENSION_RELOAD_MANAGER=0\nEXTENSION_RESTART_UNITS=");
        tap_ok(!l.reload_manager && !l.restart_units, "EXTENSION_RELOAD_MANAGER=0 and an empty list ask nothing");
        layer_done(&l);
}

static void test_swaps(void) {
        Generation old, new, none = {};
        ManagerRequest m = {};
        char *taken[] = { (char *) "plain", (char *) "app", NULL };

        /* old: app (restarts a), plain (nothing), gone (restarts g); new: app changed, plain same, extra new. */
        generation_with(&old, (Layer[]) {
                layer("app", "f1", "EXTENSION_RESTART_UNITS=a.service"),
                layer("gone", "g1", "EXTENSION_RESTART_UNITS=g.service\nEXTENSION_RELOAD_OR_RESTART_UNITS=a.service"),
                layer("plain", "p1", "ID=_any"),
                layer("same", "s1", "EXTENSION_RELOAD_MANAGER=1\nEXTENSION_RESTART_UNITS=s.service"),
        }, 4);
        generation_with(&new, (Layer[]) {
                layer("app", "f2", "EXTENSION_RESTART_UNITS=a.service\nEXTENSION_RELOAD_OR_RESTART_UNITS=r.service"),
                layer("extra", "e1", "EXTENSION_RELOAD_MANAGER=1"),
                layer("plain", "p1", "ID=_any"),
                layer("same", "s1", "EXTENSION_RELOAD_MANAGER=1\nEXTENSION_RESTART_UNITS=s.service"),
        }, 4);

        tap_ok(manager_request_add_swap(&m, &old, &new, NULL) >= 0, "a refresh's request");
        expect_request(&m, true, "app extra gone", "a.service g.service", "r.service",
                       "changed app, new extra, gone gone, same same (a.service: restart wins)");
        manager_request_done(&m);

        tap_ok(manager_request_add_swap(&m, &new, &new, NULL) >= 0, "nothing changed");
        expect_request(&m, false, "", "", "", "an unchanged generation");
        manager_request_done(&m);

        tap_ok(manager_request_add_swap(&m, &none, &new, NULL) >= 0, "a first merge");
        expect_request(&m, true, "app extra same", "a.service s.service", "r.service", "a first merge");
        manager_request_done(&m);

        tap_ok(manager_request_add_swap(&m, &none, &new, taken) >= 0, "taking systemd-sysext's overlay over");
        expect_request(&m, true, "extra same", "s.service", "", "a takeover: what systemd-sysext had is not new");
        manager_request_done(&m);

        tap_ok(manager_request_add_all(&m, &old) >= 0, "an unmerge");
        expect_request(&m, true, "app gone same", "a.service g.service s.service", "", "an unmerge");
        manager_request_done(&m);

        generation_done(&old);
        generation_done(&new);

        /* The same file, now mounted under dm-verity (sidecars added): the same content, no restart. */
        generation_with(&old, (Layer[]) {
                layer("v", "raw:fe00:12:4096:17.5", "EXTENSION_RESTART_UNITS=v.service"),
        }, 1);
        generation_with(&new, (Layer[]) {
                layer("v", "raw:fe00:12:4096:17.5:verity:abcd", "EXTENSION_RESTART_UNITS=v.service"),
        }, 1);
        tap_ok(manager_request_add_swap(&m, &old, &new, NULL) >= 0, "sidecars added to an image");
        expect_request(&m, false, "", "", "", "the same file under dm-verity restarts nothing");
        manager_request_done(&m);
        generation_done(&old);
        generation_done(&new);
        /* Another file is another image. */
        generation_with(&old, (Layer[]) { layer("v", "raw:fe00:12:4096:17.5", "EXTENSION_RESTART_UNITS=v.service") }, 1);
        generation_with(&new, (Layer[]) { layer("v", "raw:fe00:13:4096:18.5", "EXTENSION_RESTART_UNITS=v.service") }, 1);
        tap_ok(manager_request_add_swap(&m, &old, &new, NULL) >= 0, "a new image file");
        expect_request(&m, true, "v", "v.service", "", "a new file restarts its units");
        manager_request_done(&m);
        generation_done(&old);
        generation_done(&new);
}

int main(void) {
        test_hierarchy_paths();
        test_unit_names();
        test_release_fields();
        test_swaps();
        return tap_done();
}
