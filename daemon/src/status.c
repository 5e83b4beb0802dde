/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "context.h"
#include "mountinfo.h"
#include "status.h"
#include "swap.h"
#include "util.h"

#define STATUS_SCAN_USEC_MAX (2 * USEC_PER_SEC)

ImageList *image_list_free(ImageList *l) {
        if (!l)
                return NULL;
        images_free(l->images, l->n_images);
        for (size_t i = 0; i < l->n_generations; i++)
                generation_done(&l->generations[i]);
        free(l->generations);
        free(l);
        return NULL;
}

/* Which hierarchies use this image in their current generation. */
static char **image_active_in(const ImageList *l, const Image *img) {
        char **where = calloc(1, sizeof(char *));

        for (size_t i = 0; where && i < l->n_generations; i++) {
                const Generation *g = &l->generations[i];

                for (size_t k = 0; g->merged && k < g->n_layers; k++)
                        if (g->class == img->class && img->fingerprint &&
                            streq(g->layers[k].fingerprint, img->fingerprint))
                                (void) strv_extend(&where, g->hierarchy);
        }
        return where;
}

static const char *image_status(const Image *img) {
        if (img->state != IMAGE_CANDIDATE)
                return image_state_to_string(img->state);
        return img->valid ? "valid" : "invalid";
}

/* How a valid image is protected: "dm-verity, root hash signed by ...; the kernel checked it too". */
static void image_protection_print(const Image *img, FILE *f) {
        fprintf(f, "         dm-verity%s%s%s, root hash from %s", img->partition ? " on its " : "",
                strempty(img->partition), img->signer ? ", signed" : "", strna(img->verity.root_hash_from));
        if (img->signer)
                fprintf(f, "; signed by %s", img->signer);
        if (img->kernel_sig > 0)
                fprintf(f, "; the kernel checked the signature too");
        else if (img->kernel_sig < 0)
                fprintf(f, "; the kernel could not check the signature (%s)", strerror(-img->kernel_sig));
        fputc('\n', f);
}

void image_list_print(const ImageList *l, FILE *f) {
        if (l->n_images == 0) {
                fprintf(f, "No extension images found.\n");
                return;
        }
        fprintf(f, "%-8s %-20s %-10s %-12s %-9s %s\n", "CLASS", "NAME", "TYPE", "VERSION", "STATUS", "PATH");
        for (size_t i = 0; i < l->n_images; i++) {
                const Image *img = l->images[i];
                _cleanup_strv_free_ char **active = image_active_in(l, img);
                _cleanup_free_ char *joined = active ? strv_join(active, ",") : NULL;

                fprintf(f, "%-8s %-20s %-10s %-12s %-9s %s\n", image_class_to_string(img->class), img->name,
                        image_type_to_string(img->type), img->version ?: "-", image_status(img), img->path);
                if (img->state == IMAGE_SHADOWED || (img->state == IMAGE_MASKED && img->shadowed_by))
                        fprintf(f, "         %s by %s\n", image_state_to_string(img->state), img->shadowed_by);
                else if (img->state == IMAGE_MASKED)
                        fprintf(f, "         an empty directory: masks '%s' in lower-priority directories\n", img->name);
                else if (!img->valid && img->reason)
                        fprintf(f, "         not usable: %s\n", img->reason);
                else if (!isempty(joined))
                        fprintf(f, "         active in %s\n", joined);
                if (img->state == IMAGE_CANDIDATE && img->valid && img->protection != IMAGE_PROTECTION_UNPROTECTED)
                        image_protection_print(img, f);
        }
}

json_object *image_list_to_json(const ImageList *l) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < l->n_images; i++) {
                const Image *img = l->images[i];
                _cleanup_strv_free_ char **active = image_active_in(l, img);
                json_object *o = json_object_new_object(), *h = json_object_new_array(), *act = json_object_new_array();

#define ADD_STR(k, v) json_object_object_add(o, k, (v) ? json_object_new_string(v) : NULL)
                ADD_STR("class", image_class_to_string(img->class));
                ADD_STR("name", img->name);
                ADD_STR("extension", img->extension);
                ADD_STR("path", img->path);
                ADD_STR("type", image_type_to_string(img->type));
                ADD_STR("status", image_status(img));
                ADD_STR("reason", img->reason);
                ADD_STR("shadowed_by", img->shadowed_by);
                ADD_STR("version", img->version);
                ADD_STR("version_source", img->version_source);
                ADD_STR("partition", img->partition);
                ADD_STR("protection", img->state == IMAGE_CANDIDATE && img->inspected ?
                        image_protection_to_string(img->protection) : NULL);
                ADD_STR("root_hash_from", img->verity.root_hash_from);
                ADD_STR("signer", img->signer);
#undef ADD_STR
                if (img->kernel_sig != 0)
                        json_object_object_add(o, "kernel_checked_signature", json_object_new_boolean(img->kernel_sig > 0));
                json_object_object_add(o, "valid", json_object_new_boolean(img->state == IMAGE_CANDIDATE && img->valid));
                STRV_FOREACH(x, img->hierarchies)
                        json_object_array_add(h, json_object_new_string(*x));
                json_object_object_add(o, "hierarchies", h);
                STRV_FOREACH(x, active)
                        json_object_array_add(act, json_object_new_string(*x));
                json_object_object_add(o, "active_in", act);
                json_object_array_add(a, o);
        }
        return a;
}

Status *status_free(Status *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                generation_done(&s->hierarchies[i].generation);
                free(s->hierarchies[i].record_error);
                namespace_views_free(s->hierarchies[i].views, s->hierarchies[i].n_views);
        }
        free(s->hierarchies);
        free(s);
        return NULL;
}

bool status_degraded(const Status *s) {
        for (size_t i = 0; i < s->n_hierarchies; i++)
                if (s->hierarchies[i].generation.n_held > 0 || s->hierarchies[i].record_error)
                        return true;
        return false;
}

/* "degraded: foo held back (downgrade 2.0 → 1.0 not allowed), /usr: record unusable" */
static void print_state(const Status *s, FILE *f) {
        const char *sep = "";

        if (!status_degraded(s))
                return;
        fprintf(f, "State: degraded: ");
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                const HierarchyStatus *h = &s->hierarchies[i];

                for (size_t k = 0; k < h->generation.n_held; k++) {
                        _cleanup_free_ char *line = hold_headline(&h->generation.held[k], h->hierarchy->path);

                        fprintf(f, "%s%s", sep, strna(line));
                        sep = ", ";
                }
                if (h->record_error) {
                        fprintf(f, "%s%s: record unusable", sep, h->hierarchy->path);
                        sep = ", ";
                }
        }
        fputc('\n', f);
}

int tuck_status(TuckContext *c, Status **ret) {
        Status *s = calloc(1, sizeof(Status));
        char *error = NULL;
        /* A look, not a refresh: a smaller budget for all the namespaces. */
        ScanBudget budget = context_scan_budget(c, NULL);
        int r;

        if (budget.refresh_usec > STATUS_SCAN_USEC_MAX)
                budget.refresh_usec = STATUS_SCAN_USEC_MAX;

        if (!s)
                return -ENOMEM;
        s->hierarchies = calloc(c->n_hierarchies ?: 1, sizeof(HierarchyStatus));
        if (!s->hierarchies) {
                free(s);
                return -ENOMEM;
        }
        s->beneath = tuck_beneath_supported(c);
        s->staging_mounts = tuck_staging_mounts(c);

        for (size_t i = 0; i < c->n_hierarchies; i++) {
                HierarchyStatus *h = &s->hierarchies[s->n_hierarchies++];
                uint64_t id;
                struct stat st;

                h->hierarchy = &c->hierarchies[i];
                r = generation_load(c->run_dir, h->hierarchy->path, &h->generation, &error);
                if (r == -ENOMEM) {
                        status_free(s);
                        return r;
                }
                if (r < 0 && r != -ENOENT) {
                        /* Said, not fatal: status is how one finds out what is wrong. */
                        _cleanup_free_ char *path = generation_path(c->run_dir, h->hierarchy->path);

                        (void) asprintf_safe(&h->record_error, "%s: %s", strna(path), error ?: strerror(-r));
                        h->generation = (Generation) {};
                }
                free(error);
                error = NULL;
                if (stat(h->hierarchy->full, &st) == 0 && path_get_mnt_id(AT_FDCWD, h->hierarchy->full, &id) == 0)
                        h->on_top = h->generation.merged && st.st_dev == h->generation.overlay_dev &&
                                    id == h->generation.overlay_mnt_id;
                (void) path_get_mount_attr(AT_FDCWD, h->hierarchy->full, &h->attr);
                if (!h->generation.merged && h->generation.n_history == 0)
                        continue;
                r = nsscan_hierarchy(c->root, h->hierarchy->full, &h->generation, &budget, &h->views, &h->n_views);
                if (r < 0) {
                        status_free(s);
                        return r;
                }
        }
        *ret = s;
        return 0;
}

/* A layer kept in place because its extension is held back? */
static bool layer_held(const Generation *g, const Layer *l) {
        for (size_t k = 0; k < g->n_held; k++)
                if (g->held[k].kept && streq(g->held[k].extension, l->extension))
                        return true;
        return false;
}

static void print_view(const NamespaceView *v, FILE *f) {
        _cleanup_free_ char *comm = name_escape(v->comm), *who = NULL;
        char flags[48];

        fprintf(f, "    mnt:[%" PRIu64 "] pid %d (%s)", v->ns_ino, (int) v->pid, strna(comm));
        if (v->unit || v->machine) {
                who = namespace_view_who(v);
                fprintf(f, " %s", strna(who));
        }
        fprintf(f, ": %s", ns_view_state_to_string(v->state));
        if (v->state == NS_VIEW_UNREADABLE) {
                fprintf(f, " (%s), %u process%s\n", namespace_view_error(v), v->n_processes,
                        v->n_processes == 1 ? "" : "es");
                return;
        }
        if (v->state == NS_VIEW_STALE)
                fprintf(f, " (generation %" PRIu64 ")", v->generation);
        fprintf(f, ", %s, %u process%s\n", v->attr_known ? mount_attr_to_string(v->attr, flags, sizeof(flags)) :
                "flags unknown", v->n_processes, v->n_processes == 1 ? "" : "es");
}

void status_print(const Status *s, FILE *f) {
        fprintf(f, "MOVE_MOUNT_BENEATH: %s\n", s->beneath > 0 ? "supported" : s->beneath == 0 ?
                "NOT supported (refresh refused unless --allow-window)" : "unknown (probe failed)");
        if (s->staging_mounts >= 0)
                fprintf(f, "Staging namespace: %d mounts\n", s->staging_mounts);
        print_state(s, f);
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                const HierarchyStatus *h = &s->hierarchies[i];
                const Generation *g = &h->generation;
                _cleanup_free_ char *since = format_timestamp(g->since_usec), *dev = format_devnum(g->overlay_dev);
                char flags[48];
                size_t current = 0, behind = 0, own = 0;

                fprintf(f, "%s (%s): ", h->hierarchy->path, image_class_to_string(h->hierarchy->class));
                if (h->record_error)
                        fprintf(f, "record unusable: %s (tuckctl unmerge writes a fresh one)\n", h->record_error);
                else if (!g->merged) {
                        fprintf(f, "not merged%s\n", g->number > 0 ? " (unmerged)" : "");
                } else {
                        fprintf(f, "generation %" PRIu64 " since %s, overlay %s, %s%s%s\n", g->number, since,
                                strna(dev), mount_attr_to_string(g->attr, flags, sizeof(flags)),
                                g->window ? ", installed with a window" : "",
                                h->on_top ? "" : " — WARNING: not on top here");
                        for (size_t k = g->n_layers; k > 0; k--)
                                fprintf(f, "  %s %s%s\n", g->layers[k - 1].name, g->layers[k - 1].version ?: "(unversioned)",
                                        layer_held(g, &g->layers[k - 1]) ? " (held back)" : "");
                }
                /* Behind: on an older overlay of ours, or unreadable (it may be). A
                 * container's own /etc (foreign, or the bare base of its own tree)
                 * never had our overlay: it is counted, not called behind. */
                for (size_t k = 0; k < h->n_views; k++)
                        switch (h->views[k].state) {
                        case NS_VIEW_CURRENT:
                                current++;
                                break;
                        case NS_VIEW_STALE:
                        case NS_VIEW_UNREADABLE:
                                behind++;
                                break;
                        case NS_VIEW_BASE:
                                if (!g->merged)
                                        current++;   /* unmerged: the base is what there is */
                                else
                                        own++;
                                break;
                        case NS_VIEW_FOREIGN:
                        case _NS_VIEW_STATE_MAX:
                                own++;
                                break;
                        }
                if (h->n_views > 0)
                        fprintf(f, "  namespaces: %zu: %zu on the current generation, %zu behind, %zu with a view "
                                "of their own (base or foreign)\n", h->n_views, current, behind, own);
                for (size_t k = 0; k < h->n_views; k++)
                        if (g->merged ? h->views[k].state != NS_VIEW_CURRENT : h->views[k].state == NS_VIEW_STALE)
                                print_view(&h->views[k], f);
                for (size_t k = 0; k < g->n_held; k++) {
                        _cleanup_free_ char *d = hold_describe(&g->held[k], h->hierarchy->path);

                        fprintf(f, "  held back: %s\n", strna(d));
                }
        }
}

json_object *status_to_json(const Status *s) {
        json_object *o = json_object_new_object(), *a = json_object_new_array();

        json_object_object_add(o, "state", json_object_new_string(status_degraded(s) ? "degraded" : "running"));
        json_object_object_add(o, "move_mount_beneath", s->beneath >= 0 ? json_object_new_boolean(s->beneath) : NULL);
        json_object_object_add(o, "staging_mounts", s->staging_mounts >= 0 ? json_object_new_int(s->staging_mounts) : NULL);
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                const HierarchyStatus *h = &s->hierarchies[i];
                json_object *x = generation_to_json(&h->generation), *views = json_object_new_array();

                if (!x)
                        continue;
                json_object_object_add(x, "hierarchy", json_object_new_string(h->hierarchy->path));
                json_object_object_add(x, "class", json_object_new_string(image_class_to_string(h->hierarchy->class)));
                json_object_object_add(x, "on_top", json_object_new_boolean(h->on_top));
                json_object_object_add(x, "record_error",
                                       h->record_error ? json_object_new_string(h->record_error) : NULL);
                json_object *held = json_object_new_array();

                for (size_t k = 0; k < h->generation.n_held; k++) {
                        json_object *y = hold_to_json(&h->generation.held[k]);
                        _cleanup_free_ char *d = hold_describe(&h->generation.held[k], h->hierarchy->path),
                                            *line = hold_headline(&h->generation.held[k], h->hierarchy->path);

                        json_object_object_add(y, "summary", line ? json_object_new_string(line) : NULL);
                        json_object_object_add(y, "message", d ? json_object_new_string(d) : NULL);
                        json_object_array_add(held, y);
                }
                json_object_object_add(x, "held_back", held);
                json_object_object_add(x, "state", json_object_new_string(
                                               h->generation.n_held > 0 || h->record_error ? "degraded" : "running"));
                for (size_t k = 0; k < h->n_views; k++) {
                        const NamespaceView *v = &h->views[k];
                        json_object *y = json_object_new_object();
                        char flags[48], *dev = format_devnum(v->dev);

                        json_object_object_add(y, "namespace", json_object_new_uint64(v->ns_ino));
                        json_object_object_add(y, "pid", json_object_new_int(v->pid));
                        json_object_object_add(y, "comm", json_object_new_string(v->comm));
                        json_object_object_add(y, "processes", json_object_new_int((int) v->n_processes));
                        json_object_object_add(y, "unit", v->unit ? json_object_new_string(v->unit) : NULL);
                        json_object_object_add(y, "user_unit", v->user_unit ? json_object_new_string(v->user_unit) : NULL);
                        json_object_object_add(y, "machine", v->machine ? json_object_new_string(v->machine) : NULL);
                        json_object_object_add(y, "own_root", json_object_new_boolean(v->own_root));
                        json_object_object_add(y, "state", json_object_new_string(ns_view_state_to_string(v->state)));
                        if (v->error < 0)
                                json_object_object_add(y, "error", json_object_new_string(namespace_view_error(v)));
                        json_object_object_add(y, "generation", json_object_new_uint64(v->generation));
                        json_object_object_add(y, "dev", dev ? json_object_new_string(dev) : NULL);
                        json_object_object_add(y, "mount_id", json_object_new_uint64(v->mnt_id));
                        json_object_object_add(y, "flags", v->attr_known ?
                                               json_object_new_string(mount_attr_to_string(v->attr, flags, sizeof(flags))) : NULL);
                        free(dev);
                        json_object_array_add(views, y);
                }
                json_object_object_add(x, "namespaces", views);
                json_object_array_add(a, x);
        }
        json_object_object_add(o, "hierarchies", a);
        return o;
}
