/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <fcntl.h>
#include <inttypes.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "context.h"
#include "mountinfo.h"
#include "observe.h"
#include "status.h"
#include "swap.h"
#include "util.h"

#define STATUS_SCAN_USEC_MAX (2 * USEC_PER_SEC)

/* ---------------------------------------------------------------- systemd's tables */

/*
 * A table as systemd's format-table prints it: columns left-aligned, one
 * space apart, the last one not padded; a cell with several lines (a list)
 * takes as many lines, the other cells of the row empty there.
 */
typedef struct Table {
        size_t n_columns;
        char **cells;        /* row by row, n_columns each */
        size_t n_cells;
} Table;

static int table_add(Table *t, const char *cell) {
        char **a = realloc(t->cells, sizeof(char *) * (t->n_cells + 1));

        if (!a)
                return -ENOMEM;
        t->cells = a;
        a[t->n_cells] = strdup(cell ?: "");
        return a[t->n_cells++] ? 0 : -ENOMEM;
}

static void table_done(Table *t) {
        for (size_t i = 0; i < t->n_cells; i++)
                free(t->cells[i]);
        free(t->cells);
}

/* Line @k of a cell ("" past its last), length in *ret_len. */
static const char *cell_line(const char *cell, size_t k, size_t *ret_len) {
        for (; k > 0 && cell; k--) {
                cell = strchr(cell, '\n');
                if (cell)
                        cell++;
        }
        if (!cell) {
                *ret_len = 0;
                return "";
        }
        *ret_len = strcspn(cell, "\n");
        return cell;
}

static size_t cell_lines(const char *cell) {
        size_t n = 1;

        for (const char *p = cell; (p = strchr(p, '\n')); p++)
                n++;
        return n;
}

/* Row 0 is the header: left out without @legend, and then not counted for widths. */
static void table_print(const Table *t, bool legend, FILE *f) {
        size_t width[8] = {}, first = legend ? 0 : t->n_columns;

        for (size_t i = first; i < t->n_cells; i++)
                for (size_t k = 0, n = cell_lines(t->cells[i]); k < n; k++) {
                        size_t len;

                        (void) cell_line(t->cells[i], k, &len);
                        if (len > width[i % t->n_columns])
                                width[i % t->n_columns] = len;
                }
        for (size_t row = first; row < t->n_cells; row += t->n_columns) {
                size_t lines = 1;

                for (size_t c = 0; c < t->n_columns; c++)
                        if (cell_lines(t->cells[row + c]) > lines)
                                lines = cell_lines(t->cells[row + c]);
                for (size_t k = 0; k < lines; k++) {
                        for (size_t c = 0; c < t->n_columns; c++) {
                                size_t len;
                                const char *s = cell_line(t->cells[row + c], k, &len);

                                if (c + 1 < t->n_columns)
                                        fprintf(f, "%.*s%*s ", (int) len, s, (int) (width[c] - len), "");
                                else
                                        fprintf(f, "%.*s", (int) len, s);
                        }
                        fputc('\n', f);
                }
        }
}

/* "Fri 2026-12-04 01:38:47 UTC", as systemd formats a timestamp; "-" for none. */
static char *format_timestamp_day(uint64_t usec) {
        time_t t = (time_t) (usec / 1000000);
        struct tm tm;
        char buf[64];

        if (usec == 0 || !localtime_r(&t, &tm) || strftime(buf, sizeof(buf), "%a %Y-%m-%d %H:%M:%S %Z", &tm) == 0)
                return strdup("-");
        return strdup(buf);
}

/* ---------------------------------------------------------------- list */

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

/* Which hierarchies use this image in their current generation, and the layer for it (if any). */
static char **image_active_in(const ImageList *l, const Image *img, const Layer **ret_layer) {
        char **where = calloc(1, sizeof(char *));

        if (ret_layer)
                *ret_layer = NULL;
        for (size_t i = 0; where && i < l->n_generations; i++) {
                const Generation *g = &l->generations[i];

                for (size_t k = 0; g->merged && k < g->n_layers; k++)
                        /* Unprivileged, no image is dissected: its file is all there is to match. */
                        if (g->class == img->class && img->fingerprint &&
                            (l->inspected ? streq_ptr(g->layers[k].fingerprint, img->fingerprint) :
                             image_fingerprint_same_file(g->layers[k].fingerprint, img->fingerprint))) {
                                (void) strv_extend(&where, g->hierarchy);
                                if (ret_layer)
                                        *ret_layer = &g->layers[k];
                        }
        }
        return where;
}

static const char *image_status(const ImageList *l, const Image *img) {
        _cleanup_strv_free_ char **active = NULL;

        if (img->state != IMAGE_CANDIDATE)
                return image_state_to_string(img->state);
        if (l->inspected)
                return img->valid ? "valid" : "invalid";
        /* Not inspected (not root): what the generation records say. */
        active = image_active_in(l, img, NULL);
        return strv_length(active) > 0 ? "active" : "not inspected";
}

/* systemd-sysext's image types: a directory, or a file ("raw", whatever its format). */
static const char *image_systemd_type(const Image *img) {
        return img->type == IMAGE_TYPE_DIRECTORY ? "directory" : "raw";
}

/* systemd-sysext's "time": a file's mtime, a directory's birth time (its mtime if there is none). */
static uint64_t image_time_usec(const Image *img) {
        struct statx sx;

        if (statx(AT_FDCWD, img->path, 0, STATX_MTIME | STATX_BTIME, &sx) < 0)
                return 0;
        if (img->type == IMAGE_TYPE_DIRECTORY && (sx.stx_mask & STATX_BTIME))
                return (uint64_t) sx.stx_btime.tv_sec * 1000000 + sx.stx_btime.tv_nsec / 1000;
        return (uint64_t) sx.stx_mtime.tv_sec * 1000000 + sx.stx_mtime.tv_nsec / 1000;
}

/* As systemd lists images: one per name and class (a shadowed one goes with its winner), by name. */
static int compare_listed(const void *a, const void *b) {
        const Image *x = *(Image * const *) a, *y = *(Image * const *) b;
        int r = strcmp(x->name, y->name);

        return r != 0 ? r : (int) x->class - (int) y->class;
}

static Image **images_listed(const ImageList *l, size_t *ret_n) {
        Image **a = calloc(l->n_images ?: 1, sizeof(Image *));
        size_t n = 0;

        for (size_t i = 0; a && i < l->n_images; i++)
                if (l->images[i]->state != IMAGE_SHADOWED)
                        a[n++] = l->images[i];
        if (a && n > 1)
                qsort(a, n, sizeof(Image *), compare_listed);
        *ret_n = n;
        return a;
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

void image_list_print(const ImageList *l, bool legend, FILE *f) {
        if (l->n_images == 0) {
                fprintf(f, "No extension images found.\n");
                return;
        }
        if (legend)
                fprintf(f, "%-8s %-20s %-10s %-12s %-13s %s\n", "CLASS", "NAME", "TYPE", "VERSION", "STATUS", "PATH");
        for (size_t i = 0; i < l->n_images; i++) {
                const Image *img = l->images[i];
                const Layer *layer;
                _cleanup_strv_free_ char **active = image_active_in(l, img, &layer);
                _cleanup_free_ char *joined = active ? strv_join(active, ",") : NULL;
                const char *version = img->version ?: layer ? layer->version : NULL;

                fprintf(f, "%-8s %-20s %-10s %-12s %-13s %s\n", image_class_to_string(img->class), img->name,
                        image_type_to_string(img->type), version ?: "-", image_status(l, img), img->path);
                if (img->state == IMAGE_SHADOWED || (img->state == IMAGE_MASKED && img->shadowed_by))
                        fprintf(f, "         %s by %s\n", image_state_to_string(img->state), img->shadowed_by);
                else if (img->state == IMAGE_MASKED)
                        fprintf(f, "         an empty directory: masks '%s' in lower-priority directories\n", img->name);
                else if (l->inspected && !img->valid && img->reason)
                        fprintf(f, "         not usable: %s\n", img->reason);
                else if (!isempty(joined))
                        fprintf(f, "         active in %s\n", joined);
                if (img->state == IMAGE_CANDIDATE && img->valid && img->protection != IMAGE_PROTECTION_UNPROTECTED)
                        image_protection_print(img, f);
        }
        if (!l->inspected)
                fprintf(f, "(not root: images are not inspected; what is active is read from %s records)\n",
                        "tuck's generation");
}

void image_list_print_table(const ImageList *l, bool legend, FILE *f) {
        _cleanup_free_ Image **listed = NULL;
        Table t = { .n_columns = 4 };
        size_t n;
        int r;

        listed = images_listed(l, &n);
        if (!listed)
                return;
        if (n == 0) {
                /* systemd-sysext logs this (stderr), the table stays empty. */
                fprintf(stderr, "No OS extensions found.\n");
                return;
        }
        r = table_add(&t, "NAME") ?: table_add(&t, "TYPE") ?: table_add(&t, "PATH") ?: table_add(&t, "TIME");
        for (size_t i = 0; r >= 0 && i < n; i++) {
                _cleanup_free_ char *time = format_timestamp_day(image_time_usec(listed[i]));

                r = table_add(&t, listed[i]->name) ?: table_add(&t, image_systemd_type(listed[i])) ?:
                    table_add(&t, listed[i]->path) ?: table_add(&t, time);
        }
        if (r >= 0)
                table_print(&t, legend, f);
        table_done(&t);
}

static json_object *image_to_json(const ImageList *l, const Image *img) {
        const Layer *layer;
        _cleanup_strv_free_ char **active = image_active_in(l, img, &layer);
        json_object *o = json_object_new_object(), *h = json_object_new_array(), *act = json_object_new_array(),
                    *shadows = json_object_new_array();
        uint64_t time = image_time_usec(img);

#define ADD_STR(k, v) json_object_object_add(o, k, (v) ? json_object_new_string(v) : NULL)
        /* systemd-sysext's keys */
        ADD_STR("name", img->name);
        ADD_STR("type", image_systemd_type(img));
        ADD_STR("path", img->path);
        json_object_object_add(o, "time", time > 0 ? json_object_new_uint64(time) : NULL);
        /* tuck's */
        ADD_STR("class", image_class_to_string(img->class));
        ADD_STR("format", image_type_to_string(img->type));
        ADD_STR("extension", img->extension ?: layer ? layer->extension : NULL);
        ADD_STR("status", image_status(l, img));
        ADD_STR("reason", img->reason);
        ADD_STR("masked_by", img->state == IMAGE_MASKED ? img->shadowed_by : NULL);
        ADD_STR("version", img->version ?: layer ? layer->version : NULL);
        ADD_STR("version_source", img->version_source ?: layer && layer->version ? "generation record" : NULL);
        ADD_STR("partition", img->partition);
        ADD_STR("protection", img->state == IMAGE_CANDIDATE && img->inspected ?
                image_protection_to_string(img->protection) : NULL);
        ADD_STR("root_hash_from", img->verity.root_hash_from);
        ADD_STR("signer", img->signer);
#undef ADD_STR
        if (img->kernel_sig != 0)
                json_object_object_add(o, "kernel_checked_signature", json_object_new_boolean(img->kernel_sig > 0));
        json_object_object_add(o, "inspected", json_object_new_boolean(l->inspected));
        json_object_object_add(o, "valid", l->inspected ?
                               json_object_new_boolean(img->state == IMAGE_CANDIDATE && img->valid) : NULL);
        STRV_FOREACH(x, img->hierarchies)
                json_object_array_add(h, json_object_new_string(*x));
        json_object_object_add(o, "hierarchies", h);
        STRV_FOREACH(x, active)
                json_object_array_add(act, json_object_new_string(*x));
        json_object_object_add(o, "active_in", act);
        for (size_t i = 0; i < l->n_images; i++)
                if (l->images[i]->state == IMAGE_SHADOWED && l->images[i]->class == img->class &&
                    streq(l->images[i]->name, img->name))
                        json_object_array_add(shadows, json_object_new_string(l->images[i]->path));
        json_object_object_add(o, "shadows", shadows);
        return o;
}

json_object *image_list_to_json(const ImageList *l) {
        _cleanup_free_ Image **listed = NULL;
        json_object *a = json_object_new_array();
        size_t n;

        listed = images_listed(l, &n);
        if (!listed) {
                json_object_put(a);
                return NULL;
        }
        for (size_t i = 0; a && i < n; i++)
                json_object_array_add(a, image_to_json(l, listed[i]));
        return a;
}

/* ---------------------------------------------------------------- status */

Status *status_free(Status *s) {
        if (!s)
                return NULL;
        for (size_t i = 0; i < s->n_hierarchies; i++) {
                generation_done(&s->hierarchies[i].generation);
                strv_free(s->hierarchies[i].foreign);
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

/*
 * systemd-sysext's overlay is on top (not yet taken over): what its metadata
 * says is merged, and since when (the mtime of the merged root, as
 * systemd-sysext status reports it).
 */
static int read_foreign(HierarchyStatus *h) {
        struct stat st;
        int r;

        r = observe_foreign_extensions(h->hierarchy, &h->foreign);
        if (r < 0)
                return r;
        if (stat(h->hierarchy->full, &st) == 0)
                h->foreign_since_usec = (uint64_t) st.st_mtim.tv_sec * 1000000 + st.st_mtim.tv_nsec / 1000;
        return 0;
}

static int hierarchy_status(TuckContext *c, bool privileged, ScanBudget *budget, HierarchyStatus *h) {
        _cleanup_free_ char *error = NULL;
        LiveState live = {};
        uint64_t id;
        struct stat st;
        int r;

        r = generation_load(c->run_dir, h->hierarchy->path, &h->generation, &error);
        if (r == -ENOMEM)
                return r;
        if (r < 0 && r != -ENOENT) {
                /* Said, not fatal: status is how one finds out what is wrong. */
                _cleanup_free_ char *path = generation_path(c->run_dir, h->hierarchy->path);

                (void) asprintf_safe(&h->record_error, "%s: %s", strna(path), error ?: strerror(-r));
                h->generation = (Generation) {};
        }
        if (stat(h->hierarchy->full, &st) == 0 && path_get_mnt_id(AT_FDCWD, h->hierarchy->full, &id) == 0)
                h->on_top = h->generation.merged && st.st_dev == h->generation.overlay_dev &&
                            id == h->generation.overlay_mnt_id;
        (void) path_get_mount_attr(AT_FDCWD, h->hierarchy->full, &h->attr);
        if (!h->on_top && observe_live(h->hierarchy, &h->generation, &live) >= 0 && live.top == TOP_SYSTEMD)
                (void) read_foreign(h);
        free(live.description);

        /* Other processes' mount namespaces are root's to read. */
        h->scanned = privileged;
        if (!privileged || (!h->generation.merged && h->generation.n_history == 0))
                return 0;
        return nsscan_hierarchy(c->root, h->hierarchy->full, &h->generation, budget, &h->views, &h->n_views);
}

static int compare_hierarchies(const void *a, const void *b) {
        const HierarchyStatus *x = a, *y = b;

        return strcmp(x->hierarchy->path, y->hierarchy->path);
}

int tuck_status(TuckContext *c, const TuckOptions *o, Status **ret) {
        Status *s = calloc(1, sizeof(Status));
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
        s->privileged = geteuid() == 0;
        s->beneath = s->privileged ? tuck_beneath_supported(c) : -EPERM;
        s->staging_mounts = s->privileged ? tuck_staging_mounts(c) : -EPERM;

        for (size_t i = 0; i < c->n_hierarchies; i++) {
                const TuckHierarchy *th = &c->hierarchies[i];
                HierarchyStatus *h;

                /* As systemd-sysext: a hierarchy that does not exist here is not listed. */
                if ((o && o->classes != 0 && !(o->classes & (1u << th->class))) || access(th->full, F_OK) < 0)
                        continue;
                h = &s->hierarchies[s->n_hierarchies++];
                h->hierarchy = th;
                r = hierarchy_status(c, s->privileged, &budget, h);
                if (r < 0) {
                        status_free(s);
                        return r;
                }
        }
        qsort(s->hierarchies, s->n_hierarchies, sizeof(HierarchyStatus), compare_hierarchies);
        *ret = s;
        return 0;
}

/* The extensions merged at a hierarchy, bottom to top, whoever merged them; NULL: none. */
static char **merged_extensions(const HierarchyStatus *h, uint64_t *ret_since) {
        const Generation *g = &h->generation;
        char **l;

        *ret_since = 0;
        if (h->foreign) {
                *ret_since = h->foreign_since_usec;
                return strv_copy(h->foreign);
        }
        if (!g->merged || !h->on_top)
                return NULL;
        l = calloc(g->n_layers + 1, sizeof(char *));
        for (size_t k = 0; l && k < g->n_layers; k++)
                if (!(l[k] = strdup(g->layers[k].name))) {
                        strv_free(l);
                        return NULL;
                }
        *ret_since = g->since_usec;
        return l;
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

static void print_namespaces(const HierarchyStatus *h, FILE *f) {
        const Generation *g = &h->generation;
        size_t current = 0, behind = 0, own = 0;

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
}

void status_print(const Status *s, FILE *f) {
        if (!s->privileged)
                fprintf(f, "MOVE_MOUNT_BENEATH: not probed (not root)\n");
        else
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

                fprintf(f, "%s (%s): ", h->hierarchy->path, image_class_to_string(h->hierarchy->class));
                if (h->foreign) {
                        _cleanup_free_ char *list = strv_join(h->foreign, " ");

                        fprintf(f, "merged by systemd-sysext: %s (tuck's next refresh takes it over)\n", strna(list));
                } else if (h->record_error)
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
                if (!s->privileged && g->merged)
                        fprintf(f, "  namespaces: not scanned (not root)\n");
                print_namespaces(h, f);
                for (size_t k = 0; k < g->n_held; k++) {
                        _cleanup_free_ char *d = hold_describe(&g->held[k], h->hierarchy->path);

                        fprintf(f, "  held back: %s\n", strna(d));
                }
        }
}

void status_print_table(const Status *s, bool legend, FILE *f) {
        Table t = { .n_columns = 3 };
        int r;

        r = table_add(&t, "HIERARCHY") ?: table_add(&t, "EXTENSIONS") ?: table_add(&t, "SINCE");
        for (size_t i = 0; r >= 0 && i < s->n_hierarchies; i++) {
                uint64_t since;
                _cleanup_strv_free_ char **l = merged_extensions(&s->hierarchies[i], &since);
                _cleanup_free_ char *joined = l ? strv_join(l, "\n") : NULL, *when = format_timestamp_day(since);

                r = table_add(&t, s->hierarchies[i].hierarchy->path) ?: table_add(&t, joined ?: "none") ?:
                    table_add(&t, l ? when : "-");
        }
        if (r >= 0)
                table_print(&t, legend, f);
        table_done(&t);
}

static json_object *view_to_json(const NamespaceView *v) {
        json_object *y = json_object_new_object();
        _cleanup_free_ char *dev = format_devnum(v->dev);
        char flags[48];

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
        return y;
}

/* One hierarchy: systemd-sysext's three keys first, then tuck's (the generation record and more). */
static json_object *hierarchy_status_to_json(const Status *s, const HierarchyStatus *h) {
        json_object *g = generation_to_json(&h->generation), *x = json_object_new_object(), *ext, *views, *held;
        uint64_t since;
        _cleanup_strv_free_ char **l = merged_extensions(h, &since);

        if (!g || !x) {
                json_object_put(g);
                json_object_put(x);
                return NULL;
        }
        json_object_object_add(x, "hierarchy", json_object_new_string(h->hierarchy->path));
        if (l) {
                ext = json_object_new_array();
                STRV_FOREACH(e, l)
                        json_object_array_add(ext, json_object_new_string(*e));
        } else
                ext = json_object_new_string("none");
        json_object_object_add(x, "extensions", ext);
        json_object_object_add(x, "since", l && since > 0 ? json_object_new_uint64(since) : NULL);
        /* Then the generation record's keys (generation, layers, overlay_dev, ...). */
        json_object_object_foreach(g, key, value)
                if (!json_object_object_get_ex(x, key, NULL))
                        json_object_object_add(x, key, json_object_get(value));
        json_object_put(g);

        json_object_object_add(x, "class", json_object_new_string(image_class_to_string(h->hierarchy->class)));
        json_object_object_add(x, "path", json_object_new_string(h->hierarchy->full));
        json_object_object_add(x, "merged_by", json_object_new_string(h->foreign ? "systemd-sysext" :
                                                                      l ? "tuck" : "none"));
        json_object_object_add(x, "on_top", json_object_new_boolean(h->on_top));
        json_object_object_add(x, "record_error", h->record_error ? json_object_new_string(h->record_error) : NULL);
        held = json_object_new_array();
        for (size_t k = 0; held && k < h->generation.n_held; k++) {
                json_object *y = hold_to_json(&h->generation.held[k]);
                _cleanup_free_ char *d = hold_describe(&h->generation.held[k], h->hierarchy->path),
                                    *line = hold_headline(&h->generation.held[k], h->hierarchy->path);

                json_object_object_add(y, "summary", line ? json_object_new_string(line) : NULL);
                json_object_object_add(y, "message", d ? json_object_new_string(d) : NULL);
                json_object_array_add(held, y);
        }
        json_object_object_add(x, "held_back", held);
        /* versions' "state" (status exits 3 when degraded), per hierarchy: the top level is systemd-sysext's array. */
        json_object_object_add(x, "state", json_object_new_string(
                                       h->generation.n_held > 0 || h->record_error ? "degraded" : "running"));
        json_object_object_add(x, "move_mount_beneath", s->beneath >= 0 ? json_object_new_boolean(s->beneath) : NULL);
        json_object_object_add(x, "staging_mounts", s->staging_mounts >= 0 ? json_object_new_int(s->staging_mounts) : NULL);
        if (!h->scanned) {
                json_object_object_add(x, "namespaces", NULL);
                return x;
        }
        views = json_object_new_array();
        for (size_t k = 0; k < h->n_views; k++)
                json_object_array_add(views, view_to_json(&h->views[k]));
        json_object_object_add(x, "namespaces", views);
        return x;
}

json_object *status_to_json(const Status *s) {
        json_object *a = json_object_new_array();

        for (size_t i = 0; a && i < s->n_hierarchies; i++) {
                json_object *x = hierarchy_status_to_json(s, &s->hierarchies[i]);

                if (x)
                        json_object_array_add(a, x);
        }
        return a;
}
