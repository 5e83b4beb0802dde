/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * The plan: what merge/refresh/unmerge decide per hierarchy from images,
 * the current generation, what is on top, version high-water marks and
 * options. Pure: no mounts.
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

static Generation generation(const char *name, const char *version, const char *fingerprint) {
        Generation g = { .hierarchy = (char *) "/usr", .class = IMAGE_SYSEXT, .merged = true, .number = 7 };

        if (name) {
                g.layers = calloc(1, sizeof(Layer));
                g.layers[0] = (Layer) {
                        .name = strdup(name), .extension = strdup(name),
                        .version = version ? strdup(version) : NULL,
                        .image = strdup("/run/extensions/x.raw"), .fingerprint = strdup(fingerprint),
                };
                g.n_layers = 1;
        }
        return g;
}

typedef struct Case {
        const char *name;
        TuckVerb verb;
        TopKind top;
        Image *images[4];
        const char *current_name, *current_version, *current_fp;   /* NULL: never merged */
        const char *highwater;   /* for "foo" */
        bool force, allow_downgrade;
        const char *remove;
        PlanAction action;
        int error;
        const char *reason_contains;
        const char *layers;      /* names, bottom to top, space-separated */
} Case;

static void run(const Case *c) {
        Generation g = {};
        json_object *versions = json_object_new_object();
        char *remove[] = { (char *) c->remove, NULL };
        size_t n_images = 0;
        Plan p = {};
        int r;

        while (n_images < 4 && c->images[n_images])
                n_images++;
        if (c->current_fp)
                g = generation(c->current_name, c->current_version, c->current_fp);
        if (c->highwater)
                (void) versions_set(versions, IMAGE_SYSEXT, "foo", c->highwater);

        PlanHierarchyInput h = {
                .hierarchy = "/usr",
                .class = IMAGE_SYSEXT,
                .current = c->current_fp ? &g : NULL,
                .live = { .top = c->top, .description = (char *) "overlay 'x' (mount 1)" },
        };
        PlanInput in = {
                .verb = c->verb,
                .images = c->images,
                .n_images = n_images,
                .hierarchies = &h,
                .n_hierarchies = 1,
                .versions = versions,
                .force = c->force,
                .allow_downgrade = c->allow_downgrade,
                .remove = c->remove ? remove : NULL,
        };

        r = plan_build(&in, &p);
        if (!tap_ok(r == 0 && p.n_hierarchies == 1, "%s: plan built", c->name))
                return;
        {
                const HierarchyPlan *hp = &p.hierarchies[0];
                _cleanup_free_ char *layers = NULL;
                char *names[8] = {};
                bool ok;

                for (size_t i = 0; i < hp->n_layers && i < 7; i++)
                        names[i] = hp->layers[i]->name;
                layers = strv_join(names, " ");
                ok = hp->action == c->action && hp->error == c->error &&
                     (!c->reason_contains || (hp->reason && strstr(hp->reason, c->reason_contains))) &&
                     (!c->layers || streq(layers, c->layers));
                if (!tap_ok(ok, "%s: %s", c->name, plan_action_to_string(c->action)))
                        tap_diag("got %s error=%d layers='%s' reason='%s'", plan_action_to_string(hp->action),
                                 hp->error, layers, tap_str(hp->reason));
        }
        plan_done(&p);
        json_object_put(versions);
        if (c->current_fp)
                layer_done(&g.layers[0]), free(g.layers);
}

int main(void) {
        Image *other_class = img("conf", "1", "fc", true), *not_usr = img("optonly", "1", "fo", true),
              *shadowed = img("zzz", "1", "fs", true);

        other_class->class = IMAGE_CONFEXT;
        strv_free(not_usr->hierarchies);
        not_usr->hierarchies = NULL;
        (void) strv_extend(&not_usr->hierarchies, "/opt");
        shadowed->state = IMAGE_SHADOWED;

        const Case cases[] = {
                { "first merge", VERB_REFRESH, TOP_BASE, { img("foo", "1", "f1", true) },
                  .action = PLAN_MERGE, .layers = "foo" },
                { "nothing to merge", VERB_REFRESH, TOP_BASE, {}, .action = PLAN_NOTHING, .reason_contains = "no extensions" },
                { "unchanged inputs: no-op", VERB_REFRESH, TOP_OURS, { img("foo", "1", "f1", true) },
                  "foo", "1", "f1", .action = PLAN_KEEP, .reason_contains = "unchanged" },
                { "unchanged, --force", VERB_REFRESH, TOP_OURS, { img("foo", "1", "f1", true) },
                  "foo", "1", "f1", .force = true, .action = PLAN_REFRESH },
                { "new image content", VERB_REFRESH, TOP_OURS, { img("foo", "1", "f2", true) },
                  "foo", "1", "f1", .action = PLAN_REFRESH },
                { "upgrade", VERB_REFRESH, TOP_OURS, { img("foo", "2.1", "f2", true) },
                  "foo", "2.0", "f1", "2.0", .action = PLAN_REFRESH },
                { "downgrade refused", VERB_REFRESH, TOP_OURS, { img("foo", "1.9", "f2", true) },
                  "foo", "2.0", "f1", "2.0", .action = PLAN_REFUSE, .error = -EPERM,
                  .reason_contains = "'foo' would be downgraded from 2.0 to 1.9" },
                { "downgrade names the override", VERB_REFRESH, TOP_OURS, { img("foo", "1.9", "f2", true) },
                  "foo", "2.0", "f1", "2.0", .action = PLAN_REFUSE, .error = -EPERM,
                  .reason_contains = "--allow-downgrade" },
                { "downgrade below a high-water mark of a past generation", VERB_REFRESH, TOP_BASE,
                  { img("foo", "1.0", "f2", true) }, .highwater = "1.5", .action = PLAN_REFUSE, .error = -EPERM },
                { "downgrade allowed", VERB_REFRESH, TOP_OURS, { img("foo", "1.9", "f2", true) },
                  "foo", "2.0", "f1", "2.0", .allow_downgrade = true, .action = PLAN_REFRESH },
                { "version order, not text order: 1.10 > 1.9", VERB_REFRESH, TOP_OURS,
                  { img("foo", "1.10", "f2", true) }, "foo", "1.9", "f1", "1.9", .action = PLAN_REFRESH },
                { "pre-release is older: 2~rc1 < 2", VERB_REFRESH, TOP_OURS, { img("foo", "2~rc1", "f2", true) },
                  "foo", "2", "f1", "2", .action = PLAN_REFUSE, .error = -EPERM },
                { "unversioned image after a versioned one", VERB_REFRESH, TOP_OURS, { img("foo", NULL, "f2", true) },
                  "foo", "2.0", "f1", "2.0", .action = PLAN_REFUSE, .error = -EPERM,
                  .reason_contains = "has no version" },
                { "active extension's image gone", VERB_REFRESH, TOP_OURS, {}, "foo", "2.0", "f1", "2.0",
                  .action = PLAN_REFUSE, .error = -EPERM, .reason_contains = "image is gone" },
                { "removal names --remove", VERB_REFRESH, TOP_OURS, {}, "foo", "2.0", "f1", "2.0",
                  .action = PLAN_REFUSE, .error = -EPERM, .reason_contains = "--remove=foo" },
                { "requested removal of the last extension: unmerge", VERB_REFRESH, TOP_OURS, {}, "foo", "2.0", "f1",
                  .remove = "foo", .action = PLAN_UNMERGE },
                { "removal of another extension is not this one's", VERB_REFRESH, TOP_OURS, {}, "foo", "2.0", "f1",
                  .remove = "bar", .action = PLAN_REFUSE, .error = -EPERM },
                { "active extension's new image invalid", VERB_REFRESH, TOP_OURS, { img("foo", "3", "f2", false) },
                  "foo", "2.0", "f1", .action = PLAN_REFUSE, .error = -EPERM,
                  .reason_contains = "is not valid: built for OS 'other'" },
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
                  "foo", "1", "f1", .action = PLAN_REFUSE, .error = -EBUSY },
                { "merge when merged", VERB_MERGE, TOP_OURS, { img("foo", "1", "f2", true) }, "foo", "1", "f1",
                  .action = PLAN_REFUSE, .error = -EALREADY, .reason_contains = "already merged (generation 7)" },
                { "merge when not merged", VERB_MERGE, TOP_BASE, { img("foo", "1", "f1", true) }, .action = PLAN_MERGE },
                { "unmerge", VERB_UNMERGE, TOP_OURS, { img("foo", "1", "f1", true) }, "foo", "1", "f1",
                  .action = PLAN_UNMERGE },
                { "unmerge needs no permission to drop extensions", VERB_UNMERGE, TOP_OURS, {}, "foo", "2", "f1", "2",
                  .action = PLAN_UNMERGE },
                { "unmerge, not merged", VERB_UNMERGE, TOP_BASE, {}, .action = PLAN_NOTHING },
                { "unmerge leaves systemd-sysext's overlay alone", VERB_UNMERGE, TOP_SYSTEMD, {}, .action = PLAN_NOTHING },
                { "unmerge takes our overlay without a record too", VERB_UNMERGE, TOP_LOST, {},
                  .action = PLAN_UNMERGE },
                { "unmerge under a foreign mount", VERB_UNMERGE, TOP_OTHER, {}, "foo", "1", "f1",
                  .action = PLAN_REFUSE, .error = -EBUSY },
        };

        for (size_t i = 0; i < ELEMENTSOF(cases); i++) {
                run(&cases[i]);
                /* Each image belongs to one case: freed, so LeakSanitizer sees libtuck's leaks only. */
                for (size_t k = 0; k < ELEMENTSOF(cases[i].images) && cases[i].images[k]; k++)
                        image_free(cases[i].images[k]);
        }

        tap_ok(layers_unchanged(NULL, 0, NULL) == false, "layers_unchanged: no generation is a change");
        return tap_done();
}
