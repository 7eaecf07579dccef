/*
 * SPDX-License-Identifier: Apache-2.0
 * Channels: the frame state machine (methods, handed to methods.c, then
 * content header and bodies), deliveries and their acknowledgement, and
 * channel exceptions.
 */
#include "broker/session/channel.h"

#include <event2/buffer.h>
#include <event2/event.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

#include "amqp/frame.h"
#include "amqp/props.h"
#include "amqp/reply.h"
#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/msg.h"
#include "broker/core/qargs.h"
#include "broker/core/queue.h"
#include "broker/core/reheader.h"
#include "broker/core/stats.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"
#include "broker/session/machine.h"
#include "broker/session/methods.h"
#include "broker/session/reply_to.h"
#include "broker/session/trace.h"

/* A body at least this large that fits in one frame is lent by the input
 * block it arrives in instead of copied into the message (inbuf.h).
 * Smaller ones are copied: they would pin a block for little gain. */
#define BODY_LEND_MIN (16 * 1024)

static void content_uncharge(struct channel *ch);

/* ---- the channel's two machines (channel.h) ---- */

#define CH_AS_NAME(s) #s,
static const char *const channel_state_names[] = {
    CHANNEL_STATES(CH_AS_NAME)
};
static const char *const content_state_names[] = {
    CONTENT_STATES(CH_AS_NAME)
};
#undef CH_AS_NAME

#define TO(s) MACHINE_TO(s)
static const uint16_t channel_state_next[] = {
    [CH_OPEN] = TO(CH_CLOSING),
    [CH_CLOSING] = 0,               /* its close-ok frees it */
};

/* A publish's content: method, header, body frames; a released
 * channel drops what it had. */
static const uint16_t content_state_next[] = {
    [CA_IDLE] = TO(CA_AWAIT_HEADER),
    [CA_AWAIT_HEADER] = TO(CA_AWAIT_BODY) | TO(CA_IDLE),
    [CA_AWAIT_BODY] = TO(CA_IDLE),
};
#undef TO

static const struct machine channel_states = {
    "state", channel_state_names, channel_state_next
};
static const struct machine content_states = {
    "content", content_state_names, content_state_next
};

static void channel_log(struct channel *ch, enum log_level level,
                        const struct log_ids *about, const char *fmt, ...)
    LOG_PRINTF(4, 5);

/* Every setter's check and trace. */
static void
channel_move(struct channel *ch, const struct machine *m, unsigned from,
             unsigned to)
{
    if (!machine_allows(m, from, to))
        fatalx("channel %u: %s %s -> %s is not a transition", ch->number,
               m->name, m->states[from], m->states[to]);
    if (log_enabled(LOG_LVL_DEBUG))   /* no varargs call otherwise */
        channel_log(ch, LOG_LVL_DEBUG, NULL, "%s %s -> %s", m->name,
                    m->states[from], m->states[to]);
}

static void
channel_set_state(struct channel *ch, enum channel_state next)
{
    channel_move(ch, &channel_states, ch->state, next);
    ch->state = next;
}

static void
set_content(struct channel *ch, enum content_state next)
{
    channel_move(ch, &content_states, ch->content, next);
    ch->content = next;
}

struct channel *
channel_new(struct conn *c, uint16_t number)
{
    struct channel *ch = xcalloc(1, sizeof(*ch));
    ch->conn = c;
    ch->number = number;
    ch->state = CH_OPEN;
    ch->flow_active = true;
    ch->content = CA_IDLE;
    ch->next_tag = 1;
    hmap_init(&ch->consumers);
    stats_churn.channels_opened++;
    return ch;
}

static void
cancel_all_consumers(struct channel *ch)
{
    size_t pos = 0;
    struct hmap_slot *s;
    struct consumer **cs = xmalloc((ch->consumers.count + 1) * sizeof(*cs));
    size_t n = 0;

    while ((s = hmap_next(&ch->consumers, &pos)) != NULL)
        cs[n++] = s->val;
    hmap_destroy(&ch->consumers);
    hmap_init(&ch->consumers);
    for (size_t i = 0; i < n; i++) {
        queue_remove_consumer(cs[i]->q, cs[i]);
        consumer_unref(cs[i]);   /* the channel's */
    }
    free(cs);
}

/* Give up everything the channel holds: consumers first (so that
 * requeued messages are not dispatched back to them), then an open
 * transaction (its held acks undone), then unacked messages back to their
 * queues, then a half-received publish. */
static void
channel_release(struct channel *ch)
{
    reply_to_channel_gone(ch);
    queue_get_unwait(&ch->get_w);
    cancel_all_consumers(ch);
    channel_tx_rollback(ch);
    channel_requeue_all(ch);
    free(ch->tx_pubs);
    ch->tx_pubs = NULL;
    ch->tx_cap = 0;
    msg_unref(ch->pub_msg);
    ch->pub_msg = NULL;
    content_uncharge(ch);
    if (ch->content != CA_IDLE)
        set_content(ch, CA_IDLE);
}

void
channel_shutdown(struct channel *ch)
{
    if (ch->state == CH_OPEN)
        channel_set_state(ch, CH_CLOSING);
    channel_release(ch);
}

static struct pend_confirm *pend_at(const struct channel *ch, size_t i);

void
channel_free(struct channel *ch)
{
    if (ch == NULL)
        return;
    channel_release(ch);
    store_unwait(&ch->store_w);
    for (size_t i = 0; i < ch->pend_len; i++) {
        msg_unref(pend_at(ch, i)->m);
        if (pend_at(ch, i)->q)
            queue_unref(pend_at(ch, i)->q);
    }
    if (ch->conn->vh)
        vhost_channel_gone(ch->conn->vh, &ch->ms);
    stats_churn.channels_closed++;
    stats_series_free(&ch->series);
    free(ch->pend);
    free(ch->unacked);
    if (ch->cto_timer != NULL)
        event_free(ch->cto_timer);
    msg_env_cache_clear(&ch->envs);
    hmap_destroy(&ch->consumers);
    free(ch);
}

void
channel_send(struct channel *ch, const struct amqp_method *m)
{
    conn_send_method(ch->conn, ch->number, m);
}

void
channel_reply(struct channel *ch, uint32_t id, bool nowait)
{
    if (nowait)
        return;
    struct amqp_method m = { .id = id };
    channel_send(ch, &m);
}

void
channel_fail(struct channel *ch, uint16_t code, uint32_t method_id,
             const char *fmt, ...)
{
    char text[256];
    va_list ap;

    if (ch->state == CH_CLOSING)
        return;
    va_start(ap, fmt);
    reply_format(text, sizeof(text), code, fmt, ap);
    va_end(ap);
    channel_log(ch, LOG_LVL_INFO, NULL, "closing channel: %s", text);

    struct amqp_method m = { .id = AMQP_CHANNEL_CLOSE };
    m.a.channel_close.reply_code = code;
    m.a.channel_close.reply_text = amqp_cstr(text);
    m.a.channel_close.class_id = method_class(method_id);
    m.a.channel_close.method_id = method_index(method_id);
    channel_send(ch, &m);
    channel_set_state(ch, CH_CLOSING);
    channel_release(ch);
}

/* The ids of a log line about 'ch' (log.h): its connection's (its name
 * in 'name', as conn_log_ids) and its number. */
static void
channel_log_ids(struct channel *ch, struct log_ids *ids, char *name,
                size_t len)
{
    conn_log_ids(ch->conn, ids, name, len);
    ids->channel = ch->number;
}

static void
channel_log(struct channel *ch, enum log_level level,
            const struct log_ids *about, const char *fmt, ...)
{
    struct log_ids ids;
    va_list ap;

    char name[160];
    if (!log_enabled(level))
        return;
    channel_log_ids(ch, &ids, name, sizeof(name));
    if (about != NULL) {
        ids.queue = about->queue;
        ids.message_id = about->message_id;
    }
    va_start(ap, fmt);
    log_eventv(level, &ids, fmt, ap);
    va_end(ap);
}

const char *
channel_esc(char *buf, size_t len, struct amqp_bytes name)
{
    return log_escape(buf, len, name.ptr, name.len);
}

void
channel_gen_name(char *out, size_t outlen, const char *prefix)
{
    static const char b64[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    uint8_t rnd[22];
    size_t n = strlen(prefix);

    if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd))
        fatal("getrandom");
    if (outlen < n + sizeof(rnd) + 1)
        fatalx("name buffer too small");
    memcpy(out, prefix, n);
    for (size_t i = 0; i < sizeof(rnd); i++)
        out[n + i] = b64[rnd[i] & 63];
    out[n + sizeof(rnd)] = '\0';
}

void
channel_set_last_queue(struct channel *ch, const char *name, size_t len)
{
    if (len >= sizeof(ch->last_queue))
        len = sizeof(ch->last_queue) - 1;
    memcpy(ch->last_queue, name, len);
    ch->last_queue[len] = '\0';
    ch->last_queue_len = len;
}

struct amqp_bytes
channel_last_queue(const struct channel *ch)
{
    return (struct amqp_bytes){ (const uint8_t *)ch->last_queue,
                                ch->last_queue_len };
}

struct exchange *
channel_find_exchange(struct channel *ch, uint32_t method_id,
                      struct amqp_bytes name)
{
    char esc[300];
    struct exchange *x = vhost_exchange(ch->conn->vh, name);
    if (x == NULL)
        channel_fail(ch, AMQP_NOT_FOUND, method_id,
                     "no exchange '%s' in vhost '%s'",
                     channel_esc(esc, sizeof(esc), name), ch->conn->vh->name);
    return x;
}

struct queue *
channel_find_queue(struct channel *ch, uint32_t method_id,
                   struct amqp_bytes name)
{
    char esc[300];
    struct queue *q;

    if (name.len == 0)
        name = channel_last_queue(ch);
    q = vhost_queue(ch->conn->vh, name);
    if (q == NULL) {
        channel_fail(ch, AMQP_NOT_FOUND, method_id, "no queue '%s' in vhost '%s'",
                     channel_esc(esc, sizeof(esc), name), ch->conn->vh->name);
        return NULL;
    }
    if (q->exclusive && q->owner != ch->conn) {
        channel_fail(ch, AMQP_RESOURCE_LOCKED, method_id,
                     "cannot obtain exclusive access to locked queue '%s' in "
                     "vhost '%s'. It could be originally declared on another "
                     "connection or the exclusive property value does not "
                     "match that of the original declaration.",
                     channel_esc(esc, sizeof(esc), name), ch->conn->vh->name);
        return NULL;
    }
    return q;
}

/* ---- deliveries and acknowledgements ---- */

static struct unacked *
ua_at(const struct channel *ch, size_t i)
{
    return &ch->unacked[(ch->ua_head + i) & (ch->ua_cap - 1)];
}

/*
 * The consumer timeout. As in RabbitMQ, a delivery that waits for its
 * ack longer than its queue's x-consumer-timeout, or else than
 * consumer_timeout, closes its channel with 406 (closing requeues every
 * unacked message), and only the channel's oldest unacked delivery is
 * looked at. RabbitMQ looks once a minute; Roost keeps one timer per
 * channel, armed for the oldest delivery's deadline, and so closes the
 * channel within a few milliseconds of it. Acks leave the timer alone:
 * when it fires after its delivery was settled, it is armed again for
 * the delivery that is now the oldest, or not at all if none is left.
 * A delivery thus costs a timestamp, and one evtimer_add when the timer
 * is idle; an ack costs nothing.
 */

/* The timeout of deliveries from 'q' in ms; 0: none. */
static uint64_t
cto_of(const struct queue *q)
{
    int64_t t = q->qa.consumer_timeout >= 0 ? q->qa.consumer_timeout
                                            : broker.cfg.consumer_timeout;
    return t > 0 ? (uint64_t)t : 0;
}

static void cto_fire(evutil_socket_t fd, short what, void *arg);

static void
cto_arm(struct channel *ch, uint64_t ms)
{
    if (broker.base == NULL)
        return;             /* unit tests without an event loop */
    if (ms > 86400000)
        ms = 86400000;      /* a longer timeout is looked at again daily */
    if (ch->cto_timer == NULL)
        ch->cto_timer = evtimer_new(broker.base, cto_fire, ch);
    struct timeval tv = { .tv_sec = (time_t)(ms / 1000),
                          .tv_usec = (suseconds_t)(ms % 1000) * 1000 };
    evtimer_add(ch->cto_timer, &tv);
    ch->cto_armed = true;
}

/* The oldest delivery still waiting: the front of the ring, past those
 * an open transaction has settled (RabbitMQ takes them off at once). */
static struct unacked *
cto_oldest(const struct channel *ch)
{
    for (size_t i = 0; i < ch->ua_len; i++) {
        struct unacked *u = ua_at(ch, i);
        if (u->e.m != NULL && u->tx_op == TX_NONE)
            return u;
    }
    return NULL;
}

static void
cto_fire(evutil_socket_t fd, short what, void *arg)
{
    struct channel *ch = arg;
    (void)fd;
    (void)what;

    ch->cto_armed = false;
    if (ch->state != CH_OPEN)
        return;
    struct unacked *u = cto_oldest(ch);
    if (u == NULL)
        return;
    uint64_t t = cto_of(u->q), waited = now_ms() - u->at;
    if (t == 0) {
        /* Its queue has no timeout: it shields the younger ones, as the
         * oldest does in RabbitMQ, until it is settled; look again in a
         * second. */
        cto_arm(ch, 1000);
        return;
    }
    if (waited < t) {
        cto_arm(ch, t - waited);
        return;
    }
    char tag[300], qname[300], mid[300];
    log_escape(qname, sizeof(qname), u->q->name, u->q->name_len);
    struct log_ids ids = { .queue = qname,
                           .message_id = msg_log_id(u->e.m, mid,
                                                    sizeof(mid)) };
    channel_log(ch, LOG_LVL_WARN, &ids, "%s%s%s on queue '%s' has timed out "
                "waiting for delivery acknowledgement (%" PRIu64 " ms)",
                u->c ? "consumer '" : "basic.get",
                u->c ? log_escape(tag, sizeof(tag), u->c->tag, u->c->tag_len)
                     : "", u->c ? "'" : "", qname, t);
    /* RabbitMQ's text (rabbit_channel.erl), with no class or method. */
    channel_fail(ch, AMQP_PRECONDITION_FAILED, 0,
                 "delivery acknowledgement on channel %u timed out. Timeout "
                 "value used: %" PRIu64 " ms. This timeout value can be "
                 "configured, see consumers doc guide to learn more",
                 ch->number, t);
}

uint64_t
channel_track(struct channel *ch, struct queue *q, struct consumer *c,
              struct qentry e, uint64_t now)
{
    uint64_t tag = ch->next_tag++;

    if (ch->ua_len == ch->ua_cap)
        ring_grow(&ch->unacked, sizeof(*ch->unacked), &ch->ua_cap,
                  &ch->ua_head, ch->ua_len);
    struct unacked *u = ua_at(ch, ch->ua_len++);
    u->tag = tag;
    u->tx_op = TX_NONE;
    u->e = e;
    u->q = queue_ref(q);
    u->c = c;
    u->at = now;
    if (c) {
        c->refs++;
        c->unacked++;
    }
    ch->ua_live++;
    if (!ch->cto_armed) {
        uint64_t t = cto_of(q);
        if (t != 0)
            cto_arm(ch, t);
    }
    return tag;
}

/* Index of the entry with 'tag', or ua_len if none. Tags increase along
 * the ring, and are contiguous unless no-ack deliveries took some numbers
 * in between: so look where a contiguous ring would have it first (O(1),
 * the common case), and search only if that misses. */
static size_t
ua_find(const struct channel *ch, uint64_t tag)
{
    size_t lo = 0, hi = ch->ua_len;

    if (ch->ua_len == 0)
        return 0;
    uint64_t first = ua_at(ch, 0)->tag;
    if (tag >= first && tag - first < ch->ua_len &&
        ua_at(ch, (size_t)(tag - first))->tag == tag) {
        lo = (size_t)(tag - first);
        hi = lo;
    }
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ua_at(ch, mid)->tag < tag)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (lo < ch->ua_len && ua_at(ch, lo)->tag == tag && ua_at(ch, lo)->e.m &&
        ua_at(ch, lo)->tx_op == TX_NONE)
        return lo;
    return ch->ua_len;
}

/* An ack of 'u', by the client: its processing time runs from its
 * delivery to the read that brought the ack. */
static void
count_ack(struct channel *ch, const struct unacked *u)
{
    ch->ms.n[MS_ACK]++;
    u->q->ms.n[MS_ACK]++;
    hist_observe(queue_hist(u->q, HIST_PROCESSING),
                 ch->conn->last_recv_ms - u->at);
}

/* Settle one delivery: requeue it, dead-letter it (rejected), or drop
 * it (acked). */
static void
settle_one(struct channel *ch, struct unacked *u, bool requeue, bool rejected)
{
    struct qentry e = u->e;
    u->e.m = NULL;
    u->tx_op = TX_NONE;
    if (!requeue && !rejected)
        count_ack(ch, u);
    if (u->c && u->q->ops->settle_by)
        u->q->ops->settle_by(u->q, u->c, e, requeue);   /* a stream's */
    else if (rejected && !requeue)
        queue_reject(u->q, e);
    else if (requeue && rejected)
        queue_retry(u->q, e);
    else if (requeue)
        queue_requeue(u->q, e);
    else
        queue_ack(u->q, e);
    if (u->c) {
        u->c->unacked--;
        consumer_unref(u->c);
        u->c = NULL;
    }
    ch->ua_live--;
}

/*
 * The distinct queues that got messages back or whose consumers got credit,
 * to dispatch once settling is over. Each holds a reference, so a queue
 * deleted meanwhile, whose last reference was an unacked delivery, stays
 * valid until then.
 */
struct qset {
    struct queue **v;
    size_t n, cap;
};

static void
qset_add(struct qset *s, struct queue *q)
{
    for (size_t k = 0; k < s->n; k++)
        if (s->v[k] == q)
            return;
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 8;
        s->v = xrealloc(s->v, s->cap * sizeof(*s->v));
    }
    s->v[s->n++] = queue_ref(q);
}

static void
qset_dispatch(struct qset *s)
{
    for (size_t k = 0; k < s->n; k++) {
        queue_dispatch(s->v[k]);
        queue_unref(s->v[k]);
    }
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

/* Drop settled entries from the front, then dispatch the queues that got
 * messages back or whose consumers got credit. */
static void
settle_done(struct channel *ch, struct qset *touched)
{
    while (ch->ua_len > 0 && ua_at(ch, 0)->e.m == NULL) {
        queue_unref(ua_at(ch, 0)->q);
        ch->ua_head = (ch->ua_head + 1) & (ch->ua_cap - 1);
        ch->ua_len--;
    }
    qset_dispatch(touched);
    if (ch->state == CH_OPEN)
        channel_resume(ch);
}

bool
channel_settle(struct channel *ch, uint64_t tag, bool multiple, bool ack,
               bool requeue)
{
    size_t first, last;
    struct qset touched = { 0 };

    if (multiple && tag == 0) {
        if (ch->ua_len == 0)
            return true;
        first = 0;
        last = ch->ua_len - 1;
    } else {
        size_t i = ua_find(ch, tag);
        if (i == ch->ua_len)
            return false;
        first = multiple ? 0 : i;
        last = i;
    }
    for (size_t i = first; i <= last; i++) {
        struct unacked *u = ua_at(ch, i);
        if (u->e.m == NULL || u->tx_op != TX_NONE)
            continue;
        if (ch->tx) {
            /* Held until tx.commit; tx.rollback forgets it. */
            u->tx_op = ack ? TX_ACK : requeue ? TX_REQUEUE : TX_DROP;
            continue;
        }
        if (!ack && requeue)
            qset_add(&touched, u->q);
        settle_one(ch, u, !ack && requeue, !ack);
    }
    settle_done(ch, &touched);
    return true;
}

void
channel_requeue_all(struct channel *ch)
{
    struct qset touched = { 0 };

    for (size_t i = 0; i < ch->ua_len; i++) {
        struct unacked *u = ua_at(ch, i);
        /* An ack, nack or reject an open transaction holds is settled
         * by its commit (or undone by its rollback), as in RabbitMQ. */
        if (u->e.m == NULL || u->tx_op != TX_NONE)
            continue;
        qset_add(&touched, u->q);
        settle_one(ch, u, true, false);
    }
    settle_done(ch, &touched);
}

/* Whether the consumer's channel could take another delivery, leaving
 * out whether its connection's output is congested: open, not stopped by
 * channel.flow, under its prefetch limits. */
static bool
channel_has_credit(const struct channel *ch, const struct consumer *c)
{
    if (ch->state != CH_OPEN || !ch->flow_active ||
        ch->conn->state != CONN_OPEN)
        return false;
    if (c->no_ack)
        return true;
    if (c->prefetch && c->unacked >= c->prefetch)
        return false;
    if (ch->prefetch_channel && ch->ua_live >= ch->prefetch_channel)
        return false;
    return true;
}

/* Whether the consumer's channel can take another delivery now. */
static bool
channel_can_deliver(const struct channel *ch, const struct consumer *c)
{
    return ch->conn->output == CONN_OUTPUT_FLOWING &&
           channel_has_credit(ch, c);
}

static void
lend_to_conn(void *arg, const uint8_t *data, size_t len, struct inblock *b,
             struct msg *m)
{
    conn_output_lend(arg, data, len, b, m);
}

/* 'method', the content header 'hdr', and the message's body frames. */
static void
send_content(struct channel *ch, const struct amqp_method *m,
             struct msg *msg, const uint8_t *hdr, size_t hdr_len)
{
    struct conn *c = ch->conn;
    struct evbuffer *out = conn_output(c);
    uint8_t buf[1024];
    struct wire_wr w;
    size_t chunk = c->frame_max - AMQP_FRAME_OVERHEAD;

    conn_send_method(c, ch->number, m);
    wire_wr_init(&w, buf, sizeof(buf));
    frame_put_header(&w, AMQP_FRAME_HEADER, ch->number, (uint32_t)hdr_len);
    evbuffer_add(out, buf, w.len);
    evbuffer_add(out, hdr, hdr_len);
    evbuffer_add(out, "\xCE", 1);
    for (uint64_t off = 0; off < msg->body_len; off += chunk) {
        size_t n = (size_t)(msg->body_len - off < chunk ? msg->body_len - off
                                                        : chunk);
        wire_wr_init(&w, buf, sizeof(buf));
        frame_put_header(&w, AMQP_FRAME_BODY, ch->number, (uint32_t)n);
        evbuffer_add(out, buf, w.len);
        msg_body_out(msg, out, off, n, lend_to_conn, c);
        evbuffer_add(out, "\xCE", 1);
    }
    conn_output_added(c);
}

void
channel_log_refuses(struct channel *ch, uint32_t method_id,
                    const struct queue *q, const char *what)
{
    conn_fail(ch->conn, AMQP_NOT_IMPLEMENTED, method_id,
              "%s not supported by stream queues queue '%s' in vhost '%s'",
              what, q->name, ch->conn->vh->name);
}

void
channel_send_content(struct channel *ch, const struct amqp_method *m,
                     struct msg *msg)
{
    send_content(ch, m, msg, msg_hdr(msg), msg_hdr_len(msg));
}

/* A header a delivery sets: x-delivery-count, or a stream's
 * x-stream-offset, to a signed 64-bit value. */
struct set_header {
    const char *key;
    int64_t value;
};

/* The headers with arg's key set to its value (reheader.h); every other
 * entry as it was. */
static bool
set_headers(struct wire_wr *w, struct content_header *h, void *arg)
{
    const struct set_header *sh = arg;
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field v, n = { .kind = AMQP_FIELD_I64, .v.i = sh->value };
    size_t outer = table_begin(w);

    if (h->props.flags & AMQP_BASIC_HEADERS_FLAG) {
        table_iter_init(&it, h->props.headers);
        while (table_next(&it, &k, &v)) {
            if (amqp_bytes_eq(k, sh->key))
                continue;
            (void)table_put_key(w, k);
            field_put(w, &v);
        }
    }
    (void)table_put_key(w, amqp_cstr(sh->key));
    field_put(w, &n);
    table_end(w, outer);
    return true;
}

void
channel_send_entry(struct channel *ch, const struct amqp_method *m,
                   const struct queue *q, const struct qentry *e)
{
    /* A quorum queue, or one with a delivery limit, shows how often the
     * message came back, as RabbitMQ's quorum queues do (0 the first
     * time): the one delivery path that re-encodes the header. */
    if (q->qa.delivery_limited || q->ops->counts_deliveries ||
        q->ops->log) {
        /* a stream's delivery says its offset, as RabbitMQ's */
        struct set_header sh = { "x-stream-offset", (int64_t)e->seq };
        if (!q->ops->log) {
            sh.key = "x-delivery-count";
            sh.value = e->deliveries > 0 ? (int64_t)e->deliveries - 1 : 0;
        }
        size_t len;
        uint8_t *hdr = reheader(e->m, set_headers, &sh, &len);
        if (hdr != NULL) {
            send_content(ch, m, e->m, hdr, len);
            /* The firehose sees the count, as RabbitMQ's sees the
             * header its quorum queue added. */
            if (trace_is_on(q->vh))
                trace_deliver(ch, q, e, hdr, len);
            free(hdr);
            return;
        }
        /* A table at the codec's bound has no room for one more entry:
         * it goes as it came. */
    }
    /* The test comes first, so that the common case stays a tail call:
     * the firehose's copy follows the delivery, as RabbitMQ's
     * record_sent does, so a copy consumed on the same connection comes
     * after it. */
    if (trace_is_on(q->vh)) {
        channel_send_content(ch, m, e->m);
        trace_deliver(ch, q, e, msg_hdr(e->m), msg_hdr_len(e->m));
        return;
    }
    channel_send_content(ch, m, e->m);
}

static inline void
count_delivery(struct channel *ch, struct queue *q, const struct qentry *e,
               int kind, uint64_t now)
{
    ch->ms.n[kind]++;
    ch->ms.n[MS_REDELIVER] += e->redelivered;
    queue_count_delivery(q, e->redelivered, e->born, kind, now);
}

void
channel_count_delivery(struct channel *ch, struct queue *q,
                       const struct qentry *e, int kind, uint64_t now)
{
    count_delivery(ch, q, e, kind, now);
}

/* Deliver 'e' from 'q' to consumer 'c' (basic.deliver). Takes over the
 * entry's message reference. */
static void
channel_deliver(struct channel *ch, struct consumer *c, struct queue *q,
                struct qentry e)
{
    struct amqp_method m = { .id = AMQP_BASIC_DELIVER };
    struct amqp_basic_deliver *d = &m.a.basic_deliver;

    d->consumer_tag.ptr = (const uint8_t *)c->tag;
    d->consumer_tag.len = c->tag_len;
    d->redelivered = e.redelivered;
    d->exchange.ptr = (const uint8_t *)msg_exchange(e.m);
    d->exchange.len = msg_exchange_len(e.m);
    d->routing_key.ptr = (const uint8_t *)msg_rkey(e.m);
    d->routing_key.len = msg_rkey_len(e.m);
    /* A no-ack delivery needs the clock only for time in queue: the
     * loop's will do (an acked one reads it for the consumer timeout). */
    uint64_t now = c->no_ack ? loop_ms : now_ms();
    count_delivery(ch, q, &e, c->no_ack ? MS_DELIVER_NO_ACK : MS_DELIVER,
                   now);
    if (c->no_ack) {
        d->delivery_tag = ch->next_tag++;
        channel_send_entry(ch, &m, q, &e);
        queue_ack(q, e);
    } else {
        d->delivery_tag = channel_track(ch, q, c, e, now);
        channel_send_entry(ch, &m, q, &e);
    }
}

/* ---- the queue's side of a consumer (struct consumer_ops) ---- */

static bool
consumer_can_take(const struct consumer *c)
{
    return channel_can_deliver(c->ch, c);
}

static bool
consumer_backs_up(const struct consumer *c)
{
    return channel_has_credit(c->ch, c) &&
           conn_is_draining_slowly(c->ch->conn);
}

static void
consumer_deliver(struct consumer *c, struct queue *q, struct qentry e)
{
    channel_deliver(c->ch, c, q, e);
}

static void channel_consumer_cancelled(struct channel *ch,
                                       struct consumer *c);

static void
consumer_cancelled(struct consumer *c)
{
    channel_consumer_cancelled(c->ch, c);
}

const struct consumer_ops channel_consumer_ops = {
    .can_take = consumer_can_take,
    .backs_up = consumer_backs_up,
    .deliver = consumer_deliver,
    .cancelled = consumer_cancelled,
};

void
channel_foreach_consumer(struct channel *ch,
                         void (*fn)(struct consumer *c, void *arg), void *arg)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&ch->consumers, &pos)) != NULL) {
        struct consumer *c = s->val;
        if (!c->cancelled)
            fn(c, arg);
    }
}

void
channel_info(const struct channel *ch, struct channel_info *out)
{
    memset(out, 0, sizeof(*out));
    out->consumers = (uint32_t)ch->consumers.count;
    out->unacked = ch->ua_live;
    out->unconfirmed = ch->confirm ? ch->pub_seq - ch->acked : 0;
    out->uncommitted = ch->tx_npubs;
    out->series = ch->series;
}

/* Tell the client its consumer was cancelled by the broker (queue deleted)
 * when it announced consumer_cancel_notify. Forgets the consumer. */
static void
channel_consumer_cancelled(struct channel *ch, struct consumer *c)
{
    if (hmap_del(&ch->consumers, c->tag, c->tag_len) == NULL)
        return;
    if (ch->conn->cap_consumer_cancel_notify && ch->state == CH_OPEN) {
        struct amqp_method m = { .id = AMQP_BASIC_CANCEL };
        m.a.basic_cancel.consumer_tag.ptr = (const uint8_t *)c->tag;
        m.a.basic_cancel.consumer_tag.len = c->tag_len;
        m.a.basic_cancel.nowait = true;
        channel_send(ch, &m);
    }
    consumer_unref(c);
}

bool
channel_cancel_consumer(struct channel *ch, struct amqp_bytes tag)
{
    struct consumer *c = hmap_del(&ch->consumers, tag.ptr, tag.len);
    if (c == NULL)
        return false;
    struct queue *q = queue_ref(c->q);
    queue_remove_consumer(q, c);
    consumer_unref(c);
    /* What waited for it (a single active consumer's queue) goes to the
     * next consumer now. (A channel that closes requeues its deliveries
     * first, which dispatches.) */
    queue_dispatch(q);
    queue_unref(q);
    return true;
}

void
channel_foreach_unacked(struct channel *ch,
                        void (*fn)(struct queue *q, struct qentry *e,
                                   void *arg), void *arg)
{
    for (size_t i = 0; i < ch->ua_len; i++) {
        struct unacked *u = ua_at(ch, i);
        if (u->e.m != NULL)
            fn(u->q, &u->e, arg);
    }
}

void
channel_resume(struct channel *ch)
{
    size_t pos = 0;
    struct hmap_slot *slot;

    /* Dispatch only delivers: it neither cancels consumers nor deletes
     * queues, so the consumer map stays as it is while iterated. Runs after
     * every ack, so it allocates nothing. */
    while ((slot = hmap_next(&ch->consumers, &pos)) != NULL)
        queue_dispatch(((struct consumer *)slot->val)->q);
}

/* ---- publisher confirms and transactions ---- */

static struct pend_confirm *
pend_at(const struct channel *ch, size_t i)
{
    return &ch->pend[(ch->pend_head + i) & (ch->pend_cap - 1)];
}

static void
confirm_dirty(struct channel *ch)
{
    if (!ch->confirm_dirty) {
        ch->confirm_dirty = true;
        conn_confirm_dirty(ch->conn, ch->number);
    }
}

/* One ack or nack for 'seq' alone, out of order. */
static void
confirm_one(struct channel *ch, uint32_t id, uint64_t seq)
{
    struct amqp_method m = { .id = id };
    if (id == AMQP_BASIC_ACK) {
        ch->ms.n[MS_CONFIRM]++;
        m.a.basic_ack.delivery_tag = seq;
    } else {
        m.a.basic_nack.delivery_tag = seq;
        /* Meaningless to a publisher; RabbitMQ sends true (its record's
         * default), so Roost does too. */
        m.a.basic_nack.requeue = true;
    }
    if (ch->state == CH_OPEN)
        channel_send(ch, &m);
}

/*
 * The confirms of a channel (docs/architecture.md, "A publish, end to
 * end", step 9). 'acked' is the frontier: every publish up to it has
 * been told. Publishes that need no disk are told with one multiple ack
 * at the end of each read, as before the store. Once one publish waits
 * for the store, it and every publish after it go into the ring 'pend'
 * in order: one that needs no disk is told at once, alone ('told'); the
 * others wait. As the store reports batches durable, the ring is emptied
 * from the front, and each run of untold publishes is told with one ack
 * naming its last tag, multiple when the run is longer than one: no ack
 * ever names a tag already told, or covers one it did not have to.
 */

/* Tell the run of untold publishes that ends at 'end' (after 'acked'). */
static void
ack_run(struct channel *ch, uint64_t end)
{
    if (end <= ch->acked)
        return;
    ch->ms.n[MS_CONFIRM] += end - ch->acked;
    if (ch->state == CH_OPEN) {
        struct amqp_method m = { .id = AMQP_BASIC_ACK };
        m.a.basic_ack.delivery_tag = end;
        m.a.basic_ack.multiple = end - ch->acked > 1;
        channel_send(ch, &m);
    }
    ch->acked = end;
}

/* Empty the ring from the front as far as batch 'durable' allows. */
static void
release_confirms(struct channel *ch, uint64_t durable)
{
    uint64_t run = 0, now = 0;

    /* Publishes before the ring were routed and need no disk. */
    if (ch->pend_len > 0 && pend_at(ch, 0)->seq - 1 > ch->acked)
        run = pend_at(ch, 0)->seq - 1;
    while (ch->pend_len > 0 &&
           (pend_at(ch, 0)->told || pend_at(ch, 0)->batch <= durable)) {
        struct pend_confirm e = *pend_at(ch, 0);
        ch->pend_head = (ch->pend_head + 1) & (ch->pend_cap - 1);
        ch->pend_len--;
        if (e.q) {
            if (!e.told && e.m->born) {
                if (now == 0)
                    now = now_ms();
                hist_observe(queue_hist(e.q, HIST_CONFIRM),
                             (uint32_t)((uint32_t)now - e.m->born));
            }
            queue_unref(e.q);
        }
        msg_unref(e.m);
        if (e.told) {
            ack_run(ch, run);
            run = 0;
            if (e.seq > ch->acked)
                ch->acked = e.seq;
        } else {
            run = e.seq;
        }
    }
    ack_run(ch, run);
    if (ch->pend_len > 0)
        store_wait(&ch->store_w, pend_at(ch, 0)->batch);
}

static void
confirms_durable(struct store_waiter *w)
{
    struct channel *ch = (struct channel *)((char *)w -
                                            offsetof(struct channel, store_w));
    release_confirms(ch, w->batch);
}

/*
 * Messages consumed and acked before their batch went to disk are never
 * written (store_msg_unneeded): their publishes need no disk any more
 * and are told now, those at the front of the ring in its runs, the
 * others alone.
 */
static void
confirms_recheck(struct store_waiter *w)
{
    struct channel *ch = (struct channel *)((char *)w -
                                            offsetof(struct channel, store_w));
    uint64_t from = store_recheck_batch();
    size_t marked = 0;

    /* Only publishes of batches not yet written can be such: they are
     * at the back of the ring. */
    for (size_t i = ch->pend_len; i-- > 0;) {
        struct pend_confirm *e = pend_at(ch, i);
        if (e->batch && e->batch < from)
            break;
        if (!e->told && e->m && store_msg_unneeded(e->m)) {
            e->batch = 0;
            marked++;
        }
    }
    if (marked == 0)
        return;
    release_confirms(ch, store_durable_batch());
    for (size_t i = ch->pend_len; i-- > 0;) {
        struct pend_confirm *e = pend_at(ch, i);
        if (e->batch && e->batch < from)
            break;
        if (!e->told && e->batch == 0) {
            e->told = true;
            confirm_one(ch, AMQP_BASIC_ACK, e->seq);
        }
    }
}

static void
pend_push(struct channel *ch, uint64_t seq, uint64_t batch, bool told,
          struct msg *m, struct queue *q)
{
    if (ch->pend_len == ch->pend_cap)
        ring_grow(&ch->pend, sizeof(*ch->pend), &ch->pend_cap,
                  &ch->pend_head, ch->pend_len);
    *pend_at(ch, ch->pend_len++) =
        (struct pend_confirm){ seq, batch, told, m ? msg_ref(m) : NULL,
                               q ? queue_ref(q) : NULL };
}

void
channel_confirm(struct channel *ch, uint64_t seq, uint64_t batch,
                struct msg *m, struct queue *q)
{
    /* Publishes are routed in order: the highest routed only grows. */
    if (seq > ch->confirmed)
        ch->confirmed = seq;
    /* Already consumed and acked: it will never be written. */
    if (batch && store_msg_unneeded(m))
        batch = 0;
    if (batch == 0 && ch->pend_len == 0) {
        confirm_dirty(ch);
        return;
    }
    if (batch == 0) {
        /* Needs no disk, behind one that does: tell it alone, now. */
        pend_push(ch, seq, 0, true, NULL, NULL);
        confirm_one(ch, AMQP_BASIC_ACK, seq);
        return;
    }
    pend_push(ch, seq, batch, false, m, q);
    if (ch->pend_len == 1 || !ch->store_w.waiting) {
        ch->store_w.durable = confirms_durable;
        ch->store_w.recheck = confirms_recheck;
        store_wait(&ch->store_w, pend_at(ch, 0)->batch);
    }
}

void
channel_confirm_nack(struct channel *ch, uint64_t seq)
{
    if (seq > ch->confirmed)
        ch->confirmed = seq;
    if (ch->pend_len > 0) {
        pend_push(ch, seq, 0, true, NULL, NULL);
        confirm_one(ch, AMQP_BASIC_NACK, seq);
        return;
    }
    /* Everything before it first, then the nack: the frontier passes. */
    ack_run(ch, seq - 1);
    confirm_one(ch, AMQP_BASIC_NACK, seq);
    ch->acked = seq;
}

void
channel_flush_confirms(struct channel *ch)
{
    ch->confirm_dirty = false;
    /* Everything before the first publish in the ring. */
    ack_run(ch, ch->pend_len ? pend_at(ch, 0)->seq - 1 : ch->confirmed);
}

/* The publish that just completed its content: held by an open
 * transaction, or routed now (and confirmed in confirm mode). */
static void
channel_publish(struct channel *ch, struct msg *msg, bool mandatory)
{
    if (!ch->tx) {
        channel_route(ch, msg, mandatory);
        return;
    }
    if (trace_is_on(ch->conn->vh))
        trace_publish_held(ch, msg);
    if (ch->tx_npubs == ch->tx_cap) {
        ch->tx_cap = ch->tx_cap ? ch->tx_cap * 2 : 16;
        ch->tx_pubs = xrealloc(ch->tx_pubs, ch->tx_cap * sizeof(*ch->tx_pubs));
    }
    ch->tx_pubs[ch->tx_npubs].m = msg_ref(msg);
    ch->tx_pubs[ch->tx_npubs].mandatory = mandatory;
    ch->tx_npubs++;
    ch->tx_bytes += msg->body_len;
}

bool
channel_tx_commit(struct channel *ch)
{
    struct qset touched = { 0 };

    /* One transaction in the store: recovery applies all of it or none.
     * Publishes first, in order, then the settlements. */
    store_tx_begin();
    for (size_t i = 0; i < ch->tx_npubs; i++) {
        channel_route(ch, ch->tx_pubs[i].m, ch->tx_pubs[i].mandatory);
        msg_unref(ch->tx_pubs[i].m);
    }
    ch->tx_npubs = 0;
    ch->tx_bytes = 0;
    for (size_t i = 0; i < ch->ua_len; i++) {
        struct unacked *u = ua_at(ch, i);
        if (u->e.m == NULL || u->tx_op == TX_NONE)
            continue;
        bool requeue = u->tx_op == TX_REQUEUE;
        bool rejected = u->tx_op == TX_DROP || requeue;
        if (requeue)
            qset_add(&touched, u->q);
        settle_one(ch, u, requeue, rejected);
    }
    bool stored = store_tx_end();
    settle_done(ch, &touched);
    return stored;
}

void
channel_tx_rollback(struct channel *ch)
{
    for (size_t i = 0; i < ch->tx_npubs; i++)
        msg_unref(ch->tx_pubs[i].m);
    ch->tx_npubs = 0;
    ch->tx_bytes = 0;
    for (size_t i = 0; i < ch->ua_len; i++)
        ua_at(ch, i)->tx_op = TX_NONE;
}

/* ---- frames ---- */

/*
 * We sent channel.close: only its close-ok ends the channel. A close
 * from the client that crossed ours is answered with close-ok and the
 * channel still waits for the client's close-ok, as in RabbitMQ; a
 * channel.open is 504 there too; anything else is dropped.
 */
static void
closing_frame(struct channel *ch, const struct frame *f)
{
    struct amqp_method m;

    if (f->type != AMQP_FRAME_METHOD ||
        method_decode(f->payload, f->size, &m) != AMQP_OK)
        return;
    if (m.id == AMQP_CHANNEL_CLOSE_OK) {
        conn_channel_closed(ch->conn, ch->number);
        channel_free(ch);
    } else if (m.id == AMQP_CHANNEL_CLOSE) {
        struct amqp_method ok = { .id = AMQP_CHANNEL_CLOSE_OK };
        channel_send(ch, &ok);
    } else if (m.id == AMQP_CHANNEL_OPEN) {
        handle_channel_open(ch, &m);
    }
}

void
channel_await_content(struct channel *ch)
{
    set_content(ch, CA_AWAIT_HEADER);
}

/* The unfinished content's bytes, as its connection bounds them: a
 * large body's frames as they arrive (a small one, under BODY_LEND_MIN,
 * is allocated whole with its header: at most that much a channel). */
static void
content_charge(struct channel *ch, uint64_t n)
{
    ch->pub_charged += n;
    conn_content_grew(ch->conn, (int64_t)n);
}

static void
content_uncharge(struct channel *ch)
{
    if (ch->pub_charged == 0)
        return;
    conn_content_grew(ch->conn, -(int64_t)ch->pub_charged);
    ch->pub_charged = 0;
}

static void
header_frame(struct channel *ch, const struct frame *f)
{
    struct content_header h;
    enum amqp_status st = content_header_decode(f->payload, f->size, &h);

    if (st == AMQP_E_HEADER_CLASS) {
        conn_fail(ch->conn, AMQP_UNEXPECTED_FRAME, AMQP_BASIC_PUBLISH,
                  "expected content header for class 60, got one for class "
                  "%u instead", wire_load16(f->payload));
        return;
    }
    if (st != AMQP_OK) {
        conn_fail(ch->conn, status_reply_code(st), AMQP_BASIC_PUBLISH,
                  "cannot decode content header: %s", status_text(st));
        return;
    }
    if (h.body_size > (uint64_t)broker.cfg.max_message_size) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                     "message size %" PRIu64 " is larger than configured max "
                     "size %" PRId64, h.body_size,
                     broker.cfg.max_message_size);
        return;
    }
    if ((h.props.flags & AMQP_BASIC_EXPIRATION_FLAG) &&
        qargs_parse_expiration(h.props.expiration) == -2) {
        char esc[300];
        channel_fail(ch, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                     "invalid expiration '%s': no_integer",
                     channel_esc(esc, sizeof(esc), h.props.expiration));
        return;
    }
    if ((h.props.flags & AMQP_BASIC_USER_ID_FLAG) &&
        !auth_may_claim(ch->conn->user, h.props.user_id)) {
        char esc[300];
        channel_fail(ch, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                     "user_id property set to '%s' but authenticated user "
                     "was '%s'", channel_esc(esc, sizeof(esc),
                                             h.props.user_id),
                     ch->conn->user);
        return;
    }
    if ((h.props.flags & AMQP_BASIC_HEADERS_FLAG) &&
        !channel_check_cc_bcc(ch, h.props.headers))
        return;
    /* A large body arrives later: lent by its block if it comes in one
     * frame, else in an allocation that grows with what arrived, so an
     * announced size costs nothing until it is sent. */
    bool lendable = h.body_size >= BODY_LEND_MIN;
    /* Direct reply-to: reply_to names the channel's address instead. */
    if ((h.props.flags & AMQP_BASIC_REPLY_TO_FLAG) &&
        reply_to_is_pseudo(h.props.reply_to)) {
        uint8_t *hdr;
        size_t len;
        struct content_header nh;
        if (!reply_to_rewrite(ch, &h, f->payload, f->size, &hdr, &len))
            return;
        (void)content_header_decode(hdr, len, &nh);
        ch->pub_msg = msg_new(ch->pub.exchange, ch->pub.routing_key, hdr, len,
                              &nh, lendable, NULL);
        free(hdr);
    } else {
        ch->pub_msg = msg_new(ch->pub.exchange, ch->pub.routing_key,
                              f->payload, f->size, &h, lendable, &ch->envs);
    }
    /* Born when its header was read: the read's clock, no clock read. */
    ch->pub_msg->born = (uint32_t)ch->conn->last_recv_ms;
    ch->pub_filled = 0;
    set_content(ch, CA_AWAIT_BODY);
    if (h.body_size == 0) {
        struct msg *m = ch->pub_msg;
        ch->pub_msg = NULL;
        set_content(ch, CA_IDLE);
        channel_publish(ch, m, ch->pub_mandatory);
        msg_unref(m);
    }
}

static void
body_frame(struct channel *ch, const struct frame *f)
{
    struct msg *m = ch->pub_msg;

    if (f->size > m->body_len - ch->pub_filled) {
        conn_fail(ch->conn, AMQP_FRAME_ERROR, AMQP_BASIC_PUBLISH,
                  "content body of %" PRIu64 " bytes exceeds the announced "
                  "body size %" PRIu32, ch->pub_filled + f->size, m->body_len);
        return;
    }
    /* A body in one frame is lent and complete at once: nothing waits. */
    if (f->size < m->body_len)
        content_charge(ch, f->size);
    /* The whole body in one frame is lent, not copied (inbuf.h). */
    msg_body_frame(m, conn_input_block(ch->conn), f->payload, f->size,
                   ch->pub_filled);
    ch->pub_filled += f->size;
    if (ch->pub_filled == m->body_len) {
        content_uncharge(ch);
        ch->pub_msg = NULL;
        set_content(ch, CA_IDLE);
        channel_publish(ch, m, ch->pub_mandatory);
        msg_unref(m);
    }
}

void
channel_frame(struct channel *ch, const struct frame *f)
{
    struct amqp_method m;

    if (ch->state == CH_CLOSING) {
        closing_frame(ch, f);
        return;
    }
    switch (ch->content) {
    case CA_AWAIT_HEADER:
        if (f->type != AMQP_FRAME_HEADER) {
            conn_fail(ch->conn, AMQP_UNEXPECTED_FRAME, AMQP_BASIC_PUBLISH,
                      "expected content header for class 60, got non content "
                      "header frame instead");
            return;
        }
        header_frame(ch, f);
        return;
    case CA_AWAIT_BODY:
        if (f->type != AMQP_FRAME_BODY) {
            conn_fail(ch->conn, AMQP_UNEXPECTED_FRAME, AMQP_BASIC_PUBLISH,
                      "expected content body, got non content body frame "
                      "instead");
            return;
        }
        body_frame(ch, f);
        return;
    case CA_IDLE:
        break;
    }
    if (f->type != AMQP_FRAME_METHOD) {
        conn_fail(ch->conn, AMQP_UNEXPECTED_FRAME, 0,
                  "expected method frame, got non method frame instead");
        return;
    }
    enum amqp_status st = method_decode(f->payload, f->size, &m);
    if (st != AMQP_OK) {
        conn_fail_decode(ch->conn, f, st);
        return;
    }
    methods_channel(ch, &m);
}
