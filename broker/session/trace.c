/*
 * SPDX-License-Identifier: Apache-2.0
 * The firehose. A trace copy is made on the slow path that re-encodes a
 * content header (reheader.h): the traced message's header is decoded,
 * the writer below turns its properties into the copy's headers table
 * and clears every other property, and the body is copied. The copy is
 * routed through amq.rabbitmq.trace like any publish, minus confirms,
 * mandatory and flow control, as RabbitMQ's rabbit_basic:publish does.
 *
 * The headers, in RabbitMQ 3.10's order and types (rabbit_trace.erl):
 * exchange_name, routing_keys (array of longstr), properties (table),
 * node; then for a publish vhost, connection, channel (signedint), user,
 * routed_queues (array of longstr), and for a delivery redelivered (0
 * or 1), vhost, connection, channel, user. 'properties' has the
 * message's properties that are set, last one first (cluster_id ...
 * content_type), integers as signedint, the headers as a table.
 */
#include "broker/session/trace.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "amqp/props.h"
#include "amqp/table.h"
#include "broker/core/broker.h"
#include "broker/core/delayed.h"
#include "broker/core/exchange.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/reheader.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/session/channel.h"
#include "broker/session/conn.h"
#include "broker/session/reply_to.h"

/* What one copy says besides the traced message itself. */
struct trace_copy {
    struct channel *ch;
    const struct msg *m;        /* its routing keys */
    bool publish;
    /* publish: where it went */
    struct queue *const *qs;
    size_t nq;
    /* deliver */
    bool redelivered;
};

/* ---- routing keys ---- */

/* The message's routing keys as RabbitMQ's basic_message has them: its
 * own, then the longstr entries of its CC and BCC headers. A new array
 * of *n (free it); the keys borrow the message. */
static struct amqp_bytes *
routing_keys(const struct msg *m, size_t *n)
{
    static const char *const hdrs[] = { "CC", "BCC" };
    struct amqp_table headers = msg_headers(m);
    struct amqp_field v, e;
    struct table_iter it;
    size_t cap = 1;

    for (size_t i = 0; i < NELEMS(hdrs); i++)
        if (table_get(headers, hdrs[i], &v) && v.kind == AMQP_FIELD_ARRAY)
            cap += array_count(v.v.array);
    struct amqp_bytes *keys = xmalloc(cap * sizeof(*keys));
    keys[0].ptr = (const uint8_t *)msg_rkey(m);
    keys[0].len = msg_rkey_len(m);
    *n = 1;
    for (size_t i = 0; i < NELEMS(hdrs); i++) {
        if (!table_get(headers, hdrs[i], &v) || v.kind != AMQP_FIELD_ARRAY)
            continue;
        array_iter_init(&it, v.v.array);
        while (array_next(&it, &e))
            if (e.kind == AMQP_FIELD_LONGSTR)
                keys[(*n)++] = e.v.str;
    }
    return keys;
}

/* Erlang's order of binaries: bytes, then the shorter first. */
static int
bytes_cmp(const void *pa, const void *pb)
{
    const struct amqp_bytes *a = pa, *b = pb;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = n ? memcmp(a->ptr, b->ptr, n) : 0;
    if (c != 0)
        return c;
    return a->len < b->len ? -1 : a->len > b->len;
}

/* Sort 'v' and drop repeats (lists:usort). The new count. */
static size_t
usort(struct amqp_bytes *v, size_t n)
{
    size_t k = 0;

    qsort(v, n, sizeof(*v), bytes_cmp);
    for (size_t i = 0; i < n; i++)
        if (k == 0 || bytes_cmp(&v[k - 1], &v[i]) != 0)
            v[k++] = v[i];
    return k;
}

/*
 * routed_queues, as rabbit_exchange:route answers: through the default
 * exchange, the routing keys themselves, sorted, without direct reply-to
 * addresses, whether or not such a queue exists; through any other, the
 * names of the queues reached, sorted.
 */
static struct amqp_bytes *
routed_queues(const struct trace_copy *t, size_t *n)
{
    struct amqp_bytes *v;
    size_t k = 0;

    if (msg_exchange_len(t->m) == 0) {
        v = routing_keys(t->m, n);
        for (size_t i = 0; i < *n; i++)
            if (!reply_to_is_address(v[i]))
                v[k++] = v[i];
    } else {
        v = xmalloc((t->nq + 1) * sizeof(*v));
        for (size_t i = 0; i < t->nq; i++) {
            v[k].ptr = (const uint8_t *)t->qs[i]->name;
            v[k++].len = t->qs[i]->name_len;
        }
    }
    *n = usort(v, k);
    return v;
}

/* ---- the headers of a copy ---- */

/* Erlang's <<V:32/signed>>: an integer that does not fit keeps its low
 * 32 bits, as RabbitMQ writes a signedint. */
static void
put_int(struct wire_wr *w, const char *key, uint64_t v)
{
    struct amqp_field f = { .kind = AMQP_FIELD_I32,
                            .v.i = (int32_t)(uint32_t)v };
    (void)table_put_key(w, amqp_cstr(key));
    field_put(w, &f);
}

/* An array of longstr under 'key'. An array's length prefix is a
 * table's: table_begin and table_end write it. */
static void
put_strs(struct wire_wr *w, const char *key, const struct amqp_bytes *v,
         size_t n)
{
    (void)table_put_key(w, amqp_cstr(key));
    wire_put_u8(w, AMQP_FIELD_ARRAY);
    size_t mark = table_begin(w);
    for (size_t i = 0; i < n; i++) {
        struct amqp_field f = { .kind = AMQP_FIELD_LONGSTR, .v.str = v[i] };
        field_put(w, &f);
    }
    table_end(w, mark);
}

/* The properties of rabbit_trace's 'properties', in its order: the
 * reverse of theirs in the content header (it builds the list by
 * prepending), and how each is written. */
enum prop_kind { PROP_STR, PROP_U8, PROP_U64, PROP_HEADERS };
#define PROP(f, name, kind) \
    { AMQP_BASIC_##f##_FLAG, #name, kind, \
      offsetof(struct amqp_basic_props, name) }
static const struct {
    uint16_t flag;
    const char *name;
    enum prop_kind kind;
    size_t off;
} props[] = {
    PROP(CLUSTER_ID, cluster_id, PROP_STR),
    PROP(APP_ID, app_id, PROP_STR),
    PROP(USER_ID, user_id, PROP_STR),
    PROP(TYPE, type, PROP_STR),
    PROP(TIMESTAMP, timestamp, PROP_U64),
    PROP(MESSAGE_ID, message_id, PROP_STR),
    PROP(EXPIRATION, expiration, PROP_STR),
    PROP(REPLY_TO, reply_to, PROP_STR),
    PROP(CORRELATION_ID, correlation_id, PROP_STR),
    PROP(PRIORITY, priority, PROP_U8),
    PROP(DELIVERY_MODE, delivery_mode, PROP_U8),
    PROP(HEADERS, headers, PROP_HEADERS),
    PROP(CONTENT_ENCODING, content_encoding, PROP_STR),
    PROP(CONTENT_TYPE, content_type, PROP_STR),
};
#undef PROP

/* 'properties': those set; integers as signedint, the headers as a
 * table without BCC, which no one may see. */
static void
put_properties(struct wire_wr *w, const struct amqp_basic_props *p)
{
    (void)table_put_key(w, amqp_cstr("properties"));
    wire_put_u8(w, AMQP_FIELD_TABLE);
    size_t mark = table_begin(w);
    for (size_t i = 0; i < NELEMS(props); i++) {
        const void *v = (const char *)p + props[i].off;
        if (!(p->flags & props[i].flag))
            continue;
        switch (props[i].kind) {
        case PROP_STR:
            (void)table_put_bytes(w, props[i].name,
                                  *(const struct amqp_bytes *)v);
            break;
        case PROP_U8:
            put_int(w, props[i].name, *(const uint8_t *)v);
            break;
        case PROP_U64:
            put_int(w, props[i].name, *(const uint64_t *)v);
            break;
        case PROP_HEADERS:
            (void)table_put_key(w, amqp_cstr(props[i].name));
            wire_put_u8(w, AMQP_FIELD_TABLE);
            wire_put_table_without(w, *(const struct amqp_table *)v, "BCC");
            break;
        }
    }
    table_end(w, mark);
}

/* The copy's headers (a reheader_fn): the traced message's properties
 * become 'properties', and the copy keeps no other property. */
static bool
copy_headers(struct wire_wr *w, struct content_header *h, void *arg)
{
    const struct trace_copy *t = arg;
    struct conn *c = t->ch->conn;
    struct amqp_bytes *v;
    size_t n;
    size_t outer = table_begin(w);

    struct amqp_bytes x = { (const uint8_t *)msg_exchange(t->m),
                            msg_exchange_len(t->m) };
    (void)table_put_bytes(w, "exchange_name", x);
    v = routing_keys(t->m, &n);
    put_strs(w, "routing_keys", v, n);
    free(v);
    put_properties(w, &h->props);
    (void)table_put_str(w, "node", broker_node_name());
    if (!t->publish)
        put_int(w, "redelivered", t->redelivered);
    (void)table_put_str(w, "vhost", c->vh->name);
    char name[160];
    conn_name(c, name, sizeof(name));
    (void)table_put_str(w, "connection", name);
    put_int(w, "channel", t->ch->number);
    (void)table_put_str(w, "user", c->user);
    if (t->publish) {
        v = routed_queues(t, &n);
        put_strs(w, "routed_queues", v, n);
        free(v);
    }
    table_end(w, outer);
    memset(&h->props, 0, sizeof(h->props));
    return true;
}

/* ---- the copy ---- */

/* Make the copy of 't->m' (content header 'hdr') for "KIND.NAME" and
 * route it through the vhost's amq.rabbitmq.trace. */
static void
emit(const struct trace_copy *t, const uint8_t *hdr, size_t hdr_len,
     const char *kind, const char *name, size_t name_len)
{
    struct vhost *vh = t->ch->conn->vh;
    struct exchange *x = vhost_exchange(vh, amqp_cstr(TRACE_EXCHANGE));
    char rkey[256];

    /* Nothing bound and no alternate: the copy would go nowhere, so it
     * is not made (tracing on with no one listening costs little). */
    if (x == NULL || (x->nbindings == 0 && x->alternate == NULL &&
                      x->policy_alternate == NULL))
        return;
    /* A routing key is a shortstr: "deliver." and a queue name of 255
     * bytes is cut to 255. */
    size_t k = strlen(kind);
    memcpy(rkey, kind, k);
    rkey[k++] = '.';
    if (name_len > sizeof(rkey) - 1 - k)
        name_len = sizeof(rkey) - 1 - k;
    memcpy(rkey + k, name, name_len);
    k += name_len;
    struct amqp_bytes xname = amqp_cstr(TRACE_EXCHANGE);
    struct amqp_bytes key = { (const uint8_t *)rkey, k };
    struct msg *copy = reheader_copy_header(t->m, hdr, hdr_len, copy_headers,
                                            (void *)t, &xname, &key);
    if (copy == NULL) {
        /* Its headers and ours over what a table may hold (16 MiB). */
        log_debug("trace: a message too large to trace was left out");
        return;
    }
    /* Its own route result: a copy pushed may start a delivery, which is
     * traced in turn. */
    struct route_result rr;
    route_result_init(&rr);
    exchange_route(x, copy, &rr);
    for (size_t i = 0; i < rr.n; i++)
        (void)queue_push(rr.qs[i], copy);
    route_result_free(&rr);
    msg_unref(copy);
}

/* RabbitMQ's trace/5 first clause: the firehose's own messages are not
 * traced. */
static bool
is_trace_message(const struct msg *m)
{
    return msg_exchange_len(m) == sizeof(TRACE_EXCHANGE) - 1 &&
           memcmp(msg_exchange(m), TRACE_EXCHANGE, msg_exchange_len(m)) == 0;
}

void
trace_publish(struct channel *ch, const struct msg *m,
              struct queue *const *qs, size_t n)
{
    struct trace_copy t = { .ch = ch, .m = m, .publish = true, .qs = qs,
                            .nq = n };

    if (is_trace_message(m))
        return;
    emit(&t, msg_hdr(m), msg_hdr_len(m), "publish", msg_exchange(m),
         msg_exchange_len(m));
}

void
trace_publish_held(struct channel *ch, struct msg *m)
{
    struct amqp_bytes xname = { (const uint8_t *)msg_exchange(m),
                                msg_exchange_len(m) };
    struct exchange *x = vhost_exchange(ch->conn->vh, xname);
    struct route_result rr;

    route_result_init(&rr);
    /* Where channel_route would send it now; a delayed one goes nowhere
     * yet, a reply is no queue's. */
    if (x != NULL && !x->is_default &&
        !(x->ops->holds_messages && delayed_delay(m) > 0)) {
        struct msg *out = exchange_route_msg(x, m, &rr);
        if (out != m)
            msg_unref(out);
    }
    trace_publish(ch, m, rr.qs, rr.n);
    route_result_free(&rr);
}

void
trace_deliver(struct channel *ch, const struct queue *q,
              const struct qentry *e, const uint8_t *hdr, size_t hdr_len)
{
    struct trace_copy t = { .ch = ch, .m = e->m,
                            .redelivered = e->redelivered };

    if (is_trace_message(e->m))
        return;
    emit(&t, hdr, hdr_len, "deliver", q->name, q->name_len);
}
