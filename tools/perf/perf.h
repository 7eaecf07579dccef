/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * roost-perf's internal interface: the constants, types, globals and
 * functions its files share (tools/perf/main.c says what each file does).
 * Every global says which file owns it, that is sets it, and when; the
 * others only read it. Whatever one file alone uses stays static there.
 */
#ifndef ROOST_TOOLS_PERF_PERF_H
#define ROOST_TOOLS_PERF_PERF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * Exit status: 0 done (see the report for lost messages, or use
 * --fail-on-loss), 1 usage or internal error, 2 cannot connect or log in,
 * 3 the broker refused a feature with 540 NOT_IMPLEMENTED (e.g.
 * "confirm.select refused: 540 NOT_IMPLEMENTED - ..."), 4 any other broker
 * error or a connection lost during the run, 5 --fail-on-loss and messages
 * were lost, duplicated or reordered.
 */
#define EXIT_USAGE 1
#define EXIT_CONNECT 2
#define EXIT_REFUSED 3
#define EXIT_BROKER 4
#define EXIT_INTEGRITY 5

#define CH 1                    /* every connection works on channel 1 */
#define STAMP_LEN 16
#define MAX_PRODUCERS 1024      /* producer ids tracked per queue */

/* ---- options: options.c ---- */

enum xtype { X_DEFAULT, X_DIRECT, X_FANOUT, X_TOPIC };
extern const char *const xtype_names[];  /* by enum xtype, as --exchange */

/*
 * The command line. Owned by options.c: parse_args() fills it before any
 * thread starts, and nothing changes it after.
 */
struct opts {
    char *host, *user, *pass, *vhost;
    int port;
    bool tls, insecure;
    char *cacert, *cert, *key;
    int producers, consumers, queues, fanout;
    size_t size;
    double rate;                /* msgs/s per producer, 0 = unlimited */
    double duration;            /* seconds, 0 = until --count */
    uint64_t count;             /* per producer; consume-only: total */
    int confirm;                /* outstanding confirms per producer */
    bool persistent;
    const char *queue_type;     /* x-queue-type, or NULL */
    const char *queue_mode;     /* x-queue-mode, or NULL */
    int prefetch;
    bool autoack;
    int multi_ack;
    enum xtype exchange;
    bool publish_only, consume_only;
    bool json, quiet, keep, fail_on_loss;
    char *prefix;
    size_t batch;
    double drain_timeout;       /* no-progress limit once producers stop */
    double interval;            /* progress lines on stderr */
    int frame_max;
};
extern struct opts o;

/* Derived topology, set by parse_args() with 'o'. */
extern int nqueues;
extern bool broadcast;          /* every message goes to every queue */

/*
 * Parses and checks the command line into 'o', 'nqueues' and 'broadcast'.
 * Exits on --help and --man-page (0) and on a usage error (EXIT_USAGE,
 * after saying why on stderr).
 */
void parse_args(int argc, char **argv);
/* Frees what parse_args() kept of --uri ('o' points into it). */
void options_free(void);

#endif
