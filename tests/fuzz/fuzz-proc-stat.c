/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * proc_stat_start_time(): field 22 of /proc/PID/stat, read for the witness
 * of every namespace wish. The comm field (field 2) is the process's own
 * choice (prctl(PR_SET_NAME)): spaces, parentheses, digits, anything but a
 * NUL, up to 15 bytes. A parsed start time must be what follows the last ')'
 * nineteen fields on.
 */

#include <stdlib.h>

#include "fuzz.h"
#include "stale.h"
#include "util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        _cleanup_free_ char *stat = NULL;
        const char *p;
        uint64_t t = 0;
        char *end;

        fuzz_setup();
        stat = fuzz_strndup(data, size);
        if (proc_stat_start_time(stat, &t) < 0)
                return 0;

        /* The same field, found another way: 20 spaces after the last ')'. */
        p = strrchr(stat, ')');
        fuzz_assert(p);
        for (unsigned spaces = 0; spaces < 20; p++)
                if (*p == ' ')
                        spaces++;
        fuzz_assert(strtoull(p, &end, 10) == t && end > p);
        return 0;
}
