/*
 * SPDX-License-Identifier: Apache-2.0
 * The queue arguments Roost implements, parsed and validated once at
 * declare: x-message-ttl, x-expires, x-max-length, x-max-length-bytes,
 * x-overflow (drop-head, reject-publish, reject-publish-dlx),
 * x-dead-letter-exchange, x-dead-letter-routing-key, x-queue-mode
 * (default, lazy), x-queue-version (1, 2), x-queue-master-locator (no
 * effect on one node), x-single-active-consumer, x-delivery-limit (on
 * every queue: Roost's extension for classic ones), x-consumer-timeout
 * (RabbitMQ 3.12's) and x-queue-type=classic. Any other "x-"
 * argument is refused with 540 NOT_IMPLEMENTED.
 */
#ifndef ROOST_BROKER_QARGS_H
#define ROOST_BROKER_QARGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/table.h"

enum qargs_overflow {
    OVERFLOW_DROP_HEAD, OVERFLOW_REJECT_PUBLISH, OVERFLOW_REJECT_PUBLISH_DLX,
};

struct queue_ops;

struct qargs {
    const struct queue_ops *type;   /* x-queue-type; NULL: classic */
    int64_t message_ttl;        /* ms; -1: none */
    int64_t expires;            /* ms; 0: never */
    int64_t max_length;         /* messages; -1: no limit */
    int64_t max_length_bytes;   /* body bytes; -1: no limit */
    enum qargs_overflow overflow;
    char *dlx;                  /* dead-letter exchange, or NULL */
    char *dlrk;                 /* dead-letter routing key, or NULL */
    bool single_active;         /* x-single-active-consumer */
    const char *quorum_only;    /* a quorum queue's argument seen */
    const char *classic_only;   /* a classic queue's argument seen */
    const char *stream_only;    /* a stream's argument seen */
    const char *not_classic;    /* one quorum queues and streams take */
    /* x-queue-type: stream (queue_stream.c): its arguments are checked
     * as RabbitMQ 3.10.8 checks them, unknown ones ignored as there */
    bool stream;
    const char *not_stream;     /* the first argument streams refuse */
    int64_t max_age_ms;         /* x-max-age; -1: none */
    int64_t segment_size;       /* x-stream-max-segment-size-bytes; -1 */
    bool delivery_limited;      /* x-delivery-limit given: */
    int64_t delivery_limit;     /* returns allowed (negative: none) */
    int64_t max_priority;       /* x-max-priority (0-255); -1: none */
    int64_t requeue_delay;      /* x-requeue-delay, ms; 0: none */
    int64_t requeue_delay_max;  /* x-requeue-delay-max, ms; 0: default */
    int64_t consumer_timeout;   /* x-consumer-timeout, ms; 0: none for
                                 * this queue; -1: not given (the global
                                 * consumer_timeout applies) */
};

enum qargs_result { QARGS_OK, QARGS_INVALID, QARGS_NOT_IMPLEMENTED };

/*
 * Parse 'args'. On QARGS_INVALID (406) or QARGS_NOT_IMPLEMENTED (540),
 * 'err' holds the reply text without its "NAME - " prefix; 'what' names
 * the queue as RabbitMQ does ("queue 'q' in vhost '/'").
 */
enum qargs_result qargs_parse(struct amqp_table args, const char *what,
                              struct qargs *out, char *err, size_t errlen);
void qargs_free(struct qargs *a);

/* x-queue-leader-locator's values (quorum queues and streams; the
 * queue-leader-locator policy key's too), NULL-terminated. */
extern const char *const qargs_leader_locators[];

/* The largest x-stream-max-segment-size-bytes (and policy
 * stream-max-segment-size-bytes) RabbitMQ takes. */
#define QARGS_STREAM_SEGMENT_MAX 3000000000LL

/* An interval in x-max-age's grammar ("7D", "1h", "30s"; Y M D h m s)
 * into '*ms' (saturating): 0, or -1 if it is not one. */
int qargs_parse_age(struct amqp_bytes s, int64_t *ms);

/* The type 'args' name in x-queue-type: classic without one, NULL for
 * one Roost does not have. */
const struct queue_ops *qargs_type_of(struct amqp_table args);

/* Whether 'args' say x-queue-type: stream (checked before anything
 * else for a server-named queue, as RabbitMQ does). */
bool qargs_is_stream(struct amqp_table args);

/* The first property a stream refuses, in RabbitMQ's order
 * (auto-delete, exclusive, non-durable), or NULL. */
const char *qargs_stream_refused_property(bool durable, bool exclusive,
                                          bool auto_delete);

/* The keys compared when a queue is declared again (NULL-terminated). */
extern const char *const qargs_equivalence_keys[];

/* An integer field of any width, as RabbitMQ accepts one, for argument
 * 'k' of 'what' ("queue 'q' in vhost '/'"):
 * QARGS_INVALID with RabbitMQ's text ("... \"expected integer, got T\"")
 * in 'err' if it is not one. */
enum qargs_result qargs_int(const struct amqp_field *v, struct amqp_bytes k,
                            const char *what, int64_t *out, char *err,
                            size_t errlen);

/* RabbitMQ's name of a field's type, as in {unacceptable_type,T}. */
const char *qargs_type_atom(enum amqp_field_kind k);


/*
 * The expiration property of a message: -1 if absent, the TTL in ms, or
 * -2 if it is not a non-negative integer (RabbitMQ refuses the publish).
 */
int64_t qargs_parse_expiration(struct amqp_bytes s);

#endif
