/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * os-release(5) style KEY=VALUE files (os-release, extension-release): shell
 * quoting without expansion, '#' comments. The result is a strv of
 * alternating keys and values; a later assignment of a key wins.
 */

/*
 * Lines that are not assignments (no '=', invalid key) are skipped and
 * counted in *ret_skipped (may be NULL), as systemd skips them. An
 * unterminated quote makes the whole file invalid: -EBADMSG, with a reason
 * in *ret_error ("line 3: unterminated quote").
 */
int env_file_parse(const char *text, char ***ret_pairs, unsigned *ret_skipped, char **ret_error);

/* The value of the last assignment to key, or NULL. */
const char *env_pairs_get(char * const *pairs, const char *key);
