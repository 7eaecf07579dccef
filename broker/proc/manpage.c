/*
 * SPDX-License-Identifier: Apache-2.0
 * The two man pages of roostd (manpage.h). The prose around the tables
 * is here; each option's and key's own words are its help in the table.
 */
#include "broker/proc/manpage.h"

#include <string.h>

#include "base/roff.h"
#include "broker/lib/config.h"
#include "broker/proc/cmdline.h"

/* The installed configuration file, as configure was told (-D in
 * Makefile.am); a build without it names the source tree's. */
#ifndef ROOST_SYSCONFDIR
#define ROOST_SYSCONFDIR "/etc"
#endif

static void
roostd_page(FILE *fp)
{
    roff_header(fp, "roostd", "8", "System Administration",
                "AMQP 0-9-1 message broker that RabbitMQ clients use "
                "unchanged");
    fputs(".SH SYNOPSIS\n.B roostd\n.RI [ options ]\n", fp);
    fputs(".SH DESCRIPTION\n.B roostd\n", fp);
    roff_line(fp,
        "is an AMQP 0-9-1 broker: clients written for RabbitMQ connect to "
        "it unchanged. It keeps durable exchanges, queues, bindings and "
        "persistent messages in its data directory, and serves RabbitMQ's "
        "management HTTP API (used by");
    fputs(".BR roostctl (8))\n", fp);
    roff_line(fp, "and Prometheus metrics.");
    fputs(".PP\n", fp);
    roff_line(fp,
        "Every setting is a key of the configuration file (see");
    fputs(".BR roost.conf (5));\n", fp);
    roff_line(fp,
        "the options below that set one are shorthands for --set. "
        "Settings are applied in order: the defaults, the file, then the "
        "command line. Nothing starts unless all of them are valid.");
    fputs(".PP\n", fp);
    roff_line(fp,
        "roostd logs to standard error unless log.file names a file; under "
        "systemd that is the journal. It is ready for connections when it "
        "logs \"server startup complete\", after the store has been "
        "recovered and every listener is open.");

    fputs(".SH OPTIONS\n", fp);
    for (size_t i = 0; i < cmdline_nopts; i++) {
        const struct cmdline_opt *o = &cmdline_opts[i];
        fputs(".TP\n", fp);
        roff_option(fp, o->is_short ? o->val : 0, o->name, o->arg);
        roff_line(fp, o->help);
    }

    fputs(".SH SIGNALS\n.TP\n.BR SIGTERM \", \" SIGINT\n", fp);
    roff_line(fp,
        "Stop listening, close every connection with 320 "
        "(CONNECTION_FORCED), wait up to close_timeout for clients to "
        "go, sync the store and exit 0.");
    fputs(".TP\n.B SIGHUP\n", fp);
    roff_line(fp,
        "Reload: make the configuration again as at start (the defaults, "
        "the -c file, the command-line settings) with the TLS "
        "certificates it names, and check all of it; then apply the keys "
        "that roost.conf(5) says SIGHUP applies, and log every other "
        "change as needing a restart. When anything is invalid nothing is "
        "applied and the error is logged. The log file is reopened (for log "
        "rotation) in any case. Open TLS connections keep their "
        "certificates. Under systemd: systemctl reload roost.");
    fputs(".SH SYSTEMD\n", fp);
    roff_line(fp,
        "Started by systemd (roost.service, Type=notify), roostd reports "
        "READY=1 once the store is recovered and the listeners are open, "
        "extends the start timeout while a large store is recovered, "
        "reports RELOADING=1 around a reload and STOPPING=1 at a stop, and "
        "sends WATCHDOG=1 at half the unit's WatchdogSec.");

    fputs(".SH EXIT STATUS\n", fp);
    roff_line(fp,
        "0 after a clean stop or a successful offline command; 1 when the "
        "broker could not start (a listener, the store) or an offline "
        "command failed; 2 for a bad command line or configuration.");

    fputs(".SH FILES\n.TP\n", fp);
    roff_path(fp, ROOST_SYSCONFDIR "/roost/roost.conf");
    roff_line(fp,
        "The configuration file the service reads (roostd itself reads "
        "only the file given with -c).");
    fputs(".TP\n", fp);
    roff_path(fp, "/var/lib/roost");
    roff_line(fp,
        "The data directory of the packaged service (roost.service); "
        "roostd's own default is ./data.");

    fputs(".SH SEE ALSO\n.BR roost.conf (5),\n.BR roostctl (8),\n"
          ".BR systemctl (1),\n.BR journalctl (1)\n", fp);
}

/* What a key's value is, in words. */
static const char *
type_words(enum opt_type t)
{
    switch (t) {
    case OPT_INT:
    case OPT_INT64:
        return "integer";
    case OPT_DOUBLE:
        return "number";
    case OPT_BOOL:
        return "true or false";
    case OPT_STRING:
        return "string";
    case OPT_LOG_LEVEL:
        return "debug, info, warning or error";
    case OPT_LIST:
        return "list, one key per entry";
    case OPT_BYTES:
        return "bytes, as digits or with a unit: kB, MB, GB (powers of "
               "1000), KiB, MiB, GiB, k, m, g (powers of 1024)";
    case OPT_BYTESIZE:
        return "bytes, as digits or with a unit: KB, MB, GB (powers of "
               "1024)";
    }
    return "?";
}

static void
conf_page(FILE *fp)
{
    roff_header(fp, "roost.conf", "5", "File Formats",
                "configuration file of roostd");
    fputs(".SH SYNOPSIS\n", fp);
    roff_path(fp, ROOST_SYSCONFDIR "/roost/roost.conf");
    fputs(".SH DESCRIPTION\n", fp);
    roff_line(fp,
        "The file that roostd -c FILE reads: one \"key = value\" setting a "
        "line, in the syntax of RabbitMQ's rabbitmq.conf, whose key names "
        "it uses where RabbitMQ has the same setting. A line starting with "
        "# is a comment; blank lines are ignored. An unknown key or a bad "
        "value stops roostd at startup with \"file:line: message\"; "
        "roostd -t -c FILE checks a file and exits.");
    fputs(".PP\n", fp);
    roff_line(fp,
        "A list key P takes any number of keys P.NAME (such as "
        "listeners.tcp.default = 5672), kept in the order first given; "
        "P = none empties it. Any key can also be given on roostd's "
        "command line as --set key=value, which wins over the file.");
    fputs(".PP\n", fp);
    roff_line(fp,
        "roostd --dump-config prints every key below, commented out with "
        "its default: the installed file is that output.");

    fputs(".SH KEYS\n", fp);
    for (size_t i = 0; i < config_nopts; i++) {
        const struct opt_def *o = &config_opts[i];
        fputs(".TP\n.B ", fp);
        roff_text(fp, o->name);
        if (o->type == OPT_LIST)
            fputs("\\fB.\\fINAME\\fR", fp);
        fputs("\n", fp);
        roff_line(fp, o->help);
        fputs(".br\n", fp);
        fprintf(fp, "Type: ");
        roff_text(fp, type_words(o->type));
        if (o->type == OPT_INT || o->type == OPT_INT64 ||
            o->type == OPT_DOUBLE || o->type == OPT_BYTES ||
            o->type == OPT_BYTESIZE)
            fprintf(fp, ", %lld to %lld", (long long)o->min,
                    (long long)o->max);
        fputs(". Default: ", fp);
        if (o->def[0] == '\0')
            fputs("none", fp);
        else
            roff_font(fp, 'B', o->def);
        fputs(o->reloadable ? ". SIGHUP applies a change.\n"
                            : ". A change needs a restart.\n", fp);
    }

    fputs(".SH EXAMPLE\n.EX\n", fp);
    roff_line(fp,
        "listeners.tcp.default = 5672\n"
        "default_user = admin\n"
        "default_pass = change-me\n"
        "vm_memory_high_watermark.relative = 0.6\n"
        "management.tcp.port = 15672\n"
        "log.level = warning");
    fputs(".EE\n", fp);
    fputs(".SH SEE ALSO\n.BR roostd (8),\n.BR roostctl (8)\n", fp);
}

int
manpage_write(FILE *fp, const char *page)
{
    if (strcmp(page, "roostd.8") == 0)
        roostd_page(fp);
    else if (strcmp(page, "roost.conf.5") == 0)
        conf_page(fp);
    else
        return -1;
    return 0;
}
