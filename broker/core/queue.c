/*
 * SPDX-License-Identifier: Apache-2.0
 * Queues: the message rings (one per priority level), requeue to the
 * original position, consumers and round-robin dispatch.
 */
#include "broker/core/queue.h"
#include "broker/core/hooks.h"
#include "broker/core/queue_int.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/broker.h"
#include "broker/core/deadletter.h"
#include "broker/core/msg.h"
#include "broker/core/store.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

static const struct queue_ops *const queue_types[] = {
    &queue_classic_ops, &queue_quorum_ops, &queue_stream_ops,
};

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
    q->utilisation = 1.0f;
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
    q->lv = &q->lv0;
    q->nlv = 1;
    if (q->qa.max_priority > 0) {
        q->nlv = (uint16_t)(q->qa.max_priority + 1);
        q->lv = xcalloc(q->nlv, sizeof(*q->lv));
    }
    TAILQ_INIT(&q->consumers);
    TAILQ_INIT(&q->bindings);
    TAILQ_INIT(&q->get_waits);
    q->refs = 1;
    q->last_used_ms = now_ms();
    queue_arm(q);
    return q;
}

/* Bytes of every queue's ring, for the memory alarm. */
static uint64_t ring_bytes;

static void dead_letter(struct queue *q, struct qentry e, const char *reason);
static void wait_push(struct queue *q, uint64_t due, struct qentry e);
static uint32_t wait_drop_all(struct queue *q);

/* The end of an entry's life in this queue, whatever ended it. */
void
entry_end(struct queue *q, struct qentry e)
{
    if (e.stored) {
        q->persistent--;
        q->bytes_persistent -= qentry_body_len(&e);
    }
    /* a call only for queues the store keeps, or records it holds */
    if (q->sid || e.paged)
        store_settled(q, &e);
    if (!e.paged)
        msg_unref(e.m);
}

uint64_t
qentry_body_len(const struct qentry *e)
{
    return e->paged ? e->body_len : e->m->body_len;
}

void
queue_unref(struct queue *q)
{
    if (--q->refs > 0)
        return;
    struct qentry e;
    while (queue_pop(q, &e))
        entry_end(q, e);
    wait_drop_all(q);
    if (q->ops->release)
        q->ops->release(q);
    ring_bytes -= (uint64_t)q->waits_cap * sizeof(*q->waits);
    free(q->waits);
    if (q->wait_timer)
        event_free(q->wait_timer);
    page_unlist(q);
    if (q->timer)
        event_free(q->timer);
    qargs_free(&q->qa);
    for (size_t l = 0; l < q->nlv; l++) {
        ring_bytes -= (uint64_t)q->lv[l].cap * sizeof(*q->lv[l].ring);
        free(q->lv[l].ring);
    }
    if (q->lv != &q->lv0)
        free(q->lv);
    free(q->hist);
    stats_series_free(&q->series);
    history_free(&q->history);
    free(q->args_buf);
    free(q->name);
    free(q);
}

/* The level a message of priority 'p' goes to: no priority is 0, and
 * one above the queue's maximum counts as the maximum (RabbitMQ's
 * rules). */
static struct qring *
level_of(struct queue *q, uint8_t p)
{
    uint16_t l = p < q->nlv ? p : (uint16_t)(q->nlv - 1);
    if (l > q->top)
        q->top = l;
    return &q->lv[l];
}

/* The level whose first entry is handed out next. */
static struct qring *
top_ring(const struct queue *q)
{
    return &q->lv[q->top];
}

/* The next entry to hand out; the queue is not empty. */
static struct qentry *
head_entry(const struct queue *q)
{
    return at(top_ring(q), 0);
}

uint64_t
queue_ring_bytes(void)
{
    return ring_bytes;
}

/* Room for one more entry in 'r'. */
static void
make_room(struct qring *r)
{
    if (r->len < r->cap)
        return;
    size_t old = r->cap;
    ring_grow(&r->ring, sizeof(*r->ring), &r->cap, &r->head, r->len);
    ring_bytes += (uint64_t)(r->cap - old) * sizeof(*r->ring);
}

static bool
over_limit(const struct queue *q, size_t extra_len, uint64_t extra_bytes)
{
    return (q->qa.max_length >= 0 &&
            q->len + extra_len > (uint64_t)q->qa.max_length) ||
           (q->qa.max_length_bytes >= 0 &&
            q->bytes + extra_bytes > (uint64_t)q->qa.max_length_bytes);
}

static struct exchange *dead_letter_exchange(const struct queue *q);
static void dead_letter_copy(struct queue *q, const struct msg *m,
                             const char *reason, unsigned deliveries,
                             struct exchange *dlx, struct qentry *done);

/* A push of a message with TTL 0 offers it to the consumers ready now
 * (as RabbitMQ), due at once only after: its queue and sequence number
 * while that dispatch runs, which queue_expire passes over. */
struct offer {
    const struct queue *q;
    uint64_t seq;
};
static struct offer offered;

/* ring_append's body, inlined into ring_push (the publish path). */
static inline struct qentry *
append_entry(struct queue *q, struct qring *r, struct msg *m,
             uint64_t expires_at)
{
    make_room(r);
    struct qentry *e = at(r, r->len);
    memset(e, 0, sizeof(*e));
    e->m = msg_ref(m);
    e->seq = q->next_seq++;
    e->born = m->born;
    e->expires_at = expires_at;
    r->len++;
    q->len++;
    q->bytes += m->body_len;
    q->ms.n[MS_PUBLISH]++;
    if (q->sid && store_enqueue(q, e)) {
        e->stored = 1;
        q->persistent++;
        q->bytes_persistent += m->body_len;
    }
    return e;
}

struct qentry *
ring_append(struct queue *q, struct qring *r, struct msg *m,
            uint64_t expires_at)
{
    return append_entry(q, r, m, expires_at);
}

void
ring_maybe_page(struct queue *q, struct qring *r)
{
    /* No window is below 16: a short queue pays one comparison. */
    if (r->len > 16 && !q->page_listed && r->len > queue_window() &&
        store_pages()) {
        page_list(q);
        queue_pager_kick(false);
    }
}

int
ring_push(struct queue *q, struct msg *m)
{
    int64_t ttl = q->qa.message_ttl;
    bool stored;

    if (q->qa.overflow != OVERFLOW_DROP_HEAD &&
        over_limit(q, 1, m->body_len)) {
        /* reject-publish-dlx: refused, and dead-lettered as "maxlen". */
        struct exchange *dlx;
        if (q->qa.overflow == OVERFLOW_REJECT_PUBLISH_DLX &&
            (dlx = dead_letter_exchange(q)) != NULL)
            dead_letter_copy(q, m, "maxlen", 0, dlx, NULL);
        return -1;
    }
    if (msg_ttl(m) >= 0 && (ttl < 0 || msg_ttl(m) < ttl))
        ttl = msg_ttl(m);
    /* TTL 0 is due at once (1), after the dispatch below (offered). */
    uint64_t expires_at = ttl >= 0 ? now_ms() + (uint64_t)ttl : 0;
    if (ttl == 0)
        expires_at = 1;
    struct qring *r = level_of(q, m->env->priority);
    struct qentry *e = append_entry(q, r, m, expires_at);
    uint64_t seq = e->seq;
    stored = e->stored;
    drop_head(q);
    if (q->nconsumers && ttl == 0) {
        /* Dead letters routed meanwhile may push TTL 0 elsewhere. */
        struct offer outer = offered;
        offered.q = q;
        offered.seq = seq;
        ring_dispatch(q);
        offered = outer;
    } else if (q->nconsumers) {
        ring_dispatch(q);
    }
    ring_maybe_page(q, r);
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
    for (size_t l = q->nlv; l-- > 0;)
        for (size_t i = 0; i < q->lv[l].len; i++)
            fn(q, at(&q->lv[l], i), arg);
}

void
ring_restore(struct queue *q, const struct qentry *re, uint8_t priority,
              uint64_t due)
{
    if (due) {
        wait_push(q, due, *re);
        msg_ref(re->m);
        return;
    }
    struct qring *r = level_of(q, priority);
    make_room(r);
    struct qentry *e = at(r, r->len);
    *e = *re;
    e->stored = 1;      /* the store rebuilt it */
    q->persistent++;
    q->bytes_persistent += qentry_body_len(e);
    if (e->paged) {
        r->npaged++;
        q->npaged++;
        q->bytes_paged += e->body_len;
    } else {
        msg_ref(e->m);
    }
    r->len++;
    q->len++;
    q->bytes += qentry_body_len(e);
    if (e->seq >= q->next_seq)
        q->next_seq = e->seq + 1;
}

/* The exchange the queue dead-letters to, if it has one that exists. */
static struct exchange *
dead_letter_exchange(const struct queue *q)
{
    if (q->qa.dlx == NULL || q->deleted)
        return NULL;
    return vhost_exchange(q->vh, amqp_cstr(q->qa.dlx));
}

/* Whether the head of level 'r' can go now, for expiry or x-max-length:
 * a paged one that is to be dead-lettered waits for its message to be
 * read. */
static bool
head_can_go(struct queue *q, const struct qring *r)
{
    if (!at(r, 0)->paged || dead_letter_exchange(q) == NULL)
        return true;
    queue_fill(q);
    return false;
}

/* Route 'dm', the dead-lettered copy of a message, through its queue's
 * dead-letter exchange 'dlx' into every queue it reaches, except where
 * it would close a fully automatic cycle (deadletter_is_cycle: RabbitMQ
 * drops it for those), and let go of it. How many queues took it;
 * '*cycles' how many it was kept from. */
static size_t
route_dead(struct exchange *dlx, struct msg *dm, size_t *cycles)
{
    struct route_result rr;
    size_t took = 0;

    *cycles = 0;
    route_result_init(&rr);
    exchange_route(dlx, dm, &rr);
    for (size_t i = 0; i < rr.n; i++) {
        if (deadletter_is_cycle(dm, rr.qs[i]->name))
            (*cycles)++;
        else if (ring_push(rr.qs[i], dm) >= 0)
            took++;
    }
    route_result_free(&rr);
    msg_unref(dm);
    return took;
}

/* A log line about 'q' and the message 'm' (NULL: none): the queue,
 * its vhost and the message id are keys of a JSON line. */
void __attribute__((format(printf, 4, 5)))
queue_log(const struct queue *q, const struct msg *m, enum log_level level,
          const char *fmt, ...)
{
    char name[300], mid[300];
    va_list ap;

    if (!log_enabled(level))
        return;
    struct log_ids ids = {
        .vhost = q->vh->name,
        .queue = log_escape(name, sizeof(name), q->name, q->name_len),
        .message_id = m ? msg_log_id(m, mid, sizeof(mid)) : NULL,
    };
    va_start(ap, fmt);
    log_eventv(level, &ids, fmt, ap);
    va_end(ap);
}

/* A message of 'q' let go for 'reason' that reached no queue: counted
 * as dropped for that reason, and said in the log as a drop ('why') at
 * most once per queue every QUEUE_DROP_LOG_MS, with how many more there
 * were since. */
#define QUEUE_DROP_LOG_MS 10000

static void __attribute__((format(printf, 5, 6)))
queue_drop(struct queue *q, const struct msg *m, const char *reason,
           unsigned deliveries, const char *why, ...)
{
    enum drop_reason d = drop_reason_of(reason);
    uint64_t now = now_ms();
    char name[300], text[512];
    va_list ap;

    q->dropped[d]++;
    stats_churn.dropped[d]++;
    if (q->drop_logged_ms != 0 && now - q->drop_logged_ms < QUEUE_DROP_LOG_MS) {
        q->drops_unlogged++;
        return;
    }
    va_start(ap, why);
    vsnprintf(text, sizeof(text), why, ap);
    va_end(ap);
    log_escape(name, sizeof(name), q->name, q->name_len);
    if (q->drops_unlogged > 0)
        queue_log(q, m, LOG_LVL_INFO, "queue '%s' in vhost '%s': a message "
                  "dropped (%s, after %u deliveries): %s; %" PRIu64 " more "
                  "dropped in the last %" PRIu64 " s", name, q->vh->name,
                  reason, deliveries, text, q->drops_unlogged,
                  (now - q->drop_logged_ms) / 1000);
    else
        queue_log(q, m, LOG_LVL_INFO, "queue '%s' in vhost '%s': a message "
                  "dropped (%s, after %u deliveries): %s", name, q->vh->name,
                  reason, deliveries, text);
    q->drop_logged_ms = now;
    q->drops_unlogged = 0;
}

/* Dead-letter message 'm' of 'q' for 'reason' through 'dlx': a copy
 * with x-death routed on, counted as dead-lettered if a queue took it,
 * else as dropped. 'done' (NULL: none) is the entry 'm' was, ended once
 * the copy is made and before it is routed. */
static void
dead_letter_copy(struct queue *q, const struct msg *m, const char *reason,
                 unsigned deliveries, struct exchange *dlx,
                 struct qentry *done)
{
    enum drop_reason d = drop_reason_of(reason);
    struct msg *dm = deadletter_msg(m, q->name, reason, q->qa.dlx,
                                    q->qa.dlrk);
    char name[300], xname[300];
    size_t cycles = 0;

    if (dm == NULL) {
        queue_drop(q, m, reason, deliveries, "too large to dead-letter: "
                   "its headers with x-death would be larger than a table "
                   "may be");
        if (done != NULL)
            entry_end(q, *done);
        return;
    }
    /* The log line names the original; the copy is about to go. */
    log_escape(xname, sizeof(xname), dlx->name, strlen(dlx->name));
    if (done != NULL)
        entry_end(q, *done);
    msg_ref(dm);
    size_t took = route_dead(dlx, dm, &cycles);
    if (took > 0) {
        q->dead_lettered[d]++;
        stats_churn.dead_lettered[d]++;
        /* A poison message (over its delivery limit) is worth a line;
         * the others come by the thousand (expiry, length limits). */
        log_escape(name, sizeof(name), q->name, q->name_len);
        queue_log(q, dm, strcmp(reason, "delivery_limit") == 0
                             ? LOG_LVL_INFO : LOG_LVL_DEBUG,
                  "queue '%s' in vhost '%s': a message dead-lettered (%s, "
                  "after %u deliveries) to exchange '%s' (%zu queue%s)",
                  name, q->vh->name, reason, deliveries, xname, took,
                  took == 1 ? "" : "s");
    } else if (cycles > 0) {
        queue_drop(q, dm, reason, deliveries, "dead-lettering it through "
                   "exchange '%s' would close a cycle with no rejection in "
                   "it", xname);
    } else {
        queue_drop(q, dm, reason, deliveries, "its dead-letter exchange "
                   "'%s' routed it to no queue", xname);
    }
    msg_unref(dm);
}

/* Give up entry 'e' for 'reason' ("rejected", "expired", "maxlen",
 * "delivery_limit"): dead-letter it if its queue has a dead-letter
 * exchange, else drop it. */
static void
dead_letter(struct queue *q, struct qentry e, const char *reason)
{
    struct exchange *dlx;

    if (q->ops->log) {
        /* a stream's retention (queue_stream.c): nothing to say */
        entry_end(q, e);
        return;
    }
    if (e.paged || (dlx = dead_letter_exchange(q)) == NULL) {
        queue_drop(q, e.paged ? NULL : e.m, reason, e.deliveries,
                   "no dead-letter exchange");
        entry_end(q, e);
        return;
    }
    dead_letter_copy(q, e.m, reason, e.deliveries, dlx, &e);
}

static bool ring_pop(struct queue *q, struct qring *r, struct qentry *out);

/* Each level expires from its own head, as in RabbitMQ. The clock is
 * read only when a head has an expiry (twice a delivery otherwise). */
void
queue_expire(struct queue *q)
{
    uint64_t now = 0;
    for (size_t l = q->len ? q->top + 1 : 0; l-- > 0;) {
        struct qring *r = &q->lv[l];
        while (r->len > 0 && at(r, 0)->expires_at) {
            if (now == 0)
                now = now_ms();
            if (at(r, 0)->expires_at > now || !head_can_go(q, r) ||
                (q == offered.q && at(r, 0)->seq == offered.seq))
                break;
            struct qentry e;
            ring_pop(q, r, &e);
            dead_letter(q, e, "expired");
        }
    }
}

void
queue_set_qargs(struct queue *q, struct qargs *qa)
{
    /* The type and the priority levels are the arguments' alone. */
    qa->type = q->qa.type;
    qa->max_priority = q->qa.max_priority;
    struct qargs was = q->qa;
    q->qa = *qa;
    memset(qa, 0, sizeof(*qa));
    if (q->ops->reconfigure && !q->deleted)
        q->ops->reconfigure(q, &was);
    qargs_free(&was);
    if (q->deleted)
        return;
    if (q->qa.overflow == OVERFLOW_DROP_HEAD)
        drop_head(q);
    queue_expire(q);
    queue_arm(q);
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
        queue_log(q, NULL, LOG_LVL_INFO, "queue '%s' in vhost '%s' unused "
                  "for %lld ms; deleting (x-expires)", q->name, q->vh->name,
                  (long long)q->qa.expires);
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
    /* The heads are the next messages to expire: RabbitMQ too expires
     * messages only when they reach the head (of their level). */
    for (size_t l = q->len ? q->top + 1 : 0; l-- > 0;) {
        const struct qring *r = &q->lv[l];
        if (r->len > 0 && at(r, 0)->expires_at &&
            (when == 0 || at(r, 0)->expires_at < when))
            when = at(r, 0)->expires_at;
    }
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
queue_hist_make(struct queue *q)
{
    q->hist = xcalloc(HIST_KINDS, sizeof(*q->hist));
}

void
ring_ack(struct queue *q, struct qentry e)
{
    q->unacked--;
    q->bytes_unacked -= e.m->body_len;      /* taken: in memory */
    entry_end(q, e);
}

void
ring_reject(struct queue *q, struct qentry e)
{
    q->unacked--;
    q->bytes_unacked -= e.m->body_len;      /* taken: in memory */
    dead_letter(q, e, "rejected");
}

/* x-overflow drop-head: the messages at the head make room (in a
 * priority queue, the highest priority's, as RabbitMQ drops them). */
void
drop_head(struct queue *q)
{
    while (q->len > 0 && over_limit(q, 0, 0) && head_can_go(q, top_ring(q))) {
        struct qentry old;
        queue_pop(q, &old);
        dead_letter(q, old, "maxlen");
    }
}

/* Put 'e' (in memory) back into its level, at its original place. */
void
put_back(struct queue *q, struct qentry e)
{
    struct qring *r = level_of(q, e.m->env->priority);
    make_room(r);
    /* Before the first entry with a larger sequence number. */
    size_t lo = index_of_seq(r, e.seq);
    if (lo == 0) {
        r->head = (r->head + r->cap - 1) & (r->cap - 1);
    } else {
        for (size_t i = r->len; i > lo; i--)
            *at(r, i) = *at(r, i - 1);
    }
    *at(r, lo) = e;
    r->len++;
    q->len++;
    q->bytes += e.m->body_len;
    if (lo <= r->mem_head)
        r->mem_head++;
    if (e.expires_at)
        queue_arm(q);
}

/*
 * How long an entry returned for the n-th time waits: x-requeue-delay,
 * doubled for each return before this one, up to x-requeue-delay-max
 * (by default the larger of ten minutes and x-requeue-delay); then a
 * random part of up to half of it is taken off, so that jobs that failed
 * together do not come back together.
 */
static uint64_t
retry_delay(const struct queue *q, uint32_t returns)
{
    uint64_t base = (uint64_t)q->qa.requeue_delay, max, d = base;

    if (q->qa.requeue_delay_max > 0)
        max = (uint64_t)q->qa.requeue_delay_max;
    else
        max = base > 600000 ? base : 600000;
    for (uint32_t i = 1; i < returns && d < max; i++)
        d *= 2;
    if (d > max)
        d = max;
    /* arc4random_uniform takes 32 bits: the part taken off is at most
     * 49 days. */
    uint64_t half = d / 2 < UINT32_MAX ? d / 2 : UINT32_MAX - 1;
    return d - arc4random_uniform((uint32_t)half + 1);
}

/* A taken entry comes back: 'failed' for a nack or reject. */
static void
queue_return(struct queue *q, struct qentry e, bool failed)
{
    q->unacked--;
    q->bytes_unacked -= e.m->body_len;      /* taken: in memory */
    if (q->deleted) {
        entry_end(q, e);
        return;
    }
    /* x-delivery-limit counts returns, as RabbitMQ's quorum queues do:
     * each delivery that comes back is one, so a limit of 2 allows three
     * deliveries; past it the message is dead-lettered (or dropped). */
    if (q->qa.delivery_limited &&
        (int64_t)e.deliveries > q->qa.delivery_limit) {
        dead_letter(q, e, "delivery_limit");
        return;
    }
    e.redelivered = true;
    if (failed && q->qa.requeue_delay > 0) {
        uint64_t delay = retry_delay(q, e.deliveries);
        if (q->sid)
            store_retry_wait(q, &e, delay);
        wait_push(q, now_ms() + delay, e);
        return;
    }
    put_back(q, e);
}

void
ring_requeue(struct queue *q, struct qentry e)
{
    queue_return(q, e, false);
}

void
ring_retry(struct queue *q, struct qentry e)
{
    queue_return(q, e, true);
}

/* ---- the requeue delay's waiting entries: a heap by due time ---- */

static bool
wait_before(const struct qwait *a, const struct qwait *b)
{
    return a->due < b->due || (a->due == b->due && a->e.seq < b->e.seq);
}

static void
wait_swap(struct qwait *a, struct qwait *b)
{
    struct qwait t = *a;
    *a = *b;
    *b = t;
}

static void wait_arm(struct queue *q);

static void
wait_push(struct queue *q, uint64_t due, struct qentry e)
{
    size_t old = q->waits_cap;
    array_reach(&q->waits, sizeof(*q->waits), &q->waits_cap, q->nwaits);
    ring_bytes += (uint64_t)(q->waits_cap - old) * sizeof(*q->waits);
    size_t i = q->nwaits++;
    q->waits[i].due = due;
    q->waits[i].e = e;
    while (i > 0 && wait_before(&q->waits[i], &q->waits[(i - 1) / 2])) {
        wait_swap(&q->waits[i], &q->waits[(i - 1) / 2]);
        i = (i - 1) / 2;
    }
    if (i == 0)
        wait_arm(q);
}

/* Take the first entry due out of the heap. */
static struct qentry
wait_pop(struct queue *q)
{
    struct qentry e = q->waits[0].e;
    q->waits[0] = q->waits[--q->nwaits];
    for (size_t i = 0;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < q->nwaits && wait_before(&q->waits[l], &q->waits[m]))
            m = l;
        if (r < q->nwaits && wait_before(&q->waits[r], &q->waits[m]))
            m = r;
        if (m == i)
            break;
        wait_swap(&q->waits[i], &q->waits[m]);
        i = m;
    }
    return e;
}

static void
wait_cb(evutil_socket_t fd, short what, void *arg)
{
    struct queue *q = arg;
    uint64_t now = now_ms();
    (void)fd;
    (void)what;

    while (q->nwaits > 0 && q->waits[0].due <= now)
        put_back(q, wait_pop(q));
    wait_arm(q);
    if (q->nconsumers)
        ring_dispatch(q);
}

/* The timer for the first entry due. */
static void
wait_arm(struct queue *q)
{
    if (q->nwaits == 0 || q->deleted) {
        if (q->wait_timer)
            evtimer_del(q->wait_timer);
        return;
    }
    if (q->wait_timer == NULL)
        q->wait_timer = evtimer_new(broker.base, wait_cb, q);
    uint64_t now = now_ms(), due = q->waits[0].due;
    uint64_t ms = due > now ? due - now : 0;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    evtimer_add(q->wait_timer, &tv);
}

/* Drop every waiting entry; returns how many. */
static uint32_t
wait_drop_all(struct queue *q)
{
    uint32_t n = 0;
    while (q->nwaits > 0) {
        entry_end(q, wait_pop(q));
        n++;
    }
    wait_arm(q);
    return n;
}

void
queue_foreach_waiting(struct queue *q,
                      void (*fn)(struct queue *q, struct qentry *e,
                                 uint64_t due, void *arg), void *arg)
{
    for (size_t i = 0; i < q->nwaits; i++)
        fn(q, &q->waits[i].e, q->waits[i].due, arg);
}

/* The queue's accounting for an entry that left level 'r'. */
void
entry_left(struct queue *q, struct qring *r, const struct qentry *e)
{
    r->len--;
    q->len--;
    q->bytes -= qentry_body_len(e);
    if (e->paged) {
        r->npaged--;
        q->npaged--;
        q->bytes_paged -= e->body_len;
    }
    while (q->top > 0 && q->lv[q->top].len == 0)
        q->top--;
}

/* Take the first entry of level 'r'. */
static bool
ring_pop(struct queue *q, struct qring *r, struct qentry *out)
{
    if (r->len == 0)
        return false;
    *out = *at(r, 0);
    r->head = (r->head + 1) & (r->cap - 1);
    if (r->mem_head)
        r->mem_head--;
    entry_left(q, r, out);
    /* A drained backlog gives its ring back: below an eighth full, the
     * ring halves (down to 4,096 entries). */
    if (r->cap > 4096 && r->len < r->cap / 8) {
        size_t old = r->cap;
        ring_resize(&r->ring, sizeof(*r->ring), &r->cap, &r->head, r->len,
                    r->cap / 2);
        ring_bytes -= (uint64_t)(old - r->cap) * sizeof(*r->ring);
    }
    return true;
}

bool
queue_pop(struct queue *q, struct qentry *out)
{
    return ring_pop(q, top_ring(q), out);
}

bool
ring_take(struct queue *q, struct qentry *out)
{
    if (q->len > 0 && head_entry(q)->paged) {
        queue_fill(q);
        return false;
    }
    if (!queue_pop(q, out))
        return false;
    out->deliveries++;
    q->unacked++;
    q->bytes_unacked += out->m->body_len;   /* taken: in memory */
    if (q->sid)
        store_delivered(q, out);
    if (q->npaged)
        queue_fill(q);
    return true;
}

bool
queue_head_paged(const struct queue *q)
{
    return q->len > 0 && head_entry(q)->paged;
}

uint32_t
ring_purge(struct queue *q)
{
    uint32_t n = wait_drop_all(q);
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
        if (c->ops->backs_up(c))
            return true;
    return false;
}

/*
 * Round-robin over the consumers: each turn takes the first consumer that
 * can take a message and moves it to the back of the list. Stops when the
 * queue is empty or a whole round found nobody with credit.
 */
/* Into the consumer list after every consumer of its priority or
 * higher. From the tail: with one priority (the usual case) at once. */
static void
insert_consumer(struct queue *q, struct consumer *c)
{
    struct consumer *after;
    TAILQ_FOREACH_REVERSE(after, &q->consumers, consumer_list, q_link)
        if (after->priority >= c->priority)
            break;
    if (after != NULL)
        TAILQ_INSERT_AFTER(&q->consumers, after, c, q_link);
    else
        TAILQ_INSERT_HEAD(&q->consumers, c, q_link);
}

void
ring_dispatch(struct queue *q)
{
    if (q->dispatching || q->deleted)
        return;
    q->dispatching = true;
    queue_expire(q);
    while (q->len > 0 && q->nconsumers > 0 && !head_entry(q)->paged) {
        struct consumer *c, *found = NULL;
        /* A single active consumer: the first to arrive, alone, until it
         * goes (then the next in order of arrival). */
        if (q->qa.single_active) {
            found = TAILQ_FIRST(&q->consumers);
            if (!found->ops->can_take(found))
                break;
        } else {
            /* The first with credit in priority order: a blocked
             * higher-priority consumer lets lower ones have it. */
            TAILQ_FOREACH(c, &q->consumers, q_link) {
                if (c->ops->can_take(c)) {
                    found = c;
                    break;
                }
            }
            if (found == NULL)
                break;
            /* Round-robin among consumers of its priority. */
            TAILQ_REMOVE(&q->consumers, found, q_link);
            insert_consumer(q, found);
        }
        struct qentry e;
        ring_take(q, &e);
        found->ops->deliver(found, q, e);
        queue_expire(q);
    }
    if (queue_head_paged(q))
        queue_fill(q);
    q->dispatching = false;
}

void
queue_add_consumer(struct queue *q, struct consumer *c)
{
    c->refs++;
    if (q->qa.single_active)
        TAILQ_INSERT_TAIL(&q->consumers, c, q_link);
    else
        insert_consumer(q, c);
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
    if (q->ops->detach)
        q->ops->detach(q, c);
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
        session_hooks.disown_queue(q->owner, q);
    while ((c = TAILQ_FIRST(&q->consumers)) != NULL) {
        c->refs++;
        queue_remove_consumer(q, c);
        c->ops->cancelled(c);
        consumer_unref(c);
    }
    while ((b = TAILQ_FIRST(&q->bindings)) != NULL)
        binding_free(b);
    vhost_remove_queue(q->vh, q);
    store_queue_gone(q);
    page_unlist(q);
    wake_get_waits(q, true);
    ring_purge(q);
    queue_unref(q);   /* the vhost's */
    queue_unref(q);   /* ours */
}

void
consumer_unref(struct consumer *c)
{
    if (--c->refs > 0)
        return;
    free((void *)c->args.ptr);
    free(c->tag);
    free(c);
}

/* ---- counting, read functions and the stats tick ---- */


void
ring_info(const struct queue *q, struct queue_info *out)
{
    memset(out, 0, sizeof(*out));
    out->ready = q->len;
    out->unacked = q->unacked;
    out->waiting = q->nwaits;
    out->paged = q->npaged;
    out->consumers = q->nconsumers;
    out->bytes_ready = q->bytes;
    out->bytes_unacked = q->bytes_unacked;
    out->bytes_paged = q->bytes_paged;
    out->persistent = q->persistent;
    out->bytes_persistent = q->bytes_persistent;
    out->memory = sizeof(*q) + q->name_len + q->args.len +
                  q->waits_cap * sizeof(*q->waits) +
                  (q->hist ? HIST_KINDS * sizeof(*q->hist) : 0) +
                  (q->series ? sizeof(*q->series) : 0) +
                  history_memory(q->history);
    for (size_t l = 0; l < q->nlv; l++)
        out->memory += q->lv[l].cap * sizeof(*q->lv[l].ring);
    out->head_age_ms = -1;
    if (q->len > 0) {
        const struct qentry *h = head_entry(q);
        if (h->born)
            out->head_age_ms =
                (int64_t)(uint32_t)((uint32_t)now_ms() - h->born);
    }
    out->utilisation = q->nconsumers ? (double)q->utilisation : -1;
    out->ms = &q->ms;
    out->dead_lettered = q->dead_lettered;
    out->dropped = q->dropped;
    out->hist = q->hist;
    out->series = q->series;
    out->history = q->history;
}

void
queue_sample(struct queue *q)
{
    uint64_t v[QS_COUNT];
    memcpy(v, q->ms.n, sizeof(q->ms.n));
    v[QS_MESSAGES] = q->len + q->unacked;
    v[QS_READY] = q->len;
    v[QS_UNACKED] = q->unacked;
    stats_sample(&q->series, v, QS_COUNT);
    uint64_t hv[HC_COUNT];
    stats_history_values(&q->ms, q->len, q->unacked, q->dead_lettered,
                         q->dropped, hv);
    history_record(&q->history, HISTORY_QUEUE, stats_tick(),
                   stats_tick_wall_ms(), hv);
    /* Consumer utilisation, as RabbitMQ's consumer_capacity: the share
     * of samples in which a ready message could have gone to a
     * consumer at once (1: consumers are never the bottleneck). */
    if (q->nconsumers == 0) {
        q->utilisation = 1.0f;
        return;
    }
    bool could = q->len == 0;
    const struct consumer *c;
    TAILQ_FOREACH(c, &q->consumers, q_link)
        if (!could && c->ops->can_take(c))
            could = true;
    q->utilisation = 0.8f * q->utilisation + (could ? 0.2f : 0.0f);
}

void
queue_foreach_binding(struct queue *q,
                      void (*fn)(const struct binding *b, void *arg),
                      void *arg)
{
    const struct binding *b;
    TAILQ_FOREACH(b, &q->bindings, dest_link)
        fn(b, arg);
}

void
queue_foreach_consumer(struct queue *q,
                       void (*fn)(struct consumer *c, void *arg), void *arg)
{
    struct consumer *c;
    TAILQ_FOREACH(c, &q->consumers, q_link)
        fn(c, arg);
}
