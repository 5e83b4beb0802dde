/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>

/*
 * Pipes stdout (and stderr, if it is the terminal too) into a pager, as
 * systemd's tools do: only if @enabled (no --no-pager) and stdout is a
 * terminal; $SYSTEMD_PAGER or $PAGER ("" or "cat": none), else pager, less,
 * more; secure mode per $SYSTEMD_PAGERSECURE. Returns 1 if a pager runs.
 */
int pager_open(bool enabled);
/* Hands the pager EOF and waits for it to quit. */
void pager_close(void);
