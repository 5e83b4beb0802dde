/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The plan: what merge/refresh/unmerge decide per hierarchy from images,
 * the current generation, what is on top, the version floors and the
 * options, and what the floors become (plan_versions_after()). Pure: no
 * mounts. Holds are per extension: a refused one keeps its staged layer or
 * stays out, and the rest of the hierarchy goes ahead.
 */

#include <stdlib.h>

#include "plan.h"
#include "tap.h"
#include "util.h"

static Image *img(const char *name, const char *version, const char *fingerprint, bool valid) {
        Image *i = calloc(1, sizeof(Image));

        i->class = IMAGE_SYSEXT;
        i->name = strdup(name);
        i->extension = strdup(name);
        i->path = strjoin("/run/extensions/", name, ".raw");
        i->search_dir = strdup("/run/extensions");
        i->version = version ? strdup(version) : NULL;
        i->fingerprint = strdup(fingerprint);
        i->state = IMAGE_CANDIDATE;
        i->inspected = true;
        i->valid = valid;
        if (!valid)
                i->reason = strdup("built for OS 'other'");
        (void) strv_extend(&i->hierarchies, "/usr");
        return i;
}

/* "foo:2.0:f1 bar:-:b1": layers NAME:VERSION:FINGERPRINT, bottom to top ("-": unversioned). */
static Generation generation(const char *spec) {
        _cleanup_strv_free_ char **l = strv_split(spec, " ");
        Generation g = {
                .hierarchy = strdup("/usr"), .class = IMAGE_SYSEXT, .merged = true, .number = 7,
                .layers = calloc(strv_length(l) + 1, sizeof(Layer)),
        };

        STRV_FOREACH(x, l) {
                _cleanup_strv_free_ char **f = strv_split(*x, ":");

                g.layers[g.n_layers++] = (Layer) {
                        .name = strdup(f[0]), .extension = strdup(f[0]),
                        .version = streq(f[1], "-") ? NULL : strdup(f[1]),
                        .image = strjoin("/run/extensions/", f[0], ".raw"), .fingerprint = strdup(f[2]),
                };
        }
        return g;
}

typedef struct Case {
        const char *name;
        TuckVerb verb;
        TopKind top;
        Image *images[4];
        const char *current;         /* layers of the current generation (NULL: never merged) */
        const char *floors;          /* "foo:2.0 bar:1.0" */
        const char *protect;         /* protected in /usr; NULL: the current generation's extensions */
        const char *unstaged;        /* current layers whose image is no longer staged */
        bool legacy, always_refresh, allow_downgrade;
        const char *allow;           /* --allow-downgrade=NAME, space-separated */
        const char *remove;
        PlanAction action;
        int error;
        const char *reason_contains;
        const char *layers;          /* names, bottom to top, "*" after a kept layer */
        const char *held;            /* "foo:downgrade:kept bar:gone:out" */
        const char *held_contains;   /* in the description of the first hold */
} Case;

static void versions_for(const Case *c, const Generation *g, Versions *v) {
        _cleanup_strv_free_ char **floors = strv_split(strempty(c->floors), " ");
        _cleanup_strv_free_ char **protect = c->protect ? strv_split(c->protect, " ") : NULL;

        *v = (Versions) { .legacy = c->legacy };
        STRV_FOREACH(x, floors) {
                _cleanup_strv_free_ char **f = strv_split(*x, ":");

                (void) versions_activate(v, IMAGE_SYSEXT, f[0], NULL, f[1], 1, "test");
        }
        if (c->protect)
                STRV_FOREACH(x, protect)
                        (void) versions_activate(v, IMAGE_SYSEXT, *x, "/usr", NULL, 1, "test");
        else if (!c->legacy)
                for (size_t k = 0; g && k < g->n_layers; k++)
                        (void) versions_activate(v, IMAGE_SYSEXT, g->layers[k].extension, "/usr", NULL, 1, "test");
}

static char *layers_of(const HierarchyPlan *hp) {
        _cleanup_strv_free_ char **names = calloc(1, sizeof(char *));

        for (size_t i = 0; i < hp->n_layers; i++)
                (void) strv_consume(&names, strjoin(plan_layer_name(&hp->layers[i]), hp->layers[i].kept ? "*" : ""));
        return strv_join(names, " ");
}

static char *held_of(const HierarchyPlan *hp) {
        _cleanup_strv_free_ char **l = calloc(1, sizeof(char *));

        for (size_t i = 0; i < hp->n_held; i++)
                (void) strv_consume(&l, strjoin(hp->held[i].extension, ":", hold_reason_to_string(hp->held[i].reason),
                                                ":", hp->held[i].kept ? "kept" : "out"));
        return strv_join(l, " ");
}

static void run(const Case *c) {
        _cleanup_strv_free_ char **allow = c->allow ? strv_split(c->allow, " ") : NULL;
        _cleanup_strv_free_ char **unstaged = c->unstaged ? strv_split(c->unstaged, " ") : NULL;
        char *remove[] = { (char *) c->remove, NULL };
        Generation g = {};
        bool staged[8] = {};
        Versions v;
        size_t n_images = 0;
        Plan p = {};
        int r;

        while (n_images < 4 && c->images[n_images])
                n_images++;
        if (c->current)
                g = generation(c->current);
        for (size_t k = 0; k < g.n_layers && k < ELEMENTSOF(staged); k++)
                staged[k] = !strv_contains(unstaged, g.layers[k].name);
        versions_for(c, c->current ? &g : NULL, &v);

        PlanHierarchyInput h = {
                .hierarchy = "/usr",
                .class = IMAGE_SYSEXT,
                .current = c->current ? &g : NULL,
                .staged = staged,
                .live = { .top = c->top, .description = (char *) "overlay 'x' (mount 1)" },
        };
        PlanInput in = {
                .verb = c->verb,
                .images = c->images,
                .n_images = n_images,
                .hierarchies = &h,
                .n_hierarchies = 1,
                .versions = &v,
                .always_refresh = c->always_refresh,
                .allow_downgrade = c->allow_downgrade,
                .allow_downgrade_names = allow,
                .remove = c->remove ? remove : NULL,
        };

        r = plan_build(&in, &p);
        if (tap_ok(r == 0 && p.n_hierarchies == 1, "%s: plan built", c->name)) {
                const HierarchyPlan *hp = &p.hierarchies[0];
                _cleanup_free_ char *layers = layers_of(hp), *held = held_of(hp),
                                    *first = hp->n_held > 0 ? hold_describe(&hp->held[0], "/usr") : NULL;
                bool ok;

                ok = hp->action == c->action && hp->error == c->error &&
                     (!c->reason_contains || (hp->reason && strstr(hp->reason, c->reason_contains))) &&
                     (!c->layers || streq(layers, c->layers)) && streq(held, strempty(c->held)) &&
                     (!c->held_contains || (first && strstr(first, c->held_contains)));
                if (!tap_ok(ok, "%s: %s", c->name, plan_action_to_string(c->action)))
                        tap_diag("got %s error=%d layers='%s' held='%s' reason='%s' first hold='%s'",
                                 plan_action_to_string(hp->action), hp->error, layers, held, tap_str(hp->reason),
                                 tap_str(first));
        }
        plan_done(&p);
        versions_done(&v);
        generation_done(&g);
}

/* The scenario in the plan, and what the floors become after it. */
static void test_floors_after(void) {
        Image *foo1 = img("foo", "1.0", "f3", true), *bar11 = img("bar", "1.1", "b2", true);
        Image *images[] = { foo1, bar11 };
        Generation g = generation("bar:1.0:b1 foo:2.0:f1");
        bool staged[] = { true, true };
        char *allow[] = { (char *) "foo", NULL };
        Versions v = {}, after = {};
        const VersionEntry *e;
        Plan p = {};
        int r;

        (void) versions_activate(&v, IMAGE_SYSEXT, "foo", "/usr", "2.0", 1, "first");
        (void) versions_activate(&v, IMAGE_SYSEXT, "bar", "/usr", "1.0", 1, "first");
        PlanHierarchyInput h = {
                .hierarchy = "/usr", .class = IMAGE_SYSEXT, .current = &g, .staged = staged,
                .live = { .top = TOP_OURS },
        };
        PlanInput in = {
                .verb = VERB_REFRESH, .images = images, .n_images = 2, .hierarchies = &h, .n_hierarchies = 1,
                .versions = &v,
        };

        /* Without a decision: bar's floor rises, foo's stays. */
        r = plan_build(&in, &p);
        r = r < 0 ? r : plan_versions_after(&p, &v, NULL, 100, "tuckctl refresh", &after);
        tap_ok(r == 0 && streq_ptr(versions_floor(&after, IMAGE_SYSEXT, "bar"), "1.1") &&
               streq_ptr(versions_floor(&after, IMAGE_SYSEXT, "foo"), "2.0"),
               "floors after a held-back downgrade: bar 1.1 (its fix), foo still 2.0");
        plan_done(&p);
        versions_done(&after);

        /* With --allow-downgrade=foo: the decision, with when and how. */
        in.allow_downgrade_names = allow;
        r = plan_build(&in, &p);
        r = r < 0 ? r : plan_versions_after(&p, &v, NULL, 100, "tuckctl refresh --allow-downgrade=foo", &after);
        e = versions_find(&after, IMAGE_SYSEXT, "foo");
        tap_ok(r == 0 && e && streq_ptr(e->floor, "1.0") && e->decision.kind == DECISION_DOWNGRADE_ALLOWED &&
               streq_ptr(e->decision.previous_floor, "2.0") && e->decision.when_usec == 100 &&
               streq_ptr(e->decision.via, "tuckctl refresh --allow-downgrade=foo") &&
               strv_contains(e->protected_in, "/usr"),
               "--allow-downgrade=foo: foo's floor goes to 1.0, recorded with when and how");
        tap_ok(streq_ptr(versions_floor(&after, IMAGE_SYSEXT, "bar"), "1.1"), "and bar's rises to 1.1");

        /* A hierarchy not done (its swap failed) changes no floor. */
        {
                bool done[] = { false };
                Versions none = {};

                r = plan_versions_after(&p, &v, done, 100, "x", &none);
                tap_ok(r == 0 && versions_equal(&none, &v), "a failed swap raises no floor and spends no decision");
                versions_done(&none);
        }
        plan_done(&p);

        /* The decision holds until a newer version is activated: then the floor follows it. */
        {
                Versions later = {};

                (void) versions_copy(&later, &after);
                (void) versions_activate(&later, IMAGE_SYSEXT, "foo", "/usr", "1.0", 200, "again");
                e = versions_find(&later, IMAGE_SYSEXT, "foo");
                tap_ok(e && streq_ptr(e->floor, "1.0") && e->decision.kind == DECISION_DOWNGRADE_ALLOWED,
                       "activating the allowed version again keeps the decision");
                (void) versions_activate(&later, IMAGE_SYSEXT, "foo", "/usr", "1.5", 300, "newer");
                e = versions_find(&later, IMAGE_SYSEXT, "foo");
                tap_ok(e && streq_ptr(e->floor, "1.5") && e->decision.kind == DECISION_ACTIVATED &&
                       e->decision.when_usec == 300, "a newer version spends the decision: floor 1.5, activated");
                versions_done(&later);
        }

        /* --remove= drops the protection, keeps the floor; forget drops both. */
        {
                Image *only_foo[] = { foo1 };
                char *remove[] = { (char *) "bar", NULL };
                Versions r2 = {};

                in.images = only_foo;
                in.n_images = 1;
                in.remove = remove;
                r = plan_build(&in, &p);
                r = r < 0 ? r : plan_versions_after(&p, &v, NULL, 100, "x", &r2);
                e = versions_find(&r2, IMAGE_SYSEXT, "bar");
                tap_ok(r == 0 && e && streq_ptr(e->floor, "1.0") && !strv_contains(e->protected_in, "/usr"),
                       "--remove=bar: bar no longer protected in /usr, its floor stays");
                tap_ok(versions_forget(&r2, IMAGE_SYSEXT, "bar") == 0 && !versions_find(&r2, IMAGE_SYSEXT, "bar") &&
                       versions_forget(&r2, IMAGE_SYSEXT, "bar") == -ENOENT, "forget: the entry goes, once");
                plan_done(&p);
                versions_done(&r2);
        }

        /* An unmerge changes no floor and no protection. */
        {
                Versions u = {};

                in.verb = VERB_UNMERGE;
                r = plan_build(&in, &p);
                r = r < 0 ? r : plan_versions_after(&p, &v, NULL, 100, "x", &u);
                tap_ok(r == 0 && versions_equal(&u, &v), "an unmerge leaves floors and protection alone");
                plan_done(&p);
                versions_done(&u);
        }

        versions_done(&after);
        versions_done(&v);
        generation_done(&g);
        image_free(foo1);
        image_free(bar11);
}

/*
 * An image in a runtime search directory (/run) is gone at every boot, as
 * /run is: its protection is that boot's. Gone in the same boot, it is held
 * back; gone after a reboot (another boot ID), it simply is not merged.
 */
static void test_runtime_protection(void) {
        Image *run_foo = img("foo", "1.0", "f1", true), *var_foo = img("foo", "1.0", "f1", true);
        Image *with_run[] = { run_foo }, *with_var[] = { var_foo };
        Generation g = generation("foo:1.0:f1");
        bool staged[] = { true };
        Versions v = {}, after = {};
        const VersionEntry *e;
        Plan p = {};
        int r;

        free(var_foo->search_dir);
        var_foo->search_dir = strdup("/var/lib/extensions");
        PlanHierarchyInput h = {
                .hierarchy = "/usr", .class = IMAGE_SYSEXT, .current = &g, .staged = staged,
                .live = { .top = TOP_OURS },
        };
        PlanInput in = {
                .verb = VERB_REFRESH, .images = with_run, .n_images = 1, .hierarchies = &h, .n_hierarchies = 1,
                .versions = &v, .always_refresh = true, .boot_id = "boot-a",
        };

        r = plan_build(&in, &p);
        r = r < 0 ? r : plan_versions_after(&p, &v, NULL, 100, "x", &after);
        e = versions_find(&after, IMAGE_SYSEXT, "foo");
        tap_ok(r == 0 && e && streq_ptr(e->runtime_boot, "boot-a") && strv_contains(e->protected_in, "/usr"),
               "an image from /run/extensions: protected in this boot only (runtime_boot)");
        plan_done(&p);

        in.images = NULL;
        in.n_images = 0;
        in.versions = &after;
        r = plan_build(&in, &p);
        tap_ok(r == 0 && p.hierarchies[0].n_held == 1 && p.hierarchies[0].held[0].reason == HOLD_GONE,
               "gone in the same boot: held back (gone)");
        plan_done(&p);
        in.boot_id = "boot-b";
        r = plan_build(&in, &p);
        tap_ok(r == 0 && p.hierarchies[0].n_held == 0 && p.hierarchies[0].n_layers == 0,
               "gone after a reboot (another boot ID): not held back, not merged");
        plan_done(&p);
        versions_done(&after);

        in.images = with_var;
        in.n_images = 1;
        in.versions = &v;
        in.boot_id = "boot-a";
        r = plan_build(&in, &p);
        r = r < 0 ? r : plan_versions_after(&p, &v, NULL, 100, "x", &after);
        e = versions_find(&after, IMAGE_SYSEXT, "foo");
        tap_ok(r == 0 && e && !e->runtime_boot, "an image from /var/lib/extensions: protected across reboots");
        plan_done(&p);
        in.images = NULL;
        in.n_images = 0;
        in.versions = &after;
        in.boot_id = "boot-b";
        r = plan_build(&in, &p);
        tap_ok(r == 0 && p.hierarchies[0].n_held == 1, "gone after a reboot: held back");
        plan_done(&p);

        versions_done(&after);
        versions_done(&v);
        generation_done(&g);
        image_free(run_foo);
        image_free(var_foo);
}

int main(void) {
        Image *other_class = img("conf", "1", "fc", true), *not_usr = img("optonly", "1", "fo", true),
              *shadowed = img("zzz", "1", "fs", true), *foo_opt = img("foo", "3", "fo3", true);

        other_class->class = IMAGE_CONFEXT;
        strv_free(not_usr->hierarchies);
        not_usr->hierarchies = NULL;
        (void) strv_extend(&not_usr->hierarchies, "/opt");
        shadowed->state = IMAGE_SHADOWED;
        strv_free(foo_opt->hierarchies);
        foo_opt->hierarchies = NULL;
        (void) strv_extend(&foo_opt->hierarchies, "/opt");

        const Case cases[] = {
                { "first merge", VERB_REFRESH, TOP_BASE, { img("foo", "1", "f1", true) },
                  .action = PLAN_MERGE, .layers = "foo" },
                { "nothing to merge", VERB_REFRESH, TOP_BASE, {}, .action = PLAN_NOTHING, .reason_contains = "no extensions" },
                { "unchanged inputs: no-op", VERB_REFRESH, TOP_OURS, { img("foo", "1", "f1", true) },
                  .current = "foo:1:f1", .action = PLAN_KEEP, .reason_contains = "unchanged" },
                { "unchanged, --always-refresh", VERB_REFRESH, TOP_OURS, { img("foo", "1", "f1", true) },
                  .current = "foo:1:f1", .always_refresh = true, .action = PLAN_REFRESH },
                { "new image content", VERB_REFRESH, TOP_OURS, { img("foo", "1", "f2", true) },
                  .current = "foo:1:f1", .action = PLAN_REFRESH },
                { "upgrade", VERB_REFRESH, TOP_OURS, { img("foo", "2.1", "f2", true) },
                  .current = "foo:2.0:f1", .floors = "foo:2.0", .action = PLAN_REFRESH, .layers = "foo" },

                /* Downgrades: held back alone, the staged layer kept. */
                { "downgrade: held back, its staged layer kept, nothing else to do", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.9", "f2", true) }, .current = "foo:2.0:f1", .floors = "foo:2.0",
                  .action = PLAN_KEEP, .layers = "foo*", .held = "foo:downgrade:kept",
                  .held_contains = "downgrade 2.0 → 1.9 not allowed" },
                { "downgrade: names the override and what stays", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.9", "f2", true) }, .current = "foo:2.0:f1", .floors = "foo:2.0",
                  .action = PLAN_KEEP, .held = "foo:downgrade:kept",
                  .held_contains = "foo 2.0 stays (use --allow-downgrade=foo" },
                { "the issue's drop: bar's fix goes in, foo's downgrade is held back alone", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.0", "f3", true), img("bar", "1.1", "b2", true) },
                  .current = "bar:1.0:b1 foo:2.0:f1", .floors = "foo:2.0 bar:1.0",
                  .action = PLAN_REFRESH, .layers = "bar foo*", .held = "foo:downgrade:kept" },
                { "held back and no longer staged: stays out, the rest goes in", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.0", "f3", true), img("bar", "1.1", "b2", true) },
                  .current = "bar:1.0:b1 foo:2.0:f1", .floors = "foo:2.0 bar:1.0", .unstaged = "foo",
                  .action = PLAN_REFRESH, .layers = "bar", .held = "foo:downgrade:out",
                  .held_contains = "foo stays out" },
                { "held back, no longer staged, nothing else changed: the overlay in place keeps it", VERB_REFRESH,
                  TOP_OURS, { img("foo", "1.0", "f3", true), img("bar", "1.0", "b1", true) },
                  .current = "bar:1.0:b1 foo:2.0:f1", .floors = "foo:2.0 bar:1.0", .unstaged = "foo",
                  .action = PLAN_KEEP, .layers = "bar", .held = "foo:downgrade:kept",
                  .held_contains = "foo 2.0 stays" },
                { "held back and gone, no longer staged, the only extension: kept in place, not unmerged",
                  VERB_REFRESH, TOP_OURS, {}, .current = "foo:2.0:f1", .floors = "foo:2.0", .unstaged = "foo",
                  .action = PLAN_KEEP, .held = "foo:gone:kept" },
                { "--allow-downgrade=foo: foo goes back, bar goes up", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.0", "f3", true), img("bar", "1.1", "b2", true) },
                  .current = "bar:1.0:b1 foo:2.0:f1", .floors = "foo:2.0 bar:1.0", .allow = "foo",
                  .action = PLAN_REFRESH, .layers = "bar foo" },
                { "--allow-downgrade=bar does not allow foo", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.0", "f3", true), img("bar", "1.1", "b2", true) },
                  .current = "bar:1.0:b1 foo:2.0:f1", .floors = "foo:2.0 bar:1.0", .allow = "bar",
                  .action = PLAN_REFRESH, .layers = "bar foo*", .held = "foo:downgrade:kept" },
                { "--allow-downgrade: every extension", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.0", "f3", true), img("bar", "0.9", "b2", true) },
                  .current = "bar:1.0:b1 foo:2.0:f1", .floors = "foo:2.0 bar:1.0", .allow_downgrade = true,
                  .action = PLAN_REFRESH, .layers = "bar foo" },
                { "downgrade below the floor of a past generation: stays out", VERB_REFRESH, TOP_BASE,
                  { img("foo", "1.0", "f2", true) }, .floors = "foo:1.5", .action = PLAN_NOTHING,
                  .held = "foo:downgrade:out" },
                { "a recorded rollback: the floor is the allowed version", VERB_REFRESH, TOP_BASE,
                  { img("foo", "1.0", "f2", true) }, .floors = "foo:1.0", .action = PLAN_MERGE, .layers = "foo" },
                { "version order, not text order: 1.10 > 1.9", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.10", "f2", true) }, .current = "foo:1.9:f1", .floors = "foo:1.9",
                  .action = PLAN_REFRESH },
                { "pre-release is older: 2~rc1 < 2", VERB_REFRESH, TOP_OURS, { img("foo", "2~rc1", "f2", true) },
                  .current = "foo:2:f1", .floors = "foo:2", .action = PLAN_KEEP, .held = "foo:downgrade:kept" },
                { "unversioned image after a versioned one", VERB_REFRESH, TOP_OURS, { img("foo", NULL, "f2", true) },
                  .current = "foo:2.0:f1", .floors = "foo:2.0", .action = PLAN_KEEP, .held = "foo:unversioned:kept",
                  .held_contains = "has no version" },

                /* Removals: protected extensions are held back too. */
                { "active extension's image gone: held back, kept", VERB_REFRESH, TOP_OURS, {},
                  .current = "foo:2.0:f1", .floors = "foo:2.0", .action = PLAN_KEEP, .layers = "foo*",
                  .held = "foo:gone:kept", .held_contains = "its image is gone" },
                { "removal names --remove", VERB_REFRESH, TOP_OURS, {}, .current = "foo:2.0:f1",
                  .floors = "foo:2.0", .action = PLAN_KEEP, .held = "foo:gone:kept", .held_contains = "--remove=foo" },
                { "requested removal of the last extension: unmerge", VERB_REFRESH, TOP_OURS, {},
                  .current = "foo:2.0:f1", .remove = "foo", .action = PLAN_UNMERGE },
                { "removal of another extension is not this one's", VERB_REFRESH, TOP_OURS, {},
                  .current = "foo:2.0:f1", .remove = "bar", .action = PLAN_KEEP, .held = "foo:gone:kept" },
                { "active extension's new image invalid: held back alone", VERB_REFRESH, TOP_OURS,
                  { img("foo", "3", "f2", false), img("bar", "2", "b2", true) }, .current = "bar:1:b1 foo:2.0:f1",
                  .action = PLAN_REFRESH, .layers = "bar foo*", .held = "foo:invalid:kept",
                  .held_contains = "is not valid: built for OS 'other'" },
                { "its image no longer carries the hierarchy: held back", VERB_REFRESH, TOP_OURS, { foo_opt },
                  .current = "foo:2.0:f1", .action = PLAN_KEEP, .held = "foo:not-carried:kept",
                  .held_contains = "no longer carries /usr" },
                { "after a reboot: a protected extension's image gone stays out, the rest merged", VERB_REFRESH,
                  TOP_BASE, { img("bar", "1", "b1", true) }, .floors = "foo:2.0 bar:1", .protect = "foo bar",
                  .action = PLAN_MERGE, .layers = "bar", .held = "foo:gone:out" },
                { "after a reboot: --remove=foo lets it go", VERB_MERGE, TOP_BASE, { img("bar", "1", "b1", true) },
                  .protect = "foo bar", .remove = "foo", .action = PLAN_MERGE, .layers = "bar" },
                { "a format-1 versions.json: the current generation is what is protected", VERB_REFRESH, TOP_OURS,
                  {}, .current = "foo:2.0:f1", .floors = "foo:2.0", .legacy = true, .action = PLAN_KEEP,
                  .held = "foo:gone:kept" },
                { "forgotten (no entry): its image may go", VERB_REFRESH, TOP_OURS, { img("bar", "1", "b1", true) },
                  .current = "bar:1:b1 foo:2.0:f1", .protect = "bar", .action = PLAN_REFRESH, .layers = "bar" },

                { "an invalid image is skipped, the rest merged", VERB_REFRESH, TOP_BASE,
                  { img("foo", "1", "f1", true), img("bar", "1", "f3", false) }, .action = PLAN_MERGE, .layers = "foo" },
                { "ordering: version-aware names, last on top", VERB_REFRESH, TOP_BASE,
                  { img("foo-10", "1", "a", true), img("foo-9", "1", "b", true), img("bar", "1", "c", true) },
                  .action = PLAN_MERGE, .layers = "bar foo-9 foo-10" },
                { "other class, other hierarchy, shadowed: not layers of /usr", VERB_REFRESH, TOP_BASE,
                  { img("foo", "1", "f1", true), other_class, not_usr, shadowed }, .action = PLAN_MERGE, .layers = "foo" },
                { "systemd-sysext on top: take over", VERB_REFRESH, TOP_SYSTEMD, { img("foo", "1", "f1", true) },
                  .action = PLAN_TAKEOVER },
                { "systemd-sysext on top, no images: left alone", VERB_REFRESH, TOP_SYSTEMD, {},
                  .action = PLAN_NOTHING, .reason_contains = "left alone" },
                { "our overlay without a record: replaced like systemd-sysext's", VERB_REFRESH, TOP_LOST,
                  { img("foo", "1", "f1", true) }, .action = PLAN_TAKEOVER },
                { "our overlay without a record, merge: replaced too", VERB_MERGE, TOP_LOST,
                  { img("foo", "1", "f1", true) }, .action = PLAN_TAKEOVER },
                { "our overlay without a record, no images: unmerged", VERB_REFRESH, TOP_LOST, {},
                  .action = PLAN_UNMERGE, .reason_contains = "no extensions left" },
                { "a foreign mount on our overlay", VERB_REFRESH, TOP_OTHER, { img("foo", "1", "f2", true) },
                  .current = "foo:1:f1", .action = PLAN_REFUSE, .error = -EBUSY },
                { "merge when merged", VERB_MERGE, TOP_OURS, { img("foo", "1", "f2", true) }, .current = "foo:1:f1",
                  .action = PLAN_REFUSE, .error = -EALREADY, .reason_contains = "already merged (generation 7)" },
                { "merge when not merged", VERB_MERGE, TOP_BASE, { img("foo", "1", "f1", true) }, .action = PLAN_MERGE },
                { "unmerge", VERB_UNMERGE, TOP_OURS, { img("foo", "1", "f1", true) }, .current = "foo:1:f1",
                  .action = PLAN_UNMERGE },
                { "unmerge needs no permission to drop extensions", VERB_UNMERGE, TOP_OURS, {},
                  .current = "foo:2:f1", .floors = "foo:2", .action = PLAN_UNMERGE },
                { "unmerge, not merged", VERB_UNMERGE, TOP_BASE, {}, .action = PLAN_NOTHING },
                { "unmerge leaves systemd-sysext's overlay alone", VERB_UNMERGE, TOP_SYSTEMD, {}, .action = PLAN_NOTHING },
                { "unmerge takes our overlay without a record too", VERB_UNMERGE, TOP_LOST, {},
                  .action = PLAN_UNMERGE },
                { "unmerge under a foreign mount", VERB_UNMERGE, TOP_OTHER, {}, .current = "foo:1:f1",
                  .action = PLAN_REFUSE, .error = -EBUSY },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                run(&cases[i]);
                /* Each image belongs to one case: freed, so LeakSanitizer sees libtuck's leaks only. */
                for (size_t k = 0; k < ELEMENTSOF(cases[i].images) && cases[i].images[k]; k++)
                        image_free(cases[i].images[k]);
        }

        test_floors_after();
        test_runtime_protection();
        tap_ok(layers_unchanged(NULL, 0, NULL) == false, "layers_unchanged: no generation is a change");
        return tap_done();
}
