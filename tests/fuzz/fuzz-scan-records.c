/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The scan's own records under /run/tuck/namespaces (nsscan.h, stale.h):
 *
 *   - stuck.json, the namespaces a scan gave up on (a worker stuck in a FUSE
 *     request, a mount table over the budget): ns_stuck_load() keeps only
 *     entries whose witness and worker still stand, and ns_stuck_save()
 *     must give back what was kept;
 *   - <hierarchy>.clean, the no-op skip: stale_scan_needed() may say "no
 *     scan needed" only for a record of exactly this generation, top, wishes
 *     file and set of devices.
 *
 * The input is stuck.json, then a line "#clean", then the .clean file. So
 * that the fuzzer can write entries that hold, these words are replaced
 * before the files are written: $PID (this process, as witness and as
 * worker), $START (its start time), $NS (its mount namespace's inode), $NOW
 * (CLOCK_REALTIME in µs) and, for the .clean file, $GEN $DEV $MNT $OURS
 * (what this harness passes as the generation, its overlay's device and
 * mount ID, and the checksum of the devices looked for).
 */

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include "fuzz.h"
#include "json-util.h"
#include "nsscan.h"
#include "stale.h"
#include "state.h"
#include "util.h"

#define GEN 7
#define MNT 1234

static uint64_t ours_checksum(const dev_t *ours, size_t n) {
        /* As stale.c's ours_stamp(): what a record written for these devices holds. */
        return fnv64(FNV64_INIT, ours, n * sizeof(dev_t));
}

/* data with every $WORD of words[] replaced by its value. */
static char *expand(const FuzzPart *p, char * const *words, char * const *values) {
        _cleanup_free_ char *in = fuzz_strndup(p->data, p->size);
        size_t cap = p->size * 4 + 64, n = 0;
        char *out = malloc(cap);

        fuzz_assert(out);
        for (const char *s = in; *s; ) {
                size_t i;

                for (i = 0; words[i]; i++)
                        if (startswith(s, words[i]))
                                break;
                if (words[i]) {
                        size_t k = strlen(values[i]);

                        if (n + k + 1 > cap) {
                                cap = 2 * (n + k + 1);
                                out = realloc(out, cap);
                                fuzz_assert(out);
                        }
                        memcpy(out + n, values[i], k);
                        n += k;
                        s += strlen(words[i]);
                        continue;
                }
                if (n + 2 > cap) {
                        cap *= 2;
                        out = realloc(out, cap);
                        fuzz_assert(out);
                }
                out[n++] = *s++;
        }
        out[n] = 0;
        return out;
}

static void check_stuck(const char *run_dir, uint64_t self_ns) {
        ScanBudget b = SCAN_BUDGET_DEFAULT;
        _cleanup_free_ Stuck *l = NULL, *back = NULL;
        size_t n = 0, m = 0;
        int r;

        b.run_dir = run_dir;
        r = ns_stuck_load(&b, &l, &n);
        if (r < 0) {
                fuzz_assert(r == -EBADMSG || r == -EFBIG || r == -ENOMEM);
                return;
        }
        for (size_t i = 0; i < n; i++) {
                fuzz_assert(l[i].ns_ino == self_ns && l[i].pid == getpid());
                if (l[i].kind == STUCK_WORKER)
                        fuzz_assert(l[i].worker == getpid());
                else
                        fuzz_assert(l[i].kind == STUCK_TABLE &&
                                    (l[i].error == -E2BIG || l[i].error == -ETIMEDOUT));
        }
        fuzz_assert(ns_stuck_save(&b, l, n) == 0);
        fuzz_assert(ns_stuck_load(&b, &back, &m) == 0);
        /* Keys that name one inode twice ("01", "1") are one entry once saved. */
        fuzz_assert(m <= n && (n == 0 || m > 0));
        for (size_t i = 0; i < m; i++) {
                bool found = false;

                for (size_t j = 0; j < n && !found; j++)
                        found = back[i].kind == l[j].kind && back[i].since == l[j].since &&
                                back[i].start_time == l[j].start_time &&
                                (back[i].kind == STUCK_WORKER ?
                                 back[i].worker_start_time == l[j].worker_start_time :
                                 back[i].error == l[j].error && back[i].limit == l[j].limit);
                fuzz_assert(found);
        }
}

/* A field the record holds as a JSON integer; one it lacks (or holds as anything else) is 0. */
static bool field_is(json_object *o, const char *key, uint64_t want) {
        json_object *v;

        if (!json_object_object_get_ex(o, key, &v) || !json_object_is_type(v, json_type_int))
                return want == 0;
        return (uint64_t) json_object_get_uint64(v) == want;
}

static void check_clean(const char *run_dir, const char *clean_path, dev_t dev) {
        const dev_t ours[] = { dev };
        Generation g = { .merged = true, .number = GEN, .overlay_dev = dev, .overlay_mnt_id = MNT };
        StaleHierarchy h = { .root = "/", .path = "/usr", .run_dir = run_dir, .id = "usr" };
        json_object *o = NULL;
        bool needed = stale_scan_needed(&h, &g, dev, MNT, ours, ELEMENTSOF(ours));

        /* A skip only on a record of exactly this state; no wishes file here: its stamp is 0. */
        if (!needed) {
                fuzz_assert(json_load(clean_path, &o) == 0);
                fuzz_assert(field_is(o, "generation", GEN) && field_is(o, "dev", (uint64_t) dev) &&
                            field_is(o, "mnt_id", MNT) && field_is(o, "wishes", 0) &&
                            field_is(o, "ours", ours_checksum(ours, ELEMENTSOF(ours))));
                json_object_put(o);
        }
        /* Whatever the record says: another top, or no merge, is scanned. */
        fuzz_assert(stale_scan_needed(&h, &g, dev, MNT + 1, ours, ELEMENTSOF(ours)));
        fuzz_assert(stale_scan_needed(&h, &g, makedev(0, 43), MNT, ours, ELEMENTSOF(ours)));
        g.merged = false;
        fuzz_assert(stale_scan_needed(&h, &g, dev, MNT, ours, ELEMENTSOF(ours)));
        fuzz_assert(stale_scan_needed(&h, NULL, dev, MNT, ours, ELEMENTSOF(ours)));
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        static char pid[24], start[24], ns[24], dev_s[24], mnt[24], gen[24], ours_s[24];
        static uint64_t self_ns;
        const dev_t dev = makedev(0, 42);
        char now[24];
        char *words[] = { "$PID", "$START", "$NS", "$NOW", "$GEN", "$DEV", "$MNT", "$OURS", NULL };
        char *values[] = { pid, start, ns, now, gen, dev_s, mnt, ours_s, NULL };
        _cleanup_free_ char *run_dir = NULL, *stuck = NULL, *clean = NULL, *clean_path = NULL;
        FuzzPart head, tail;

        fuzz_setup();
        if (!self_ns) {
                uint64_t t;

                fuzz_assert(ns_witness_read(getpid(), &self_ns, &t) == 0);
                snprintf(pid, sizeof(pid), "%d", (int) getpid());
                snprintf(start, sizeof(start), "%" PRIu64, t);
                snprintf(ns, sizeof(ns), "%" PRIu64, self_ns);
                snprintf(gen, sizeof(gen), "%d", GEN);
                snprintf(dev_s, sizeof(dev_s), "%" PRIu64, (uint64_t) dev);
                snprintf(mnt, sizeof(mnt), "%d", MNT);
                snprintf(ours_s, sizeof(ours_s), "%" PRIu64, ours_checksum(&dev, 1));
        }
        snprintf(now, sizeof(now), "%" PRIu64, now_usec(CLOCK_REALTIME));

        fuzz_split(data, size, "\n#clean\n", &head, &tail);
        stuck = expand(&head, words, values);
        clean = expand(&tail, words, values);
        run_dir = path_join(fuzz_dir(), "run/tuck");
        clean_path = path_join(fuzz_dir(), "run/tuck/namespaces/usr.clean");
        fuzz_assert(run_dir && clean_path);
        fuzz_write_file("run/tuck/namespaces/stuck.json", stuck, strlen(stuck));
        fuzz_write_file("run/tuck/namespaces/usr.clean", clean, strlen(clean));

        check_stuck(run_dir, self_ns);
        check_clean(run_dir, clean_path, dev);
        return 0;
}
