/*
 * SPDX-License-Identifier: Apache-2.0
 * Exchanges and bindings. An exchange owns its bindings (as source) and a
 * type-specific index over them that answers "which bindings match this
 * message" without scanning every binding where the type allows: a hash
 * by routing key (direct), a list (fanout), a trie (topic), a list of
 * parsed header matches (headers). One file per type implements
 * struct exchange_ops.
 *
 * Routing follows exchange-to-exchange bindings and alternate exchanges,
 * visits each exchange at most once (cycles are harmless) and reports
 * each queue at most once.
 */
#ifndef ROOST_BROKER_EXCHANGE_H
#define ROOST_BROKER_EXCHANGE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

#include "amqp/table.h"
#include "amqp/wire.h"
#include "broker/core/stats.h"

struct msg;
struct queue;
struct vhost;
struct exchange;
struct route_ctx;

struct binding {
    struct exchange *src;
    struct queue *q;            /* destination: a queue ... */
    struct exchange *dest_x;    /* ... or an exchange */
    char *key;                  /* routing key (binding key) */
    size_t key_len;
    struct amqp_table args;     /* borrows args_buf */
    uint8_t *args_buf;
    void *index_data;           /* owned by the type's index */
    TAILQ_ENTRY(binding) src_link;   /* in src->bindings */
    TAILQ_ENTRY(binding) dest_link;  /* in the destination's list */
};
TAILQ_HEAD(binding_list, binding);

struct exchange_ops {
    const char *type;
    void *(*create)(void);
    void (*destroy)(void *index);
    /* Add a binding to the index; -1 with a message in 'err' if its
     * arguments are invalid for this type (406 PRECONDITION_FAILED). */
    int (*add)(void *index, struct binding *b, char *err, size_t errlen);
    void (*remove)(void *index, struct binding *b);
    /* Call route_emit(rc, b) for every binding that matches 'm'. */
    void (*route)(void *index, const struct msg *m, struct route_ctx *rc);
    /* If set, used instead of create: an index that needs its exchange
     * (its arguments, its vhost), made once the exchange is filled in. */
    void *(*create_for)(struct exchange *x);
    /* If set, the declare arguments are checked: 0, or the reply code
     * (406 soft, 503 hard) with RabbitMQ's text in 'err'. */
    int (*check_args)(struct amqp_table args, char *err, size_t errlen);
    /* It holds messages itself before routing them (x-delayed-message):
     * the store keeps them under the exchange's id (delayed.h). */
    bool holds_messages;
};

extern const struct exchange_ops exchange_direct_ops;
extern const struct exchange_ops exchange_fanout_ops;
extern const struct exchange_ops exchange_topic_ops;
extern const struct exchange_ops exchange_headers_ops;
/* x-delayed-message (broker/core/delayed.h): holds messages with an x-delay
 * and routes them through its x-delayed-type when they are due. */
extern const struct exchange_ops exchange_delayed_ops;

/* The ops of a type name ("direct", ...), or NULL if unknown. */
const struct exchange_ops *exchange_ops_find(struct amqp_bytes type);

struct exchange {
    char *name;
    size_t name_len;
    struct vhost *vh;
    const struct exchange_ops *ops;
    void *index;
    bool durable, auto_delete, internal;
    bool is_default;            /* the nameless default exchange */
    uint8_t *args_buf;          /* declare arguments, for equivalence */
    struct amqp_table args;
    char *alternate;            /* alternate-exchange argument, or NULL */
    char *policy_alternate;     /* a policy's, where the argument is NULL */
    struct binding_list bindings;       /* as source */
    struct binding_list dest_bindings;  /* as destination */
    size_t nbindings;
    uint64_t epoch;             /* last routing pass that visited it */
    uint32_t sid;               /* store id of a durable x-delayed-message
                                 * exchange (its held messages); else 0 */
    /* counters (stats.h): publish_in, publish_out */
    struct msg_stats ms;
    struct stats_series *series;
};

struct exchange *exchange_new(struct vhost *vh, struct amqp_bytes name,
                              const struct exchange_ops *ops, bool durable,
                              bool auto_delete, bool internal,
                              struct amqp_table args);
/* Remove every binding from and to 'x', then free it. */
void exchange_free(struct exchange *x);

/*
 * Bind 'src' to a queue or an exchange. Binding the same (destination,
 * key, arguments) twice is a no-op. 0, or -1 with a message when the
 * type rejects the arguments.
 */
int exchange_bind(struct exchange *src, struct queue *q,
                  struct exchange *dest_x, struct amqp_bytes key,
                  struct amqp_table args, char *err, size_t errlen);

/* Whether 'src' has the matching binding. */
bool exchange_is_bound(struct exchange *src, struct queue *q,
                       struct exchange *dest_x, struct amqp_bytes key,
                       struct amqp_table args);

/* Remove the matching binding; false if there was none. */
bool exchange_unbind(struct exchange *src, struct queue *q,
                     struct exchange *dest_x, struct amqp_bytes key,
                     struct amqp_table args);

/* Each binding of which 'x' is the source, in the order they were
 * made; 'fn' must not change any. */
void exchange_foreach_binding(struct exchange *x,
                              void (*fn)(const struct binding *b, void *arg),
                              void *arg);
/* Each binding to exchange 'x'. */
void exchange_foreach_dest_binding(struct exchange *x,
                                   void (*fn)(const struct binding *b,
                                              void *arg), void *arg);

/* Remove and free one binding (and auto-delete its source if that was
 * its last binding). */
void binding_free(struct binding *b);

/*
 * RabbitMQ compares only some declare arguments when a queue or exchange
 * is declared again. Check the NULL-terminated 'keys' of 'got' against
 * 'cur'; on a difference write RabbitMQ's text to 'err':
 *   inequivalent arg 'K' for WHAT: received the value '5' of type
 *   'signedint' but current is none
 * and return false. 'what' is e.g. "queue 'q' in vhost '/'".
 */
bool args_equivalent(struct amqp_table cur, struct amqp_table got,
                     const char *const *keys, const char *what, char *err,
                     size_t errlen);

/* ---- routing ---- */

struct route_result {
    struct queue **qs;
    size_t n, cap;
};

void route_result_init(struct route_result *r);
void route_result_free(struct route_result *r);

/* Route 'm' through 'x' into 'out' (cleared first). */
/* exchange_route by the message's routing key and by each of 'extra'
 * (CC and BCC): each queue once in 'out'. */
void exchange_route_keys(struct exchange *x, const struct msg *m,
                         const struct amqp_bytes *extra, size_t n,
                         struct route_result *out);
void exchange_route(struct exchange *x, const struct msg *m,
                    struct route_result *out);

/*
 * Route 'm' through 'x' by its routing key and the keys its CC and BCC
 * headers list (their longstr entries, as RabbitMQ takes them), each
 * queue once. Returns the message to enqueue: 'm', or a new reference
 * to a copy without BCC, which no consumer may see (the slow path,
 * reheader.h); the caller releases a copy once it has enqueued it.
 */
struct msg *exchange_route_msg(struct exchange *x, struct msg *m,
                               struct route_result *out);

/* For the type indexes: the routing key being routed (the message's, or
 * one of the extra keys). */
struct amqp_bytes route_key(const struct route_ctx *rc);

/* For the type indexes: report one matching binding. */
void route_emit(struct route_ctx *rc, struct binding *b);

#endif
