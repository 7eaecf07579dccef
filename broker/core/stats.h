/*
 * SPDX-License-Identifier: Apache-2.0
 * Counters, rates and latency histograms (docs/operations.md). Each
 * module counts its own events in a struct it owns (a queue's, a
 * channel's, an exchange's message counters; a connection's bytes): one
 * increment of a field already in cache, nothing else on the AMQP path.
 * Rates are not kept by the counting code: every
 * collect_statistics_interval the stats tick samples each object's
 * counters (stats_sample) and keeps the rate of the last interval, as
 * RabbitMQ's rates_mode basic does. The management API and /metrics read
 * counters only through the modules' read functions (queue_info,
 * channel_info, conn_info, exchange_info).
 */
#ifndef ROOST_BROKER_STATS_H
#define ROOST_BROKER_STATS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/core/history.h"

/* RabbitMQ's message_stats keys, in its order. Not every object has
 * every one: a queue has no confirm, an exchange only publish_in and
 * publish_out (stats_keys says which). */
enum msg_stat {
    MS_PUBLISH,
    MS_PUBLISH_IN,
    MS_PUBLISH_OUT,
    MS_CONFIRM,
    MS_RETURN_UNROUTABLE,
    MS_DROP_UNROUTABLE,
    MS_DELIVER,
    MS_DELIVER_NO_ACK,
    MS_GET,
    MS_GET_NO_ACK,
    MS_GET_EMPTY,
    MS_ACK,
    MS_REDELIVER,
    MS_COUNT
};

struct msg_stats {
    uint64_t n[MS_COUNT];
};

/* The JSON key of each counter ("publish", "deliver_no_ack", ...). */
extern const char *const msg_stat_names[MS_COUNT];

/* Which counters each kind of object shows (bits of 1u << MS_...). */
#define MS_KEYS_QUEUE                                                   \
    ((1u << MS_PUBLISH) | (1u << MS_DELIVER) | (1u << MS_DELIVER_NO_ACK) | \
     (1u << MS_GET) | (1u << MS_GET_NO_ACK) | (1u << MS_GET_EMPTY) |      \
     (1u << MS_ACK) | (1u << MS_REDELIVER))
#define MS_KEYS_EXCHANGE ((1u << MS_PUBLISH_IN) | (1u << MS_PUBLISH_OUT))
#define MS_KEYS_CHANNEL                                                 \
    (MS_KEYS_QUEUE | (1u << MS_CONFIRM) | (1u << MS_RETURN_UNROUTABLE) |  \
     (1u << MS_DROP_UNROUTABLE))

static inline void
msg_stats_add(struct msg_stats *to, const struct msg_stats *from)
{
    for (int i = 0; i < MS_COUNT; i++)
        to->n[i] += from->n[i];
}

/* Why a queue let a message go other than by ack (RabbitMQ's
 * dead-letter reasons): counted dead-lettered, or dropped where the
 * queue has no dead-letter exchange. */
enum drop_reason {
    DROP_EXPIRED,
    DROP_REJECTED,
    DROP_MAXLEN,
    DROP_DELIVERY_LIMIT,
    DROP_COUNT
};
extern const char *const drop_reason_names[DROP_COUNT];
enum drop_reason drop_reason_of(const char *reason);

/*
 * A latency histogram with fixed buckets (seconds: 0.005 ... 300 and
 * +Inf, Prometheus' cumulative form is made when it is written out).
 * The clock is now_ms()'s coarse monotonic one, so the first bucket
 * holds everything under its resolution (4 ms with HZ=250).
 */
#define HIST_BUCKETS 15
extern const uint32_t hist_bounds_ms[HIST_BUCKETS - 1];

struct hist {
    uint64_t bucket[HIST_BUCKETS];  /* not cumulative; the last is +Inf */
    uint64_t count;
    uint64_t sum_ms;
};

static inline void
hist_observe(struct hist *h, uint64_t ms)
{
    int i = 0;
    while (i < HIST_BUCKETS - 1 && ms > hist_bounds_ms[i])
        i++;
    h->bucket[i]++;
    h->count++;
    h->sum_ms += ms;
}

static inline void
hist_add(struct hist *to, const struct hist *from)
{
    for (int i = 0; i < HIST_BUCKETS; i++)
        to->bucket[i] += from->bucket[i];
    to->count += from->count;
    to->sum_ms += from->sum_ms;
}

/* A queue's three: publish to first delivery, delivery to ack, publish
 * to the publisher's confirm. */
enum { HIST_IN_QUEUE, HIST_PROCESSING, HIST_CONFIRM, HIST_KINDS };

/*
 * The rate of change of up to STATS_SERIES_MAX values of one object
 * over the last interval: made by the tick, only for objects that have
 * counted something (an idle queue keeps a NULL pointer).
 */
#define STATS_SERIES_MAX 16
struct stats_series {
    uint64_t last[STATS_SERIES_MAX];
    float rate[STATS_SERIES_MAX];
    uint64_t tick;              /* the tick that sampled it */
};

/* Sample 'n' values into '*s' (made at the first nonzero value): each
 * rate becomes (value - last) / interval. */
void stats_sample(struct stats_series **s, const uint64_t *v, size_t n);

/* The rate of value 'i' of '*s' (0 when none was sampled). */
static inline double
stats_rate(const struct stats_series *s, size_t i)
{
    return s ? (double)s->rate[i] : 0.0;
}

void stats_series_free(struct stats_series **s);

/* RabbitMQ's management.rates_mode: basic (rates of the last interval),
 * detailed (the same: Roost keeps no per-pair samples), none (no rates:
 * the tick does not run). */
enum rates_mode { RATES_BASIC, RATES_DETAILED, RATES_NONE };

/* Start the tick (collect_statistics_interval ms). */
void stats_start(void);
void stats_stop(void);
/* The tick's interval in seconds. */
double stats_interval(void);
enum rates_mode stats_rates_mode(void);

/* The broker's message_stats: every channel's, open or closed, and
 * their rates (sampled by the tick). */
void stats_overview(struct msg_stats *out);
const struct stats_series *stats_overview_series(void);

/* The tick's count since the start, and the wall clock (ms since the
 * epoch) when it last ran: where histories are recorded. */
uint64_t stats_tick(void);
uint64_t stats_tick_wall_ms(void);
/* The broker's history (NULL before anything was counted). */
const struct history *stats_history(void);
/* The values a history keeps (HC_*), from an object's message_stats,
 * depths and dead-lettered and dropped counts ([DROP_COUNT] each). */
void stats_history_values(const struct msg_stats *ms, uint64_t ready,
                          uint64_t unacked, const uint64_t *dead_lettered,
                          const uint64_t *dropped, uint64_t v[HC_COUNT]);
/* The broker's values now, as its history keeps them. */
void stats_broker_values(uint64_t v[HC_COUNT]);

/*
 * Broker-wide churn, for /metrics (rabbitmq_*_opened_total, ...): each
 * module adds one when it makes or drops the object, never per message.
 * Connections are counted from accept to release (not the management
 * API's direct ones); the bytes of those that closed are kept so that
 * the broker's byte totals never go down.
 */
struct stats_churn {
    uint64_t conns_opened, conns_closed;
    uint64_t channels_opened, channels_closed;
    uint64_t queues_declared, queues_created, queues_deleted;
    uint64_t conn_recv_gone, conn_send_gone;    /* octets */
    /* every queue's dead-lettered and dropped messages by reason, those
     * of queues deleted since too (one more increment where the queue
     * counts its own) */
    uint64_t dead_lettered[DROP_COUNT], dropped[DROP_COUNT];
};
extern struct stats_churn stats_churn;

/* The node's figures the tick samples for their rates (/api/nodes'
 * *_details, the overview's disk_reads and disk_writes). */
enum { NODE_MEM_USED, NODE_FD_USED, NODE_SOCKETS_USED, NODE_DISK_FREE,
       NODE_DISK_READS, NODE_DISK_WRITES, NODE_COUNT };
const struct stats_series *stats_node_series(void);
/* Open file descriptors of the process (a readdir of /proc/self/fd). */
uint64_t stats_open_fds(void);

#endif
