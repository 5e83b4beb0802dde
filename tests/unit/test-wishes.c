/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * What namespaces want (<run_dir>/namespaces/<id>.json, stale.h): a wish
 * applies only while its witness, a process recorded with its start time,
 * is still in a namespace of the recorded inode, since the kernel hands a
 * dead namespace's inode number to the next one. The matching against a
 * table of "live processes", both file forms, the /proc/PID/stat parser,
 * and the real check against our own process and a dead child.
 */

#include <inttypes.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mount-api.h"
#include "mountinfo.h"
#include "stale.h"
#include "tap.h"
#include "util.h"

/* ---- /proc/PID/stat field 22 */

static const struct {
        const char *stat;
        int r;
        uint64_t start_time;
} stat_cases[] = {
        { "1234 (sleep) S 1 1234 1234 0 -1 4194304 100 0 0 0 0 0 0 0 20 0 1 0 98765 8192 100 18446744073709551615\n",
          0, 98765 },
        /* The comm may hold spaces and parentheses: the last ')' ends it. */
        { "77 (a) (b c) 9 9 9) R 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 4242 0\n", 0, 4242 },
        { "77 (x) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 7", 0, 7 },
        { "77 (x) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0\n", -EBADMSG, 0 },       /* truncated */
        { "77 (x) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 -5 0\n", -EBADMSG, 0 },
        { "77 (x) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 12ab 0\n", -EBADMSG, 0 },
        { "77 (x) S 1 77 77 0 -1 0 0 0 0 0 0 0 0 0 20 0 1 0 99999999999999999999999 0\n", -EBADMSG, 0 },
        { "77 x S 1 77", -EBADMSG, 0 },
        { "", -EBADMSG, 0 },
};

static void test_stat_parse(void) {
        for (size_t i = 0; i < ELEMENTSOF(stat_cases); i++) {
                uint64_t t = 0;
                int r = proc_stat_start_time(stat_cases[i].stat, &t);

                tap_ok(r == stat_cases[i].r && (r < 0 || t == stat_cases[i].start_time),
                       "stat case %zu: r=%d start_time=%" PRIu64, i, r, t);
        }
}

/* ---- matching, against a table of live processes */

typedef struct Live {
        pid_t pid;
        uint64_t start_time, ns_ino;
} Live;

typedef struct Machine {
        const Live *live;
        size_t n;
        unsigned calls;
} Machine;

static bool table_check(const NsWant *w, void *userdata) {
        Machine *m = userdata;

        m->calls++;
        for (size_t i = 0; i < m->n; i++)
                if (m->live[i].pid == w->pid)
                        return m->live[i].start_time == w->start_time && m->live[i].ns_ino == w->ns_ino;
        return false;
}

static void test_confirm(void) {
        static const Live live[] = {
                { 100, 5000, 4026532001 },   /* the witness of 4026532001, as recorded */
                { 101, 7777, 4026532002 },   /* pid 101 was reused: another start time */
                { 102, 6000, 4026532999 },   /* pid 102 moved to another namespace (setns) */
        };
        NsWant w[] = {
                { 4026532001, MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID, 100, 5000 },
                { 4026532002, MOUNT_ATTR_NOSUID, 101, 6000 },
                { 4026532003, MOUNT_ATTR_NOEXEC, 102, 6000 },
                { 4026532004, MOUNT_ATTR_NOSUID, 103, 6100 },   /* pid 103 is gone */
                { 4026532005, MOUNT_ATTR_NODEV, 0, 0 },         /* no witness (older form) */
        };
        Machine m = { live, ELEMENTSOF(live), 0 };
        size_t n = ns_wants_confirm(w, ELEMENTSOF(w), table_check, &m);

        tap_ok(n == 1 && w[0].ns_ino == 4026532001 && w[0].pid == 100, "only the confirmed witness is kept (%zu)", n);
        tap_ok(m.calls == 4, "entries without a witness are not even checked (%u calls)", m.calls);
        tap_ok(ns_wanted(w, n, 4026532001) == (MOUNT_ATTR_RDONLY | MOUNT_ATTR_NOSUID), "its wish applies");
        /* The reuse case: the namespace now holding 4026532002 is not the one that wanted nosuid. */
        tap_ok(ns_wanted(w, n, 4026532002) == 0, "a reused pid: the inode's wish does not apply");
        tap_ok(ns_wanted(w, n, 4026532003) == 0, "a witness in another namespace: does not apply");
        tap_ok(ns_wanted(w, n, 4026532004) == 0, "a dead witness: does not apply");
        tap_ok(ns_wanted(w, n, 4026532005) == 0, "no witness: does not apply");
        tap_ok(ns_wants_confirm(w, 0, table_check, &m) == 0, "nothing recorded: nothing kept");
}

/* ---- the file, both forms */

static void test_json(void) {
        static const char *text =
                "{ \"4026532001\": { \"attr\": 3, \"pid\": 100, \"start_time\": 5000 },"
                "  \"4026532002\": 2,"                                  /* the older form */
                "  \"4026532003\": { \"attr\": 255, \"pid\": 101 },"   /* attr masked */
                "  \"4026532004\": { \"attr\": 2, \"pid\": -4, \"start_time\": 1 },"
                "  \"4026532005\": { \"attr\": 2, \"pid\": 99999999999, \"start_time\": 1 },"
                "  \"not-an-inode\": { \"attr\": 2, \"pid\": 1, \"start_time\": 1 },"
                "  \"12x\": 2, \"0\": 2 }";
        _cleanup_free_ NsWant *w = NULL, *back = NULL;
        json_object *o = json_tokener_parse(text), *saved;
        size_t n = 0, n_back = 0;
        int r;

        r = ns_wants_from_json(o, &w, &n);
        json_object_put(o);
        tap_ok(r == 0 && n == 5, "both forms read, bad keys skipped (%d, %zu)", r, n);
        if (n != 5)
                return;
        tap_ok(w[0].ns_ino == 4026532001 && w[0].attr == 3 && w[0].pid == 100 && w[0].start_time == 5000,
               "the witnessed form");
        tap_ok(w[1].ns_ino == 4026532002 && w[1].attr == MOUNT_ATTR_NOSUID && w[1].pid == 0,
               "the older form: the flags, no witness");
        tap_ok(w[2].attr == TUCK_ATTR_MASK && w[2].pid == 101 && w[2].start_time == 0, "flags masked");
        tap_ok(w[3].pid == 0 && w[4].pid == 0, "impossible pids: no witness");

        o = json_tokener_parse("[1, 2]");
        tap_ok(ns_wants_from_json(o, &back, &n_back) == -EBADMSG, "not an object: -EBADMSG");
        json_object_put(o);

        saved = ns_wants_to_json(w, n);
        r = saved ? ns_wants_from_json(saved, &back, &n_back) : -ENOMEM;
        json_object_put(saved);
        tap_ok(r == 0 && n_back == 2, "written: only entries with a witness (%zu)", n_back);
        tap_ok(n_back == 2 && back[0].ns_ino == 4026532001 && back[0].attr == 3 && back[0].pid == 100 &&
               back[0].start_time == 5000 && back[1].ns_ino == 4026532003 && back[1].pid == 101,
               "and read back as written");
}

/* ---- the real witness check, through /proc: ourselves and a dead child */

static void test_witness_proc(void) {
        NsWant me = { .pid = getpid() };
        struct stat st;
        pid_t child;
        int r;

        r = ns_witness_read(me.pid, &me.ns_ino, &me.start_time);
        tap_ok(r == 0 && stat("/proc/self/ns/mnt", &st) == 0 && st.st_ino == me.ns_ino,
               "our own namespace and start time read (%d, %" PRIu64 ")", r, me.start_time);
        tap_ok(ns_witness_check(&me, NULL), "we witness our own namespace");
        me.start_time++;
        tap_ok(!ns_witness_check(&me, NULL), "not with another start time");
        me.start_time--;
        me.ns_ino++;
        tap_ok(!ns_witness_check(&me, NULL), "not for another namespace inode");
        me.ns_ino--;

        child = fork();
        if (child == 0)
                _exit(0);
        (void) waitpid(child, NULL, 0);
        NsWant dead = { me.ns_ino, MOUNT_ATTR_NOSUID, child, me.start_time };
        tap_ok(ns_witness_read(child, &dead.ns_ino, &dead.start_time) == -ESRCH, "a reaped child: -ESRCH");
        tap_ok(!ns_witness_check(&dead, NULL), "a dead witness confirms nothing");
}

int main(void) {
        test_stat_parse();
        test_confirm();
        test_json();
        test_witness_proc();
        return tap_done();
}
