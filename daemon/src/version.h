/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Version-aware ordering, as systemd orders extension images and as the UAPI
 * group's Version Format Specification defines it.
 */

/* Returns <0, 0, >0 like strcmp(). NULL sorts like "". */
int strverscmp_improved(const char *a, const char *b);
