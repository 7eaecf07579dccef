/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of class basic: qos, consume, cancel, publish (and routing the
 * completed message), get, ack, nack, reject, recover. Reply codes and
 * texts follow RabbitMQ 3.x.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/alarm.h"
#include "broker/core/broker.h"
#include "broker/core/delayed.h"
#include "broker/core/exchange.h"
#include "broker/core/msg.h"
#include "broker/core/qargs.h"
#include "broker/core/queue.h"
#include "broker/core/reheader.h"
#include "broker/core/vhost.h"
#include "broker/lib/util.h"
#include "broker/session/conn.h"
#include "broker/session/handlers.h"
#include "broker/session/reply_to.h"
#include "broker/session/trace.h"

void
handle_basic_qos(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_basic_qos *a = &m->a.basic_qos;

    if (a->prefetch_size != 0) {
        /* As RabbitMQ: prefetch by size is not supported. */
        conn_fail(ch->conn, AMQP_NOT_IMPLEMENTED, AMQP_BASIC_QOS,
                  "prefetch_size!=0 (%u)", a->prefetch_size);
        return;
    }
    /* RabbitMQ's meaning: global=false limits each consumer created after
     * this call; global=true limits the whole channel. */
    if (a->global) {
        ch->prefetch_channel = a->prefetch_count;
        channel_resume(ch);
    } else {
        ch->prefetch_consumer = a->prefetch_count;
    }
    channel_reply(ch, AMQP_BASIC_QOS_OK, false);
}

static bool
has_exclusive_consumer(const struct queue *q)
{
    const struct consumer *c;
    TAILQ_FOREACH(c, &q->consumers, q_link)
        if (c->exclusive)
            return true;
    return false;
}

void
handle_basic_consume(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_basic_consume *a = &m->a.basic_consume;
    const uint32_t mid = AMQP_BASIC_CONSUME;
    struct queue *q;
    struct amqp_bytes tag = a->consumer_tag;
    char gen[64], esc[300];

    if (reply_to_is_pseudo(a->queue)) {
        reply_to_consume(ch, a);
        return;
    }
    if ((q = channel_find_queue(ch, mid, a->queue)) == NULL)
        return;
    if (tag.len == 0) {
        channel_gen_name(gen, sizeof(gen), "amq.ctag-");
        tag = amqp_cstr(gen);
    } else if (hmap_get(&ch->consumers, tag.ptr, tag.len)) {
        conn_fail(ch->conn, AMQP_NOT_ALLOWED, mid,
                  "attempt to reuse consumer tag '%s'",
                  channel_esc(esc, sizeof(esc), tag));
        return;
    }
    if (ch->consumers.count >= (size_t)broker.cfg.consumer_max_per_channel) {
        conn_fail(ch->conn, AMQP_NOT_ALLOWED, mid,
                  "reached maximum (%lld) of consumers per channel",
                  (long long)broker.cfg.consumer_max_per_channel);
        return;
    }
    /* A stream (RabbitMQ 3.10.8's checks and texts): acks are its
     * credit, the consumer's prefetch count; the exclusive flag is
     * ignored, as there. */
    if (q->ops->log) {
        if (a->no_ack) {
            channel_log_refuses(ch, mid, q, "automatic acknowledgement");
            return;
        }
        if (ch->prefetch_consumer == 0) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                         "consumer prefetch count is not set for 'queue "
                         "'%s' in vhost '%s''", q->name, ch->conn->vh->name);
            return;
        }
        static const char *const refused[] = {
            "x-priority", "x-cancel-on-ha-failover",
        };
        for (size_t i = 0; i < NELEMS(refused); i++) {
            struct amqp_field v;
            if (table_get(a->arguments, refused[i], &v)) {
                channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                             "invalid arg '%s' for queue '%s' in vhost '%s' "
                             "of queue type %s", refused[i], q->name,
                             ch->conn->vh->name, q->ops->rabbit_name);
                return;
            }
        }
    } else if (has_exclusive_consumer(q) ||
               (a->exclusive && q->nconsumers > 0)) {
        channel_fail(ch, AMQP_ACCESS_REFUSED, mid,
                     "queue '%s' in vhost '%s' in exclusive use", q->name,
                     ch->conn->vh->name);
        return;
    }
    /* x-priority, an integer of any width, as RabbitMQ checks it;
     * other consume arguments are ignored, as there. */
    struct amqp_field pv;
    int64_t priority = 0;
    if (table_get(a->arguments, "x-priority", &pv)) {
        char what[600], err[800];
        snprintf(what, sizeof(what), "queue '%s' in vhost '%s'", q->name,
                 ch->conn->vh->name);
        if (qargs_int(&pv, amqp_cstr("x-priority"), what, &priority, err,
                      sizeof(err)) != QARGS_OK) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
            return;
        }
    }
    struct consumer *c = xcalloc(1, sizeof(*c));
    c->q = q;
    c->priority = priority;
    c->ops = &channel_consumer_ops;
    c->ch = ch;
    c->tag = xstrndup(tag.ptr, tag.len);
    c->tag_len = tag.len;
    c->no_ack = a->no_ack;
    c->exclusive = a->exclusive;
    c->prefetch = ch->prefetch_consumer;
    c->refs = 1;   /* the channel's */
    if (a->arguments.len > 0) {
        /* kept for the management API (consumer_details' arguments)
         * and the queue type (attach may keep pointers into it) */
        uint8_t *buf = xmalloc(a->arguments.len);
        memcpy(buf, a->arguments.ptr, a->arguments.len);
        c->args = (struct amqp_table){ buf, a->arguments.len };
    }
    char err[800];
    if (q->ops->attach && !q->ops->attach(q, c, c->args, err, sizeof(err))) {
        consumer_unref(c);
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid, "%s", err);
        return;
    }
    hmap_put(&ch->consumers, c->tag, c->tag_len, c);
    queue_add_consumer(q, c);
    if (!a->nowait) {
        struct amqp_method ok = { .id = AMQP_BASIC_CONSUME_OK };
        ok.a.basic_consume_ok.consumer_tag = tag;
        channel_send(ch, &ok);
    }
    queue_dispatch(q);
}

void
handle_basic_cancel(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_basic_cancel *a = &m->a.basic_cancel;
    /* Copy the tag: cancelling may free the consumer that owns it, and the
     * reply echoes it. */
    uint8_t tag[256];
    size_t len = a->consumer_tag.len;
    memcpy(tag, a->consumer_tag.ptr, len);
    if (!reply_to_cancel(ch, a->consumer_tag))
        (void)channel_cancel_consumer(ch, a->consumer_tag);
    if (a->nowait)
        return;
    struct amqp_method ok = { .id = AMQP_BASIC_CANCEL_OK };
    ok.a.basic_cancel_ok.consumer_tag.ptr = tag;
    ok.a.basic_cancel_ok.consumer_tag.len = len;
    channel_send(ch, &ok);
}

/* The content that follows is the method table's business (M_CONTENT
 * in methods.c): once this returns with the channel open, the channel
 * awaits its header. */
void
handle_basic_publish(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_basic_publish *a = &m->a.basic_publish;
    const uint32_t mid = AMQP_BASIC_PUBLISH;
    struct exchange *x;
    char esc[300];

    if (a->immediate) {
        conn_fail(ch->conn, AMQP_NOT_IMPLEMENTED, mid, "immediate=true");
        return;
    }
    /* Look the exchange up now, as RabbitMQ does, so that the error names
     * the publish; the content frames that follow are then ignored. */
    if ((x = channel_find_exchange(ch, mid, a->exchange)) == NULL)
        return;
    if (x->internal) {
        channel_fail(ch, AMQP_ACCESS_REFUSED, mid,
                     "cannot publish to internal exchange '%s' in vhost '%s'",
                     channel_esc(esc, sizeof(esc), a->exchange),
                     ch->conn->vh->name);
        return;
    }
    /* The method's strings borrow the input frame: keep copies. */
    memcpy(ch->pub_buf, a->exchange.ptr, a->exchange.len);
    memcpy(ch->pub_buf + 256, a->routing_key.ptr, a->routing_key.len);
    ch->pub = *a;
    ch->pub.exchange.ptr = ch->pub_buf;
    ch->pub.routing_key.ptr = ch->pub_buf + 256;
    ch->pub_mandatory = a->mandatory;
    if (alarm_is_set())
        conn_block(ch->conn, alarm_reason());
}

/* ---- sender-selected distribution (CC, BCC) ---- */

static const char *const cc_bcc[] = { "CC", "BCC" };

bool
channel_check_cc_bcc(struct channel *ch, struct amqp_table headers)
{
    struct amqp_field v;
    for (size_t i = 0; i < NELEMS(cc_bcc); i++)
        if (table_get(headers, cc_bcc[i], &v) && v.kind != AMQP_FIELD_ARRAY) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, AMQP_BASIC_PUBLISH,
                         "invalid message: {unacceptable_type_in_header,"
                         "\"%s\",%s}", cc_bcc[i], qargs_type_atom(v.kind));
            return false;
        }
    return true;
}

/*
 * A publish to an x-delayed-message exchange with an x-delay to wait
 * (delayed.h): held, to be routed when due. So, as the issue asks, no
 * basic.return for mandatory: its route is not known yet. Its confirm
 * goes out once it is held: at once, or once the store has synced it
 * (a persistent message in a durable exchange); a nack if the bound
 * refused it. False if it routes now, as through its inner type.
 */
static bool
hold_delayed(struct channel *ch, struct exchange *x, struct msg *m,
             uint64_t seq)
{
    uint64_t delay = delayed_delay(m);

    if (delay == 0)
        return false;
    /* Routed nowhere yet, as the plugin's route answers. */
    if (trace_is_on(ch->conn->vh) && !ch->tx)
        trace_publish(ch, m, NULL, 0);
    int r = delayed_hold(x, m, delay);
    if (seq && r < 0)
        channel_confirm_nack(ch, seq);
    else if (seq)
        channel_confirm(ch, seq, r > 0 ? store_open_batch() : 0, m, NULL);
    alarm_check_memory();
    return true;
}

void
channel_route(struct channel *ch, struct msg *m, bool mandatory)
{
    struct amqp_bytes xname = { (const uint8_t *)msg_exchange(m),
                                msg_exchange_len(m) };
    struct vhost *vh = ch->conn->vh;
    struct exchange *x = vhost_exchange(vh, xname);
    /* Reused across publishes so that routing allocates nothing in the
     * steady state; the loop thread is the only user. */
    static struct route_result rr;
    uint64_t seq = ch->confirm ? ++ch->pub_seq : 0;

    rr.n = 0;
    struct msg *out = m;
    struct amqp_bytes rkey = { (const uint8_t *)msg_rkey(m), msg_rkey_len(m) };
    ch->ms.n[MS_PUBLISH]++;
    if (x)
        x->ms.n[MS_PUBLISH_IN]++;
    if (x && x->is_default && reply_to_is_address(rkey)) {
        /* A reply: straight to its requester, or nowhere. As RabbitMQ,
         * a mandatory one comes back as unroutable either way. */
        (void)reply_to_deliver(rkey, m);
        x = NULL;
    }
    if (x == NULL)
        ;   /* deleted while the content arrived */
    else if (x->ops->holds_messages && hold_delayed(ch, x, m, seq))
        return;
    else if (msg_cc_bcc(m))
        out = exchange_route_msg(x, m, &rr);
    else
        exchange_route(x, m, &rr);
    /* As RabbitMQ: traced once routed, before it reaches its queues (a
     * transaction's publishes were traced at basic.publish). */
    if (trace_is_on(vh) && !ch->tx)
        trace_publish(ch, m, rr.qs, rr.n);
    if (rr.n > 0)
        x->ms.n[MS_PUBLISH_OUT]++;
    else
        ch->ms.n[mandatory ? MS_RETURN_UNROUTABLE : MS_DROP_UNROUTABLE]++;
    if (rr.n == 0 && mandatory) {
        /* As RabbitMQ: the return goes out before the confirm. */
        struct amqp_method ret = { .id = AMQP_BASIC_RETURN };
        ret.a.basic_return.reply_code = AMQP_NO_ROUTE;
        ret.a.basic_return.reply_text = amqp_cstr("NO_ROUTE");
        ret.a.basic_return.exchange = xname;
        ret.a.basic_return.routing_key.ptr = (const uint8_t *)msg_rkey(m);
        ret.a.basic_return.routing_key.len = msg_rkey_len(m);
        channel_send_content(ch, &ret, m);
    }
    bool refused = false;
    struct queue *stored = NULL;
    for (size_t i = 0; i < rr.n; i++) {
        int r = queue_push(rr.qs[i], out);
        refused |= r < 0;
        if (r > 0 && stored == NULL)
            stored = rr.qs[i];
        if (queue_is_backed_up(rr.qs[i]))
            conn_flow(ch->conn);
    }
    /* A persistent message in a durable queue is confirmed once the store
     * has synced it; anything else at once. */
    if (seq && refused)
        channel_confirm_nack(ch, seq);
    else if (seq)
        channel_confirm(ch, seq, stored ? store_open_batch() : 0, out,
                        stored);
    if (out != m)
        msg_unref(out);
    alarm_check_memory();
}

static void get_run(struct channel *ch, struct queue *q, bool no_ack);

/* The head a basic.get waited for was read back (or its queue is gone):
 * answer, then handle the input that came after it. */
static void
get_ready(struct get_wait *w, struct queue *q)
{
    struct channel *ch = (struct channel *)((char *)w -
                                            offsetof(struct channel, get_w));
    if (q == NULL) {
        struct amqp_method m = { .id = AMQP_BASIC_GET_EMPTY };
        m.a.basic_get_empty.cluster_id = amqp_cstr("");
        channel_send(ch, &m);
    } else {
        get_run(ch, q, ch->get_no_ack);
    }
    if (ch->get_w.q == NULL)
        conn_release_input(ch->conn);
}

static void
get_run(struct channel *ch, struct queue *q, bool no_ack)
{
    struct qentry e;

    if (!queue_take(q, &e)) {
        if (queue_head_paged(q)) {
            /* Its message is being read: wait, reading nothing else. */
            ch->get_no_ack = no_ack;
            ch->get_w.ready = get_ready;
            queue_get_wait(q, &ch->get_w);
            conn_hold_input(ch->conn);
            return;
        }
        struct amqp_method m = { .id = AMQP_BASIC_GET_EMPTY };
        m.a.basic_get_empty.cluster_id = amqp_cstr("");
        channel_send(ch, &m);
        ch->ms.n[MS_GET_EMPTY]++;
        q->ms.n[MS_GET_EMPTY]++;
        return;
    }
    struct amqp_method m = { .id = AMQP_BASIC_GET_OK };
    struct amqp_basic_get_ok *g = &m.a.basic_get_ok;
    g->redelivered = e.redelivered;
    g->exchange.ptr = (const uint8_t *)msg_exchange(e.m);
    g->exchange.len = msg_exchange_len(e.m);
    g->routing_key.ptr = (const uint8_t *)msg_rkey(e.m);
    g->routing_key.len = msg_rkey_len(e.m);
    g->message_count = (uint32_t)q->len;
    uint64_t now = now_ms();
    channel_count_delivery(ch, q, &e, no_ack ? MS_GET_NO_ACK : MS_GET, now);
    if (no_ack) {
        g->delivery_tag = ch->next_tag++;
        channel_send_entry(ch, &m, q, &e);
        queue_ack(q, e);
    } else {
        g->delivery_tag = channel_track(ch, q, NULL, e, now);
        channel_send_entry(ch, &m, q, &e);
    }
}

void
handle_basic_get(struct channel *ch, const struct amqp_method *m)
{
    const struct amqp_basic_get *a = &m->a.basic_get;
    struct queue *q = channel_find_queue(ch, AMQP_BASIC_GET, a->queue);

    if (q == NULL)
        return;
    if (q->ops->log) {
        channel_log_refuses(ch, AMQP_BASIC_GET, q, "basic.get");
        return;
    }
    queue_touch(q);
    queue_expire(q);
    get_run(ch, q, a->no_ack);
}

static void
settle(struct channel *ch, uint32_t mid, uint64_t tag, bool multiple,
       bool ack, bool requeue)
{
    if (!channel_settle(ch, tag, multiple, ack, requeue))
        channel_fail(ch, AMQP_PRECONDITION_FAILED, mid,
                     "unknown delivery tag %" PRIu64, tag);
}

void
handle_basic_ack(struct channel *ch, const struct amqp_method *m)
{
    settle(ch, m->id, m->a.basic_ack.delivery_tag, m->a.basic_ack.multiple,
           true, false);
}

void
handle_basic_nack(struct channel *ch, const struct amqp_method *m)
{
    settle(ch, m->id, m->a.basic_nack.delivery_tag, m->a.basic_nack.multiple,
           false, m->a.basic_nack.requeue);
}

void
handle_basic_reject(struct channel *ch, const struct amqp_method *m)
{
    settle(ch, m->id, m->a.basic_reject.delivery_tag, false, false,
           m->a.basic_reject.requeue);
}

/* basic.recover and basic.recover-async: only recover has a reply. */
void
handle_basic_recover(struct channel *ch, const struct amqp_method *m)
{
    bool requeue = m->id == AMQP_BASIC_RECOVER
                       ? m->a.basic_recover.requeue
                       : m->a.basic_recover_async.requeue;

    if (!requeue) {
        /* As RabbitMQ 3.x. */
        conn_fail(ch->conn, AMQP_NOT_IMPLEMENTED, m->id, "requeue=false");
        return;
    }
    channel_requeue_all(ch);
    if (m->id == AMQP_BASIC_RECOVER)
        channel_reply(ch, AMQP_BASIC_RECOVER_OK, false);
}
