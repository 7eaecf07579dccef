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

#include <amqp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

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

/* ---- big-endian fields, for the frames roost-perf encodes itself ---- */

static inline uint8_t *
put8(uint8_t *p, uint8_t v)
{
    *p = v;
    return p + 1;
}

static inline uint8_t *
put16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
    return p + 2;
}

static inline uint8_t *
put32(uint8_t *p, uint32_t v)
{
    p = put16(p, (uint16_t)(v >> 16));
    return put16(p, (uint16_t)v);
}

static inline uint8_t *
put64(uint8_t *p, uint64_t v)
{
    p = put32(p, (uint32_t)(v >> 32));
    return put32(p, (uint32_t)v);
}

static inline uint64_t
get64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v = v << 8 | p[i];
    return v;
}

/*
 * The stamp at the start of every body (STAMP_LEN bytes): the send time,
 * now_ns(), then the producer id in 16 bits and its sequence number in 48.
 */
static inline void
stamp_put(uint8_t *p, uint64_t ts, unsigned pid, uint64_t seq)
{
    p = put64(p, ts);
    put64(p, (uint64_t)pid << 48 | (seq & 0xffffffffffffu));
}

static inline void
stamp_get(const uint8_t *p, uint64_t *ts, unsigned *pid, uint64_t *seq)
{
    uint64_t idseq = get64(p + 8);
    *ts = get64(p);
    *pid = (unsigned)(idseq >> 48);
    *seq = idseq & 0xffffffffffffu;
}

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
    const char *stream_offset;  /* consumers' x-stream-offset, or NULL */
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

/* ---- the run: run.c ---- */

/*
 * Records the first failure, with its exit status and message, and sets
 * 'g_abort', which every thread checks and stops at. Later failures are
 * consequences of the first and are dropped. Any thread may call it.
 */
void fail(int code, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
extern atomic_bool g_abort;
/* The first failure's exit status (0: none) and message, set by fail();
 * main.c reads them once the threads are joined. */
extern int g_exit;
extern char g_err[1024];

/* calloc() that exits with EXIT_USAGE when memory runs out. */
void *xcalloc(size_t n, size_t size);

/*
 * The start line. Each consumer and producer thread, once connected and
 * set up, calls ready_and_wait(), which returns true at the start and
 * false on an abort; the main thread waits with wait_ready() until 'n'
 * threads are there (false on an abort), then go() sets 'g_start_ns' and
 * 'g_go' and releases them. go_cancel() aborts a start that will not
 * happen. 'g_go' and 'g_start_ns' are written once, by go(), before the
 * threads are released.
 */
bool ready_and_wait(void);
bool wait_ready(int n);
void go(void);
void go_cancel(void);
extern bool g_go;
extern uint64_t g_start_ns;     /* CLOCK_MONOTONIC ns (now_ns()) */

/* Set by main.c's monitor when the producers, then the consumers, are to
 * stop; never cleared. */
extern atomic_bool g_stop_producers, g_stop_consumers;

/* ---- latency histogram: hist.c ---- */

#define H_SUB_BITS 6
#define H_SUB (1u << H_SUB_BITS)
#define H_BUCKETS ((64 - H_SUB_BITS + 1) * H_SUB)

struct hist {
    uint64_t n, sum, min, max;
    uint64_t b[H_BUCKETS];
};

/* Adds the sample 'v' (ns). */
void hist_add(struct hist *h, uint64_t v);
/* Adds every sample of 'h' to 'into'. */
void hist_merge(struct hist *into, const struct hist *h);
/* The 'q'-quantile (0.99 for p99), 0 for an empty histogram. */
uint64_t hist_pct(const struct hist *h, double q);

/* ---- sequence checking: seq.c ---- */

struct seqtrack;

struct pq {                     /* per queue */
    char name[256];
    char bind_key[256];
    uint64_t initial;           /* consume-only: message count at start */
    _Atomic(struct seqtrack *) trk[MAX_PRODUCERS];
};
/*
 * The queues, 'nqueues' of them. Owned by main.c, which allocates them
 * before the topology is declared and frees them at exit; setup_topology()
 * fills in the names, keys and backlogs before any thread starts, and the
 * consumers fill in the trackers through seq_mark().
 */
extern struct pq *pqs;

enum seq_mark { SEQ_NEW, SEQ_DUPLICATE, SEQ_REORDERED, SEQ_UNTRACKED };

/*
 * Records that a consumer of queue 'q' received sequence 'seq' of producer
 * 'pid'. 'last' is the consumer's own array of MAX_PRODUCERS, the highest
 * sequence plus one it has seen from each producer, and is updated.
 * SEQ_UNTRACKED: 'pid' or 'seq' is out of range (not a body of ours), and
 * nothing is recorded. Safe to call from several consumers of 'q' at once.
 */
enum seq_mark seq_mark(struct pq *q, uint64_t *last, unsigned pid,
                       uint64_t seq);

/* What queue 'q' received, summed over its producers. */
struct seq_tally {
    uint64_t received;          /* distinct sequences */
    uint64_t high;              /* each producer's highest one plus one */
    uint64_t dups, reordered;
};
/* Counts 'q''s trackers into 'out'; call it once the consumers stopped. */
void seq_tally(struct pq *q, struct seq_tally *out);
/* Frees 'q''s trackers. */
void seq_free(struct pq *q);

/* ---- connections: conn.c ---- */

struct link {
    amqp_connection_state_t st;
    int fd;                     /* for gathered writes; -1 when not allowed */
    size_t frame_max;
    bool closed;                /* the broker closed it; skip the goodbye */
    char who[32];
};

/*
 * Opens 'l' with the options' address, TLS and credentials, logs in and
 * opens channel CH; 'who' ("producer 3") names it in messages. Returns 0,
 * or -1 after fail(): EXIT_CONNECT when it could not connect or log in
 * (EXIT_REFUSED for a 540), EXIT_BROKER when channel.open failed,
 * EXIT_USAGE out of memory. Close it with link_close() either way.
 */
int link_open(struct link *l, const char *who);
/* Says goodbye unless the broker closed it, and frees it; no-op twice. */
void link_close(struct link *l);
/*
 * Returns 0 if the RPC 'what' succeeded, else records why and returns -1;
 * 'lib_exit' is the exit status for a library error (a lost connection).
 */
int rpc_check(struct link *l, const char *what, int lib_exit);
/*
 * If 'm' is the broker closing the connection or the channel while 'what'
 * ran, answers with the close-ok it expects, records the failure (exit
 * status 'conn_exit' for the connection, EXIT_BROKER for the channel, and
 * EXIT_REFUSED for 540 NOT_IMPLEMENTED, so that scripts can tell a missing
 * feature from a broken run) and returns true; false for any other method.
 */
bool link_handle_close(struct link *l, const char *what,
                       const amqp_method_t *m, int conn_exit);

/* ---- gathered output: outq.c ---- */

#define OUT_IOV 64

struct outq {
    struct iovec iov[OUT_IOV];
    int niov;
    size_t bytes;
    uint64_t first_ns;          /* stamp of the oldest queued message */
    uint8_t *stage;
    size_t used, cap;
};

/* Empties 'q' with a staging buffer of 'cap' bytes (xcalloc), which its
 * owner frees: free(q->stage). */
void outq_init(struct outq *q, size_t cap);
/* Is there room for 'copy' more bytes to copy and 'refs' references?
 * (Inline: it is asked for every message.) */
static inline bool
outq_fits(const struct outq *q, size_t copy, int refs)
{
    return q->used + copy <= q->cap && q->niov + 1 + refs <= OUT_IOV;
}
/* Queues a copy of 'n' bytes at 'p'; check outq_fits() first. */
void outq_copy(struct outq *q, const void *p, size_t n);
/* Queues 'n' bytes at 'p' by reference: they must stay put until the
 * flush; check outq_fits() first. */
void outq_ref(struct outq *q, const void *p, size_t n);
/*
 * Writes everything queued. While the socket is full it keeps reading what
 * the broker sends (confirms, a close) through 'on_input', so that neither
 * side can wait on the other forever. Returns 0, or -1 after a failure was
 * recorded.
 */
int outq_flush(struct link *l, struct outq *q, int (*on_input)(void *),
               void *arg);

/* ---- producers: producer.c ---- */

struct confirm_slot {
    uint64_t ts;
    bool done;
};

struct producer {
    unsigned id;
    pthread_t thr;
    struct link l;
    int queue;                  /* partition mode: the queue it feeds */
    char rkey[256];
    /* the frames of one message, stamp at 'stamp_off' */
    uint8_t *tmpl;
    size_t tmpl_len, stamp_off;
    uint8_t *body;              /* for amqp_basic_publish */
    struct outq out;
    /* confirms */
    struct confirm_slot *ring;
    uint64_t next_tag, low_tag;
    struct hist *clat;
    /* results, read by the main thread */
    atomic_uint_fast64_t published;
    uint64_t confirmed, nacked, blocked;
    uint64_t last_send_ns, last_confirm_ns, last_check_ns;
    atomic_bool finished;
};

/*
 * The producers, o.producers of them (at least one slot). Owned by
 * main.c, which allocates them, sets each one's id, queue and routing key
 * and starts producer_main() on it; from then on the thread owns its
 * producer, but for 'published' and 'finished', which the main thread
 * reads as it goes; the rest it reads once the thread is joined.
 */
extern struct producer *prods;

/* A producer thread's body, on 'arg', a struct producer. */
void *producer_main(void *arg);
/* Frees what producer_main() allocated (not 'p' itself, nor its link). */
void producer_free(struct producer *p);

/* ---- consumers: consumer.c ---- */

struct consumer {
    unsigned id;
    pthread_t thr;
    struct link l;
    int queue;
    struct outq out;            /* gathered acks */
    struct hist *lat;
    uint64_t *last;             /* per producer: last sequence seen + 1 */
    uint64_t pending, last_tag; /* manual acks not sent yet */
    atomic_uint_fast64_t received;
    atomic_uint_fast64_t last_recv_ns;
    uint64_t dups, reordered, malformed, redelivered;
    atomic_bool finished;
};

/*
 * The consumers, o.consumers of them (at least one slot). Owned by
 * main.c as the producers are: it sets each one's id and queue and starts
 * consumer_main() on it; while it runs the main thread reads only
 * 'received', 'last_recv_ns' and 'finished', the rest once it is joined.
 */
extern struct consumer *cons;

/* A consumer thread's body, on 'arg', a struct consumer. */
void *consumer_main(void *arg);
/* Frees what consumer_main() allocated (not 'c' itself, nor its link). */
void consumer_free(struct consumer *c);

/* ---- topology: topology.c ---- */

/* The exchange to publish to ("" = the default exchange); set by
 * setup_topology() before any producer starts. */
extern char xname[300];

/*
 * Names the exchange and the queues (xname, pqs[].name), declares them
 * with the bindings and purges the queues; with --consume-only it only
 * looks the queues up (passive queue.declare) for their backlog,
 * pqs[].initial. Returns 0, or -1 after fail().
 */
int setup_topology(struct link *l);
/* Writes producer 'pid''s routing key, for the queue(s) it feeds. */
void routing_key(int pid, char *out, size_t len);
/* What the producers that feed queue 'q' have published so far. */
uint64_t queue_sent(int q);
/*
 * Deletes what setup_topology declared. Failing here does not spoil a run
 * that has been measured, so problems are only warnings ('quiet': none,
 * after a failure).
 */
void teardown_topology(struct link *l, bool quiet);
/*
 * Publish-only: the last write left the producer, but is it in the queues?
 * Asks each queue for its depth (passive queue.declare) until it holds what
 * was sent to it, and returns when that was, or 0 if the queues stopped
 * growing short of it for --drain-timeout; '*enqueued' is what they held
 * at the last look.
 */
uint64_t wait_enqueued(struct link *l, uint64_t *enqueued);

/* ---- the report: report.c ---- */

/*
 * Gathers the counts of the joined producers and consumers and prints the
 * report, text and with --json JSON. 'cpu' is the client's CPU seconds
 * over the run, 'end_ns' when the threads were joined, 'enq_ns' and
 * 'enqueued' what wait_enqueued() found (0, 0 but for --publish-only).
 * Returns false if messages were lost, duplicated or reordered.
 */
bool report_run(double cpu, uint64_t end_ns, uint64_t enq_ns,
                uint64_t enqueued);
/* Says why the run failed, g_err: on stderr and, with --json, as JSON
 * with the exit status on stdout. */
void report_error(void);

#endif
