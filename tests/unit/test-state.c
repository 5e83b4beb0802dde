/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Generation records: the history of overlays a namespace may still show
 * (newest first, capped, the oldest dropped), and the JSON round trip; and
 * the shape of versions.json.
 */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "state.h"
#include "tap.h"
#include "util.h"

static void test_history_after(bool merged, size_t n_old) {
        PastOverlay old_history[GENERATION_HISTORY_MAX];
        Generation g = {
                .merged = merged, .number = 100, .overlay_dev = makedev(0, 100),
                .history = old_history, .n_history = n_old,
        };
        PastOverlay *h = NULL;
        size_t n = 0, want = merged + n_old;
        int r;

        for (size_t i = 0; i < n_old; i++)
                old_history[i] = (PastOverlay) { .number = 99 - i, .dev = makedev(0, 99 - i) };
        if (want > GENERATION_HISTORY_MAX)
                want = GENERATION_HISTORY_MAX;

        r = generation_history_after(&g, &h, &n);
        tap_ok(r == 0 && n == want,
               "%s, %zu old: %zu after (want %zu)", merged ? "merged" : "unmerged", n_old, n, want);
        if (n > 0)
                tap_ok(h[0].number == (merged ? 100 : 99) && h[n - 1].number == (merged ? 101 : 100) - n,
                       "newest first, oldest dropped: %" PRIu64 " .. %" PRIu64, h[0].number, h[n - 1].number);
        free(h);
}

static void test_json_round_trip(void) {
        Layer layers[] = { { "foo", "foo", "1.2", "/run/extensions/foo.raw", "raw:1:2:3:4.5" } };
        PastOverlay history[] = { { 6, makedev(0, 47) } };
        Generation g = {
                .hierarchy = (char *) "/usr", .class = IMAGE_SYSEXT, .merged = true, .number = 7,
                .overlay_dev = makedev(0, 48), .overlay_mnt_id = 123, .base_dev = makedev(0, 40),
                .attr = 5, .layers = layers, .n_layers = 1, .history = history, .n_history = 1,
        }, back = {};
        json_object *o = generation_to_json(&g);

        tap_ok(o && generation_from_json(o, &back) == 0, "generation to JSON and back");
        tap_ok(streq_ptr(back.hierarchy, "/usr") && back.number == 7 && back.overlay_dev == g.overlay_dev &&
               back.overlay_mnt_id == 123 && back.base_dev == g.base_dev && back.attr == 5,
               "the record survives");
        tap_ok(back.n_layers == 1 && streq_ptr(back.layers[0].version, "1.2") && back.n_history == 1 &&
               back.history[0].dev == makedev(0, 47), "layers and history survive");
        json_object_put(o);
        generation_done(&back);
}

/*
 * versions.json: the high-water marks load, and a file whose shape is wrong
 * is refused (found by fuzz-versions: {"sysext": "2"} loaded, and the next
 * versions_set() aborted in json-c).
 */
static void test_versions_shape(void) {
        static const struct {
                const char *text;
                int want;
        } cases[] = {
                { "{ \"sysext\": { \"foo\": \"1.2\" }, \"confext\": {} }", 0 },
                { "{ \"somebody-else\": 1 }", 0 },
                { "{ \"sysext\": \"2\" }", -EBADMSG },
                { "{ \"confext\": [ \"c\" ] }", -EBADMSG },
                { "{ \"sysext\": { \"foo\": 5 } }", -EBADMSG },   /* read as no floor at all */
                { "[ ]", -EBADMSG },
        };
        char dir[] = "/tmp/tuck-test-state.XXXXXX";
        _cleanup_free_ char *path = NULL;

        if (!mkdtemp(dir) || !(path = path_join(dir, "versions.json"))) {
                tap_ok(false, "versions.json: a temporary directory");
                return;
        }
        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                json_object *v = NULL;
                int r;

                r = write_file_atomic(path, cases[i].text, 0644);
                if (r >= 0)
                        r = versions_load(dir, &v);
                if (r == 0)   /* what a refresh does with a loaded file next */
                        r = versions_set(v, IMAGE_SYSEXT, "foo", "9");
                if (!tap_ok(r == cases[i].want, "versions.json %s: %s", cases[i].text,
                            cases[i].want == 0 ? "loads and takes a mark" : "refused as corrupt"))
                        tap_diag("got %d", r);
                json_object_put(v);
        }
        (void) unlink(path);
        (void) rmdir(dir);
}

/*
 * A writer killed between writing its temporary and renaming it over the
 * state file leaves PATH.tmp.PID: the next write of that file removes it if
 * PID is gone, and leaves a live writer's alone (found by tuckd-crash.sh).
 */
static void test_dead_temporaries(void) {
        char dir[] = "/tmp/tuck-test-temps.XXXXXX";
        _cleanup_free_ char *path = NULL, *dead = NULL, *live = NULL, *other = NULL;
        pid_t child;
        struct stat st;

        child = fork();
        if (child == 0)
                _exit(0);
        (void) waitpid(child, NULL, 0);   /* a pid nobody has now */
        if (!mkdtemp(dir) || !(path = path_join(dir, "staging.json")) ||
            asprintf_safe(&dead, "%s.tmp.%d", path, (int) child) < 0 ||
            asprintf_safe(&live, "%s.tmp.%d", path, (int) getppid()) < 0 ||
            asprintf_safe(&other, "%s/versions.json.tmp.%d", dir, (int) child) < 0) {
                tap_ok(false, "temporaries: a temporary directory");
                return;
        }
        (void) write_file_atomic(dead, "{}", 0644);
        (void) write_file_atomic(live, "{}", 0644);
        (void) write_file_atomic(other, "{}", 0644);
        tap_ok(write_file_atomic(path, "{}\n", 0644) == 0, "temporaries: the state file is written");
        tap_ok(stat(dead, &st) < 0 && errno == ENOENT, "temporaries: a dead writer's is removed");
        tap_ok(stat(live, &st) == 0, "temporaries: a live writer's stays");
        tap_ok(stat(other, &st) == 0, "temporaries: another file's stays");
        (void) unlink(path), (void) unlink(live), (void) unlink(other), (void) unlink(dead);
        (void) rmdir(dir);
}

int main(void) {
        test_history_after(true, 0);
        test_history_after(true, 5);
        test_history_after(false, 5);
        /* A full history: the overlay being retired goes first, the oldest goes. */
        test_history_after(true, GENERATION_HISTORY_MAX);
        test_history_after(false, GENERATION_HISTORY_MAX);
        test_json_round_trip();
        test_versions_shape();
        test_dead_temporaries();
        return tap_done();
}
