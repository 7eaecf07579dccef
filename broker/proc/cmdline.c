/*
 * SPDX-License-Identifier: Apache-2.0
 * The table of roostd's options (cmdline.h) and the three things made
 * from it: --help, getopt_long's tables, and (in manpage.c) roostd(8).
 */
#include "broker/proc/cmdline.h"

#include <getopt.h>
#include <string.h>

#include "broker/lib/util.h"

const struct cmdline_opt cmdline_opts[] = {
    { "config", 'c', true, "FILE",
      "read the configuration from FILE: key = value lines, as in "
      "rabbitmq.conf (roost.conf(5)); settings on the command line "
      "override it" },
    { "port", 'p', false, "N",
      "AMQP port (the port key; default 5672, 0 picks a free one and "
      "logs it)" },
    { "bind", 'b', false, "ADDR",
      "listen address (the bind key; default: all IPv4 and IPv6 "
      "addresses)" },
    { "data-dir", 'd', false, "DIR",
      "data directory (the data_dir key; default ./data)" },
    { "log-level", 'l', false, "LVL",
      "debug, info, warning or error (the log.level key)" },
    { "log-file", 'L', false, "FILE",
      "log file (the log.file key; default standard error)" },
    { "set", 's', true, "KEY=VALUE",
      "set any configuration key, as a line of the file would" },
    { "import-definitions", 'I', false, "FILE",
      "at start, add the vhosts, exchanges, queues and bindings of a "
      "RabbitMQ definitions file (JSON; the load_definitions key)" },
    { "export-definitions", 'E', false, "FILE",
      "write the definitions kept in the data directory of a stopped "
      "broker (--data-dir) as a RabbitMQ definitions file (- for standard "
      "output) and exit" },
    { "check-data", 'K', false, "DIR",
      "verify a stopped broker's data directory, print what it holds, "
      "and exit (0 clean, 1 corrupt, 2 cannot check)" },
    { "accept-data-loss", 'A', false, NULL,
      "start even though the definitions in the data directory are "
      "damaged or missing (else the start stops, naming --check-data): "
      "what cannot be read is lost, and so are the messages of the queues "
      "it defined" },
    { "ignore-unsupported", 'U', false, NULL,
      "skip, with a warning, RabbitMQ keys that Roost does not implement "
      "(else they stop the start when they would change anything)" },
    { "test-config", 't', true, NULL,
      "check the configuration (and its warnings) and exit" },
    { "dump-config", 'D', false, NULL,
      "print every key with its help and default (roost.conf) and exit" },
    { "man-page", 'M', false, "PAGE",
      "print the man page PAGE (roostd.8 or roost.conf.5) as roff and "
      "exit" },
    { "version", 'V', false, NULL, "print the version and exit" },
    { "help", 'h', true, NULL, "print this help and exit" },
};
const size_t cmdline_nopts = NELEMS(cmdline_opts);

/* Where the help column starts, and the width it is wrapped to. */
#define HELP_COL 24
#define WIDTH 79

void
cmdline_usage(FILE *fp)
{
    fprintf(fp, "usage: roostd [options]\n");
    for (size_t i = 0; i < cmdline_nopts; i++) {
        const struct cmdline_opt *o = &cmdline_opts[i];
        char left[64];
        int col;

        if (o->is_short)
            snprintf(left, sizeof(left), "  -%c, --%s%s%s", o->val, o->name,
                     o->arg ? " " : "", o->arg ? o->arg : "");
        else
            snprintf(left, sizeof(left), "      --%s%s%s", o->name,
                     o->arg ? " " : "", o->arg ? o->arg : "");
        fputs(left, fp);
        col = (int)strlen(left);
        if (col > HELP_COL - 2) {
            fputc('\n', fp);
            col = 0;
        }
        /* Word by word, each line starting at HELP_COL. */
        const char *w = o->help;
        bool first = true;
        while (*w != '\0') {
            size_t n = strcspn(w, " ");
            if (!first && col + 1 + (int)n > WIDTH) {
                fputc('\n', fp);
                col = 0;
                first = true;
            }
            if (first) {
                fprintf(fp, "%*s", HELP_COL - col, "");
                col = HELP_COL;
            } else {
                fputc(' ', fp);
                col++;
            }
            fwrite(w, 1, n, fp);
            col += (int)n;
            first = false;
            w += n;
            while (*w == ' ')
                w++;
        }
        fputc('\n', fp);
    }
}

/* One slot more than the table for getopt_long's zero entry. */
static struct option longopts[NELEMS(cmdline_opts) + 1];
static char shortopts[2 * NELEMS(cmdline_opts) + 1];

static void
build_tables(void)
{
    size_t n = 0;

    if (longopts[0].name != NULL)
        return;
    for (size_t i = 0; i < cmdline_nopts; i++) {
        const struct cmdline_opt *o = &cmdline_opts[i];
        longopts[i] = (struct option){
            o->name, o->arg ? required_argument : no_argument, NULL, o->val,
        };
        if (o->is_short) {
            shortopts[n++] = o->val;
            if (o->arg)
                shortopts[n++] = ':';
        }
    }
    shortopts[n] = '\0';
}

const struct option *
cmdline_longopts(void)
{
    build_tables();
    return longopts;
}

const char *
cmdline_shortopts(void)
{
    build_tables();
    return shortopts;
}
