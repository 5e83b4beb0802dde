/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Placeholder until libtuck's core lands (branch core): see engine.h. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine.h"
#include "macro.h"

struct Engine {
        char *paths[3];
        char *dirs[6];
};

static const char *const engine_verb_table[_ENGINE_VERB_MAX] = {
        [ENGINE_MERGE] = "merge",
        [ENGINE_REFRESH] = "refresh",
        [ENGINE_UNMERGE] = "unmerge",
};

const char *engine_verb_to_string(EngineVerb v) {
        return v >= 0 && v < _ENGINE_VERB_MAX ? engine_verb_table[v] : NULL;
}

int engine_new(const char *root, const char *config, Engine **ret) {
        static const char *const h[] = { "/usr", "/opt", "/etc" };
        static const char *const d[] = { "/etc/extensions", "/run/extensions", "/var/lib/extensions",
                                         "/etc/confexts", "/run/confexts", "/var/lib/confexts" };
        Engine *e = calloc(1, sizeof *e);
        const char *r = strcmp(root, "/") == 0 ? "" : root;

        if (!e)
                return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(h); i++)
                if (asprintf(&e->paths[i], "%s%s", r, h[i]) < 0)
                        return -ENOMEM;
        for (size_t i = 0; i < ELEMENTSOF(d); i++)
                if (asprintf(&e->dirs[i], "%s%s", r, d[i]) < 0)
                        return -ENOMEM;
        *ret = e;
        return 0;
}

Engine *engine_free(Engine *e) {
        if (!e)
                return NULL;
        for (size_t i = 0; i < ELEMENTSOF(e->paths); i++)
                free(e->paths[i]);
        for (size_t i = 0; i < ELEMENTSOF(e->dirs); i++)
                free(e->dirs[i]);
        free(e);
        return NULL;
}

size_t engine_hierarchies(Engine *e, const char *const **ret) {
        *ret = (const char *const *) e->paths;
        return ELEMENTSOF(e->paths);
}

size_t engine_image_dirs(Engine *e, const char *const **ret) {
        *ret = (const char *const *) e->dirs;
        return ELEMENTSOF(e->dirs);
}

int engine_generation(Engine *e, size_t hierarchy, EngineGeneration *ret) {
        struct stat st;

        if (stat(e->paths[hierarchy], &st) < 0)
                return -errno;
        *ret = (EngineGeneration) { .generation = 0, .dev = st.st_dev };
        return 0;
}

int engine_run(Engine *e, EngineVerb verb, uint64_t flags, char **ret_error) {
        *ret_error = strdup("libtuck core is not merged yet");
        return -EOPNOTSUPP;
}

int engine_status_json(Engine *e, char **ret) {
        return -EOPNOTSUPP;
}

int engine_list_json(Engine *e, char **ret) {
        return -EOPNOTSUPP;
}

int engine_recover(Engine *e) {
        return 0;
}
