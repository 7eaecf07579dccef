/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The broker's core with nothing above it, for the unit tests that drive
 * it directly (the check programs that include this): an event base, the
 * configuration's defaults, the vhost "/" and the RAM store (store.h),
 * opened; no socket, channel or data directory. Queues and exchanges are
 * declared, and messages published, through the core's own constructors
 * and calls, in the order the session's handlers make them; consumers are
 * fakes behind struct consumer_ops that record what they are handed.
 * Everything made here is freed by fx_teardown (the suite runs under
 * ASan's leak check).
 */
#ifndef ROOST_TESTS_CORE_FIXTURE_H
#define ROOST_TESTS_CORE_FIXTURE_H

#include "tests/unit/testutil.h"

#include <stdbool.h>
#include <stdint.h>

#include "amqp/table.h"
#include "broker/core/exchange.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/vhost.h"

/* The vhost "/", made by fx_setup. */
extern struct vhost *fx_vh;

/* A checked fixture: setup and teardown of each test (in its own
 * process unless CK_FORK=no). */
void fx_setup(void);
void fx_teardown(void);
/* A test case of 'name' in 's' with that fixture. */
TCase *fx_tcase(Suite *s, const char *name);

/*
 * A field table from a line of entries separated by spaces, into 't'
 * (valid while 't' is): "k=v" a longstr, "k#12" a signed 64-bit integer,
 * "k:true" (or "k:false") a bool, "k!" a void, "k=[a,b]" an array of
 * longstrs. NULL or "" is the empty table. The test fails on a spec too
 * long for the buffer.
 */
struct fx_table {
    uint8_t buf[2048];
};
struct amqp_table fx_table(struct fx_table *t, const char *spec);

/* Declare a queue as queue.declare does: its arguments parsed (qargs.h)
 * and checked against its type, then queue_new and vhost_add_queue. The
 * test fails if the declare would be refused. */
struct queue *fx_queue(const char *name, bool durable, const char *args);
/* Declare an exchange of 'type' as exchange.declare does (the type's
 * argument check, exchange_new, vhost_add_exchange). */
struct exchange *fx_exchange(const char *name, const char *type,
                             const char *args);
/* Bind exchange 'x' to queue 'q', or to exchange 'dest' (fx_bind_x); the
 * test fails if the type refuses the binding. */
void fx_bind(const char *x, const char *q, const char *key, const char *args);
void fx_bind_x(const char *src, const char *dest, const char *key,
               const char *args);

/* A queue or exchange of "/" by name (NULL: none). */
struct queue *fx_find_queue(const char *name);
struct exchange *fx_find_exchange(const char *name);

/* The basic properties a test sets; all zero is none of them. */
struct fx_props {
    bool persistent;            /* delivery-mode 2 */
    bool has_priority;          /* the priority property, set to: */
    uint8_t priority;
    const char *expiration;     /* NULL: none */
    const char *headers;        /* fx_table's spec; NULL: none */
    const char *message_id;     /* NULL: none */
};

/* A message as the channel makes it from a publish's content header:
 * the properties encoded (amqp/props.h), msg_new, the body copied in.
 * A new reference. */
struct msg *fx_msg(const char *exchange, const char *rkey, const char *body,
                   const struct fx_props *p);

/* What a publish did, as channel_route counts it: the queues it reached,
 * how many pushes answered 1 (the store took it: its confirm waits) and
 * how many -1 (refused). */
struct fx_pub {
    size_t routed;
    size_t stored, refused;
};

/* Publish as channel_route does: exchange_route_msg (CC and BCC
 * included) through the exchange named, then queue_push to each queue.
 * The test fails if there is no such exchange. */
struct fx_pub fx_publish(const char *exchange, const char *rkey,
                         const char *body, const struct fx_props *p);

/* The queues a message would reach through exchange 'exchange', their
 * names sorted and joined by ',' ("" for none); a queue reached twice
 * shows twice. Into a static buffer. */
const char *fx_route(const char *exchange, const char *rkey,
                     const struct fx_props *p);

/* A message's body as a string, "*" appended if 'redelivered'; one of a
 * few static buffers in turn. */
const char *fx_body(const struct msg *m, bool redelivered);

/* Take everything ready out of 'q' as basic.get with auto-ack does
 * (queue_take, queue_ack): the bodies in order, separated by spaces, a
 * redelivered one marked "*". Into a static buffer. */
const char *fx_drain(struct queue *q);

/*
 * A fake consumer. Its credit is the channel's: with a prefetch it can
 * take while fewer than that are unacked; 'blocked' makes it refuse (as a
 * congested connection). Each delivery is held, as a channel holds an
 * unacked one (with references to the queue and the consumer), until
 * fx_settle, and noted in the delivery log.
 */
#define FX_HELD_MAX 64
struct fx_consumer {
    struct consumer c;          /* first: consumer_unref frees the block */
    char name[16];
    bool blocked;
    bool told_cancelled;        /* ops->cancelled was called */
    struct fx_held {
        struct queue *q;
        struct qentry e;
    } held[FX_HELD_MAX];
    size_t nheld;
};

/* Consume from 'q' as basic.consume does (queue_add_consumer, then
 * queue_dispatch); 'prefetch' 0 is unlimited. Freed by fx_teardown. */
struct fx_consumer *fx_consume(struct queue *q, const char *name,
                               uint32_t prefetch, int64_t priority);
/* basic.cancel: off the queue (what it holds stays held). */
void fx_cancel(struct fx_consumer *f);

enum fx_settle { FX_ACK, FX_REQUEUE, FX_RETRY, FX_REJECT };

/* Settle the held delivery whose body is 'body' as basic.ack, or
 * basic.reject with requeue (FX_REQUEUE: queue_requeue; FX_RETRY:
 * queue_retry, a nack's return) or without (FX_REJECT), then dispatch
 * the queue as the channel does after settling. The test fails if it
 * holds no such delivery. Returns the entry's delivery count. */
uint32_t fx_settle(struct fx_consumer *f, const char *body,
                   enum fx_settle how);

/* The deliveries since the last call, as "name:body" separated by
 * spaces (redelivered ones marked "*"), and the log cleared. */
const char *fx_deliveries(void);

/* Run the event loop until 'done(arg)' or 'ms' have passed; whether it
 * was done. */
bool fx_loop_until(bool (*done)(void *arg), void *arg, int ms);

#endif
