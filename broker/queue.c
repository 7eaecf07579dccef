/*
 * Queues: the message ring, requeue to the original position, consumers
 * and round-robin dispatch.
 */
#include "broker/queue.h"

#include <event2/event.h>
#include <stdlib.h>
#include <string.h>

#include "broker/broker.h"
#include "broker/channel.h"
#include "broker/deadletter.h"
#include "broker/conn.h"
#include "broker/log.h"
#include "broker/msg.h"
#include "broker/store/store.h"
#include "broker/util.h"
#include "broker/vhost.h"

const struct queue_ops queue_classic_ops = { "classic", true };

static const struct queue_ops *const queue_types[] = { &queue_classic_ops };

const struct queue_ops *
queue_ops_find(struct amqp_bytes name)
{
    for (size_t i = 0; i < NELEMS(queue_types); i++)
        if (amqp_bytes_eq(name, queue_types[i]->type))
            return queue_types[i];
    return NULL;
}

struct queue *
queue_new(struct vhost *vh, struct amqp_bytes name, bool durable,
          bool exclusive, bool auto_delete, struct conn *owner,
          struct amqp_table args, struct qargs *qa)
{
    struct queue *q = xcalloc(1, sizeof(*q));
    q->ops = qa->type ? qa->type : &queue_classic_ops;
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
    q->qa = *qa;
    memset(qa, 0, sizeof(*qa));
    TAILQ_INIT(&q->consumers);
    TAILQ_INIT(&q->bindings);
    q->refs = 1;
    q->last_used_ms = now_ms();
    queue_arm(q);
    return q;
}

static bool queue_pop(struct queue *q, struct qentry *out);
static void dead_letter(struct queue *q, struct qentry e, const char *reason);

/* The end of an entry's life in this queue, whatever ended it. */
static void
entry_end(struct queue *q, struct qentry e)
{
    if (q->sid)     /* a call only for queues the store keeps */
        store_settled(q, &e);
    msg_unref(e.m);
}

void
queue_unref(struct queue *q)
{
    if (--q->refs > 0)
        return;
    struct qentry e;
    while (queue_pop(q, &e))
        entry_end(q, e);
    if (q->timer)
        event_free(q->timer);
    qargs_free(&q->qa);
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
    ring_grow(&q->ring, sizeof(*q->ring), &q->cap, &q->head, q->len);
}

static bool
over_limit(const struct queue *q, size_t extra_len, uint64_t extra_bytes)
{
    return (q->qa.max_length >= 0 &&
            q->len + extra_len > (uint64_t)q->qa.max_length) ||
           (q->qa.max_length_bytes >= 0 &&
            q->bytes + extra_bytes > (uint64_t)q->qa.max_length_bytes);
}

int
queue_push(struct queue *q, struct msg *m)
{
    int64_t ttl = q->qa.message_ttl;
    bool stored;

    if (q->qa.overflow == OVERFLOW_REJECT_PUBLISH &&
        over_limit(q, 1, m->body_len))
        return -1;
    if (m->ttl >= 0 && (ttl < 0 || m->ttl < ttl))
        ttl = m->ttl;
    if (q->len == q->cap)
        grow(q);
    struct qentry *e = at(q, q->len);
    e->m = msg_ref(m);
    e->seq = q->next_seq++;
    e->redelivered = false;
    e->deliveries = 0;
    /* TTL 0 still reaches a consumer that is ready now (as RabbitMQ). */
    e->expires_at = ttl >= 0 ? now_ms() + (uint64_t)ttl : 0;
    if (ttl == 0)
        e->expires_at = 1;
    q->len++;
    q->bytes += m->body_len;
    stored = q->sid && store_enqueue(q, e);
    /* x-overflow drop-head: the oldest messages make room. */
    while (q->len > 0 && over_limit(q, 0, 0)) {
        struct qentry old;
        queue_pop(q, &old);
        dead_letter(q, old, "maxlen");
    }
    if (q->nconsumers)
        queue_dispatch(q);
    if (ttl >= 0) {
        queue_expire(q);
        queue_arm(q);
    }
    return stored;
}

void
queue_foreach_ready(struct queue *q,
                    void (*fn)(struct queue *q, struct qentry *e, void *arg),
                    void *arg)
{
    for (size_t i = 0; i < q->len; i++)
        fn(q, at(q, i), arg);
}

void
queue_restore(struct queue *q, struct msg *m, uint64_t seq,
              uint64_t expires_at, uint32_t deliveries, bool redelivered)
{
    if (q->len == q->cap)
        grow(q);
    struct qentry *e = at(q, q->len);
    e->m = msg_ref(m);
    e->seq = seq;
    e->expires_at = expires_at;
    e->deliveries = deliveries;
    e->redelivered = redelivered;
    q->len++;
    q->bytes += m->body_len;
    if (seq >= q->next_seq)
        q->next_seq = seq + 1;
}

/* Give up entry 'e' for 'reason' ("rejected", "expired", "maxlen"):
 * republish its message through the queue's dead-letter exchange if it
 * has one, else drop it. */
static void
dead_letter(struct queue *q, struct qentry e, const char *reason)
{
    struct exchange *dlx;
    struct msg *dm;

    if (q->qa.dlx == NULL || q->deleted ||
        (dlx = vhost_exchange(q->vh, amqp_cstr(q->qa.dlx))) == NULL) {
        entry_end(q, e);
        return;
    }
    dm = deadletter_msg(e.m, q->name, reason, q->qa.dlx, q->qa.dlrk);
    entry_end(q, e);
    if (dm == NULL)   /* a cycle that would expire forever, or too large */
        return;
    struct route_result rr;
    route_result_init(&rr);
    exchange_route(dlx, dm, &rr);
    for (size_t i = 0; i < rr.n; i++)
        if (rr.qs[i] != q || strcmp(reason, "rejected") == 0)
            (void)queue_push(rr.qs[i], dm);
    route_result_free(&rr);
    msg_unref(dm);
}

void
queue_expire(struct queue *q)
{
    uint64_t now = now_ms();
    while (q->len > 0 && at(q, 0)->expires_at && at(q, 0)->expires_at <= now) {
        struct qentry e;
        queue_pop(q, &e);
        dead_letter(q, e, "expired");
    }
}

void
queue_touch(struct queue *q)
{
    q->last_used_ms = now_ms();
    if (q->qa.expires)
        queue_arm(q);
}

static void
timer_cb(evutil_socket_t fd, short what, void *arg)
{
    struct queue *q = arg;
    (void)fd;
    (void)what;

    q->timer_at = 0;
    queue_expire(q);
    if (q->qa.expires && q->nconsumers == 0 &&
        now_ms() >= q->last_used_ms + (uint64_t)q->qa.expires) {
        log_info("queue '%s' in vhost '%s' unused for %lld ms; deleting (x-expires)",
                 q->name, q->vh->name, (long long)q->qa.expires);
        queue_delete(q);
        return;
    }
    queue_arm(q);
}

void
queue_arm(struct queue *q)
{
    uint64_t when = 0;

    if (q->deleted)
        return;
    /* The head is the next message to expire: RabbitMQ too expires
     * messages only when they reach the head. */
    if (q->len > 0 && at(q, 0)->expires_at)
        when = at(q, 0)->expires_at;
    if (q->qa.expires && q->nconsumers == 0) {
        uint64_t idle = q->last_used_ms + (uint64_t)q->qa.expires;
        if (when == 0 || idle < when)
            when = idle;
    }
    if (when == 0 || (q->timer_at && q->timer_at <= when))
        return;
    if (q->timer == NULL)
        q->timer = evtimer_new(broker.base, timer_cb, q);
    uint64_t now = now_ms(), ms = when > now ? when - now : 0;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    q->timer_at = when;
    evtimer_add(q->timer, &tv);
}

void
queue_ack(struct queue *q, struct qentry e)
{
    entry_end(q, e);
}

void
queue_reject(struct queue *q, struct qentry e)
{
    dead_letter(q, e, "rejected");
}

void
queue_requeue(struct queue *q, struct qentry e)
{
    if (q->deleted) {
        entry_end(q, e);
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
    if (e.expires_at)
        queue_arm(q);
}

static bool
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

bool
queue_take(struct queue *q, struct qentry *out)
{
    if (!queue_pop(q, out))
        return false;
    out->deliveries++;
    if (q->sid)
        store_delivered(q, out);
    return true;
}

uint32_t
queue_purge(struct queue *q)
{
    uint32_t n = 0;
    struct qentry e;
    while (queue_pop(q, &e)) {
        entry_end(q, e);
        n++;
    }
    return n;
}

/*
 * Flow control (docs/architecture.md, "Backpressure and limits"): more is
 * ready than flow_control allows, and a consumer with credit waits only
 * for its connection's output to drain (and that connection is still
 * writing: conn_is_draining_slowly). Decided at each publish, never
 * cached. A queue with no consumers, or whose consumers are at their
 * prefetch limit, is never backed up: a job-queue backlog is normal.
 */
bool
queue_is_backed_up(const struct queue *q)
{
    const struct consumer *c;
    int64_t len = broker.cfg.flow_queue_length;
    int64_t bytes = broker.cfg.flow_queue_bytes;

    if (q->len == 0 || q->nconsumers == 0 ||
        !((len > 0 && q->len > (uint64_t)len) ||
          (bytes > 0 && q->bytes > (uint64_t)bytes)))
        return false;
    TAILQ_FOREACH(c, &q->consumers, q_link)
        if (channel_has_credit(c->ch, c) &&
            conn_is_draining_slowly(c->ch->conn))
            return true;
    return false;
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
    queue_expire(q);
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
        queue_take(q, &e);
        channel_deliver(found->ch, found, q, e);
        queue_expire(q);
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
    if (q->nconsumers == 0)
        queue_touch(q);
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
    if (q->timer)
        evtimer_del(q->timer);
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
    vhost_remove_queue(q->vh, q);
    store_queue_gone(q);
    queue_purge(q);
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
