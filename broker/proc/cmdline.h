/*
 * SPDX-License-Identifier: Apache-2.0
 * roostd's command-line options: one table (long name, short letter,
 * argument, help) that makes --help, getopt_long's tables and the
 * OPTIONS of roostd(8), so the three cannot drift apart. What each option
 * does is main.c's parse_args (by the table's 'val').
 */
#ifndef ROOST_BROKER_CMDLINE_H
#define ROOST_BROKER_CMDLINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdio.h>

struct option;

struct cmdline_opt {
    const char *name;       /* --name */
    char val;               /* what getopt_long returns for it */
    bool is_short;          /* -val works too */
    const char *arg;        /* the argument's name; NULL: takes none */
    const char *help;       /* one paragraph, no line breaks */
};

extern const struct cmdline_opt cmdline_opts[];
extern const size_t cmdline_nopts;

/* "usage: roostd [options]" and every option with its help, wrapped. */
void cmdline_usage(FILE *fp);

/* getopt_long's long options (ending in a zero entry) and short-option
 * string, made from the table once; static, never freed. */
const struct option *cmdline_longopts(void);
const char *cmdline_shortopts(void);

#endif
