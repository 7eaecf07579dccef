/*
 * Queues: the message ring, requeue to the original position, consumers
 * and round-robin dispatch.
 */
#include "broker/queue.h"

#include <stdlib.h>
#include <string.h>

#include "broker/channel.h"
#include "broker/conn.h"
#include "broker/msg.h"
#include "broker/util.h"
#include "broker/vhost.h"

struct queue *
queue_new(struct vhost *vh, struct amqp_bytes name, bool durable,
          bool exclusive, bool auto_delete, struct conn *owner,
          struct amqp_table args)
{
    struct queue *q = xcalloc(1, sizeof(*q));
    q->name = xstrndup(name.ptr, name.len);
    q->name_len = name.len;
    q->vh = vh;
    q->durable = durable;
    q->exclusive = exclusive;
    q->auto_delete = auto_delete;
    q->owner = owner;
    q->args_buf = xmalloc(args.len ? args.len : 1);
    if (args.len)
        memcpy(q->args_buf, args.ptr, args.len);
    q->args.ptr = q->args_buf;
    q->args.len = args.len;
    TAILQ_INIT(&q->consumers);
    TAILQ_INIT(&q->bindings);
    q->refs = 1;
    return q;
}

void
queue_unref(struct queue *q)
{
    if (--q->refs > 0)
        return;
    struct qentry e;
    while (queue_pop(q, &e))
        msg_unref(e.m);
    free(q->ring);
    free(q->args_buf);
    free(q->name);
    free(q);
}

static struct qentry *
at(const struct queue *q, size_t i)
{
    return &q->ring[(q->head + i) & (q->cap - 1)];
}

static void
grow(struct queue *q)
{
    size_t ncap = q->cap ? q->cap * 2 : 16;
    struct qentry *n = xmalloc(ncap * sizeof(*n));
    for (size_t i = 0; i < q->len; i++)
        n[i] = *at(q, i);
    free(q->ring);
    q->ring = n;
    q->cap = ncap;
    q->head = 0;
}

void
queue_push(struct queue *q, struct msg *m)
{
    if (q->len == q->cap)
        grow(q);
    struct qentry *e = at(q, q->len);
    e->m = msg_ref(m);
    e->seq = q->next_seq++;
    e->redelivered = false;
    q->len++;
    q->bytes += m->body_len;
    if (q->nconsumers)
        queue_dispatch(q);
}

void
queue_requeue(struct queue *q, struct qentry e)
{
    if (q->deleted) {
        msg_unref(e.m);
        return;
    }
    if (q->len == q->cap)
        grow(q);
    e.redelivered = true;
    /* Find the first entry with a larger sequence number; requeued
     * messages are usually older than everything queued, so look from the
     * front. */
    size_t lo = 0, hi = q->len;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (at(q, mid)->seq < e.seq)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo == 0) {
        q->head = (q->head + q->cap - 1) & (q->cap - 1);
    } else {
        for (size_t i = q->len; i > lo; i--)
            *at(q, i) = *at(q, i - 1);
    }
    *at(q, lo) = e;
    q->len++;
    q->bytes += e.m->body_len;
}

bool
queue_pop(struct queue *q, struct qentry *out)
{
    if (q->len == 0)
        return false;
    *out = *at(q, 0);
    q->head = (q->head + 1) & (q->cap - 1);
    q->len--;
    q->bytes -= out->m->body_len;
    return true;
}

uint32_t
queue_purge(struct queue *q)
{
    uint32_t n = 0;
    struct qentry e;
    while (queue_pop(q, &e)) {
        msg_unref(e.m);
        n++;
    }
    return n;
}

/*
 * Round-robin over the consumers: each turn takes the first consumer that
 * can take a message and moves it to the back of the list. Stops when the
 * queue is empty or a whole round found nobody with credit.
 */
void
queue_dispatch(struct queue *q)
{
    if (q->dispatching || q->deleted)
        return;
    q->dispatching = true;
    while (q->len > 0 && q->nconsumers > 0) {
        struct consumer *c, *found = NULL;
        TAILQ_FOREACH(c, &q->consumers, q_link) {
            if (channel_can_deliver(c->ch, c)) {
                found = c;
                break;
            }
        }
        if (found == NULL)
            break;
        TAILQ_REMOVE(&q->consumers, found, q_link);
        TAILQ_INSERT_TAIL(&q->consumers, found, q_link);
        struct qentry e;
        queue_pop(q, &e);
        channel_deliver(found->ch, found, q, e);
    }
    q->dispatching = false;
}

void
queue_add_consumer(struct queue *q, struct consumer *c)
{
    c->refs++;
    TAILQ_INSERT_TAIL(&q->consumers, c, q_link);
    q->nconsumers++;
    q->had_consumer = true;
}

void
queue_remove_consumer(struct queue *q, struct consumer *c)
{
    if (c->cancelled)
        return;
    c->cancelled = true;
    TAILQ_REMOVE(&q->consumers, c, q_link);
    q->nconsumers--;
    consumer_unref(c);
    if (q->auto_delete && q->nconsumers == 0 && q->had_consumer && !q->deleted)
        queue_delete(q);
}

void
queue_delete(struct queue *q)
{
    struct consumer *c;
    struct binding *b;

    if (q->deleted)
        return;
    q->deleted = true;
    queue_ref(q);
    if (q->exclusive && q->owner)
        conn_disown_queue(q->owner, q);
    while ((c = TAILQ_FIRST(&q->consumers)) != NULL) {
        struct channel *ch = c->ch;
        c->refs++;
        queue_remove_consumer(q, c);
        channel_consumer_cancelled(ch, c);
        consumer_unref(c);
    }
    while ((b = TAILQ_FIRST(&q->bindings)) != NULL)
        binding_free(b);
    queue_purge(q);
    vhost_remove_queue(q->vh, q);
    queue_unref(q);   /* the vhost's */
    queue_unref(q);   /* ours */
}

void
consumer_unref(struct consumer *c)
{
    if (--c->refs > 0)
        return;
    free(c->tag);
    free(c);
}
