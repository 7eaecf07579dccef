/*
 * SPDX-License-Identifier: Apache-2.0
 * The x-delayed-message exchange (delayed.h has the behaviour): its
 * index is its inner type's index, beside which it holds its delayed
 * messages in a heap by due time with one timer armed for the first.
 * Bindings and routing are the inner type's; holding happens before
 * routing, in channel_route (handle_basic.c), so that other exchanges'
 * publishes pay nothing for it.
 */
#include "broker/core/delayed.h"

#include <event2/event.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>
#include <time.h>

#include "amqp/spec_gen.h"
#include "broker/core/alarm.h"
#include "broker/core/broker.h"
#include "broker/core/exchange.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/reheader.h"
#include "broker/core/store.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

/* Due messages routed per timer callback at most, so that a backlog
 * that falls due at once (after a restart) leaves the loop to others. */
#define DUE_PER_TURN 256

/* A held message whose record is still to be written is routed this
 * much later (a sync's time), not before: see delayed_due. */
#define NOT_WRITTEN_RETRY_MS 2

struct held {
    int64_t due;                /* monotonic ms (negative: long past) */
    uint64_t seq : 63;          /* publish order; the store's position */
    uint64_t stored : 1;        /* the store holds it (delayed.h) */
    uint64_t due_wall;          /* wall-clock ms, as the journal says */
    struct msg *m;
};

struct delayed {
    const struct exchange_ops *inner;
    void *inner_index;
    struct exchange *x;
    struct held *heap;
    size_t n, cap;
    uint64_t next_seq;
    struct event *timer;
    int64_t armed_for;          /* the due time the timer is set for */
    bool armed;
    TAILQ_ENTRY(delayed) link;
};

static TAILQ_HEAD(, delayed) all = TAILQ_HEAD_INITIALIZER(all);
static uint64_t total;          /* held by every exchange */
static bool bound_logged;       /* since the bound was last reached */

/* ---- arguments and the x-delay header ---- */

/*
 * Check an x-delayed-message exchange's declare arguments: 0, or the
 * reply code (406 PRECONDITION_FAILED, soft; 503 COMMAND_INVALID, hard)
 * with RabbitMQ's text in 'err'.
 */
static int
delayed_check_args(struct amqp_table args, char *err, size_t errlen)
{
    struct amqp_field v;
    char esc[300];

    /* The plugin's texts (rabbit_exchange_type_delayed_message:validate). */
    if (!table_get(args, "x-delayed-type", &v) || v.kind != AMQP_FIELD_LONGSTR) {
        snprintf(err, errlen, "Invalid argument, 'x-delayed-type' must be "
                 "an existing exchange type");
        return AMQP_PRECONDITION_FAILED;
    }
    if (amqp_bytes_eq(v.v.str, "x-delayed-message")) {
        snprintf(err, errlen, "Invalid argument, 'x-delayed-message' can't "
                 "be used for 'x-delayed-type'");
        return AMQP_PRECONDITION_FAILED;
    }
    if (exchange_ops_find(v.v.str) == NULL) {
        /* rabbit_exchange:check_type, a connection error there too. */
        snprintf(err, errlen, "unknown exchange type '%s'",
                 log_escape(esc, sizeof(esc), v.v.str.ptr, v.v.str.len));
        return AMQP_COMMAND_INVALID;
    }
    return 0;
}

/* A longstr that is an integer, as binary_to_integer reads it. */
static bool
str_int(struct amqp_bytes s, int64_t *out)
{
    char buf[32], *end;

    if (s.len == 0 || s.len >= sizeof(buf))
        return false;
    memcpy(buf, s.ptr, s.len);
    buf[s.len] = '\0';
    if (buf[0] != '-' && buf[0] != '+' && (buf[0] < '0' || buf[0] > '9'))
        return false;
    long long v = strtoll(buf, &end, 10);
    if (*end != '\0')
        return false;
    *out = v;
    return true;
}

/* The x-delay header as the plugin's get_delay reads it; false if it
 * has none that reads as an integer. */
static bool
header_delay(const struct msg *m, int64_t *out)
{
    struct amqp_field v;

    if (!table_get(msg_headers(m), "x-delay", &v))
        return false;
    double d;
    if (field_as_int(&v, out))
        return true;
    if (v.kind == AMQP_FIELD_DECIMAL && field_as_real(&v, &d)) {
        *out = (int64_t)d;   /* truncated, as trunc/1 */
        return true;
    }
    if (field_as_real(&v, &d)) {
        if (!(d > -9e18 && d < 9e18))
            return false;
        *out = (int64_t)d;   /* truncated, as trunc/1 */
        return true;
    }
    if (v.kind == AMQP_FIELD_LONGSTR)
        return str_int(v.v.str, out);
    return false;
}

uint64_t
delayed_delay(const struct msg *m)
{
    int64_t d;

    if (!header_delay(m, &d) || d <= 0 || (uint64_t)d > DELAYED_MAX_MS)
        return 0;
    return (uint64_t)d;
}

/* The headers with x-delay set to minus the delay (reheader.h): a
 * signedint as the plugin writes it, a long when that cannot hold it. */
static bool
negate_delay(struct wire_wr *w, struct content_header *h, void *arg)
{
    const int64_t *delay = arg;
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field v;
    size_t outer = table_begin(w);

    table_iter_init(&it, h->props.headers);
    while (table_next(&it, &k, &v)) {
        (void)table_put_key(w, k);
        if (amqp_bytes_eq(k, "x-delay")) {
            struct amqp_field n = { .kind = AMQP_FIELD_I32 };
            n.v.i = -*delay;
            if (n.v.i < INT32_MIN)
                n.kind = AMQP_FIELD_I64;
            field_put(w, &n);
        } else {
            field_put(w, &v);
        }
    }
    table_end(w, outer);
    return true;
}

/* A new reference to 'm' as it is routed when due. */
static struct msg *
as_routed(struct msg *m)
{
    int64_t delay;
    struct msg *copy;

    if (!header_delay(m, &delay) ||
        (copy = reheader_copy(m, negate_delay, &delay, NULL, NULL)) == NULL)
        return msg_ref(m);
    return copy;
}

/* ---- the heap ---- */

static bool
before(const struct held *a, const struct held *b)
{
    return a->due < b->due || (a->due == b->due && a->seq < b->seq);
}

static void
heap_push(struct delayed *d, struct held h)
{
    if (d->n == d->cap) {
        d->cap = d->cap ? d->cap * 2 : 16;
        d->heap = xrealloc(d->heap, d->cap * sizeof(*d->heap));
    }
    size_t i = d->n++;
    while (i > 0 && before(&h, &d->heap[(i - 1) / 2])) {
        d->heap[i] = d->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    d->heap[i] = h;
}

static struct held
heap_pop(struct delayed *d)
{
    struct held top = d->heap[0], last = d->heap[--d->n];
    size_t i = 0;

    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= d->n)
            break;
        if (c + 1 < d->n && before(&d->heap[c + 1], &d->heap[c]))
            c++;
        if (!before(&d->heap[c], &last))
            break;
        d->heap[i] = d->heap[c];
        i = c;
    }
    if (d->n > 0)
        d->heap[i] = last;
    /* A drained backlog gives its memory back. */
    if (d->n == 0 && d->cap > 1024) {
        free(d->heap);
        d->heap = NULL;
        d->cap = 0;
    }
    return top;
}

/* ---- the timer ---- */

static void due_cb(evutil_socket_t fd, short what, void *arg);

static void
arm_at(struct delayed *d, int64_t at)
{
    if (d->armed && d->armed_for == at)
        return;
    if (d->timer == NULL)
        d->timer = evtimer_new(broker.base, due_cb, d);
    int64_t ms = at - mono_ms();
    if (ms < 0)
        ms = 0;
    struct timeval tv = { (time_t)(ms / 1000), (suseconds_t)(ms % 1000) * 1000 };
    evtimer_add(d->timer, &tv);
    d->armed = true;
    d->armed_for = at;
}

static void
arm(struct delayed *d)
{
    if (d->n > 0) {
        arm_at(d, d->heap[0].due);
    } else if (d->armed && d->timer) {
        evtimer_del(d->timer);
        d->armed = false;
    }
}

/*
 * Route one due message through its exchange, to the queues bound now.
 * Its routing and the end of its held entry are one transaction in the
 * store: recovery finds it either still held or routed.
 */
static void
route_due(struct delayed *d, struct held *h)
{
    /* Reused, as channel_route's: the loop thread is the only user. */
    static struct route_result rr;
    struct msg *routed = as_routed(h->m);
    /* Its time in a queue starts now, not when it was published. */
    routed->born = (uint32_t)now_ms();

    store_tx_begin();
    rr.n = 0;
    struct msg *out = exchange_route_msg(d->x, routed, &rr);
    for (size_t i = 0; i < rr.n; i++)
        (void)queue_push(rr.qs[i], out);
    if (h->stored)
        store_delay_release(d->x->sid, h->seq, h->m, true);
    (void)store_tx_end();
    if (out != routed)
        msg_unref(out);
    msg_unref(routed);
    msg_unref(h->m);
}

static void
due_cb(evutil_socket_t fd, short what, void *arg)
{
    struct delayed *d = arg;
    int64_t now = mono_ms();
    int n = 0;

    (void)fd;
    (void)what;
    d->armed = false;
    while (d->n > 0 && d->heap[0].due <= now) {
        if (n == DUE_PER_TURN) {
            arm_at(d, now);
            return;
        }
        /* Its publisher's confirm waits for its own record: routing it
         * before that is written would let the store drop the record
         * and the confirm go out before the routed copy is on disk. */
        if (d->heap[0].stored && !store_delay_ready(d->heap[0].m)) {
            arm_at(d, now + NOT_WRITTEN_RETRY_MS);
            return;
        }
        struct held h = heap_pop(d);
        total--;
        if (total < (uint64_t)broker.cfg.delayed_max_messages)
            bound_logged = false;
        route_due(d, &h);
        n++;
    }
    if (n > 0)
        alarm_check_memory();
    arm(d);
}

/* ---- holding ---- */

int
delayed_hold(struct exchange *x, struct msg *m, uint64_t delay)
{
    struct delayed *d = x->index;

    if (total >= (uint64_t)broker.cfg.delayed_max_messages) {
        if (!bound_logged) {
            bound_logged = true;
            log_warnx("delayed: %" PRIu64 " messages held "
                      "(delayed_message.max_messages): further delayed "
                      "publishes are refused (basic.nack in confirm mode, "
                      "dropped otherwise) until some fall due", total);
        }
        return -1;
    }
    struct held h = { 0 };
    /* mono_ms() is the millisecond begun, up to 1 ms before now: the
     * next one, or the message could be routed up to 1 ms early (the
     * restored ones are rounded up too) */
    h.due = mono_ms() + 1 + (int64_t)delay;
    h.due_wall = wall_ms() + delay;
    h.seq = d->next_seq++;
    h.m = msg_ref(m);
    h.stored = x->sid != 0 && store_delay_hold(x->sid, h.seq, m, h.due_wall);
    heap_push(d, h);
    total++;
    arm(d);
    return h.stored ? 1 : 0;
}

void
delayed_restore(struct exchange *x, uint64_t seq, uint64_t due_wall,
                struct msg *m)
{
    struct delayed *d = x->index;
    struct held h = { 0 };

    if (x->ops != &exchange_delayed_ops)
        fatalx("delayed: exchange '%s' is not x-delayed-message", x->name);
    /* Relative to now on both clocks, by one offset between them read
     * at the first message recovered, so that every one keeps its place
     * among the others (each reading of the two would differ by a
     * millisecond or so); a millisecond later, as both clocks are read
     * to the millisecond: never early. */
    static bool have_offset;
    static int64_t offset;
    if (!have_offset) {
        offset = mono_ms() - (int64_t)wall_ms();
        have_offset = true;
    }
    h.due = (int64_t)due_wall + offset + 1;
    h.due_wall = due_wall;
    h.seq = seq;
    h.stored = 1;
    h.m = msg_ref(m);
    heap_push(d, h);
    total++;
    delayed_note_seq(x, seq);
    arm(d);
}

void
delayed_note_seq(struct exchange *x, uint64_t seq)
{
    struct delayed *d = x->index;

    if (x->ops == &exchange_delayed_ops && seq >= d->next_seq)
        d->next_seq = seq + 1;
}

void
delayed_foreach_stored(void (*fn)(uint32_t sid, uint64_t seq,
                                  uint64_t due_wall, struct msg *m, void *arg),
                       void *arg)
{
    struct delayed *d;

    TAILQ_FOREACH(d, &all, link)
        for (size_t i = 0; i < d->n; i++)
            if (d->heap[i].stored)
                fn(d->x->sid, d->heap[i].seq, d->heap[i].due_wall,
                   d->heap[i].m, arg);
}

/* ---- the exchange type: the inner type's index ---- */

static void *
delayed_create(void)
{
    fatalx("delayed: created without its exchange");
}

static void *
delayed_create_for(struct exchange *x)
{
    struct delayed *d = xcalloc(1, sizeof(*d));
    struct amqp_field v;

    /* Declares are checked (delayed_check_args); anything else that
     * slipped through routes as direct, the plugin's usual inner type. */
    if (table_get(x->args, "x-delayed-type", &v) &&
        v.kind == AMQP_FIELD_LONGSTR)
        d->inner = exchange_ops_find(v.v.str);
    if (d->inner == NULL || d->inner == &exchange_delayed_ops) {
        log_warnx("delayed: exchange '%s' in vhost '%s' has no valid "
                  "x-delayed-type; it routes as direct", x->name, x->vh->name);
        d->inner = &exchange_direct_ops;
    }
    d->inner_index = d->inner->create_for ? d->inner->create_for(x)
                                          : d->inner->create();
    d->x = x;
    d->next_seq = 1;
    TAILQ_INSERT_TAIL(&all, d, link);
    return d;
}

/* The exchange is deleted (or the broker stops): what it holds goes,
 * and the store forgets it (its records are orphans once the exchange's
 * definition is gone). */
static void
delayed_destroy(void *index)
{
    struct delayed *d = index;

    for (size_t i = 0; i < d->n; i++) {
        struct held *h = &d->heap[i];
        if (h->stored)
            store_delay_release(d->x->sid, h->seq, h->m, false);
        msg_unref(h->m);
    }
    total -= d->n;
    if (d->n > 0)
        log_debug("delayed: exchange '%s' in vhost '%s' freed with %zu "
                 "held messages; they are dropped", d->x->name,
                 d->x->vh->name, d->n);
    TAILQ_REMOVE(&all, d, link);
    if (d->timer)
        event_free(d->timer);
    d->inner->destroy(d->inner_index);
    free(d->heap);
    free(d);
}

static int
delayed_add(void *index, struct binding *b, char *err, size_t errlen)
{
    struct delayed *d = index;
    return d->inner->add(d->inner_index, b, err, errlen);
}

static void
delayed_remove(void *index, struct binding *b)
{
    struct delayed *d = index;
    d->inner->remove(d->inner_index, b);
}

static void
delayed_route(void *index, const struct msg *m, struct route_ctx *rc)
{
    struct delayed *d = index;
    d->inner->route(d->inner_index, m, rc);
}

const struct exchange_ops exchange_delayed_ops = {
    .type = "x-delayed-message",
    .create = delayed_create,
    .destroy = delayed_destroy,
    .add = delayed_add,
    .remove = delayed_remove,
    .route = delayed_route,
    .create_for = delayed_create_for,
    .check_args = delayed_check_args,
    .holds_messages = true,
};
