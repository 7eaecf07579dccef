/*
 * SPDX-License-Identifier: Apache-2.0
 * Prometheus metrics (prom.h): the listener, the three endpoints and the
 * text exposition format 0.0.4. Family names, types and help texts are
 * rabbitmq_prometheus 3.10's (prometheus_rabbitmq_core_metrics_collector,
 * _global_metrics_collector, _alarm_metrics_collector) for what Roost
 * has; docs/compatibility.md lists the ones it cannot have. Roost's own
 * families start with roost_.
 *
 * Who owns what: a scrape is a 'struct scrape', owned by this file from
 * the request until its answer is handed to evhttp or its client goes
 * (the connection's close callback; libevent then leaves the unfinished
 * request to us to end). A scrape first takes a reference to each queue
 * it will show (queue_ref), so that a queue deleted while the scrape is
 * written stays readable; a deleted queue is then left out, and its
 * labels, made the first time it is written, never touch a vhost that
 * may be gone. The aggregated answer then sums the queues SLICE_US of
 * loop time at a time, the next slice from a timer of no delay, and goes
 * out whole; a per-object or detailed answer is a chunked reply whose
 * next slice is written when evhttp has sent the previous one. Either
 * way AMQP connections get their turn in between.
 *
 * Everything is read through the modules' read functions (queue_info,
 * conn_info, channel_info, vhost_foreach*, alarm_*, stats_*, and the
 * broker-wide stats_churn); nothing here is on the AMQP path.
 */
#include "broker/mgmt/prom.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>

#include "broker/core/alarm.h"
#include "broker/core/broker.h"
#include "broker/core/queue.h"
#include "broker/core/stats.h"
#include "broker/core/stream.h"
#include "broker/core/vhost.h"
#include "broker/lib/accept_guard.h"
#include "broker/mgmt/http_guard.h"
#include "broker/lib/log.h"
#include "broker/lib/port_holder.h"
#include "broker/lib/util.h"
#include "broker/lib/version.h"
#include "broker/mgmt/mgmt_int.h"
#include "broker/session/channel.h"
#include "broker/session/conn.h"

#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* How long one slice of a scrape may hold the loop. */
/* A scrape has no body: this much is read of one before 413. */
#define PROM_BODY_MAX (64 * 1024)
#define SLICE_US 5000
/* Queues written between two looks at the clock. */
#define SLICE_CHECK 32

/* ---- the families ---- */

/* rabbitmq_prometheus' groups ("family=" of /metrics/detailed). */
enum group {
    G_CHURN = 1u << 0,          /* connection_churn_metrics */
    G_NODE_COARSE = 1u << 1,    /* node_coarse_metrics */
    G_NODE = 1u << 2,           /* node_metrics */
    G_QUEUE_COARSE = 1u << 3,   /* queue_coarse_metrics */
    G_QUEUE_CONSUMERS = 1u << 4,/* queue_consumer_count */
    G_QUEUE = 1u << 5,          /* queue_metrics */
    G_CHANNEL = 1u << 6,        /* channel_metrics */
    G_CHANNEL_X = 1u << 7,      /* channel_exchange_metrics */
    G_CHANNEL_Q = 1u << 8,      /* channel_queue_metrics */
    G_CONN_COARSE = 1u << 9,    /* connection_coarse_metrics */
    G_CONN = 1u << 10,          /* connection_metrics */
    G_CHANNEL_QX = 1u << 11,    /* channel_queue_exchange_metrics */
    G_VHOST_STATUS = 1u << 12,  /* vhost_status */
    G_ROOST_QUEUE = 1u << 13,   /* Roost's per-queue families */
    G_ALL = (1u << 14) - 1,
};

static const struct {
    const char *name;
    unsigned bit;
} groups[] = {
    { "connection_churn_metrics", G_CHURN },
    { "node_coarse_metrics", G_NODE_COARSE },
    { "node_metrics", G_NODE },
    { "queue_coarse_metrics", G_QUEUE_COARSE },
    { "queue_consumer_count", G_QUEUE_CONSUMERS },
    { "queue_metrics", G_QUEUE },
    { "channel_metrics", G_CHANNEL },
    { "channel_exchange_metrics", G_CHANNEL_X },
    { "channel_queue_metrics", G_CHANNEL_Q },
    { "connection_coarse_metrics", G_CONN_COARSE },
    { "connection_metrics", G_CONN },
    { "channel_queue_exchange_metrics", G_CHANNEL_QX },
    { "vhost_status", G_VHOST_STATUS },
    { "roost_queue_metrics", G_ROOST_QUEUE },
};

/* What a queue family shows of a queue_info. */
enum qkind { QK_VALUE, QK_DEAD_LETTERED, QK_DROPPED, QK_HIST, QK_STREAM,
             QK_STREAM_LAG };

/* QK_STREAM: a stream's own figures (stream_info), per queue only. */
enum sval { SV_FIRST, SV_LAST, SV_BYTES, SV_DROPPED, SV_SEGMENTS, SV_DISK };

enum qval {
    QV_READY, QV_UNACKED, QV_MESSAGES, QV_CONSUMERS, QV_CAPACITY,
    QV_UTILISATION, QV_MEMORY, QV_RAM, QV_RAM_BYTES, QV_READY_RAM,
    QV_UNACKED_RAM, QV_BYTES, QV_READY_BYTES, QV_UNACKED_BYTES, QV_PAGED,
    QV_PUBLISHED, QV_HEAD_AGE, QV_REDELIVERED, QV_WAITING, QV_COUNT
};

struct qfam {
    const char *name;           /* without "rabbitmq_" unless 'roost' */
    const char *type;
    const char *help;
    enum qkind kind;
    int arg;                    /* QK_VALUE: enum qval; QK_HIST: kind */
    unsigned groups;
    bool roost;
};

static const struct qfam qfams[] = {
    { "queue_messages_ready", "gauge",
      "Messages ready to be delivered to consumers", QK_VALUE, QV_READY,
      G_QUEUE_COARSE, false },
    { "queue_messages_unacked", "gauge",
      "Messages delivered to consumers but not yet acknowledged", QK_VALUE,
      QV_UNACKED, G_QUEUE_COARSE, false },
    { "queue_messages", "gauge",
      "Sum of ready and unacknowledged messages - total queue depth",
      QK_VALUE, QV_MESSAGES, G_QUEUE_COARSE, false },
    { "queue_consumers", "gauge", "Consumers on a queue", QK_VALUE,
      QV_CONSUMERS, G_QUEUE | G_QUEUE_CONSUMERS, false },
    { "queue_consumer_capacity", "gauge", "Consumer capacity", QK_VALUE,
      QV_CAPACITY, G_QUEUE, false },
    { "queue_consumer_utilisation", "gauge", "Same as consumer capacity",
      QK_VALUE, QV_UTILISATION, G_QUEUE, false },
    { "queue_process_memory_bytes", "gauge",
      "Memory in bytes used by the Erlang queue process", QK_VALUE,
      QV_MEMORY, G_QUEUE, false },
    { "queue_messages_ram", "gauge",
      "Ready and unacknowledged messages stored in memory", QK_VALUE,
      QV_RAM, G_QUEUE, false },
    { "queue_messages_ram_bytes", "gauge",
      "Size of ready and unacknowledged messages stored in memory",
      QK_VALUE, QV_RAM_BYTES, G_QUEUE, false },
    { "queue_messages_ready_ram", "gauge", "Ready messages stored in memory",
      QK_VALUE, QV_READY_RAM, G_QUEUE, false },
    { "queue_messages_unacked_ram", "gauge",
      "Unacknowledged messages stored in memory", QK_VALUE, QV_UNACKED_RAM,
      G_QUEUE, false },
    { "queue_messages_bytes", "gauge",
      "Size in bytes of ready and unacknowledged messages", QK_VALUE,
      QV_BYTES, G_QUEUE, false },
    { "queue_messages_ready_bytes", "gauge", "Size in bytes of ready messages",
      QK_VALUE, QV_READY_BYTES, G_QUEUE, false },
    { "queue_messages_unacked_bytes", "gauge",
      "Size in bytes of all unacknowledged messages", QK_VALUE,
      QV_UNACKED_BYTES, G_QUEUE, false },
    { "queue_messages_paged_out", "gauge", "Messages paged out to disk",
      QK_VALUE, QV_PAGED, G_QUEUE, false },
    { "queue_messages_published_total", "counter",
      "Total number of messages published to queues", QK_VALUE,
      QV_PUBLISHED, G_CHANNEL_QX, false },
    { "roost_queue_head_message_age_seconds", "gauge",
      "How long the oldest ready message has waited (lag); the largest of "
      "them in the aggregate", QK_VALUE, QV_HEAD_AGE, G_ROOST_QUEUE, true },
    { "roost_queue_messages_redelivered_total", "counter",
      "Messages delivered again after a requeue", QK_VALUE, QV_REDELIVERED,
      G_ROOST_QUEUE, true },
    { "roost_queue_messages_waiting", "gauge",
      "Messages waiting out their requeue delay (x-requeue-delay)",
      QK_VALUE, QV_WAITING, G_ROOST_QUEUE, true },
    { "roost_queue_messages_dead_lettered_total", "counter",
      "Messages the queue dead-lettered, by reason", QK_DEAD_LETTERED, 0,
      G_ROOST_QUEUE, true },
    { "roost_queue_messages_dropped_total", "counter",
      "Messages the queue let go without a dead-letter exchange, by reason",
      QK_DROPPED, 0, G_ROOST_QUEUE, true },
    { "roost_queue_time_in_queue_seconds", "histogram",
      "Time from publish to first delivery", QK_HIST, HIST_IN_QUEUE,
      G_ROOST_QUEUE, true },
    { "roost_queue_processing_time_seconds", "histogram",
      "Time from delivery to acknowledgement", QK_HIST, HIST_PROCESSING,
      G_ROOST_QUEUE, true },
    { "roost_queue_confirm_latency_seconds", "histogram",
      "Time from publish to the publisher's confirm", QK_HIST, HIST_CONFIRM,
      G_ROOST_QUEUE, true },
    { "roost_stream_first_offset", "gauge",
      "A stream's oldest kept offset (per queue only)", QK_STREAM, SV_FIRST,
      G_ROOST_QUEUE, true },
    { "roost_stream_last_offset", "gauge",
      "A stream's newest offset; no series while it is empty (per queue "
      "only)", QK_STREAM, SV_LAST, G_ROOST_QUEUE, true },
    { "roost_stream_bytes", "gauge",
      "Body bytes a stream keeps (per queue only)", QK_STREAM, SV_BYTES,
      G_ROOST_QUEUE, true },
    { "roost_stream_segments", "gauge",
      "A stream's own segment files (per queue only)", QK_STREAM,
      SV_SEGMENTS, G_ROOST_QUEUE, true },
    { "roost_stream_disk_bytes", "gauge",
      "Bytes of a stream's own segment files (per queue only)", QK_STREAM,
      SV_DISK, G_ROOST_QUEUE, true },
    { "roost_stream_retention_dropped_total", "counter",
      "Messages a stream let go by x-max-age or x-max-length-bytes (per "
      "queue only)", QK_STREAM, SV_DROPPED, G_ROOST_QUEUE, true },
    { "roost_stream_consumer_lag", "gauge",
      "Messages from a stream consumer name's committed offset to the end "
      "(per queue and name only)", QK_STREAM_LAG, 0, G_ROOST_QUEUE, true },
};
#define NQFAMS (sizeof(qfams) / sizeof(qfams[0]))

/* Series a queue adds to a per-object answer (its share of the bound). */
static size_t
queue_series(void)
{
    size_t n = 0;
    for (size_t i = 0; i < NQFAMS; i++)
        n += qfams[i].kind == QK_VALUE || qfams[i].kind == QK_STREAM ||
                     qfams[i].kind == QK_STREAM_LAG ? 1
           : qfams[i].kind == QK_HIST ? HIST_BUCKETS + 2 : DROP_COUNT;
    return n;
}

static double
qvalue(enum qval v, const struct queue_info *qi)
{
    double util = qi->utilisation < 0 ? 0 : qi->utilisation;
    uint64_t ready_ram = qi->ready > qi->paged ? qi->ready - qi->paged : 0;

    switch (v) {
    case QV_READY: return (double)qi->ready;
    case QV_UNACKED: return (double)qi->unacked;
    case QV_MESSAGES: return (double)(qi->ready + qi->unacked);
    case QV_CONSUMERS: return (double)qi->consumers;
    case QV_CAPACITY: return util;
    case QV_UTILISATION: return util;
    case QV_MEMORY: return (double)qi->memory;
    case QV_RAM: return (double)(ready_ram + qi->unacked);
    case QV_RAM_BYTES:
        /* paged bodies are not in memory; their bytes are not told apart
         * from the rest, so a paged queue shows all its bytes here */
        return (double)(qi->bytes_ready + qi->bytes_unacked);
    case QV_READY_RAM: return (double)ready_ram;
    case QV_UNACKED_RAM: return (double)qi->unacked;
    case QV_BYTES: return (double)(qi->bytes_ready + qi->bytes_unacked);
    case QV_READY_BYTES: return (double)qi->bytes_ready;
    case QV_UNACKED_BYTES: return (double)qi->bytes_unacked;
    case QV_PAGED: return (double)qi->paged;
    case QV_PUBLISHED: return (double)qi->ms->n[MS_PUBLISH];
    case QV_HEAD_AGE:
        return qi->head_age_ms < 0 ? 0 : (double)qi->head_age_ms / 1000.0;
    case QV_REDELIVERED: return (double)qi->ms->n[MS_REDELIVER];
    case QV_WAITING: return (double)qi->waiting;
    case QV_COUNT: break;
    }
    return 0;
}

/* ---- writing ---- */

static uint64_t
clock_us(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000 + (uint64_t)ts.tv_nsec / 1000;
}

static uint64_t
mono_us(void)
{
    return clock_us(CLOCK_MONOTONIC);
}

/* The length of the UTF-8 sequence at 's' (at most 'n' bytes), or 0 if
 * it is not one. */
static size_t
utf8_len(const unsigned char *s, size_t n)
{
    size_t len;
    uint32_t cp;

    if (s[0] < 0x80)
        return 1;
    if ((s[0] & 0xE0) == 0xC0) {
        len = 2;
        cp = s[0] & 0x1F;
    } else if ((s[0] & 0xF0) == 0xE0) {
        len = 3;
        cp = s[0] & 0x0F;
    } else if ((s[0] & 0xF8) == 0xF0) {
        len = 4;
        cp = s[0] & 0x07;
    } else {
        return 0;
    }
    if (len > n)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        cp = (cp << 6) | (s[i] & 0x3F);
    }
    if ((len == 2 && cp < 0x80) || (len == 3 && cp < 0x800) ||
        (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
        (cp >= 0xD800 && cp <= 0xDFFF))
        return 0;
    return len;
}

/*
 * 'key="value"' into 'out' (room for 2 * len + strlen(key) + 4 bytes),
 * escaped as the text format asks (backslash, double quote, newline);
 * bytes that are not UTF-8, and other control characters, become '?'
 * (a name made over AMQP need not be UTF-8; Prometheus wants it).
 * Returns the bytes written.
 */
static size_t
put_label(char *out, const char *key, const char *value, size_t len)
{
    const unsigned char *v = (const unsigned char *)value;
    size_t o = (size_t)sprintf(out, "%s=\"", key);

    for (size_t i = 0; i < len;) {
        size_t n = utf8_len(v + i, len - i);
        if (n == 0) {
            out[o++] = '?';
            i++;
        } else if (v[i] == '\\' || v[i] == '"') {
            out[o++] = '\\';
            out[o++] = (char)v[i++];
        } else if (v[i] == '\n') {
            out[o++] = '\\';
            out[o++] = 'n';
            i++;
        } else if (v[i] < 0x20 || v[i] == 0x7F) {
            out[o++] = '?';
            i++;
        } else {
            memcpy(out + o, v + i, n);
            o += n;
            i += n;
        }
    }
    out[o++] = '"';
    out[o] = '\0';
    return o;
}

/* 'vhost="..."' (and ',queue="..."') in a new string. */
static char *
labels_of(const char *vhost, const char *queue, size_t qlen)
{
    size_t vlen = strlen(vhost);
    char *s = xmalloc(2 * (vlen + qlen) + 32);
    size_t o = put_label(s, "vhost", vhost, vlen);
    if (queue != NULL) {
        s[o++] = ',';
        put_label(s + o, "queue", queue, qlen);
    }
    return s;
}

/*
 * Lines are built by hand into a buffer and added in one piece:
 * evbuffer_add_printf costs a vsnprintf and a buffer search for every
 * series, and a per-object scrape writes 100,000 of them.
 */
struct line {
    char buf[4096];
    size_t n;
};

static void
ln_str(struct line *l, const char *str)
{
    size_t n = strlen(str);
    if (n > sizeof(l->buf) - 64 - l->n)     /* names are shorter */
        n = sizeof(l->buf) - 64 - l->n;
    memcpy(l->buf + l->n, str, n);
    l->n += n;
}

static void
ln_u64(struct line *l, uint64_t v)
{
    char tmp[24];
    int i = 0;
    do {
        tmp[i++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (i)
        l->buf[l->n++] = tmp[--i];
}

/* A number as the text format writes it, and the line's end. */
static void
ln_value(struct line *l, double v)
{
    if (v >= 0 && v == (double)(uint64_t)v && v < 1e15)
        ln_u64(l, (uint64_t)v);
    else
        l->n += (size_t)snprintf(l->buf + l->n, 32, "%.9g", v);
    l->buf[l->n++] = '\n';
}

/* NAME{LABELS[,EXTRA]} or NAME, then a space. */
static void
ln_start(struct line *l, const char *p, const char *name, const char *suffix,
         const char *labels, const char *extra)
{
    bool any = labels[0] != '\0' || extra[0] != '\0';
    l->n = 0;
    ln_str(l, p);
    ln_str(l, name);
    ln_str(l, suffix);
    if (any) {
        ln_str(l, "{");
        ln_str(l, labels);
        if (labels[0] != '\0' && extra[0] != '\0')
            ln_str(l, ",");
        ln_str(l, extra);
        ln_str(l, "}");
    }
    ln_str(l, " ");
}

static void
ln_add(struct evbuffer *b, const struct line *l)
{
    evbuffer_add(b, l->buf, l->n);
}

/* ---- a scrape ---- */

enum mode { MODE_AGGREGATED, MODE_PER_OBJECT, MODE_DETAILED };

struct sq {
    struct queue *q;            /* a reference */
    char *labels;               /* made when first written */
};

struct qwalk;

struct scrape {
    struct evhttp_request *req; /* NULL once the client has gone */
    struct evhttp_connection *evcon;
    enum mode mode;
    unsigned groups;            /* G_* to show */
    const char *prefix;         /* "rabbitmq_" or "rabbitmq_detailed_" */
    char *vhost_filter;         /* detailed: ?vhost= (NULL: all) */
    struct evbuffer *buf;
    struct sq *qs;
    size_t nq, qcap;
    uint64_t omitted;           /* queues left out by the bound */
    uint64_t queues_total;      /* every queue there was */
    size_t fam, pos;            /* where the queue families are */
    struct qwalk *sum;          /* aggregated: the sums so far */
    struct event *next;         /* aggregated: the next slice of sums */
    uint64_t started_us;
    LIST_ENTRY(scrape) link;
};

static struct evhttp *http;
static struct http_listener listener;
static char bound_ip[64];
static int bound_port;
static LIST_HEAD(, scrape) scrapes = LIST_HEAD_INITIALIZER(scrapes);
static uint64_t slice_max_us, slice_max_cpu_us, scrape_max_us;
static bool omitted_logged;

/* "# HELP" and "# TYPE" of a family, if its group is shown. */
static bool
fam(struct scrape *s, unsigned group, const char *name, const char *type,
    const char *help, bool roost)
{
    if ((s->groups & group) == 0)
        return false;
    const char *p = roost ? "" : s->prefix;
    evbuffer_add_printf(s->buf, "# TYPE %s%s %s\n# HELP %s%s %s\n", p, name,
                        type, p, name, help);
    return true;
}

/* One series: NAME{LABELS} VALUE ('labels' NULL or "": none). */
static void
series(struct scrape *s, const char *name, const char *labels, double v,
       bool roost)
{
    struct line l;
    ln_start(&l, roost ? "" : s->prefix, name, "", labels ? labels : "", "");
    ln_value(&l, v);
    ln_add(s->buf, &l);
}

/* A family of one series without labels. */
static void
single(struct scrape *s, unsigned group, const char *name, const char *type,
       const char *help, double v)
{
    if (fam(s, group, name, type, help, false))
        series(s, name, NULL, v, false);
}

static void
scrape_free(struct scrape *s)
{
    if (s == NULL)
        return;
    LIST_REMOVE(s, link);
    for (size_t i = 0; i < s->nq; i++) {
        queue_unref(s->qs[i].q);
        free(s->qs[i].labels);
    }
    free(s->qs);
    free(s->sum);
    if (s->next)
        event_free(s->next);
    free(s->vhost_filter);
    if (s->buf)
        evbuffer_free(s->buf);
    free(s);
}

/* ---- node, churn, alarms, totals, identity ---- */

static void
write_node(struct scrape *s)
{
    const struct stats_churn *ch = &stats_churn;
    struct rlimit rl = { 0, 0 };
    double up = (double)(now_ms() - broker.started_ms) / 1000.0;

    getrlimit(RLIMIT_NOFILE, &rl);
    if (s->mode != MODE_DETAILED &&
        fam(s, G_ALL, "process_start_time_seconds", "gauge",
            "Start time of the process since unix epoch in seconds", true))
        series(s, "process_start_time_seconds", NULL,
               (double)((wall_ms() - (now_ms() - broker.started_ms)) / 1000),
               true);
    if (s->mode != MODE_DETAILED) {
        single(s, G_ALL, "alarms_free_disk_space_watermark", "untyped",
               "is 1 if free disk space watermark alarm is in effect",
               alarm_disk_set());
        single(s, G_ALL, "alarms_memory_used_watermark", "untyped",
               "is 1 if VM memory watermark alarm is in effect",
               alarm_memory_set());
    }
    single(s, G_CHURN, "connections_opened_total", "counter",
           "Total number of connections opened", (double)ch->conns_opened);
    single(s, G_CHURN, "connections_closed_total", "counter",
           "Total number of connections closed or terminated",
           (double)ch->conns_closed);
    single(s, G_CHURN, "channels_opened_total", "counter",
           "Total number of channels opened", (double)ch->channels_opened);
    single(s, G_CHURN, "channels_closed_total", "counter",
           "Total number of channels closed", (double)ch->channels_closed);
    single(s, G_CHURN, "queues_declared_total", "counter",
           "Total number of queues declared", (double)ch->queues_declared);
    single(s, G_CHURN, "queues_created_total", "counter",
           "Total number of queues created", (double)ch->queues_created);
    single(s, G_CHURN, "queues_deleted_total", "counter",
           "Total number of queues deleted", (double)ch->queues_deleted);
    single(s, G_NODE_COARSE, "process_open_fds", "gauge",
           "Open file descriptors", (double)stats_open_fds());
    single(s, G_NODE_COARSE, "process_open_tcp_sockets", "gauge",
           "Open TCP sockets", (double)conn_count());
    single(s, G_NODE_COARSE, "process_resident_memory_bytes", "gauge",
           "Memory used in bytes", (double)mgmt_rss_bytes());
    single(s, G_NODE_COARSE, "disk_space_available_bytes", "gauge",
           "Disk space available in bytes", (double)alarm_disk_free());
    single(s, G_NODE, "process_max_fds", "gauge",
           "Open file descriptors limit", (double)rl.rlim_cur);
    single(s, G_NODE, "process_max_tcp_sockets", "gauge",
           "Open TCP sockets limit", (double)broker.cfg.connection_max);
    single(s, G_NODE, "resident_memory_limit_bytes", "gauge",
           "Memory high watermark in bytes", (double)alarm_memory_limit());
    single(s, G_NODE, "disk_space_available_limit_bytes", "gauge",
           "Free disk space low watermark in bytes",
           (double)broker.cfg.disk_free_limit);
    single(s, G_NODE, "erlang_uptime_seconds", "gauge", "Node uptime", up);
    if (s->mode != MODE_DETAILED &&
        fam(s, G_ALL, "roost_memory_used_bytes", "gauge",
            "Memory the memory alarm counts (messages, connection buffers, "
            "queue entries) against rabbitmq_resident_memory_limit_bytes",
            true))
        series(s, "roost_memory_used_bytes", NULL,
               (double)alarm_memory_used(), true);
}

static void
write_identity(struct scrape *s)
{
    char labels[2200];
    const char *name = broker_node_name();
    size_t o;

    evbuffer_add_printf(s->buf, "# TYPE rabbitmq_build_info untyped\n"
                        "# HELP rabbitmq_build_info RabbitMQ & Erlang/OTP "
                        "version info\n"
                        "rabbitmq_build_info{rabbitmq_version=\"%s\","
                        "prometheus_plugin_version=\"%s\","
                        "product_name=\"%s\",product_version=\"%s\"} 1\n",
                        ROOST_RABBITMQ_VERSION, ROOST_RABBITMQ_VERSION,
                        ROOST_PRODUCT, ROOST_VERSION);
    o = put_label(labels, "rabbitmq_node", name, strlen(name));
    labels[o++] = ',';
    o += put_label(labels + o, "rabbitmq_cluster", name, strlen(name));
    labels[o++] = ',';
    /* Roost keeps no cluster id: the node name stands for it. */
    char id[400];
    snprintf(id, sizeof(id), "roost-cluster-id-%s", name);
    put_label(labels + o, "rabbitmq_cluster_permanent_id", id, strlen(id));
    evbuffer_add_printf(s->buf, "# TYPE rabbitmq_identity_info untyped\n"
                        "# HELP rabbitmq_identity_info RabbitMQ node & "
                        "cluster identity info\n"
                        "rabbitmq_identity_info{%s} 1\n", labels);
}

static void
write_totals(struct scrape *s)
{
    struct conn_totals ct;

    if (s->mode == MODE_DETAILED)
        return;
    conn_totals(NULL, &ct);
    single(s, G_ALL, "connections", "gauge", "Connections currently open",
           (double)ct.connections);
    single(s, G_ALL, "channels", "gauge", "Channels currently open",
           (double)ct.channels);
    single(s, G_ALL, "consumers", "gauge", "Consumers currently connected",
           (double)ct.consumers);
    single(s, G_ALL, "queues", "gauge", "Queues available",
           (double)s->queues_total);
}

/* ---- channels and connections, summed for the broker or per vhost ---- */

struct csum {
    const struct vhost *vh;     /* NULL: the broker */
    struct msg_stats ms;
    uint64_t consumers, unacked, unconfirmed, uncommitted;
    uint64_t prefetch_consumer, prefetch_channel;
    uint64_t recv_oct, send_oct, recv_cnt, send_cnt, channels;
};

struct csums {
    struct csum *v;
    size_t n;
    bool per_vhost;
};

static struct csum *
csum_for(struct csums *cs, const struct vhost *vh)
{
    if (!cs->per_vhost)
        return &cs->v[0];
    for (size_t i = 0; i < cs->n; i++)
        if (cs->v[i].vh == vh)
            return &cs->v[i];
    return NULL;
}

static void
add_channel(struct channel *ch, void *arg)
{
    struct csum *c = arg;
    struct channel_info ci;

    channel_info(ch, &ci);
    c->consumers += ci.consumers;
    c->unacked += ci.unacked;
    c->unconfirmed += ci.unconfirmed;
    c->uncommitted += ci.uncommitted;
    c->prefetch_consumer += ch->prefetch_consumer;
    c->prefetch_channel += ch->prefetch_channel;
    c->channels++;
    msg_stats_add(&c->ms, &ch->ms);
}

static void
add_conn(struct conn *c, void *arg)
{
    struct csums *cs = arg;
    struct csum *sum = c->vh ? csum_for(cs, c->vh) : cs->per_vhost ? NULL
                                                                 : cs->v;
    if (sum == NULL)
        return;
    sum->recv_oct += c->recv_oct;
    sum->send_oct += c->send_oct;
    sum->recv_cnt += c->recv_cnt;
    sum->send_cnt += c->send_cnt;
    struct msg_stats saved = sum->ms;
    conn_foreach_channel(c, add_channel, sum);
    /* The broker's counters come from stats_overview (closed channels
     * too): keep only the gauges of open ones there. */
    if (!cs->per_vhost)
        sum->ms = saved;
}

static void
add_vhost(struct vhost *vh, void *arg)
{
    struct csums *cs = arg;
    cs->v = xrealloc(cs->v, (cs->n + 1) * sizeof(*cs->v));
    memset(&cs->v[cs->n], 0, sizeof(cs->v[0]));
    cs->v[cs->n].vh = vh;
    cs->v[cs->n].ms = vh->channels_gone;
    cs->n++;
}

struct cfam {
    const char *name, *type, *help;
    unsigned group;
    int ms;                     /* MS_*; -1: 'field' */
    size_t field;               /* offsetof(struct csum, ...) */
};

#define CF(f) -1, offsetof(struct csum, f)
static const struct cfam cfams[] = {
    { "channel_consumers", "gauge", "Consumers on a channel", G_CHANNEL,
      CF(consumers) },
    { "channel_messages_unacked", "gauge",
      "Delivered but not yet acknowledged messages", G_CHANNEL,
      CF(unacked) },
    { "channel_messages_unconfirmed", "gauge",
      "Published but not yet confirmed messages", G_CHANNEL,
      CF(unconfirmed) },
    { "channel_messages_uncommitted", "gauge",
      "Messages received in a transaction but not yet committed", G_CHANNEL,
      CF(uncommitted) },
    { "consumer_prefetch", "gauge",
      "Limit of unacknowledged messages for each consumer", G_CHANNEL,
      CF(prefetch_consumer) },
    { "channel_prefetch", "gauge",
      "Total limit of unacknowledged messages for all consumers on a "
      "channel", G_CHANNEL, CF(prefetch_channel) },
    { "channel_messages_published_total", "counter",
      "Total number of messages published into an exchange on a channel",
      G_CHANNEL_X, MS_PUBLISH, 0 },
    { "channel_messages_confirmed_total", "counter",
      "Total number of messages published into an exchange and confirmed "
      "on the channel", G_CHANNEL_X, MS_CONFIRM, 0 },
    { "channel_messages_unroutable_returned_total", "counter",
      "Total number of messages published as mandatory into an exchange "
      "and returned to the publisher as unroutable", G_CHANNEL_X,
      MS_RETURN_UNROUTABLE, 0 },
    { "channel_messages_unroutable_dropped_total", "counter",
      "Total number of messages published as non-mandatory into an "
      "exchange and dropped as unroutable", G_CHANNEL_X, MS_DROP_UNROUTABLE,
      0 },
    { "channel_get_ack_total", "counter",
      "Total number of messages fetched with basic.get in manual "
      "acknowledgement mode", G_CHANNEL_Q, MS_GET, 0 },
    { "channel_get_total", "counter",
      "Total number of messages fetched with basic.get in automatic "
      "acknowledgement mode", G_CHANNEL_Q, MS_GET_NO_ACK, 0 },
    { "channel_messages_delivered_ack_total", "counter",
      "Total number of messages delivered to consumers in manual "
      "acknowledgement mode", G_CHANNEL_Q, MS_DELIVER, 0 },
    { "channel_messages_delivered_total", "counter",
      "Total number of messages delivered to consumers in automatic "
      "acknowledgement mode", G_CHANNEL_Q, MS_DELIVER_NO_ACK, 0 },
    { "channel_messages_redelivered_total", "counter",
      "Total number of messages redelivered to consumers", G_CHANNEL_Q,
      MS_REDELIVER, 0 },
    { "channel_messages_acked_total", "counter",
      "Total number of messages acknowledged by consumers", G_CHANNEL_Q,
      MS_ACK, 0 },
    { "channel_get_empty_total", "counter",
      "Total number of times basic.get operations fetched no message",
      G_CHANNEL_Q, MS_GET_EMPTY, 0 },
    { "connection_incoming_bytes_total", "counter",
      "Total number of bytes received on a connection", G_CONN_COARSE,
      CF(recv_oct) },
    { "connection_outgoing_bytes_total", "counter",
      "Total number of bytes sent on a connection", G_CONN_COARSE,
      CF(send_oct) },
    { "connection_incoming_packets_total", "counter",
      "Total number of packets received on a connection", G_CONN,
      CF(recv_cnt) },
    { "connection_outgoing_packets_total", "counter",
      "Total number of packets sent on a connection", G_CONN, CF(send_cnt) },
    { "connection_channels", "gauge", "Channels on a connection", G_CONN,
      CF(channels) },
};
#undef CF

static double
cvalue(const struct cfam *f, const struct csum *c)
{
    if (f->ms >= 0)
        return (double)c->ms.n[f->ms];
    return (double)*(const uint64_t *)(const void *)((const char *)c +
                                                     f->field);
}

/* The global counters of rabbitmq_prometheus 3.10's global collector
 * that the published Overview dashboard reads, from the broker's
 * channel counters (every channel's, open or closed). */
static void
write_global(struct scrape *s, const struct csum *c)
{
    const uint64_t *dl = stats_churn.dead_lettered;
    const uint64_t *dr = stats_churn.dropped;
    const uint64_t *n = c->ms.n;
    static const char *const P = "protocol=\"amqp091\"";
    static const struct {
        const char *name, *help;
        int ms;
    } g[] = {
        { "global_messages_received_total",
          "Total number of messages received from publishers", MS_PUBLISH },
        { "global_messages_confirmed_total",
          "Total number of messages confirmed to publishers", MS_CONFIRM },
        { "global_messages_unroutable_dropped_total",
          "Total number of messages published as non-mandatory into an "
          "exchange and dropped as unroutable", MS_DROP_UNROUTABLE },
        { "global_messages_unroutable_returned_total",
          "Total number of messages published as mandatory into an "
          "exchange and returned to the publisher as unroutable",
          MS_RETURN_UNROUTABLE },
        { "global_messages_delivered_consume_auto_ack_total",
          "Total number of messages delivered to consumers using "
          "basic.consume with automatic acknowledgment", MS_DELIVER_NO_ACK },
        { "global_messages_delivered_consume_manual_ack_total",
          "Total number of messages delivered to consumers using "
          "basic.consume with manual acknowledgment", MS_DELIVER },
        { "global_messages_delivered_get_auto_ack_total",
          "Total number of messages delivered to consumers using basic.get "
          "with automatic acknowledgment", MS_GET_NO_ACK },
        { "global_messages_delivered_get_manual_ack_total",
          "Total number of messages delivered to consumers using basic.get "
          "with manual acknowledgment", MS_GET },
        { "global_messages_get_empty_total",
          "Total number of times basic.get operations fetched no message",
          MS_GET_EMPTY },
        { "global_messages_redelivered_total",
          "Total number of messages redelivered to consumers",
          MS_REDELIVER },
        { "global_messages_acknowledged_total",
          "Total number of messages acknowledged by consumers", MS_ACK },
    };

    if (s->mode == MODE_DETAILED)
        return;
    for (size_t i = 0; i < sizeof(g) / sizeof(g[0]); i++)
        if (fam(s, G_ALL, g[i].name, "counter", g[i].help, false))
            series(s, g[i].name, P, (double)n[g[i].ms], false);
    if (fam(s, G_ALL, "global_messages_delivered_total", "counter",
            "Total number of messages delivered to consumers", false))
        series(s, "global_messages_delivered_total", P,
               (double)(n[MS_DELIVER] + n[MS_DELIVER_NO_ACK] + n[MS_GET] +
                        n[MS_GET_NO_ACK]), false);
    if (fam(s, G_ALL, "global_messages_received_confirm_total", "counter",
            "Total number of messages received from publishers expecting "
            "confirmations", false))
        series(s, "global_messages_received_confirm_total", P,
               (double)(n[MS_CONFIRM] + c->unconfirmed), false);
    if (fam(s, G_ALL, "global_messages_routed_total", "counter",
            "Total number of messages routed to queues or streams", false)) {
        uint64_t lost = n[MS_DROP_UNROUTABLE] + n[MS_RETURN_UNROUTABLE];
        series(s, "global_messages_routed_total", P,
               (double)(n[MS_PUBLISH] > lost ? n[MS_PUBLISH] - lost : 0),
               false);
    }
    if (fam(s, G_ALL, "global_consumers", "gauge",
            "Current number of consumers", false))
        series(s, "global_consumers", P, (double)c->consumers, false);
    /* dead-lettered: RabbitMQ's strategy at_most_once when the queue has
     * a dead-letter exchange, "disabled" (dropped) when not; every
     * queue's since the start, deleted ones too */
    static const char *const dlname[DROP_COUNT] = {
        [DROP_EXPIRED] = "global_messages_dead_lettered_expired_total",
        [DROP_REJECTED] = "global_messages_dead_lettered_rejected_total",
        [DROP_MAXLEN] = "global_messages_dead_lettered_maxlen_total",
        [DROP_DELIVERY_LIMIT] =
            "global_messages_dead_lettered_delivery_limit_total",
    };
    static const char *const dlhelp[DROP_COUNT] = {
        [DROP_EXPIRED] = "Total number of messages dead-lettered due to "
                         "message TTL exceeded",
        [DROP_REJECTED] = "Total number of messages dead-lettered due to "
                          "basic.reject or basic.nack",
        [DROP_MAXLEN] = "Total number of messages dead-lettered due to "
                        "overflow drop-head or reject-publish-dlx",
        [DROP_DELIVERY_LIMIT] = "Total number of messages dead-lettered due "
                                "to delivery-limit exceeded",
    };
    for (int r = 0; r < DROP_COUNT; r++) {
        if (!fam(s, G_ALL, dlname[r], "counter", dlhelp[r], false))
            continue;
        series(s, dlname[r], "dead_letter_strategy=\"at_most_once\"",
               (double)dl[r], false);
        series(s, dlname[r], "dead_letter_strategy=\"disabled\"",
               (double)dr[r], false);
    }
}

static void
write_channels(struct scrape *s)
{
    struct csums cs = { NULL, 0, s->mode != MODE_AGGREGATED };

    if (cs.per_vhost) {
        vhost_foreach(add_vhost, &cs);
    } else {
        cs.v = xcalloc(1, sizeof(*cs.v));
        cs.n = 1;
        stats_overview(&cs.v[0].ms);
        cs.v[0].recv_oct = stats_churn.conn_recv_gone;
        cs.v[0].send_oct = stats_churn.conn_send_gone;
    }
    conn_foreach(add_conn, &cs);
    for (size_t i = 0; i < sizeof(cfams) / sizeof(cfams[0]); i++) {
        const struct cfam *f = &cfams[i];
        size_t shown = 0;
        for (size_t j = 0; j < cs.n; j++) {
            const struct csum *c = &cs.v[j];
            if (s->vhost_filter && strcmp(c->vh->name, s->vhost_filter) != 0)
                continue;
            if (shown++ == 0 &&
                !fam(s, f->group, f->name, f->type, f->help, false))
                break;
            if (c->vh == NULL) {
                series(s, f->name, NULL, cvalue(f, c), false);
            } else {
                char *l = labels_of(c->vh->name, NULL, 0);
                series(s, f->name, l, cvalue(f, c), false);
                free(l);
            }
        }
    }
    if (!cs.per_vhost) {
        write_global(s, &cs.v[0]);
    } else if (s->mode == MODE_PER_OBJECT) {
        /* the global families are the broker's in every answer */
        struct csum all;
        memset(&all, 0, sizeof(all));
        stats_overview(&all.ms);
        for (size_t j = 0; j < cs.n; j++) {
            all.consumers += cs.v[j].consumers;
            all.unconfirmed += cs.v[j].unconfirmed;
        }
        write_global(s, &all);
    }
    free(cs.v);
}

/* ---- queues ---- */

struct qwalk {
    struct scrape *s;
    size_t allowed;             /* queues the bound lets in */
    /* the aggregate */
    double sum[QV_COUNT];
    uint64_t dl[DROP_COUNT], dr[DROP_COUNT];
    struct hist hist[HIST_KINDS];
    uint64_t n;
};

static void
sum_queue(struct qwalk *w, const struct queue *q)
{
    struct queue_info qi;

    queue_info(q, &qi);
    w->n++;
    for (int v = 0; v < QV_COUNT; v++) {
        double x = qvalue((enum qval)v, &qi);
        if (v == QV_HEAD_AGE)
            w->sum[v] = x > w->sum[v] ? x : w->sum[v];
        else
            w->sum[v] += x;
    }
    for (int r = 0; r < DROP_COUNT; r++) {
        w->dl[r] += qi.dead_lettered[r];
        w->dr[r] += qi.dropped[r];
    }
    if (qi.hist != NULL)
        for (int k = 0; k < HIST_KINDS; k++)
            hist_add(&w->hist[k], &qi.hist[k]);
}

static void
take_queue(struct queue *q, void *arg)
{
    struct qwalk *w = arg;
    struct scrape *s = w->s;

    s->queues_total++;
    if (s->nq == w->allowed) {
        s->omitted++;
        return;
    }
    if (s->nq == s->qcap) {
        s->qcap = s->qcap ? 2 * s->qcap : 256;
        s->qs = xrealloc(s->qs, s->qcap * sizeof(*s->qs));
    }
    s->qs[s->nq].q = queue_ref(q);
    s->qs[s->nq].labels = NULL;
    s->nq++;
}

static void
take_vhost(struct vhost *vh, void *arg)
{
    struct qwalk *w = arg;
    if (w->s->vhost_filter && strcmp(vh->name, w->s->vhost_filter) != 0)
        return;
    vhost_foreach_queue(vh, take_queue, arg);
}

/* A histogram's series: cumulative buckets, sum and count. */
static void
write_hist(struct scrape *s, const char *name, const char *labels,
           const struct hist *h)
{
    static const struct hist none;
    static char le[HIST_BUCKETS][32];
    uint64_t cum = 0;
    struct line l;

    if (le[0][0] == '\0') {
        for (int i = 0; i < HIST_BUCKETS - 1; i++)
            snprintf(le[i], sizeof(le[i]), "le=\"%g\"",
                     hist_bounds_ms[i] / 1000.0);
        snprintf(le[HIST_BUCKETS - 1], sizeof(le[0]), "le=\"+Inf\"");
    }
    if (h == NULL)
        h = &none;
    for (int i = 0; i < HIST_BUCKETS; i++) {
        cum += h->bucket[i];
        ln_start(&l, "", name, "_bucket", labels, le[i]);
        ln_value(&l, (double)cum);
        ln_add(s->buf, &l);
    }
    ln_start(&l, "", name, "_sum", labels, "");
    ln_value(&l, (double)h->sum_ms / 1000.0);
    ln_add(s->buf, &l);
    ln_start(&l, "", name, "_count", labels, "");
    ln_value(&l, (double)h->count);
    ln_add(s->buf, &l);
}

/* A reason-labelled family's series for one queue (or the sum). */
static void
write_reasons(struct scrape *s, const char *name, const char *labels,
              const uint64_t *v)
{
    static char reason[DROP_COUNT][40];
    struct line l;
    for (int r = 0; r < DROP_COUNT; r++) {
        if (reason[r][0] == '\0')
            snprintf(reason[r], sizeof(reason[r]), "reason=\"%s\"",
                     drop_reason_names[r]);
        ln_start(&l, "", name, "", labels, reason[r]);
        ln_value(&l, (double)v[r]);
        ln_add(s->buf, &l);
    }
}

static bool
qfam_header(struct scrape *s, const struct qfam *f)
{
    return fam(s, f->groups, f->name, f->type, f->help, f->roost);
}

static void
write_queue_aggregate(struct scrape *s, const struct qwalk *w)
{
    for (size_t i = 0; i < NQFAMS; i++) {
        const struct qfam *f = &qfams[i];
        if (!qfam_header(s, f))
            continue;
        switch (f->kind) {
        case QK_VALUE:
            series(s, f->name, NULL, w->sum[f->arg], f->roost);
            break;
        case QK_DEAD_LETTERED:
            write_reasons(s, f->name, "", w->dl);
            break;
        case QK_DROPPED:
            write_reasons(s, f->name, "", w->dr);
            break;
        case QK_HIST:
            write_hist(s, f->name, "", &w->hist[f->arg]);
            break;
        case QK_STREAM:
        case QK_STREAM_LAG:
            break;      /* a sum over streams or names would mean nothing */
        }
    }
}

struct lag_walk {
    struct scrape *s;
    const char *fam, *labels;
};

static void
write_lag(const struct stream_name_info *ni, void *arg)
{
    const struct lag_walk *w = arg;
    char name[2 * 255 + 16];
    struct line l;

    put_label(name, "name", ni->name, ni->len);
    ln_start(&l, "", w->fam, "", w->labels, name);
    ln_value(&l, (double)ni->lag);
    ln_add(w->s->buf, &l);
}

/* One queue's series of family 'f'. Its labels are made the first time:
 * the queue is not deleted then, so its vhost is still there. */
static void
write_queue_one(struct scrape *s, const struct qfam *f, struct sq *e)
{
    struct queue_info qi;

    if (e->labels == NULL)
        e->labels = labels_of(e->q->vh->name, e->q->name, e->q->name_len);
    queue_info(e->q, &qi);
    switch (f->kind) {
    case QK_VALUE:
        series(s, f->name, e->labels, qvalue((enum qval)f->arg, &qi),
               f->roost);
        break;
    case QK_DEAD_LETTERED:
        write_reasons(s, f->name, e->labels, qi.dead_lettered);
        break;
    case QK_DROPPED:
        write_reasons(s, f->name, e->labels, qi.dropped);
        break;
    case QK_HIST:
        write_hist(s, f->name, e->labels, qi.hist ? &qi.hist[f->arg] : NULL);
        break;
    case QK_STREAM:
        if (e->q->ops->log) {
            struct stream_info si;
            stream_info(e->q, &si);
            double v = f->arg == SV_FIRST   ? (double)si.first_offset
                       : f->arg == SV_LAST  ? (double)si.next_offset - 1
                       : f->arg == SV_BYTES ? (double)si.bytes
                       : f->arg == SV_SEGMENTS ? (double)si.segments
                       : f->arg == SV_DISK ? (double)si.disk_bytes
                                            : (double)si.retention_dropped;
            if (f->arg != SV_LAST || si.messages > 0)
                series(s, f->name, e->labels, v, f->roost);
        }
        break;
    case QK_STREAM_LAG:
        if (e->q->ops->log) {
            struct lag_walk w = { s, f->name, e->labels };
            stream_foreach_name(e->q, write_lag, &w);
        }
        break;
    }
}

/*
 * Write queue families from (s->fam, s->pos) until done (true) or the
 * slice's time is up (false). A deleted queue is left out.
 */
static bool
write_queue_slice(struct scrape *s, uint64_t t0)
{
    size_t done = 0;

    for (; s->fam < NQFAMS; s->fam++, s->pos = 0) {
        const struct qfam *f = &qfams[s->fam];
        if ((s->groups & f->groups) == 0)
            continue;
        if (s->pos == 0)
            qfam_header(s, f);
        for (; s->pos < s->nq; s->pos++) {
            struct sq *e = &s->qs[s->pos];
            if (e->q->deleted)
                continue;
            write_queue_one(s, f, e);
            if (++done % SLICE_CHECK == 0 && mono_us() - t0 > SLICE_US) {
                s->pos++;
                return false;
            }
        }
    }
    return true;
}

/* ---- replying ---- */

static void scrape_continue(struct evhttp_connection *evcon, void *arg);

/* A slice ends: its time on the clock (what AMQP clients wait, also
 * while another process has the CPU) and on the thread's CPU clock (what
 * the slice itself cost) since 'sl' began. */
struct slice {
    uint64_t wall, cpu;
};

static struct slice
slice_begin(void)
{
    return (struct slice){ mono_us(), clock_us(CLOCK_THREAD_CPUTIME_ID) };
}

static void
note_slice(struct slice sl)
{
    uint64_t wall = mono_us() - sl.wall;
    uint64_t cpu = clock_us(CLOCK_THREAD_CPUTIME_ID) - sl.cpu;
    if (wall > slice_max_us)
        slice_max_us = wall;
    if (cpu > slice_max_cpu_us)
        slice_max_cpu_us = cpu;
}

static void
write_trailer(struct scrape *s)
{
    if (s->mode != MODE_AGGREGATED) {
        if (s->mode == MODE_PER_OBJECT &&
            fam(s, G_ALL, "roost_prometheus_objects_omitted", "gauge",
                "Queues left out of this answer by prometheus.max_series",
                true))
            series(s, "roost_prometheus_objects_omitted", NULL,
                   (double)s->omitted, true);
    }
    write_totals(s);
    if (s->mode != MODE_DETAILED) {
        if (fam(s, G_ALL, "roost_prometheus_slice_max_seconds", "gauge",
                "The longest a scrape has held the event loop in one slice",
                true))
            series(s, "roost_prometheus_slice_max_seconds", NULL,
                   (double)slice_max_us / 1e6, true);
        if (fam(s, G_ALL, "roost_prometheus_slice_max_cpu_seconds", "gauge",
                "The most CPU time one slice of a scrape has taken", true))
            series(s, "roost_prometheus_slice_max_cpu_seconds", NULL,
                   (double)slice_max_cpu_us / 1e6, true);
    }
    write_identity(s);
}

static void
scrape_done(struct scrape *s)
{
    uint64_t took = mono_us() - s->started_us;
    if (took > scrape_max_us)
        scrape_max_us = took;
    log_debug("prometheus: scrape of %zu queues in %" PRIu64 " us (longest "
              "slice %" PRIu64 " us)", s->nq, took, slice_max_us);
}

/* The next slice: called when evhttp has written the previous one. */
static void
scrape_continue(struct evhttp_connection *evcon, void *arg)
{
    struct scrape *s = arg;
    struct slice sl = slice_begin();
    (void)evcon;

    for (;;) {
        bool last = write_queue_slice(s, sl.wall);
        if (last)
            write_trailer(s);
        if (!last && evbuffer_get_length(s->buf) == 0)
            continue;           /* every queue of the slice was gone */
        if (!last) {
            evhttp_send_reply_chunk_with_cb(s->req, s->buf, scrape_continue,
                                            s);
            note_slice(sl);
            return;
        }
        /* the client's connection is no business of ours any more */
        http_guard_set_closecb(s->evcon, NULL, NULL);
        evhttp_send_reply_chunk(s->req, s->buf);
        evhttp_send_reply_end(s->req);
        scrape_done(s);
        scrape_free(s);
        note_slice(sl);
        return;
    }
}

/*
 * The client went (or timed out) before the end. libevent 2.1 then
 * detaches a request its user has not finished from the connection it
 * frees (evhttp_connection_incoming_fail) and leaves it to the user:
 * ending it frees it.
 */
static void
client_gone(struct evhttp_connection *evcon, void *arg)
{
    struct scrape *s = arg;
    (void)evcon;
    log_debug("prometheus: client went during a scrape (%zu of %zu "
              "queues' families written)", s->pos, s->nq);
    if (evhttp_request_get_connection(s->req) == NULL)
        evhttp_send_reply_end(s->req);
    scrape_free(s);
}

static void
reply_plain(struct evhttp_request *req, int code, const char *reason,
            const char *text)
{
    struct evbuffer *b = evbuffer_new();
    if (b == NULL)
        fatalx("prometheus: out of memory");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      "text/plain; charset=utf-8");
    evbuffer_add_printf(b, "%s\n", text);
    evhttp_send_reply(req, code, reason, b);
    evbuffer_free(b);
}

/* ?family=... (repeated) of /metrics/detailed; 0 if none is known. */
static unsigned
detailed_groups(struct evkeyvalq *q)
{
    unsigned g = 0;
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, q, next) {
        if (strcmp(kv->key, "family") != 0)
            continue;
        for (size_t i = 0; i < sizeof(groups) / sizeof(groups[0]); i++)
            if (strcmp(kv->value, groups[i].name) == 0)
                g |= groups[i].bit;
    }
    return g;
}

static void
write_vhost_status(struct vhost *vh, void *arg)
{
    struct scrape *s = arg;
    if (s->vhost_filter && strcmp(vh->name, s->vhost_filter) != 0)
        return;
    char *l = labels_of(vh->name, NULL, 0);
    evbuffer_add_printf(s->buf, "rabbitmq_cluster_vhost_status{%s} 1\n", l);
    free(l);
}

/*
 * The aggregated answer's next slice of sums; when every queue is
 * summed, the answer goes out whole. The next slice runs from a timer
 * of no delay, which libevent runs after its next look at the sockets.
 */
static void
sum_next(evutil_socket_t fd, short what, void *arg)
{
    struct scrape *s = arg;
    struct qwalk *w = s->sum;
    struct slice sl = slice_begin();
    static const struct timeval now = { 0, 0 };
    (void)fd;
    (void)what;

    while (s->pos < s->nq) {
        const struct queue *q = s->qs[s->pos++].q;
        if (!q->deleted)
            sum_queue(w, q);
        if (s->pos % SLICE_CHECK == 0 && mono_us() - sl.wall > SLICE_US) {
            evtimer_add(s->next, &now);
            note_slice(sl);
            return;
        }
    }
    write_node(s);
    write_channels(s);
    write_queue_aggregate(s, w);
    write_trailer(s);
    http_guard_set_closecb(s->evcon, NULL, NULL);
    evhttp_send_reply(s->req, 200, "OK", s->buf);
    scrape_done(s);
    scrape_free(s);
    note_slice(sl);
}

static void
start_scrape(struct evhttp_request *req, enum mode mode)
{
    struct scrape *s = xcalloc(1, sizeof(*s));
    struct qwalk w;
    struct slice sl = slice_begin();

    LIST_INSERT_HEAD(&scrapes, s, link);
    s->req = req;
    s->evcon = evhttp_request_get_connection(req);
    s->mode = mode;
    s->groups = G_ALL;
    s->prefix = mode == MODE_DETAILED ? "rabbitmq_detailed_" : "rabbitmq_";
    s->buf = evbuffer_new();
    s->started_us = sl.wall;
    if (s->buf == NULL)
        fatalx("prometheus: out of memory");
    if (mode == MODE_DETAILED) {
        struct evkeyvalq q;
        const char *query = evhttp_uri_get_query(
            evhttp_request_get_evhttp_uri(req));
        TAILQ_INIT(&q);
        if (query != NULL && evhttp_parse_query_str(query, &q) == 0) {
            s->groups = detailed_groups(&q);
            const char *vh = evhttp_find_header(&q, "vhost");
            if (vh != NULL)
                s->vhost_filter = xstrdup(vh);
        } else {
            s->groups = 0;
        }
        evhttp_clear_headers(&q);
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                      CONTENT_TYPE);

    memset(&w, 0, sizeof(w));
    w.s = s;
    http_guard_set_closecb(s->evcon, client_gone, s);
    if (mode == MODE_AGGREGATED) {
        /* every queue, referenced: summed a slice at a time */
        w.allowed = SIZE_MAX;
        vhost_foreach(take_vhost, &w);
        s->sum = xmalloc(sizeof(*s->sum));
        *s->sum = w;
        s->next = evtimer_new(broker.base, sum_next, s);
        if (s->next == NULL)
            fatalx("prometheus: out of memory");
        note_slice(sl);
        sum_next(-1, 0, s);
        return;
    }
    /* per object: the queues to show, then the node and the channels */
    size_t per_q = queue_series();
    int64_t max = broker.cfg.prom_max_series;
    w.allowed = max > 0 ? (size_t)max / per_q : SIZE_MAX;
    vhost_foreach(take_vhost, &w);
    if (s->omitted > 0 && mode == MODE_PER_OBJECT) {
        evbuffer_add_printf(s->buf, "# Roost: %" PRIu64 " of %" PRIu64
                            " queues left out: prometheus.max_series = %"
                            PRId64 " allows %zu queues of %zu series\n",
                            s->omitted, s->omitted + s->nq, max, w.allowed,
                            per_q);
        if (!omitted_logged) {
            omitted_logged = true;
            log_warnx("prometheus: per-object metrics cut at %zu queues "
                      "(prometheus.max_series = %" PRId64 "); %" PRIu64
                      " left out (logged once)", w.allowed, max,
                      s->omitted);
        }
    }
    write_node(s);
    write_channels(s);
    if (mode == MODE_DETAILED &&
        (s->groups & G_VHOST_STATUS) != 0) {
        evbuffer_add_printf(s->buf, "# TYPE rabbitmq_cluster_vhost_status "
                            "gauge\n# HELP rabbitmq_cluster_vhost_status "
                            "Whether a given vhost is running\n");
        vhost_foreach(write_vhost_status, s);
    }
    evhttp_send_reply_start(req, 200, "OK");
    s->fam = 0;
    s->pos = 0;
    evhttp_send_reply_chunk_with_cb(req, s->buf, scrape_continue, s);
    note_slice(sl);
}

static void
request_cb(struct evhttp_request *req, void *arg)
{
    const struct evhttp_uri *uri = evhttp_request_get_evhttp_uri(req);
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    const char *base = broker.cfg.prom_path;
    size_t blen = strlen(base);
    enum evhttp_cmd_type m = evhttp_request_get_command(req);
    enum mode mode;
    (void)arg;

    if (broker.shutting_down) {
        reply_plain(req, 503, "Service Unavailable", "shutting down");
        return;
    }
    /* DNS rebinding: a page whose name resolves to this address would
     * read the metrics (names of queues, users, vhosts) with the
     * browser's help. */
    char why[400];
    if (mgmt_host_check(req, bound_ip, why, sizeof(why)) != 0) {
        reply_plain(req, 421, "Misdirected Request", why);
        return;
    }
    if (path == NULL || strncmp(path, base, blen) != 0) {
        reply_plain(req, 404, "Not Found", "Not Found");
        return;
    }
    if (path[blen] == '\0')
        mode = broker.cfg.prom_per_object ? MODE_PER_OBJECT : MODE_AGGREGATED;
    else if (strcmp(path + blen, "/per-object") == 0)
        mode = MODE_PER_OBJECT;
    else if (strcmp(path + blen, "/detailed") == 0)
        mode = MODE_DETAILED;
    else {
        reply_plain(req, 404, "Not Found", "Not Found");
        return;
    }
    if (m != EVHTTP_REQ_GET && m != EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Allow",
                          "GET, HEAD");
        reply_plain(req, 405, "Method Not Allowed", "Method Not Allowed");
        return;
    }
    if (m == EVHTTP_REQ_HEAD) {
        evhttp_add_header(evhttp_request_get_output_headers(req),
                          "Content-Type", CONTENT_TYPE);
        evhttp_send_reply(req, 200, "OK", NULL);
        return;
    }
    start_scrape(req, mode);
}

/* ---- listening ---- */

int
prom_start(void)
{
    const struct config *c = &broker.cfg;
    const char *ip = c->prom_tcp_ip;
    const char *shown = ip[0] ? ip : "all addresses";
    struct timeval idle = { c->mgmt_idle_timeout_ms / 1000,
                            (c->mgmt_idle_timeout_ms % 1000) * 1000 };

    if (c->prom_tcp_port < 0)
        return 0;
    int fd = mgmt_listen(ip, c->prom_tcp_port, bound_ip, sizeof(bound_ip),
                         &bound_port);
    if (fd < 0 && errno == EADDRINUSE) {
        char who[128];
        port_holder(c->prom_tcp_port, who, sizeof(who));
        if (!c->prom_tcp_port_given) {
            log_warnx("prometheus: port %d on %s is in use by %s; running "
                      "without metrics (set prometheus.tcp.port to use "
                      "another port)", c->prom_tcp_port, shown, who);
            return 0;
        }
        log_errorx("prometheus: port %d on %s is in use by %s; choose "
                   "another with prometheus.tcp.port", c->prom_tcp_port,
                   shown, who);
        return -1;
    }
    if (fd < 0) {
        log_warn("prometheus: cannot listen on %s port %d "
                 "(prometheus.tcp.ip, prometheus.tcp.port)", shown,
                 c->prom_tcp_port);
        return -1;
    }
    http = evhttp_new(broker.base);
    if (http == NULL) {
        close(fd);
        log_errorx("prometheus: cannot create the HTTP server");
        return -1;
    }
    /* every method reaches request_cb, which answers 405 itself */
    evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD |
                                         EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                         EVHTTP_REQ_DELETE |
                                         EVHTTP_REQ_OPTIONS |
                                         EVHTTP_REQ_PATCH);
    evhttp_set_max_headers_size(http, 64 * 1024);
    evhttp_set_max_body_size(http, PROM_BODY_MAX);
    evhttp_set_timeout_tv(http, &idle);
    evhttp_set_default_content_type(http, NULL);
    evhttp_set_gencb(http, request_cb, NULL);
    char what[128];
    snprintf(what, sizeof(what), "Prometheus listener %s:%d", bound_ip,
             bound_port);
    struct http_guard_limits lim = {
        .conn_max = (size_t)c->mgmt_max_connections,
        .request_ms = c->mgmt_request_timeout_ms,
        .small_body = PROM_BODY_MAX,
        .large_body = PROM_BODY_MAX,
    };
    listener.http = http;
    if (mgmt_accept(&listener, fd, what, &lim) != 0) {
        http = NULL;
        return -1;
    }
    if (strchr(bound_ip, ':'))
        log_info("Prometheus metrics on http://[%s]:%d%s", bound_ip,
                 bound_port, c->prom_path);
    else
        log_info("Prometheus metrics on http://%s:%d%s", bound_ip,
                 bound_port, c->prom_path);
    return 0;
}

void
prom_stop(void)
{
    struct scrape *s;

    while ((s = LIST_FIRST(&scrapes)) != NULL) {
        http_guard_set_closecb(s->evcon, NULL, NULL);
        scrape_free(s);
    }
    mgmt_unlisten(&listener);
    http = NULL;
}
