/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * /etc/tuck/tuck.conf as both of its readers load it: libtuck's
 * config_load() ([Sysext], [Confext], [Policy], StalePolicy=) and tuckd's
 * daemon_config_load() ([Daemon]). A file either loads, with values in
 * range, or is refused with an error naming the line.
 */

#include <stdlib.h>

#include "config.h"
#include "fuzz.h"
#include "tuckd-conf.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *path = NULL, *error = NULL;
        DaemonConfig d;
        TuckConfig c;
        int r;

        fuzz_setup();
        fuzz_write_file("tuck.conf", data, size);
        path = path_join(fuzz_dir(), "tuck.conf");
        fuzz_assert(path);

        /* On failure c is left done or with the defaults: config_done() either way, as context.c does. */
        r = config_load(&c, path, &error);
        if (r < 0)
                fuzz_assert(error || r == -ENOMEM);
        else {
                for (ImageClass k = 0; k < _IMAGE_CLASS_MAX; k++) {
                        STRV_FOREACH(p, c.search_dirs[k])
                                fuzz_assert(**p == '/');
                        STRV_FOREACH(p, c.hierarchies[k])
                                fuzz_assert(**p == '/');
                }
                fuzz_assert(stale_policy_to_string(c.stale_policy));
        }
        config_done(&c);

        r = daemon_config_load(path, &d);
        if (r == 0) {
                fuzz_assert(d.max_delay_usec >= d.quiet_usec);
                fuzz_assert(stale_policy_to_string(d.stale_policy));
        }
        return 0;
}
