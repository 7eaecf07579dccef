/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of class queue: declare, bind, unbind, purge, delete. Reply
 * codes and texts follow RabbitMQ 3.x.
 */
#include <stdio.h>
#include <string.h>

#include "amqp/table.h"
#include "broker/core/broker.h"
#include "broker/core/exchange.h"
#include "broker/core/queue.h"
#include "broker/core/stats.h"
#include "broker/core/vhost.h"
#include "broker/session/access.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"
#include "broker/session/reply_to.h"

static const char *
yes_no(bool b)
{
    return b ? "true" : "false";
}

static void
declare_ok(struct channel *ch, struct queue *q, bool nowait)
{
    queue_expire(q);
    stats_churn.queues_declared++;
    channel_set_last_queue(ch, q->name, q->name_len);
    if (nowait)
        return;
    struct amqp_method m = { .id = AMQP_QUEUE_DECLARE_OK };
    m.a.queue_declare_ok.queue.ptr = (const uint8_t *)q->name;
    m.a.queue_declare_ok.queue.len = q->name_len;
    m.a.queue_declare_ok.message_count = (uint32_t)q->len;
    m.a.queue_declare_ok.consumer_count = (uint32_t)q->nconsumers;
    channel_send(ch, &m);
}

/* As RabbitMQ answers a passive declare of the reply-to pseudo-queue or
 * an address: no messages, one consumer. */
static void
reply_to_declare_ok(struct channel *ch, struct amqp_bytes name, bool nowait)
{
    if (nowait)
        return;
    struct amqp_method m = { .id = AMQP_QUEUE_DECLARE_OK };
    m.a.queue_declare_ok.queue = name;
    m.a.queue_declare_ok.message_count = 0;
    m.a.queue_declare_ok.consumer_count = 1;
    channel_send(ch, &m);
}

/*
 * queue.declare of queue 'q', which exists: as RabbitMQ, only compared
 * with what it was declared with (its arguments are not parsed again:
 * a stream redeclared without x-queue-type is inequivalent, not a
 * classic queue with a stream's argument).
 */
static void
redeclare(struct channel *ch, struct queue *q,
          const struct amqp_queue_declare *a, const char *esc,
          const char *what)
{
    const uint32_t mid = AMQP_QUEUE_DECLARE;
    struct vhost *vh = ch->conn->vh;
    char err[1024];

    /* As RabbitMQ: another connection's exclusive queue, or an
     * exclusive flag that differs from the queue's (either way), is
     * 405. */
    if ((q->exclusive && q->owner != ch->conn) ||
        a->exclusive != q->exclusive) {
        channel_fail(ch, AMQP_RESOURCE_LOCKED, mid,
                     "cannot obtain exclusive access to locked queue '%s' "
                     "in vhost '%s'. It could be originally declared on "
                     "another connection or the exclusive property value "
                     "does not match that of the original declaration.",
                     esc, vh->name);
        return;
    }
    if (q->durable != a->durable || q->auto_delete != a->auto_delete) {
        bool dur = q->durable != a->durable;
        bool got = dur ? a->durable : a->auto_delete;
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                     "inequivalent arg '%s' for queue '%s' in vhost '%s': "
                     "received '%s' but current is '%s'",
                     dur ? "durable" : "auto_delete", esc, vh->name,
                     yes_no(got), yes_no(!got));
        return;
    }
    /* The type (no x-queue-type means classic: RabbitMQ's rule;
     * the text as when one side is missing). */
    static const char *const type_key[] = { "x-queue-type", NULL };
    if (qargs_type_of(a->arguments) != q->ops &&
        !args_equivalent(q->args, a->arguments, type_key, what, err,
                         sizeof(err))) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
        return;
    }
    /* As RabbitMQ, only the arguments Roost implements are compared. */
    if (!args_equivalent(q->args, a->arguments, qargs_equivalence_keys,
                         what, err, sizeof(err))) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
        return;
    }
    queue_touch(q);
    declare_ok(ch, q, a->nowait);
}

void
handle_queue_declare(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_queue_declare *a = &m->a.queue_declare;
    const uint32_t mid = AMQP_QUEUE_DECLARE;
    struct vhost *vh = ch->conn->vh;
    struct amqp_bytes name = a->queue;
    char gen[64], esc[300], what[700], err[1024];
    struct queue *q;
    struct qargs qa;

    if (a->passive) {
        if (reply_to_exists(name)) {
            reply_to_declare_ok(ch, name, a->nowait);
            return;
        }
        if ((q = channel_find_queue(ch, mid, name)) != NULL)
            declare_ok(ch, q, a->nowait);
        return;
    }
    if (name.len == 0) {
        channel_gen_name(gen, sizeof(gen), "amq.gen-");
        name = amqp_cstr(gen);
        /* The name the server makes is the one checked (access.c). */
        if (!access_allows(ch, mid, PERM_CONFIGURE, RES_QUEUE, name))
            return;
        /* As RabbitMQ 3.10.8: before the arguments are looked at. */
        if (qargs_is_stream(a->arguments)) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                         "Cannot declare a server-named queue for type "
                         "rabbit_stream_queue");
            return;
        }
    }
    /* A name with amq.* is refused before (access.c). */
    channel_esc(esc, sizeof(esc), name);
    snprintf(what, sizeof(what), "queue '%s' in vhost '%s'", esc, vh->name);
    if ((q = vhost_queue(vh, name)) != NULL) {
        redeclare(ch, q, a, esc, what);
        return;
    }
    switch (qargs_parse(a->arguments, what, &qa, err, sizeof(err))) {
    case QARGS_OK:
        break;
    case QARGS_INVALID:
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
        return;
    case QARGS_NOT_IMPLEMENTED:
        conn_fail(ch->conn, AMQP_NOT_IMPLEMENTED, mid, "%s", err);
        return;
    }
    /* What the type refuses (a quorum queue is durable, shared and
     * kept, as RabbitMQ wants it). */
    const struct queue_ops *type = qa.type ? qa.type : &queue_classic_ops;
    const char *refused = type->refused_property(a->durable, a->exclusive,
                                                 a->auto_delete);
    if (refused != NULL) {
        qargs_free(&qa);
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                     "invalid property '%s' for %s", refused, what);
        return;
    }
    /* Creating it: a dead-letter exchange needs read on the queue and
     * write on that exchange, as in RabbitMQ. */
    if (qa.dlx != NULL &&
        (!access_allows(ch, mid, PERM_READ, RES_QUEUE, name) ||
         !access_allows(ch, mid, PERM_WRITE, RES_EXCHANGE,
                        amqp_cstr(qa.dlx)))) {
        qargs_free(&qa);
        return;
    }
    int64_t limit = broker.cfg.max_queues;
    if (vh->max_queues >= 0 && vh->max_queues < limit)
        limit = vh->max_queues;
    if (vh->queues.count >= (size_t)limit) {
        qargs_free(&qa);
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                     "cannot declare queue '%s': queue limit in vhost '%s' "
                     "(%lld) is reached", esc, vh->name, (long long)limit);
        return;
    }
    q = queue_new(vh, name, a->durable, a->exclusive, a->auto_delete,
                  a->exclusive ? ch->conn : NULL, a->arguments, &qa);
    vhost_add_queue(vh, q);
    if (a->exclusive)
        conn_own_queue(ch->conn, q);
    declare_ok(ch, q, a->nowait);
}

/* queue.bind: 0-9-1 says an empty queue name means the last declared
 * queue, and then an empty routing key means its name (so for unbind). */
void
handle_queue_bind(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_queue_bind *a = &m->a.queue_bind;
    const uint32_t mid = AMQP_QUEUE_BIND;
    struct amqp_bytes key = a->routing_key;
    struct queue *q;
    struct exchange *x;
    char err[256];

    if ((q = channel_find_queue(ch, mid, a->queue)) == NULL)
        return;
    if (a->queue.len == 0 && key.len == 0) {
        key.ptr = (const uint8_t *)q->name;
        key.len = q->name_len;
    }
    /* The default exchange is refused before (access.c). */
    if ((x = channel_find_exchange(ch, mid, a->exchange)) == NULL)
        return;
    if (exchange_bind(x, q, NULL, key, a->arguments, err, sizeof(err)) != 0) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
        return;
    }
    channel_reply(ch, AMQP_QUEUE_BIND_OK, a->nowait);
}

/*
 * As RabbitMQ 3.10: unbinding what is not bound is unbind-ok, also when
 * the queue or the exchange is gone (clients unbind in their cleanup,
 * after an auto-delete); only an existing binding of another
 * connection's exclusive queue is refused (405).
 */
void
handle_queue_unbind(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_queue_unbind *a = &m->a.queue_unbind;
    struct vhost *vh = ch->conn->vh;
    struct amqp_bytes qname = a->queue, key = a->routing_key;
    struct queue *q;
    struct exchange *x;

    if (qname.len == 0)
        qname = channel_last_queue(ch);
    q = vhost_queue(vh, qname);
    x = vhost_exchange(vh, a->exchange);
    if (q != NULL && a->queue.len == 0 && key.len == 0) {
        key.ptr = (const uint8_t *)q->name;
        key.len = q->name_len;
    }
    if (q != NULL && x != NULL &&
        exchange_is_bound(x, q, NULL, key, a->arguments)) {
        if (channel_find_queue(ch, AMQP_QUEUE_UNBIND, qname) == NULL)
            return;
        (void)exchange_unbind(x, q, NULL, key, a->arguments);
    }
    channel_reply(ch, AMQP_QUEUE_UNBIND_OK, false);
}

void
handle_queue_purge(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_queue_purge *a = &m->a.queue_purge;
    struct queue *q = channel_find_queue(ch, AMQP_QUEUE_PURGE, a->queue);
    if (q == NULL)
        return;
    if (q->ops->log) {
        channel_log_refuses(ch, AMQP_QUEUE_PURGE, q, "queue.purge");
        return;
    }
    uint32_t n = queue_purge(q);
    if (a->nowait)
        return;
    struct amqp_method ok = { .id = AMQP_QUEUE_PURGE_OK };
    ok.a.queue_purge_ok.message_count = n;
    channel_send(ch, &ok);
}

void
handle_queue_delete(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_queue_delete *a = &m->a.queue_delete;
    const uint32_t mid = AMQP_QUEUE_DELETE;
    struct amqp_bytes name = a->queue;
    struct queue *q;
    char esc[300];
    uint32_t n = 0;

    if (name.len == 0) {
        name.ptr = (const uint8_t *)ch->last_queue;
        name.len = ch->last_queue_len;
    }
    q = vhost_queue(ch->conn->vh, name);
    if (q) {
        if ((q = channel_find_queue(ch, mid, name)) == NULL)
            return;
        channel_esc(esc, sizeof(esc), name);
        if (a->if_unused && q->nconsumers > 0) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                         "queue '%s' in vhost '%s' in use", esc,
                         ch->conn->vh->name);
            return;
        }
        if (a->if_empty && q->len > 0) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                         "queue '%s' in vhost '%s' not empty", esc,
                         ch->conn->vh->name);
            return;
        }
        n = (uint32_t)q->len;
        queue_delete(q);
    }
    /* As RabbitMQ 3.x: deleting a queue that does not exist is ok. */
    if (a->nowait)
        return;
    struct amqp_method ok = { .id = AMQP_QUEUE_DELETE_OK };
    ok.a.queue_delete_ok.message_count = n;
    channel_send(ch, &ok);
}
