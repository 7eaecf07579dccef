/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The stream queue type (queue.h; docs/streams.md): a log. Entries stay
 * after they are delivered, in the queue's ring, in offset order (an
 * entry's seq is its offset); each consumer reads from its own offset
 * (consumer->offset) with credit, its prefetch count. Retention
 * (x-max-length-bytes, x-max-age, or their policies, whose values win)
 * lets entries go from the head, one message at a time, on each append,
 * when a policy changes and, for age, by the queue's timer. Every
 * message is stored, transient or not, and synced before its confirm;
 * beyond the paging window the ring's entries are paged as any queue's,
 * and a consumer reading behind reads them back on the pager thread
 * into copies of its own, at most its credit at a time.
 *
 * The ring and its accounting are queue.c's (queue_int.h); what is a
 * stream's own is here.
 */
#include "broker/core/queue_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/broker.h"
#include "broker/core/msg.h"
#include "broker/core/qargs.h"
#include "broker/core/store.h"
#include "broker/core/vhost.h"
#include "broker/lib/util.h"

/* The most entries, and about the most bytes, one read back takes. */
#define READ_MAX_ENTRIES 256
#define READ_MAX_BYTES (1u << 20)

/* A consumer's reads (c->reader): the messages of a run of paged
 * entries read back, in offset order, handed out from 'next'. */
struct reader {
    struct consumer *c;
    struct queue *q;
    struct qentry *es;          /* the entries read (their offsets) */
    struct msg **ms;            /* their messages; NULL: unreadable */
    size_t n, next;
    bool reading;
    bool detached;              /* its consumer left: freed after the read */
    /* deliveries it nacked or rejected with requeue, or recovered: each
     * goes to it again, lowest offset first, before its offset moves on;
     * no more than it had unacked, so its prefetch count bounds them */
    struct qentry *back;
    size_t nback, back_cap;
};

/* A read back in flight. */
struct read_job {
    struct pager_job job;
    struct reader *rd;
};

static void stream_dispatch(struct queue *q);

/* ---- offsets ---- */

/* The first offset kept, and the one the next append takes. */
static uint64_t
first_offset(const struct queue *q)
{
    return q->lv0.len ? at(&q->lv0, 0)->seq : q->next_seq;
}

/* The first offset whose entry came at most 'age' ms before now (the
 * ring is in append order, so its ages fall: a binary search); ages
 * are the 32 bits of qentry.born, so 'age' counts up to 24 days. An
 * entry whose time is not known (born 0) counts as old. */
static uint64_t
offset_of_age(const struct queue *q, uint64_t age)
{
    const struct qring *r = &q->lv0;
    uint32_t now = (uint32_t)now_ms();
    size_t lo = 0, hi = r->len;

    if (age > UINT32_MAX / 2)
        return first_offset(q);
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct qentry *e = at(r, mid);
        if (e->born == 0 || (uint32_t)(now - e->born) > age)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < r->len ? at(r, lo)->seq : q->next_seq;
}

/* x-stream-offset's text value, as RabbitMQ formats a value it does not
 * take: {invalid_stream_offset_arg,{TYPE,VALUE}}. */
static bool
bad_offset(const struct queue *q, const struct amqp_field *v, char *err,
           size_t errlen)
{
    char val[300];
    if (v->kind == AMQP_FIELD_LONGSTR || v->kind == AMQP_FIELD_BYTES)
        snprintf(val, sizeof(val), "<<\"%.*s\">>",
                 (int)(v->v.str.len > 200 ? 200 : v->v.str.len),
                 (const char *)v->v.str.ptr);
    else if (v->kind == AMQP_FIELD_BOOL)
        snprintf(val, sizeof(val), "%s", v->v.b ? "true" : "false");
    else
        snprintf(val, sizeof(val), "_");
    snprintf(err, errlen, "invalid arg 'x-stream-offset' for queue '%s' in "
             "vhost '%s': {invalid_stream_offset_arg,{%s,%s}}", q->name,
             q->vh->name, qargs_type_atom(v->kind), val);
    return false;
}

/* Where a consumer with x-stream-offset 'v' starts. */
static bool
parse_offset(const struct queue *q, const struct amqp_field *v,
             uint64_t *out, char *err, size_t errlen)
{
    uint64_t first = first_offset(q), next = q->next_seq;
    int64_t n;

    if (field_as_int(v, &n)) {
        /* -N: the last N messages; past the end: next; below the first
         * kept: the first kept */
        uint64_t back = 0 - (uint64_t)n;    /* -n, INT64_MIN too */
        if (n < 0)
            *out = back >= next - first ? first : next - back;
        else
            *out = (uint64_t)n > next ? next
                   : (uint64_t)n < first ? first : (uint64_t)n;
        return true;
    }
    if (v->kind == AMQP_FIELD_TIMESTAMP) {
        /* seconds: the first message appended at or after it */
        uint64_t wall = wall_ms(), t = v->v.u > UINT64_MAX / 1000
                                           ? UINT64_MAX : v->v.u * 1000;
        *out = t >= wall ? next : offset_of_age(q, wall - t);
        return true;
    }
    if (v->kind != AMQP_FIELD_LONGSTR && v->kind != AMQP_FIELD_BYTES)
        return bad_offset(q, v, err, errlen);
    struct amqp_bytes s = v->v.str;
    int64_t ms;
    if (amqp_bytes_eq(s, "first"))
        *out = first;
    else if (amqp_bytes_eq(s, "last"))
        *out = q->lv0.len ? at(&q->lv0, q->lv0.len - 1)->seq : next;
    else if (amqp_bytes_eq(s, "next"))
        *out = next;
    else if (v->kind == AMQP_FIELD_LONGSTR && qargs_parse_age(s, &ms) == 0 &&
             ms > 0)
        *out = offset_of_age(q, (uint64_t)ms);
    else
        return bad_offset(q, v, err, errlen);
    return true;
}

/* ---- consumers ---- */

static bool
stream_attach(struct queue *q, struct consumer *c, struct amqp_table args,
              char *err, size_t errlen)
{
    struct amqp_field v;

    c->offset = q->next_seq;
    if (table_get(args, "x-stream-offset", &v) &&
        !parse_offset(q, &v, &c->offset, err, errlen))
        return false;
    struct reader *rd = xcalloc(1, sizeof(*rd));
    rd->c = c;
    rd->q = q;
    c->reader = rd;
    return true;
}

/* Let go of what 'rd' read and has not handed out. */
static void
reader_clear(struct reader *rd)
{
    for (size_t i = rd->next; i < rd->n; i++)
        if (rd->ms[i] != NULL)
            msg_unref(rd->ms[i]);
    free(rd->es);
    free(rd->ms);
    rd->es = NULL;
    rd->ms = NULL;
    rd->n = rd->next = 0;
}

static void
stream_detach(struct queue *q, struct consumer *c)
{
    struct reader *rd = c->reader;
    (void)q;
    if (rd == NULL)
        return;
    c->reader = NULL;
    reader_clear(rd);
    for (size_t i = 0; i < rd->nback; i++)
        msg_unref(rd->back[i].m);
    free(rd->back);
    rd->back = NULL;
    rd->nback = 0;
    if (rd->reading)
        rd->detached = true;
    else
        free(rd);
}

static void
read_done(struct pager_job *j)
{
    struct read_job *rj = (struct read_job *)j;
    struct reader *rd = rj->rd;
    struct queue *q = rd->q;
    struct consumer *c = rd->c;

    rd->reading = false;
    if (!rd->detached) {
        rd->ms = xcalloc(j->nreads ? j->nreads : 1, sizeof(*rd->ms));
        for (size_t k = 0; k < j->nreads; k++) {
            struct pager_read *r = &j->reads[k];
            rd->ms[k] = r->err ? NULL : store_page_decode(&rd->es[k], r);
        }
        rd->n = j->nreads;
        rd->next = 0;
    }
    pager_read_free(j);
    free(rj);
    if (rd->detached) {
        reader_clear(rd);
        free(rd);
    } else if (!q->deleted) {
        stream_dispatch(q);
    }
    consumer_unref(c);
    queue_unref(q);
}

/* Read back the run of paged entries from ring index 'i' on, for
 * consumer 'c': at most its credit, READ_MAX_ENTRIES and about
 * READ_MAX_BYTES. */
static void
reader_start(struct queue *q, struct consumer *c, size_t i)
{
    struct reader *rd = c->reader;
    struct read_job *rj = xcalloc(1, sizeof(*rj));
    size_t cap = 0, bytes = 0, max = READ_MAX_ENTRIES;

    if (c->prefetch > c->unacked && c->prefetch - c->unacked < max)
        max = c->prefetch - c->unacked;
    reader_clear(rd);
    rd->es = xcalloc(max, sizeof(*rd->es));
    for (; i < q->lv0.len && rj->job.nreads < max && bytes < READ_MAX_BYTES;
         i++) {
        const struct qentry *e = at(&q->lv0, i);
        if (!e->paged)
            break;
        rd->es[rj->job.nreads] = *e;
        bytes += pager_add_read(&rj->job, &cap, e, rj->job.nreads);
    }
    rd->reading = true;
    rj->rd = rd;
    rj->job.kind = PAGER_READ;
    rj->job.done = read_done;
    c->refs++;
    queue_ref(q);
    store_read_submit(&rj->job);
}

/* The message of entry 'e' (at ring index 'i') for consumer 'c': a new
 * reference, or NULL when it must be read back first (a read is then
 * under way) or could not be read (then '*skip'). */
static struct msg *
message_for(struct queue *q, struct consumer *c, const struct qentry *e,
            size_t i, bool *skip)
{
    struct reader *rd = c->reader;

    *skip = false;
    if (!e->paged)
        return msg_ref(e->m);
    if (rd->reading)
        return NULL;
    if (rd->next < rd->n && rd->es[rd->next].seq == e->seq) {
        struct msg *m = rd->ms[rd->next++];
        if (m == NULL) {
            queue_log(q, NULL, LOG_LVL_ERROR, "stream '%s' in vhost '%s': "
                      "offset %llu could not be read back; skipped",
                      q->name, q->vh->name, (unsigned long long)e->seq);
            *skip = true;
        }
        return m;
    }
    reader_start(q, c, i);
    return NULL;
}

static void
stream_redeliver(struct queue *q, struct consumer *c, struct qentry e)
{
    struct reader *rd = c->reader;
    if (rd->nback == rd->back_cap) {
        rd->back_cap = rd->back_cap ? rd->back_cap * 2 : 8;
        rd->back = xrealloc(rd->back, rd->back_cap * sizeof(*rd->back));
    }
    size_t i = rd->nback;
    while (i > 0 && rd->back[i - 1].seq > e.seq) {
        rd->back[i] = rd->back[i - 1];
        i--;
    }
    e.redelivered = 1;
    rd->back[i] = e;
    rd->nback++;
    (void)q;    /* the channel dispatches the queue after settling */
}

/* The first delivery that came back to 'c', taken. */
static bool
take_back(struct consumer *c, struct qentry *out)
{
    struct reader *rd = c->reader;
    if (rd->nback == 0)
        return false;
    *out = rd->back[0];
    memmove(rd->back, rd->back + 1, --rd->nback * sizeof(*rd->back));
    return true;
}

/* Hand each consumer with credit what lies at its offset, in turns. */
static void
stream_dispatch(struct queue *q)
{
    if (q->dispatching || q->deleted)
        return;
    q->dispatching = true;
    bool more = true;
    while (more) {
        more = false;
        struct consumer *c;
        TAILQ_FOREACH(c, &q->consumers, q_link) {
            if (!c->ops->can_take(c))
                continue;
            struct qentry d;
            if (take_back(c, &d)) {
                more = true;
                c->ops->deliver(c, q, d);
                continue;
            }
            size_t i = index_of_seq(&q->lv0, c->offset);
            if (i >= q->lv0.len)
                continue;
            const struct qentry *e = at(&q->lv0, i);
            bool skip;
            struct msg *m = message_for(q, c, e, i, &skip);
            if (m == NULL && !skip)
                continue;
            c->offset = e->seq + 1;
            more = true;
            if (m == NULL)
                continue;
            d = *e;
            d.m = m;
            d.paged = d.scratch = d.stored = 0;
            d.redelivered = 0;
            d.deliveries = 0;
            c->ops->deliver(c, q, d);
        }
    }
    q->dispatching = false;
}

/* ---- retention ----
 *
 * The rings' own limits do it, one message at a time: x-max-length-bytes
 * (or its policy) is drop-head's byte limit, and an entry's expiry is
 * its append time plus x-max-age (or its policy), so the queue's timer
 * lets the head go on time, idle stream or not. A log drops instead of
 * dead-lettering (queue.c, dead_letter). */

static void
retain(struct queue *q)
{
    drop_head(q);
    queue_expire(q);
    queue_arm(q);
}

/* x-max-age, or the max-age policy, in ms; -1: none (qentry.expires_at
 * has 60 bits: an age beyond 2^58 ms, nine million years, is none). */
static int64_t
max_age(const struct queue *q)
{
    return q->qa.max_age_ms < (INT64_C(1) << 58) ? q->qa.max_age_ms : -1;
}

/* Entry 'e''s deadline under the max-age in force: its append time plus
 * the age; 0: none. The append time is known from e->born for ages of
 * up to 24 days (as offset_of_age's); an older entry keeps the deadline
 * it has, if it has one. */
static uint64_t
deadline_of(const struct queue *q, const struct qentry *e, uint64_t now)
{
    int64_t age = max_age(q);
    if (age < 0)
        return 0;
    uint32_t held = e->born ? (uint32_t)now - e->born : UINT32_MAX;
    if (held > UINT32_MAX / 2) {
        if (e->expires_at)
            return e->expires_at;
        held = UINT32_MAX / 2;
    }
    uint64_t d = now + (uint64_t)age;
    return d > held ? d - held : 1;     /* 1: due already, 0 is never */
}

/* A policy changed the max-age: every deadline follows at once, and
 * queue_set_qargs lets go what is then due (and what a new
 * max-length-bytes no longer holds). */
static void
stream_reconfigure(struct queue *q, const struct qargs *was)
{
    if (was->max_age_ms == q->qa.max_age_ms)
        return;
    uint64_t now = now_ms();
    for (size_t i = 0; i < q->lv0.len; i++) {
        struct qentry *e = at(&q->lv0, i);
        e->expires_at = deadline_of(q, e, now);
    }
}

/* ---- the table ---- */

static int
stream_push(struct queue *q, struct msg *m)
{
    int64_t age = max_age(q);
    uint64_t expires = age >= 0 ? now_ms() + (uint64_t)age : 0;
    struct qentry *e = ring_append(q, &q->lv0, m, expires);
    int stored = e->stored;
    retain(q);
    if (q->nconsumers)
        stream_dispatch(q);
    ring_maybe_page(q, &q->lv0);
    return stored;
}

/* Nothing is taken: basic.get is refused before (540). */
static bool
stream_take(struct queue *q, struct qentry *out)
{
    (void)q;
    (void)out;
    return false;
}

/* A delivery settled (acked, rejected or nacked without requeue, or
 * returned after its consumer left): the entry stays in the log; only
 * the consumer's copy goes. */
static void
stream_settle(struct queue *q, struct qentry e)
{
    (void)q;
    msg_unref(e.m);
}

/* Purge is refused before (540). */
static uint32_t
stream_purge(struct queue *q)
{
    (void)q;
    return 0;
}

/* The deadline the store kept is the max-age's when the message came: a
 * policy may have changed it since. */
static void
stream_restore(struct queue *q, const struct qentry *e, uint8_t priority,
               uint64_t due)
{
    struct qentry re = *e;
    (void)due;
    re.expires_at = deadline_of(q, e, now_ms());
    ring_restore(q, &re, priority, 0);
}

static const char *
stream_refused_arg(const struct qargs *qa)
{
    return qa->not_stream;
}

/* rabbit_stream_queue:capabilities/0's unsupported_policies, less the
 * keys Roost's policies do not hold (max-priority,
 * single-active-consumer, ha-*), and Roost's keys for queues whose
 * messages come back. */
static const char *const stream_refused_policy_keys[] = {
    "expires", "message-ttl", "dead-letter-exchange",
    "dead-letter-routing-key", "max-length", "max-in-memory-length",
    "max-in-memory-bytes", "overflow", "queue-mode", "delivery-limit",
    "queue-master-locator", "dead-letter-strategy",
    "requeue-delay", "requeue-delay-max", "roost-delivery-limit", NULL,
};

const struct queue_ops queue_stream_ops = {
    .type = "stream",
    .rabbit_name = "rabbit_stream_queue",
    .stores_messages = true,
    .stores_transient = true,
    .log = true,
    .refused_policy_keys = stream_refused_policy_keys,
    .refused_property = qargs_stream_refused_property,
    .refused_arg = stream_refused_arg,
    .push = stream_push,
    .take = stream_take,
    .dispatch = stream_dispatch,
    .ack = stream_settle,
    .reject = stream_settle,
    .requeue = stream_settle,
    .retry = stream_settle,
    .redeliver = stream_redeliver,
    .purge = stream_purge,
    .info = ring_info,
    .restore = stream_restore,
    .attach = stream_attach,
    .detach = stream_detach,
    .reconfigure = stream_reconfigure,
};
