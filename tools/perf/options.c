/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * roost-perf's command line: the options with their defaults, the text of
 * --help (which is also the OPTIONS of roost-perf(1), --man-page), and
 * parse_args(), which reads them, checks them against each other and
 * derives the topology (how many queues, whether every queue gets every
 * message). A usage error exits here, with EXIT_USAGE.
 */
#include <amqp.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/roff.h"
#include "perf.h"

const char *const xtype_names[] = { "default", "direct", "fanout", "topic" };

struct opts o = {
    .host = "localhost", .user = "guest", .pass = "guest", .vhost = "/",
    .port = 0, .producers = 1, .consumers = 1, .queues = 1, .size = 1024,
    .multi_ack = 1, .exchange = X_DIRECT, .prefix = "roost-perf-",
    .batch = 16384, .drain_timeout = 10, .interval = 1, .frame_max = 131072,
};

int nqueues;
bool broadcast;

/* --help, and the OPTIONS of roost-perf(1) (--man-page), so the two are
 * one text. */
static const char usage_text[] =
"usage: roost-perf [options]\n"
"Connection:\n"
"  --uri URI             amqp[s]://user:pass@host:port/vhost\n"
"  --host H --port N     broker address (default localhost:5672, 5671 with --tls)\n"
"  --user U --password P --vhost V   (default guest, guest, /)\n"
"  --tls                 connect with TLS; --cacert FILE, --cert FILE, --key FILE\n"
"  --insecure            with --tls: do not verify the broker's certificate\n"
"  --frame-max N         frame_max to ask for (default 131072)\n"
"Load:\n"
"  --producers N --consumers N   threads, one connection each (default 1, 1)\n"
"  --queues N            queues; producer i publishes to queue i % N (default 1)\n"
"  --exchange T          direct, fanout, topic or default (default direct)\n"
"  --fanout M            M queues, each gets every message\n"
"  --size BYTES          body size, at least 16 (default 1024)\n"
"  --rate R              msgs/s per producer, 0 = unlimited (default 0)\n"
"  --duration S          publish for S seconds (default 10 unless --count)\n"
"  --count N             messages per producer; consume-only: messages in total\n"
"  --confirm N           publisher confirms, N outstanding per producer\n"
"  --persistent          durable queues, delivery mode 2\n"
"  --queue-type T        declare the queues durable with x-queue-type T\n"
"                        (classic, quorum)\n"
"  --queue-mode M        declare the queues with x-queue-mode M (lazy)\n"
"  --stream-offset V     consume with x-stream-offset V (first, last, next or\n"
"                        an offset; with --queue-type stream): each consumer\n"
"                        reads every message, checked in its own order\n"
"  --prefetch N          basic.qos per consumer (default 0: none)\n"
"  --autoack             no acks (default: manual acks)\n"
"  --multi-ack N         ack every N messages with multiple=true (default 1)\n"
"  --publish-only        publish, leave the messages queued and exit\n"
"  --consume-only        drain the queues (until empty, or --count received)\n"
"  --queue-prefix P      names: P0, P1... and exchange P<type> (default roost-perf-)\n"
"  --keep                do not delete the queues and exchange at the end\n"
"  --batch BYTES         gather writes up to BYTES (default 16384); 0 = one\n"
"                        amqp_basic_publish / amqp_basic_ack per message\n"
"  --drain-timeout S     stop waiting for messages after S s without any (10)\n"
"Output:\n"
"  --json                JSON report on standard output\n"
"  --interval S          progress on standard error every S s (default 1)\n"
"  --quiet               no progress lines\n"
"  --fail-on-loss        exit 5 if messages were lost, duplicated or reordered\n"
"Other:\n"
"  -h, --help            this help\n"
"  --man-page            print the man page roost-perf(1) as roff\n"
"Exit: 0 ok, 1 usage, 2 connect/login, 3 refused (540 NOT_IMPLEMENTED),\n"
"      4 broker error, 5 loss (with --fail-on-loss)\n";

static void
usage(FILE *f)
{
    fputs(usage_text, f);
}

/* roost-perf(1): the help above as its options, between a few words on
 * what the tool is and does. */
static void
man_page(FILE *f)
{
    roff_header(f, "roost-perf", "1", "User Commands",
                "load generator for AMQP 0-9-1 brokers");
    fputs(".SH SYNOPSIS\n.B roost-perf\n.RI [ options ]\n"
          ".SH DESCRIPTION\n.B roost-perf\n", f);
    roff_line(f,
        "runs producers and consumers against an AMQP 0-9-1 broker (Roost "
        "or RabbitMQ), one thread and connection each, for a duration or a "
        "count of messages, and reports the rates, the end-to-end latency "
        "(each body carries its send time) and every message lost, "
        "duplicated or reordered.");
    fputs(".SH OPTIONS\n.nf\n", f);
    /* As --help prints them, in no-fill mode, without the usage line. */
    roff_text(f, strchr(usage_text, '\n') + 1);
    fputs(".fi\n.SH SEE ALSO\n.BR roostd (8)\n", f);
}

static double
num_arg(const char *name, const char *s, double min, double max)
{
    char *end;
    double v;
    errno = 0;
    v = strtod(s, &end);
    if (errno != 0 || end == s || *end != '\0' || !(v >= min && v <= max)) {
        fprintf(stderr, "roost-perf: %s: '%s' is not a number in [%g, %g]\n",
                name, s, min, max);
        exit(EXIT_USAGE);
    }
    return v;
}

enum opt_id {
    O_URI = 256, O_HOST, O_PORT, O_USER, O_PASS, O_VHOST, O_TLS, O_CACERT,
    O_CERT, O_KEY, O_INSECURE, O_FRAME_MAX, O_PRODUCERS, O_CONSUMERS,
    O_QUEUES, O_EXCHANGE, O_FANOUT, O_SIZE, O_RATE, O_DURATION, O_COUNT,
    O_CONFIRM, O_PERSISTENT, O_QUEUE_TYPE, O_QUEUE_MODE, O_STREAM_OFFSET,
    O_PREFETCH,
    O_AUTOACK, O_MULTI_ACK, O_PUBLISH_ONLY, O_CONSUME_ONLY, O_PREFIX, O_KEEP,
    O_BATCH, O_DRAIN, O_JSON, O_INTERVAL, O_QUIET, O_FAIL_ON_LOSS, O_HELP,
    O_MAN_PAGE,
};

/* Every option --help lists (tests/integration/manpages.sh checks it). */
static const struct option long_options[] = {
    { "uri", 1, 0, O_URI }, { "host", 1, 0, O_HOST },
    { "port", 1, 0, O_PORT }, { "user", 1, 0, O_USER },
    { "password", 1, 0, O_PASS }, { "vhost", 1, 0, O_VHOST },
    { "tls", 0, 0, O_TLS }, { "cacert", 1, 0, O_CACERT },
    { "cert", 1, 0, O_CERT }, { "key", 1, 0, O_KEY },
    { "insecure", 0, 0, O_INSECURE }, { "frame-max", 1, 0, O_FRAME_MAX },
    { "producers", 1, 0, O_PRODUCERS }, { "consumers", 1, 0, O_CONSUMERS },
    { "queues", 1, 0, O_QUEUES }, { "exchange", 1, 0, O_EXCHANGE },
    { "fanout", 1, 0, O_FANOUT }, { "size", 1, 0, O_SIZE },
    { "rate", 1, 0, O_RATE }, { "duration", 1, 0, O_DURATION },
    { "count", 1, 0, O_COUNT }, { "confirm", 1, 0, O_CONFIRM },
    { "persistent", 0, 0, O_PERSISTENT },
    { "queue-type", 1, 0, O_QUEUE_TYPE },
    { "queue-mode", 1, 0, O_QUEUE_MODE },
    { "stream-offset", 1, 0, O_STREAM_OFFSET },
    { "prefetch", 1, 0, O_PREFETCH }, { "autoack", 0, 0, O_AUTOACK },
    { "multi-ack", 1, 0, O_MULTI_ACK },
    { "publish-only", 0, 0, O_PUBLISH_ONLY },
    { "consume-only", 0, 0, O_CONSUME_ONLY },
    { "queue-prefix", 1, 0, O_PREFIX }, { "keep", 0, 0, O_KEEP },
    { "batch", 1, 0, O_BATCH }, { "drain-timeout", 1, 0, O_DRAIN },
    { "json", 0, 0, O_JSON }, { "interval", 1, 0, O_INTERVAL },
    { "quiet", 0, 0, O_QUIET }, { "fail-on-loss", 0, 0, O_FAIL_ON_LOSS },
    { "help", 0, 0, O_HELP }, { "man-page", 0, 0, O_MAN_PAGE },
    { 0, 0, 0, 0 },
};

static char *uri_copy;          /* --uri, which 'o' points into */

static void
parse_uri(const char *arg)
{
    struct amqp_connection_info ci;

    free(uri_copy);
    uri_copy = strdup(arg);
    if (uri_copy == NULL || amqp_parse_url(uri_copy, &ci) != 0) {
        fprintf(stderr, "roost-perf: --uri: cannot parse '%s'\n", arg);
        exit(EXIT_USAGE);
    }
    o.host = ci.host;
    o.port = ci.port;
    o.user = ci.user;
    o.pass = ci.password;
    o.vhost = ci.vhost;
    o.tls = ci.ssl;
}

static enum xtype
xtype_arg(const char *arg)
{
    for (int i = 0; i < 4; i++)
        if (strcmp(arg, xtype_names[i]) == 0)
            return (enum xtype)i;
    fprintf(stderr, "roost-perf: --exchange: '%s' is not direct, "
            "fanout, topic or default\n", arg);
    exit(EXIT_USAGE);
}

/* --help's "Connection:" options; false if 'c' is not one of them. */
static bool
conn_option(int c, char *arg, bool *have_port)
{
    switch (c) {
    case O_URI:
        parse_uri(arg);
        *have_port = true;
        break;
    case O_HOST: o.host = arg; break;
    case O_PORT:
        o.port = (int)num_arg("--port", arg, 1, 65535);
        *have_port = true;
        break;
    case O_USER: o.user = arg; break;
    case O_PASS: o.pass = arg; break;
    case O_VHOST: o.vhost = arg; break;
    case O_TLS: o.tls = true; break;
    case O_CACERT: o.cacert = arg; break;
    case O_CERT: o.cert = arg; break;
    case O_KEY: o.key = arg; break;
    case O_INSECURE: o.insecure = true; break;
    case O_FRAME_MAX:
        o.frame_max = (int)num_arg("--frame-max", arg, 4096, 1 << 24);
        break;
    default:
        return false;
    }
    return true;
}

/* --help's "Load:" options; false if 'c' is not one of them. */
static bool
load_option(int c, char *arg, bool *have_duration)
{
    switch (c) {
    case O_PRODUCERS:
        o.producers = (int)num_arg("--producers", arg, 0, MAX_PRODUCERS);
        break;
    case O_CONSUMERS:
        o.consumers = (int)num_arg("--consumers", arg, 0, 4096);
        break;
    case O_QUEUES: o.queues = (int)num_arg("--queues", arg, 1, 4096); break;
    case O_EXCHANGE: o.exchange = xtype_arg(arg); break;
    case O_FANOUT: o.fanout = (int)num_arg("--fanout", arg, 1, 4096); break;
    case O_SIZE:
        o.size = (size_t)num_arg("--size", arg, STAMP_LEN, 1 << 27);
        break;
    case O_RATE: o.rate = num_arg("--rate", arg, 0, 1e9); break;
    case O_DURATION:
        o.duration = num_arg("--duration", arg, 0, 1e7);
        *have_duration = true;
        break;
    case O_COUNT: o.count = (uint64_t)num_arg("--count", arg, 0, 4e9); break;
    case O_CONFIRM:
        o.confirm = (int)num_arg("--confirm", arg, 0, 1 << 20);
        break;
    case O_PERSISTENT: o.persistent = true; break;
    case O_QUEUE_TYPE: o.queue_type = arg; break;
    case O_QUEUE_MODE: o.queue_mode = arg; break;
    case O_STREAM_OFFSET: o.stream_offset = arg; break;
    case O_PREFETCH:
        o.prefetch = (int)num_arg("--prefetch", arg, 0, 65535);
        break;
    case O_AUTOACK: o.autoack = true; break;
    case O_MULTI_ACK:
        o.multi_ack = (int)num_arg("--multi-ack", arg, 1, 1 << 20);
        break;
    case O_PUBLISH_ONLY: o.publish_only = true; break;
    case O_CONSUME_ONLY: o.consume_only = true; break;
    case O_PREFIX: o.prefix = arg; break;
    case O_KEEP: o.keep = true; break;
    case O_BATCH: o.batch = (size_t)num_arg("--batch", arg, 0, 1 << 24); break;
    case O_DRAIN:
        o.drain_timeout = num_arg("--drain-timeout", arg, 0.1, 1e6);
        break;
    default:
        return false;
    }
    return true;
}

/* --help's "Output:" options; false if 'c' is not one of them. */
static bool
output_option(int c, char *arg)
{
    switch (c) {
    case O_JSON: o.json = true; break;
    case O_INTERVAL: o.interval = num_arg("--interval", arg, 0, 1e6); break;
    case O_QUIET: o.quiet = true; break;
    case O_FAIL_ON_LOSS: o.fail_on_loss = true; break;
    default:
        return false;
    }
    return true;
}

/*
 * The options against each other: the defaults that depend on others, the
 * mode (--publish-only, --consume-only, or both), and the topology.
 */
static void
check_args(bool have_port, bool have_duration)
{
#define USAGE_IF(cond, ...) do { if (cond) { \
        fprintf(stderr, "roost-perf: " __VA_ARGS__); fputc('\n', stderr); \
        exit(EXIT_USAGE); } } while (0)
    if (!have_port)
        o.port = o.tls ? 5671 : 5672;
    USAGE_IF(o.publish_only && o.consume_only,
             "--publish-only and --consume-only exclude each other");
    if (o.publish_only)
        o.consumers = 0;
    if (o.consume_only)
        o.producers = 0;
    if (o.consumers == 0)
        o.publish_only = true;
    if (o.producers == 0)
        o.consume_only = true;
    USAGE_IF(o.publish_only && o.consume_only,
             "nothing to do: no producers and no consumers");
    if (!have_duration && o.count == 0 && !o.consume_only)
        o.duration = 10;
    if (o.publish_only && o.duration == 0 && o.count == 0)
        USAGE_IF(true, "--publish-only needs --duration or --count");
    USAGE_IF((o.cert != NULL || o.key != NULL || o.cacert != NULL) && !o.tls,
             "--cacert, --cert and --key need --tls");
    USAGE_IF(o.fanout > 0 && o.exchange == X_DEFAULT,
             "--fanout needs a direct, fanout or topic exchange");
    USAGE_IF(!o.autoack && o.prefetch > 0 && o.multi_ack > o.prefetch,
             "--multi-ack %d > --prefetch %d would stall the consumers",
             o.multi_ack, o.prefetch);
    nqueues = o.fanout > 0 ? o.fanout : o.queues;
    broadcast = o.fanout > 0 || o.exchange == X_FANOUT;
    USAGE_IF(!o.publish_only && o.consumers < nqueues,
             "%d queue(s) need at least as many consumers (have %d)", nqueues,
             o.consumers);
    USAGE_IF(strlen(o.prefix) > 200, "--queue-prefix is too long");
#undef USAGE_IF
}

void
parse_args(int argc, char **argv)
{
    bool have_duration = false, have_port = false;
    int c;

    while ((c = getopt_long(argc, argv, "h", long_options, NULL)) != -1) {
        if (conn_option(c, optarg, &have_port) ||
            load_option(c, optarg, &have_duration) ||
            output_option(c, optarg))
            continue;
        switch (c) {
        case 'h':
        case O_MAN_PAGE:
            man_page(stdout);
            exit(0);
        case O_HELP:
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            exit(EXIT_USAGE);
        }
    }
    if (optind < argc) {
        fprintf(stderr, "roost-perf: unexpected argument '%s'\n", argv[optind]);
        exit(EXIT_USAGE);
    }
    check_args(have_port, have_duration);
}

void
options_free(void)
{
    free(uri_copy);
    uri_copy = NULL;
}
