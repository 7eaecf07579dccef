/*
 * SPDX-License-Identifier: Apache-2.0
 * roostd(8) and roost.conf(5), written from the tables they document
 * (cmdline_opts[] and config_opts[]) so that neither page can drift from
 * the program. `roostd --man-page PAGE` prints one; the build installs
 * what it prints.
 */
#ifndef ROOST_BROKER_MANPAGE_H
#define ROOST_BROKER_MANPAGE_H

#include <stdio.h>

/* Write 'page' ("roostd.8" or "roost.conf.5") to 'fp' as roff. Returns
 * 0, or -1 for a page it does not know (nothing written). */
int manpage_write(FILE *fp, const char *page);

#endif
