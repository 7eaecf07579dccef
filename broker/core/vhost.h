/*
 * SPDX-License-Identifier: Apache-2.0
 * A virtual host: its exchanges (including the default exchange and the
 * predeclared amq.* ones) and its queues, by name.
 */
#ifndef ROOST_BROKER_VHOST_H
#define ROOST_BROKER_VHOST_H

#include <stdbool.h>
#include <stdint.h>

#include "amqp/wire.h"
#include "broker/core/stats.h"
#include "broker/lib/hmap.h"

struct exchange;
struct policy_table;
struct queue;

struct vhost {
    char *name;
    char *description;          /* "" when none */
    char *tags;                 /* comma separated, "" when none */
    int64_t max_connections;    /* vhost limits; -1: none */
    int64_t max_queues;
    struct hmap exchanges;
    struct hmap queues;
    struct exchange *default_x;
    uint64_t route_epoch;
    struct policy_table *policies;  /* policy.c's; NULL: none yet */
    bool tracing;               /* the firehose is on (trace.h) */
    /* the counters of its channels that closed (stats.h): the overview's
     * message_stats are these and its open channels' */
    struct msg_stats channels_gone;
};

/* The firehose's exchange in every vhost (broker/session/trace.h). */
#define TRACE_EXCHANGE "amq.rabbitmq.trace"

/* Whether publishes into 'vh' and deliveries from it are traced. */
static inline bool
trace_is_on(const struct vhost *vh)
{
    return __builtin_expect(vh->tracing, 0);
}

/* Switch tracing in 'vh' on or off, logged as RabbitMQ logs it
 * ("Enabling tracing for vhost '/'", "Tracing is already enabled ..."). */
void trace_set(struct vhost *vh, bool on);

/* A vhost with the default exchange and amq.direct, amq.fanout,
 * amq.topic, amq.headers, amq.match and amq.rabbitmq.trace predeclared,
 * tracing off. */
struct vhost *vhost_new(const char *name);
void vhost_free(struct vhost *vh);

/*
 * Create a vhost at run time (or at import): registered with the broker
 * and announced unless 'quiet'. Returns the vhost, or the existing one if
 * it was already there.
 */
struct vhost *vhost_create(const char *name, bool quiet);

/*
 * Delete a vhost with everything in it: its connections are closed
 * (320 CONNECTION_FORCED), its queues, exchanges and bindings deleted,
 * its permissions dropped. False if there was none.
 */
bool vhost_delete(const char *name);

/* Its description and tags ("" for none), announced unless 'quiet'. */
void vhost_set_meta(struct vhost *vh, const char *description,
                    const char *tags, bool quiet);

/* The vhost limits, by RabbitMQ's names. */
enum vhost_limit { VHOST_MAX_CONNECTIONS, VHOST_MAX_QUEUES };
/* The limit called 'name' ("max-connections", "max-queues") into '*l';
 * false if it is neither. */
bool vhost_limit_named(const char *name, enum vhost_limit *l);
/* Limit 'l' of 'vh': -1 for none. */
int64_t vhost_limit(const struct vhost *vh, enum vhost_limit l);
/* Set it (negative: none, kept as -1), announced unless 'quiet'. */
void vhost_set_limit(struct vhost *vh, enum vhost_limit l, int64_t value,
                     bool quiet);

/* Every vhost, in no particular order. */
void vhost_foreach(void (*fn)(struct vhost *vh, void *arg), void *arg);

/* Each queue, or exchange, of 'vh', in no particular order. 'fn' must
 * not add or delete any. */
void vhost_foreach_queue(struct vhost *vh,
                         void (*fn)(struct queue *q, void *arg), void *arg);
void vhost_foreach_exchange(struct vhost *vh,
                            void (*fn)(struct exchange *x, void *arg),
                            void *arg);

/* A channel of a connection to 'vh' closed with counters 'ms'. */
void vhost_channel_gone(struct vhost *vh, const struct msg_stats *ms);

/* The stats tick (stats.c): every vhost's queues and exchanges. */
void vhost_sample_all(void);

/* How many exchanges 'vh' has (the default and amq.* ones included). */
size_t vhost_exchange_count(const struct vhost *vh);

/* Queues in 'vh' and its total of ready and unacked messages. */
void vhost_totals(const struct vhost *vh, uint64_t *queues, uint64_t *ready,
                  uint64_t *unacked);

struct exchange *vhost_exchange(struct vhost *vh, struct amqp_bytes name);
struct queue *vhost_queue(struct vhost *vh, struct amqp_bytes name);

/* Adding one applies the vhost's policies to it (policy.h). */
void vhost_add_exchange(struct vhost *vh, struct exchange *x);
void vhost_remove_exchange(struct vhost *vh, struct exchange *x);
void vhost_add_queue(struct vhost *vh, struct queue *q);
void vhost_remove_queue(struct vhost *vh, struct queue *q);

#endif
