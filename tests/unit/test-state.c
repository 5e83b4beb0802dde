/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * Generation records: the history of overlays a namespace may still show
 * (newest first, capped, the oldest dropped), and the JSON round trip.
 * State files of the wrong shape (versions.json, generation records): an
 * error that says which member is wrong, never an abort, never a silently
 * dropped floor.
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

        char *error = NULL;

        tap_ok(o && generation_from_json(o, &back, &error) == 0, "generation to JSON and back");
        tap_ok(streq_ptr(back.hierarchy, "/usr") && back.number == 7 && back.overlay_dev == g.overlay_dev &&
               back.overlay_mnt_id == 123 && back.base_dev == g.base_dev && back.attr == 5,
               "the record survives");
        tap_ok(back.n_layers == 1 && streq_ptr(back.layers[0].version, "1.2") && back.n_history == 1 &&
               back.history[0].dev == makedev(0, 47), "layers and history survive");
        json_object_put(o);
        generation_done(&back);
        free(error);
}

typedef struct Bad {
        const char *json;
        const char *error;           /* a part of the message */
} Bad;

static void test_versions_bad(void) {
        static const Bad bad[] = {
                { "{\"sysext\":\"x\"}", "sysext: a string, expected an object" },
                { "{\"sysext\":{\"foo\":2}}", "sysext.foo: a number, expected a version string" },
                { "{\"sysext\":{\"foo\":[\"1\"]}}", "sysext.foo: an array" },
                { "{\"format\":2,\"sysext\":{\"foo\":\"1.2\"}}", "sysext.foo: a string, expected an object" },
                { "{\"format\":2,\"sysext\":{\"foo\":{\"floor\":5}}}", "sysext.foo.floor: a number, expected a string" },
                { "{\"format\":2,\"sysext\":{\"foo\":{\"protected_in\":\"/usr\"}}}",
                  "sysext.foo.protected_in: a string, expected an array" },
                { "{\"format\":2,\"sysext\":{\"foo\":{\"protected_in\":[1]}}}", "sysext.foo.protected_in[0]: a number" },
                { "{\"format\":2,\"sysext\":{\"foo\":{\"decision\":{\"kind\":\"maybe\"}}}}",
                  "sysext.foo.decision.kind: 'maybe' is not one of" },
                { "{\"format\":2,\"sysext\":{\"foo\":{\"decision\":{\"when_usec\":-1}}}}",
                  "sysext.foo.decision.when_usec: negative" },
                { "{\"format\":\"2\"}", "format: a string, expected a number" },
                { "{\"format\":3}", "format: 3 is not a format this tuck knows" },
                { "{\"sysext\":{\"../x\":\"1\"}}", "sysext: '../x' is not an extension name" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_object *o = json_tokener_parse(bad[i].json);
                Versions v = {};
                char *error = NULL;
                int r = versions_from_json(o, &v, &error);

                if (!tap_ok(r == -EBADMSG && error && strstr(error, bad[i].error), "versions.json %s: refused", bad[i].json))
                        tap_diag("got %d '%s', want -EBADMSG '%s'", r, tap_str(error), bad[i].error);
                versions_done(&v);
                free(error);
                json_object_put(o);
        }
}

static void test_versions_round_trip(void) {
        Versions v = {}, back = {};
        json_object *o, *legacy = json_tokener_parse("{\"sysext\":{\"foo\":\"1.2\"},\"confext\":{}}");
        char *error = NULL;

        (void) versions_activate(&v, IMAGE_SYSEXT, "foo", "/usr", "2.0", 10, "tuckctl merge");
        (void) versions_allow(&v, IMAGE_SYSEXT, "foo", "1.0", 20, "tuckctl refresh --allow-downgrade=foo");
        (void) versions_activate(&v, IMAGE_CONFEXT, "cfg", "/etc", NULL, 10, "tuckctl merge");
        o = versions_to_json(&v);
        tap_ok(o && versions_from_json(o, &back, &error) == 0 && versions_equal(&v, &back),
               "versions to JSON and back: floors, decisions, protection");
        json_object_put(o);
        versions_done(&back);
        tap_ok(versions_from_json(legacy, &back, &error) == 0 && back.legacy &&
               streq_ptr(versions_floor(&back, IMAGE_SYSEXT, "foo"), "1.2"),
               "a format-1 file reads as floors (no decisions, no protection)");
        versions_done(&back);
        json_object_put(legacy);
        versions_done(&v);
        free(error);
}

static void test_generation_bad(void) {
        static const Bad bad[] = {
                { "{\"class\":\"sysext\"}", "hierarchy: missing" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"nope\"}", "class: missing, or not" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"sysext\",\"generation\":\"7\"}",
                  "generation: a string, expected a number" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"sysext\",\"layers\":{}}", "layers: an object, expected an array" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"sysext\",\"layers\":[3]}", "layers[0]: a number" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"sysext\",\"layers\":[{\"name\":\"foo\"}]}",
                  "layers[0].extension: missing" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"sysext\",\"overlay_dev\":\"zero\"}",
                  "overlay_dev: 'zero' is not a device number" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"sysext\",\"merged\":1}", "merged: a number, expected a boolean" },
                { "{\"hierarchy\":\"/usr\",\"class\":\"sysext\",\"held_back\":[{\"extension\":\"foo\"}]}",
                  "held_back[0].reason: not known" },
        };

        for (size_t i = 0; i < ELEMENTSOF(bad); i++) {
                json_object *o = json_tokener_parse(bad[i].json);
                Generation g = {};
                char *error = NULL;
                int r = generation_from_json(o, &g, &error);

                if (!tap_ok(r == -EBADMSG && error && strstr(error, bad[i].error), "generation %s: refused", bad[i].json))
                        tap_diag("got %d '%s', want -EBADMSG '%s'", r, tap_str(error), bad[i].error);
                generation_done(&g);
                free(error);
                json_object_put(o);
        }
}

/*
 * versions.json: the high-water marks load, and a file whose shape is wrong
 * is refused (found by fuzz-versions: {"sysext": "2"} loaded, and the next
 * versions_set() aborted in json-c).
 */
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
        test_versions_bad();
        test_versions_round_trip();
        test_generation_bad();
        test_dead_temporaries();
        return tap_done();
}
