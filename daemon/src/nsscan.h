/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The namespace scan: what every mount namespace on the machine sees at a
 * hierarchy, without entering any and without waiting on anyone.
 *
 * Namespaces are found through /proc/PID/ns/mnt, deduplicated by inode
 * before anything else is read (its link text "mnt:[INODE]", the cheapest
 * thing /proc has). For each new one a pidfd is taken first: everything
 * read afterwards goes through a /proc/PID directory fd proven to be that
 * process (the pidfd still alive once it is open), and whoever acts on the
 * view later (a heal, a restart) goes through the same pidfd, so a pid
 * reused meanwhile is never acted on (namespace_view_open_proc()).
 *
 * Then the cheap check: the hierarchy is opened O_PATH below
 * /proc/PID/root (openat2 RESOLVE_IN_ROOT, so a symlink inside a container
 * resolves inside it) and statx()ed with AT_STATX_DONT_SYNC: the device and
 * mount ID of the top mount there. No file is read, and nothing is asked
 * of a file system that may not answer: a lookup the dentry cache cannot
 * answer (RESOLVE_CACHED fails with EAGAIN) or any lookup where openat2()
 * is refused (tuckd.service's seccomp) goes to a forked worker with a
 * deadline (the scan budget below), which is killed when a FUSE server or a
 * dead NFS server does not answer; the namespace is then reported
 * unreadable and, while that worker is stuck, not looked at again.
 *
 * The device decides most views alone. The host's live top and the base are
 * held by tuck, so their device numbers are theirs: a view on them is read
 * no further (its flags from statvfs(), which goes to our own overlay). An
 * earlier overlay's number is not proof: once it is gone the kernel hands
 * its anonymous device number to the next tmpfs, overlay or FUSE mount
 * anywhere. Only for those is the namespace's mount table read (bounded:
 * mountinfo of a namespace with 20,000 stacked binds takes seconds, the
 * k-th one's path walks k mounts in the kernel), and the view counts as one
 * of ours only if that mount is an overlay by tuck's or systemd-sysext's
 * name. A view on any other device is not ours and no flags are read from
 * it (statvfs() of a FUSE mount asks its server).
 *
 * Who a namespace is comes from systemd (sd_pid_get_unit(),
 * sd_pid_get_user_unit(), sd_pid_get_owner_uid(), sd_pid_get_machine_name()),
 * read by pid and confirmed by the pidfd afterwards; never from parsing
 * cgroup paths.
 *
 * Two users: tuckctl status classifies every view against the generation
 * record (NS_VIEW_*), and the refresh's stale-namespace step (stale.c,
 * heal.c) takes the views that still show one of our overlays.
 *
 * The root prefix (tests; "/" on a real host): a namespace that shares our
 * root names the hierarchy as we do, PREFIX/usr; a container with its own
 * root names it as configured, /usr, inside its root. With a prefix, a scan
 * keeps the namespaces of that test host only: those that see the prefix
 * directory itself, and containers started in our session (the test's own;
 * other tests on the same machine run in sessions of their own).
 */

#include <libmount/libmount.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "state.h"

/*
 * What one run may spend on namespaces (tuck.conf [Scan], tuckd(8) "SCAN
 * BUDGET"). One per refresh (every scan and every heal of it) or per status.
 */
typedef struct ScanBudget {
        uint64_t namespace_usec;     /* one namespace: its walk, its mount table */
        uint64_t refresh_usec;       /* all of them, from the first scan of the run on */
        unsigned max_mounts;         /* a mount table longer than this is not read */
        uint64_t heal_usec;          /* one heal (heal.c): entering a namespace, carrying its
                                      * mounts, the swap there; started only while the run's
                                      * time is not used up */
        uint64_t deadline;           /* CLOCK_MONOTONIC; 0: set by the first scan */
        const char *run_dir;         /* <root>/run/tuck: stuck scans are remembered there (or NULL) */
        void (*keepalive)(void *userdata);   /* called while waiting (tuckd: the watchdog) */
        void *userdata;
} ScanBudget;

#define SCAN_NAMESPACE_USEC_DEFAULT (500 * UINT64_C(1000))
#define SCAN_REFRESH_USEC_DEFAULT (10 * UINT64_C(1000000))
#define SCAN_MAX_MOUNTS_DEFAULT 10000U
#define SCAN_HEAL_USEC_DEFAULT (5 * UINT64_C(1000000))

#define SCAN_BUDGET_DEFAULT                                           \
        (ScanBudget) {                                                \
                .namespace_usec = SCAN_NAMESPACE_USEC_DEFAULT,        \
                .refresh_usec = SCAN_REFRESH_USEC_DEFAULT,            \
                .max_mounts = SCAN_MAX_MOUNTS_DEFAULT,                \
                .heal_usec = SCAN_HEAL_USEC_DEFAULT,                  \
        }

/*
 * Scans that got stuck: <run_dir>/namespaces/stuck.json
 *
 *   { "<mnt ns inode>": { "pid": WITNESS, "start_time": TICKS, "worker": PID,
 *                          "worker_start_time": TICKS, "since": USEC }, ... }
 *   or, for a mount table too long or too slow to read:
 *   { "<mnt ns inode>": { "pid": WITNESS, "start_time": TICKS, "table": -ERRNO, "limit": N,
 *                          "since": USEC } }
 *   (N: the MaxMounts= or the NamespaceBudgetSec= in µs it was over; a larger one now reads it again)
 *
 * A worker a namespace left waiting (killed, but in a FUSE request its server
 * read) stays until that file system answers or goes away. While it is there
 * the namespace is reported unreadable without being looked at again, so
 * neither tuckd's refreshes nor a series of tuckctl runs pile up one stuck
 * process per run. Each entry names a witness in the namespace, as the
 * wishes do (stale.h), and the worker by its start time. A mount table that
 * was over the budget is not read again for STUCK_TABLE_USEC either: a few
 * namespaces of 20,000 stacked binds would otherwise cost every refresh and
 * every status their full budget. */

typedef enum StuckKind {
        STUCK_WORKER,           /* a worker never came back from its walk: skip the walk */
        STUCK_TABLE,            /* its mount table was too long or too slow: skip reading it */
} StuckKind;

/* A table found too long is not read again for this long (it may shrink, but rarely will). */
#define STUCK_TABLE_USEC (300 * UINT64_C(1000000))

typedef struct Stuck {
        uint64_t ns_ino;
        StuckKind kind;
        int error;              /* STUCK_TABLE: -E2BIG or -ETIMEDOUT */
        uint64_t limit;         /* ... past which: MaxMounts= or NamespaceBudgetSec= then */
        pid_t pid, worker;
        uint64_t start_time, worker_start_time, since;
} Stuck;

/*
 * The entries of b->run_dir's stuck.json that still hold: the worker still
 * stuck, the witness still standing, a table entry still young. A file that
 * does not parse is -EBADMSG; none is an empty list.
 */
int ns_stuck_load(const ScanBudget *b, Stuck **ret, size_t *ret_n);
/* Writes them (none: the file goes). */
int ns_stuck_save(const ScanBudget *b, const Stuck *l, size_t n);

/* Starts the run's clock (once). */
void scan_budget_start(ScanBudget *b);
/* When one more namespace started now must be done: the earlier of its own budget and the run's. */
uint64_t scan_budget_namespace_deadline(ScanBudget *b);
/* Time left for the run (0: used up). */
uint64_t scan_budget_left(ScanBudget *b);
void scan_budget_keepalive(const ScanBudget *b);

typedef enum NsViewState {
        NS_VIEW_CURRENT,     /* the current generation's overlay */
        NS_VIEW_STALE,       /* an older generation of ours */
        NS_VIEW_BASE,        /* the bare base (unmerged view) */
        NS_VIEW_FOREIGN,     /* something else: a container's own tree, systemd-sysext, ... */
        NS_VIEW_UNREADABLE,  /* its view could not be read (error): it may be one of ours */
        _NS_VIEW_STATE_MAX,
} NsViewState;

typedef struct NamespaceView {
        uint64_t ns_ino;         /* inode of /proc/PID/ns/mnt: one view per namespace */
        pid_t pid;               /* the first process found in it */
        int pidfd;               /* of @pid, taken before anything was read; -EBADF: none */
        unsigned n_processes;
        char comm[16];           /* as the process set it: escape before printing */
        char *unit;              /* its system unit (sd_pid_get_unit(); a user's process is in
                                  * user@UID.service), or NULL */
        char *user_unit;         /* its unit in a user's manager (sd_pid_get_user_unit()), or NULL */
        uid_t owner_uid;         /* the user owning it (sd_pid_get_owner_uid()), or UID_INVALID */
        char *machine;           /* its container as systemd-machined knows it, or NULL */
        uint64_t userns_ino;     /* the user namespace owning the mount namespace (0: unknown) */
        bool userns_ours;        /* ... is ours (the initial one, on a host) */
        bool own_root;           /* its root is not ours (a container) */
        char *path;              /* the hierarchy as this namespace names it, below its root */
        dev_t dev;               /* st_dev at the hierarchy: identifies the overlay */
        uint64_t mnt_id;         /* its top mount at the hierarchy */
        uint64_t attr;           /* MOUNT_ATTR_* of that mount (TUCK_ATTR_MASK), if attr_known */
        bool attr_known;         /* flags are read only where that cannot block (see above) */
        char *source;            /* its mount source if its mount table was read and it is an
                                  * overlay of tuck's or systemd-sysext's ("tuck-sysext", ...) */
        int error;               /* <0: the view could not be read, why (NS_VIEW_UNREADABLE) */
        char *error_text;        /* ... in words, where errno says too little (budgets) */
        NsViewState state;       /* set by namespace_view_classify() */
        uint64_t generation;     /* for STALE/CURRENT: which generation it sees */
} NamespaceView;

#define UID_INVALID ((uid_t) -1)
#define NAMESPACE_VIEW_NULL ((NamespaceView) { .pidfd = -EBADF, .owner_uid = UID_INVALID })

const char *ns_view_state_to_string(NsViewState s);

void namespace_view_done(NamespaceView *v);
void namespace_views_free(NamespaceView *v, size_t n);

/* Why a view is unreadable, in words (error_text, or strerror). */
const char *namespace_view_error(const NamespaceView *v);

/*
 * Who it is, escaped, for one line of text: "container web-1", "unit
 * nginx.service", "unit foo.service of user 1000", "process COMM".
 * NULL on -ENOMEM.
 */
char *namespace_view_who(const NamespaceView *v);

/*
 * Who it is (comm, unit, user unit and owner, machine, owning user
 * namespace), from systemd and /proc by pid, believed only if the view's
 * pidfd is still alive afterwards: -ESRCH if it is gone (and nothing is
 * set). A scan does this only with NSSCAN_IDENTIFY: most views need no name.
 */
int namespace_view_identify(NamespaceView *v);

/*
 * An O_DIRECTORY fd of /proc/PID for the view's process, and only for it:
 * opened, then the view's pidfd must still be alive (-ESRCH otherwise, and
 * without a pidfd). Lookups through it fail once that process is gone,
 * even if its pid is given to another, so one check covers every later
 * openat() of "ns/mnt", "root", "mountinfo", ... (heal.c).
 */
int namespace_view_open_proc(const NamespaceView *v);

/*
 * The view's mount table (/proc/PID/mountinfo through the proven /proc fd),
 * within @b: -E2BIG past b->max_mounts, -ETIMEDOUT past the namespace's
 * time (read in small pieces, the deadline checked between them).
 */
int namespace_view_mount_table(const NamespaceView *v, ScanBudget *b, struct libmnt_table **ret);

typedef enum NsScanFlags {
        NSSCAN_ALL = 1 << 0,         /* every view (status), not only those on our overlays */
        NSSCAN_SKIP_SELF = 1 << 1,   /* not our own namespace (the swap itself took care of it) */
        NSSCAN_ANY_CANDIDATE = 1 << 2, /* a view on any device but @live may be ours (taking
                                        * systemd-sysext's overlay over): its mount table says */
        NSSCAN_IDENTIFY = 1 << 3,    /* namespace_view_identify() every view kept */
        NSSCAN_SKIP_FOLLOWING = 1 << 4, /* drop views on @live with no flag beyond @host_attr that
                                         * are not in @watch: they follow, and need nothing */
} NsScanFlags;

/*
 * The namespaces one scan found following (NSSCAN_SKIP_FOLLOWING), for the
 * next scan of the same hierarchy in the same run: a refresh scans before
 * its swap (to pin what the swap would loosen) and again after it (to find
 * who did not follow), and most namespaces are the same both times. The
 * scan after takes over each one's pidfd and root, and with the root what
 * was learnt of it (a container's own or ours, and under a root prefix
 * whether it sees the prefix), when the same process is still the first
 * found in that namespace, its root is still the same mount and directory
 * (a statx() of /proc/PID/root: a setns(), chroot() or pivot_root() since
 * makes it another), and its pidfd says it is still alive afterwards. It
 * then walks the hierarchy again from that root: whether the namespace
 * follows is decided afresh. It saves a pidfd_open(), the open and close of
 * /proc/PID/root, and the walk to the root prefix. Two descriptors each, in
 * at most a quarter of what RLIMIT_NOFILE leaves above 1024.
 */
typedef struct NsFollower {
        uint64_t ns_ino;
        pid_t pid;
        int pidfd;                   /* taken before root_fd was opened */
        int root_fd;                 /* /proc/PID/root, O_PATH */
        uint64_t root_mnt_id, root_ino;   /* ... which mount and directory it is */
        dev_t root_dev;
        bool own_root, want_sees_root, sees_root;
} NsFollower;

typedef struct NsFollowers {
        NsFollower *list;
        size_t n, allocated;
} NsFollowers;

void ns_followers_done(NsFollowers *f);

/* What to look for at one hierarchy. */
typedef struct NsScanSpec {
        const char *root;            /* tuck's root prefix ("/" on a host) */
        const char *path;            /* the hierarchy, root prefix applied */
        dev_t live;                  /* the host's top there: alive, its number is its own; 0: none */
        dev_t base;                  /* the base tuck holds there (status), 0: none */
        const dev_t *ours;           /* earlier overlays of ours: confirmed by the mount table */
        size_t n_ours;
        uint64_t host_attr;          /* NSSCAN_SKIP_FOLLOWING: the host's flags at the hierarchy */
        const uint64_t *watch;       /* ... and the namespaces (by inode) that want more than that */
        size_t n_watch;
        NsScanFlags flags;
        ScanBudget *budget;          /* NULL: the defaults, for this scan alone */
        NsFollowers *followers_out;  /* the namespaces found following are kept here (or NULL) */
        NsFollowers *followers_in;   /* ... and taken from here by the next scan (or NULL) */
} NsScanSpec;

/*
 * One view per mount namespace of the root (see above) at @spec->path.
 * Without NSSCAN_ALL only those on @live, and those on @ours (or, with
 * NSSCAN_ANY_CANDIDATE, on anything) whose mount is an overlay of tuck's or
 * systemd-sysext's (v->source says whose). Processes that vanish while
 * scanning are skipped, and so are namespaces without the hierarchy. A
 * namespace whose view cannot be read for another reason (permissions, a
 * sandbox refusing a system call, a budget) is kept with .error set: it
 * may well be one of ours, and whoever scans must say so rather than take
 * it for absent.
 */
int namespaces_scan(const NsScanSpec *spec, NamespaceView **ret, size_t *ret_n);

/*
 * @old's namespace read again (its process, by its pidfd: -ESRCH once it is
 * gone), as namespaces_scan() would read it, whatever it shows.
 */
int namespace_view_reread(const NamespaceView *old, const NsScanSpec *spec, NamespaceView *ret);

/* A process's view of @path by pid (tests, tuckd-heal-tool): -ESRCH and friends when it is gone. */
int namespace_view_read(pid_t pid, const char *root, const char *path, NamespaceView *ret);

/* Is @d one of the @n device numbers in @devs? */
bool dev_in(dev_t d, const dev_t *devs, size_t n);

/* What a view shows, against generation record @g (NULL: never merged). */
void namespace_view_classify(NamespaceView *v, const Generation *g);

/* Every namespace of the root at hierarchy @path, classified against @g (tuckctl status). */
int nsscan_hierarchy(const char *root, const char *path, const Generation *g, ScanBudget *budget,
                     NamespaceView **ret, size_t *ret_n);
