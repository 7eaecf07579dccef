/*
 * SPDX-License-Identifier: Apache-2.0
 * Queues, exchanges and bindings in the management API, as RabbitMQ
 * 3.10's rabbit_mgmt_wm_queue*.erl, _exchange*.erl and _binding*.erl
 * answer them: lists and objects in its JSON shapes, read through the
 * modules' read functions (queue_info, vhost_foreach_queue,
 * exchange_foreach_binding, ...); and what RabbitMQ does over a direct
 * AMQP connection (declare, delete, purge, bind, unbind, publish, get,
 * the aliveness test) done the same way, through mgmt_amqp.h, so that every check and error
 * text is the AMQP one.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amqp/reply.h"
#include "amqp/table.h"
#include "amqp/wire.h"
#include "broker/core/broker.h"
#include "broker/core/exchange.h"
#include "broker/core/policy.h"
#include "broker/core/queue.h"
#include "broker/core/stats.h"
#include "broker/core/vhost.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/util.h"
#include "broker/mgmt/mgmt_amqp.h"
#include "broker/mgmt/mgmt_int.h"
#include "broker/session/channel.h"
#include "broker/session/conn.h"
#include "tls/hash.h"

static const char *const by_vhost_name[] = { "vhost", "name", NULL };

static json_t *
bytes_str(const char *s, size_t n)
{
    return defs_json_str(s, n);
}

/* ---- queues ---- */

static json_t *
drops_json(const uint64_t *n)
{
    json_t *o = json_object();
    for (int i = 0; i < DROP_COUNT; i++)
        json_object_set_new(o, drop_reason_names[i],
                            json_integer((json_int_t)n[i]));
    return o;
}

static json_t *
policy_name_json(const struct policy *p)
{
    return p ? mgmt_str(p->name) : json_null();
}

static json_t *
consumer_json(struct consumer *c, bool with_queue)
{
    char name[160], chname[180];
    struct conn *cn = c->ch->conn;
    conn_name(cn, name, sizeof(name));
    snprintf(chname, sizeof(chname), "%s (%u)", name, c->ch->number);
    json_t *cd = json_pack("{s:o, s:o, s:s, s:i, s:o}", "connection_name",
                           mgmt_str(name), "name", mgmt_str(chname), "node",
                           broker_node_name(), "number", c->ch->number,
                           "user", mgmt_str(cn->user ? cn->user : ""));
    mgmt_set_addr(cd, "peer_host", "peer_port", cn->peer);
    json_t *o = json_pack(
        "{s:o, s:o, s:b, s:b, s:s, s:o, s:b, s:I}",
        "arguments", defs_json_table(c->args), "channel_details", cd,
        "ack_required", !c->no_ack, "active", 1, "activity_status", "up",
        "consumer_tag", bytes_str(c->tag, c->tag_len), "exclusive",
        c->exclusive, "prefetch_count", (json_int_t)c->prefetch);
    if (c->q->ops->log)
        mgmt_stream_consumer_json(o, c);
    if (with_queue)
        json_object_set_new(o, "queue",
                            json_pack("{s:o, s:o}", "name",
                                      bytes_str(c->q->name, c->q->name_len),
                                      "vhost", mgmt_str(c->q->vh->name)));
    return o;
}

json_t *
mgmt_consumer_json(struct consumer *c)
{
    return consumer_json(c, true);
}

static void
add_consumer(struct consumer *c, void *arg)
{
    json_array_append_new(arg, consumer_json(c, true));
}

/* A queue's JSON; 'hr': the history a queue's own page asks for, or
 * NULL. */
static json_t *
queue_json(struct queue *q, bool detail, const struct mgmt_history_req *hr)
{
    struct queue_info qi;
    queue_info(q, &qi);
    const struct policy *pol = policy_for_queue(q, POLICY_USER);
    const struct policy *op = policy_for_queue(q, POLICY_OPERATOR);
    uint64_t msgs = qi.ready + qi.unacked;
    json_t *o = json_pack(
        "{s:o, s:b, s:b, s:b, s:s, s:o, s:o, s:s, s:s, s:o, s:o, s:n, s:n,"
        " s:n, s:n, s:I}",
        "name", bytes_str(q->name, q->name_len), "durable", q->durable,
        "auto_delete", q->auto_delete, "exclusive", q->exclusive, "node",
        broker_node_name(), "vhost", mgmt_str(q->vh->name), "arguments",
        defs_json_table(q->args), "type", q->ops->type, "state",
        "running", "policy", policy_name_json(pol), "operator_policy",
        policy_name_json(op), "exclusive_consumer_tag",
        "single_active_consumer_tag", "recoverable_slaves",
        "head_message_timestamp", "consumers", (json_int_t)qi.consumers);
    json_object_set_new(o, "effective_policy_definition",
                        pol ? json_deep_copy(pol->definition) : json_object());
    mgmt_set_count(o, "messages", msgs, stats_rate(qi.series, QS_MESSAGES));
    mgmt_set_count(o, "messages_ready", qi.ready,
                   stats_rate(qi.series, QS_READY));
    mgmt_set_count(o, "messages_unacknowledged", qi.unacked,
                   stats_rate(qi.series, QS_UNACKED));
    json_object_set_new(o, "messages_ram",
                        json_integer((json_int_t)(msgs - qi.paged)));
    json_object_set_new(o, "messages_ready_ram",
                        json_integer((json_int_t)(qi.ready - qi.paged)));
    json_object_set_new(o, "messages_unacknowledged_ram",
                        json_integer((json_int_t)qi.unacked));
    json_object_set_new(o, "messages_paged_out",
                        json_integer((json_int_t)qi.paged));
    json_object_set_new(o, "message_bytes",
                        json_integer((json_int_t)(qi.bytes_ready +
                                                  qi.bytes_unacked)));
    json_object_set_new(o, "message_bytes_ready",
                        json_integer((json_int_t)qi.bytes_ready));
    json_object_set_new(o, "message_bytes_unacknowledged",
                        json_integer((json_int_t)qi.bytes_unacked));
    json_object_set_new(o, "message_bytes_paged_out",
                        json_integer((json_int_t)qi.bytes_paged));
    json_object_set_new(o, "message_bytes_ram",
                        json_integer((json_int_t)(qi.bytes_ready +
                                                  qi.bytes_unacked -
                                                  qi.bytes_paged)));
    json_object_set_new(o, "messages_persistent",
                        json_integer((json_int_t)qi.persistent));
    json_object_set_new(o, "message_bytes_persistent",
                        json_integer((json_int_t)qi.bytes_persistent));
    json_object_set_new(o, "memory", json_integer((json_int_t)qi.memory));
    json_object_set_new(o, "consumer_utilisation",
                        qi.utilisation < 0 ? json_null()
                                           : json_real(qi.utilisation));
    json_object_set_new(o, "consumer_capacity",
                        qi.utilisation < 0 ? json_integer(0)
                                           : json_real(qi.utilisation));
    json_object_set_new(o, "message_stats",
                        mgmt_msg_stats(qi.ms, MS_KEYS_QUEUE, qi.series));
    /* Roost's own: lag, retry back-off, what was let go */
    json_object_set_new(o, "head_message_age",
                        qi.head_age_ms < 0
                            ? json_null()
                            : json_real((double)qi.head_age_ms / 1000.0));
    json_object_set_new(o, "messages_waiting",
                        json_integer((json_int_t)qi.waiting));
    json_object_set_new(o, "dead_lettered", drops_json(qi.dead_lettered));
    json_object_set_new(o, "dropped", drops_json(qi.dropped));
    if (q->ops->log) {
        json_object_set_new(o, "stream", mgmt_stream_json(q));
        json_object_set_new(o, "consumer_offsets",
                            mgmt_stream_offsets_json(q));
    }
    if (detail) {
        json_t *cs = json_array();
        queue_foreach_consumer(q, add_consumer, cs);  /* with "queue", as
                                                       * RabbitMQ's */
        json_object_set_new(o, "consumer_details", cs);
        json_object_set_new(o, "deliveries", json_array());
        json_object_set_new(o, "incoming", json_array());
    }
    if (hr) {
        uint64_t now[HC_COUNT];
        stats_history_values(qi.ms, qi.ready, qi.unacked, qi.dead_lettered,
                             qi.dropped, now);
        mgmt_add_history(o, json_object_get(o, "message_stats"), qi.history,
                         now, hr);
    }
    return o;
}

struct list {
    struct mgmt_req *r;
    json_t *arr;
};

/* The queue list: references, rendered a slice at a time
 * (mgmt_reply_items). */
struct qrefs {
    struct mgmt_req *r;
    void **v;
    size_t n, cap;
};

static void
ref_queue(struct queue *q, void *arg)
{
    struct qrefs *l = arg;
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = queue_ref(q);
}

static void
ref_vhost_queues(struct vhost *vh, void *arg)
{
    struct qrefs *l = arg;
    if (mgmt_is_visible_vhost(l->r->user, vh->name))
        vhost_foreach_queue(vh, ref_queue, l);
}

static json_t *
render_queue(void *item)
{
    struct queue *q = item;
    return q->deleted ? NULL : queue_json(q, false, NULL);
}

static void
release_queue(void *item)
{
    queue_unref(item);
}

static bool
queue_sort_key(void *item, const char *key, const char **str, double *num)
{
    struct queue *q = item;
    struct queue_info qi;
    *str = NULL;
    if (strcmp(key, "name") == 0) {
        *str = q->name;
        return true;
    }
    if (strcmp(key, "vhost") == 0) {
        *str = q->deleted ? "" : q->vh->name;
        return true;
    }
    queue_info(q, &qi);
    if (strcmp(key, "messages") == 0)
        *num = (double)(qi.ready + qi.unacked);
    else if (strcmp(key, "messages_ready") == 0)
        *num = (double)qi.ready;
    else if (strcmp(key, "messages_unacknowledged") == 0)
        *num = (double)qi.unacked;
    else if (strcmp(key, "consumers") == 0)
        *num = (double)qi.consumers;
    else if (strcmp(key, "memory") == 0)
        *num = (double)qi.memory;
    else if (strcmp(key, "message_bytes") == 0)
        *num = (double)(qi.bytes_ready + qi.bytes_unacked);
    else if (strcmp(key, "head_message_age") == 0)
        *num = (double)qi.head_age_ms;
    else
        return false;
    return true;
}

static const struct mgmt_list_ops queue_list_ops = {
    render_queue, release_queue, queue_sort_key,
};


void
mgmt_queues(struct mgmt_req *r)
{
    struct qrefs l = { r, NULL, 0, 0 };
    if (r->arg[0] != NULL) {
        struct vhost *vh = mgmt_req_vhost(r);
        if (vh == NULL)
            return;
        vhost_foreach_queue(vh, ref_queue, &l);
    } else {
        vhost_foreach(ref_vhost_queues, &l);
    }
    mgmt_reply_items(r, l.v, l.n, &queue_list_ops, by_vhost_name);
    free(l.v);
}

static struct queue *
find_queue(struct vhost *vh, const char *name)
{
    return vhost_queue(vh, amqp_cstr(name));
}

static struct exchange *
find_exchange(struct vhost *vh, const char *name)
{
    /* amq.default names the default exchange in paths, as in RabbitMQ */
    if (strcmp(name, "amq.default") == 0)
        name = "";
    return vhost_exchange(vh, amqp_cstr(name));
}

/* ---- over AMQP: the answer ---- */

/*
 * The answer to a channel.close or connection.close, as RabbitMQ's
 * management plugin turns them into HTTP: 404 not_found (the text as
 * sent), 403 ACCESS_REFUSED as 401 not_authorised, the others 400
 * bad_request with the text after "CODE - ".
 */
static void
amqp_error(struct mgmt_req *r, int code, const char *text)
{
    const char *dash = strstr(text, " - ");
    const char *reason = dash ? dash + 3 : text;
    if (code == -1)
        mgmt_error(r, 500, "timeout", text);
    else if (code == MGMT_AMQP_TOO_BIG)
        mgmt_bad_request(r, "%s", text);
    else if (code == 404)
        mgmt_error(r, 404, "not_found", text);
    else if (code == 403)
        mgmt_error(r, 401, "not_authorised", "Access refused.");
    else
        mgmt_error(r, 400, "bad_request", reason);
}

/* A session for 'r' as its user in 'vh'. */
static struct mgmt_amqp *
session(struct mgmt_req *r, struct vhost *vh)
{
    return mgmt_amqp_open(mgmt_user_name(r), vh);
}

struct pending {
    struct mgmt_req *r;         /* deferred */
    int ok_code;                /* answered when every reply came */
    json_t *ok_body;
    /* for get: the options */
    int count;
    bool ack, requeue, base64_always;
    long truncate;
    bool routed_check;
};

static struct pending *
pending_new(struct mgmt_req *r, int ok_code)
{
    struct pending *p = xcalloc(1, sizeof(*p));
    p->r = mgmt_defer(r);
    p->ok_code = ok_code;
    return p;
}

static void
pending_end(struct pending *p, struct mgmt_amqp *s)
{
    mgmt_req_free(p->r);
    json_decref(p->ok_body);
    free(p);
    mgmt_amqp_free(s);
}

static void
simple_done(struct mgmt_amqp *s, void *arg)
{
    struct pending *p = arg;
    const char *text;
    int err = mgmt_amqp_error(s, &text);
    if (err != 0)
        amqp_error(p->r, err, text);
    else if (p->ok_body)
        mgmt_reply(p->r, p->ok_code, json_incref(p->ok_body));
    else
        mgmt_reply(p->r, p->ok_code, NULL);
    pending_end(p, s);
}

/* ---- a body's options ---- */

/* A boolean option: absent gives 'def'; JSON true/false or the strings
 * "true"/"false" (rabbitmqadmin sends both). -1 if it is neither. */
static int
opt_bool(json_t *o, const char *key, bool def)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v))
        return def;
    if (json_is_boolean(v))
        return json_is_true(v);
    if (json_is_string(v) && strcmp(json_string_value(v), "true") == 0)
        return 1;
    if (json_is_string(v) && strcmp(json_string_value(v), "false") == 0)
        return 0;
    return -1;
}

/* "arguments" as an encoded table in '*buf' (freed by the caller). */
static int
opt_table(struct mgmt_req *r, json_t *o, const char *key, uint8_t **buf,
          struct amqp_table *t)
{
    json_t *v = json_object_get(o, key);
    struct wire_wr w;
    *buf = NULL;
    *t = (struct amqp_table){ NULL, 0 };
    if (v == NULL || json_is_null(v) ||
        (json_is_string(v) && json_string_length(v) == 0))
        return 0;
    if (!json_is_object(v)) {
        mgmt_bad_request(r, "%s must be an object", key);
        return -1;
    }
    wire_wr_init(&w, NULL, 0);
    if (defs_json_put_table(&w, v) != 0 || w.len - 4 > TABLE_MAX_SIZE) {
        mgmt_bad_request(r, "%s: too deep or too large", key);
        return -1;
    }
    size_t len = w.len;
    *buf = xmalloc(len);
    wire_wr_init(&w, *buf, len);
    (void)defs_json_put_table(&w, v);
    *t = (struct amqp_table){ *buf + 4, len - 4 };
    if (table_validate(t->ptr, t->len, 1) != AMQP_OK) {
        mgmt_bad_request(r, "%s: not a valid table", key);
        free(*buf);
        *buf = NULL;
        return -1;
    }
    return 0;
}

/* A name from a path for AMQP: at most a shortstr. */
static bool
shortstr_ok(struct mgmt_req *r, const char *what, const char *name)
{
    if (strlen(name) <= 255)
        return true;
    mgmt_bad_request(r, "%s name too long", what);
    return false;
}

static void
put_queue(struct mgmt_req *r, struct vhost *vh)
{
    json_t *o;
    uint8_t *abuf;
    struct amqp_table args;

    if (!shortstr_ok(r, "queue", r->arg[1]) || mgmt_body_object(r, &o) != 0)
        return;
    int durable = opt_bool(o, "durable", false);
    int auto_delete = opt_bool(o, "auto_delete", false);
    if (durable < 0 || auto_delete < 0) {
        mgmt_bad_request(r, "durable and auto_delete must be booleans");
        json_decref(o);
        return;
    }
    if (opt_table(r, o, "arguments", &abuf, &args) != 0) {
        json_decref(o);
        return;
    }
    bool created = find_queue(vh, r->arg[1]) == NULL;
    struct mgmt_amqp *s = session(r, vh);
    struct amqp_method m = { .id = AMQP_QUEUE_DECLARE };
    m.a.queue_declare.queue = amqp_cstr(r->arg[1]);
    m.a.queue_declare.durable = durable;
    m.a.queue_declare.auto_delete = auto_delete;
    m.a.queue_declare.arguments = args;
    mgmt_amqp_method(s, &m);
    free(abuf);
    json_decref(o);
    mgmt_amqp_run(s, simple_done, pending_new(r, created ? 201 : 204));
}

static void
delete_queue(struct mgmt_req *r, struct vhost *vh)
{
    const char *ifu = evhttp_find_header(&r->query, "if-unused");
    const char *ife = evhttp_find_header(&r->query, "if-empty");
    struct mgmt_amqp *s = session(r, vh);
    struct amqp_method m = { .id = AMQP_QUEUE_DELETE };
    m.a.queue_delete.queue = amqp_cstr(r->arg[1]);
    m.a.queue_delete.if_unused = ifu && strcmp(ifu, "true") == 0;
    m.a.queue_delete.if_empty = ife && strcmp(ife, "true") == 0;
    mgmt_amqp_method(s, &m);
    mgmt_amqp_run(s, simple_done, pending_new(r, 204));
}

void
mgmt_queue(struct mgmt_req *r)
{
    struct vhost *vh = mgmt_req_vhost(r);
    if (vh == NULL)
        return;
    struct queue *q = find_queue(vh, r->arg[1]);
    if (r->method == EVHTTP_REQ_PUT) {
        put_queue(r, vh);
        return;
    }
    if (q == NULL) {
        mgmt_not_found(r);
        return;
    }
    if (r->method == EVHTTP_REQ_DELETE)
        delete_queue(r, vh);
    else {
        struct mgmt_history_req hr;
        mgmt_history_req(r, &hr);
        mgmt_reply(r, 200, queue_json(q, true, &hr));
    }
}

void
mgmt_queue_contents(struct mgmt_req *r)
{
    struct vhost *vh = mgmt_req_vhost(r);
    if (vh == NULL)
        return;
    if (find_queue(vh, r->arg[1]) == NULL) {
        mgmt_not_found(r);
        return;
    }
    struct mgmt_amqp *s = session(r, vh);
    struct amqp_method m = { .id = AMQP_QUEUE_PURGE };
    m.a.queue_purge.queue = amqp_cstr(r->arg[1]);
    mgmt_amqp_method(s, &m);
    mgmt_amqp_run(s, simple_done, pending_new(r, 204));
}

/* ---- messages as JSON (get) ---- */

static bool
is_utf8_text(const uint8_t *p, size_t n)
{
    json_t *v = json_stringn((const char *)p, n);
    bool ok = v != NULL && memchr(p, '\0', n) == NULL;
    json_decref(v);
    return ok;
}

static void
set_bytes_prop(json_t *o, const char *key, uint16_t flags, uint16_t bit,
               struct amqp_bytes v)
{
    if (flags & bit)
        json_object_set_new(o, key, bytes_str((const char *)v.ptr, v.len));
}

json_t *
mgmt_props_json(const struct amqp_basic_props *p)
{
    json_t *o = json_object();
    uint16_t f = p->flags;
    set_bytes_prop(o, "content_type", f, AMQP_BASIC_CONTENT_TYPE_FLAG,
                   p->content_type);
    set_bytes_prop(o, "content_encoding", f,
                   AMQP_BASIC_CONTENT_ENCODING_FLAG, p->content_encoding);
    if (f & AMQP_BASIC_HEADERS_FLAG)
        json_object_set_new(o, "headers", defs_json_table(p->headers));
    if (f & AMQP_BASIC_DELIVERY_MODE_FLAG)
        json_object_set_new(o, "delivery_mode",
                            json_integer(p->delivery_mode));
    if (f & AMQP_BASIC_PRIORITY_FLAG)
        json_object_set_new(o, "priority", json_integer(p->priority));
    set_bytes_prop(o, "correlation_id", f, AMQP_BASIC_CORRELATION_ID_FLAG,
                   p->correlation_id);
    set_bytes_prop(o, "reply_to", f, AMQP_BASIC_REPLY_TO_FLAG, p->reply_to);
    set_bytes_prop(o, "expiration", f, AMQP_BASIC_EXPIRATION_FLAG,
                   p->expiration);
    set_bytes_prop(o, "message_id", f, AMQP_BASIC_MESSAGE_ID_FLAG,
                   p->message_id);
    if (f & AMQP_BASIC_TIMESTAMP_FLAG)
        json_object_set_new(o, "timestamp",
                            json_integer((json_int_t)p->timestamp));
    set_bytes_prop(o, "type", f, AMQP_BASIC_TYPE_FLAG, p->type);
    set_bytes_prop(o, "user_id", f, AMQP_BASIC_USER_ID_FLAG, p->user_id);
    set_bytes_prop(o, "app_id", f, AMQP_BASIC_APP_ID_FLAG, p->app_id);
    set_bytes_prop(o, "cluster_id", f, AMQP_BASIC_CLUSTER_ID_FLAG,
                   p->cluster_id);
    return o;
}

void
mgmt_payload_json(json_t *o, const uint8_t *body, size_t len, long truncate,
                  bool base64_always)
{
    size_t n = truncate >= 0 && (size_t)truncate < len ? (size_t)truncate
                                                        : len;
    json_object_set_new(o, "payload_bytes", json_integer((json_int_t)len));
    if (!base64_always && is_utf8_text(body, n)) {
        json_object_set_new(o, "payload", json_stringn((const char *)body, n));
        json_object_set_new(o, "payload_encoding", json_string("string"));
        return;
    }
    char *b64 = xmalloc(4 * (n / 3 + 1) + 1);
    tls_base64(body, n, b64);
    json_object_set_new(o, "payload", json_string(b64));
    json_object_set_new(o, "payload_encoding", json_string("base64"));
    free(b64);
}

static void
get_done(struct mgmt_amqp *s, void *arg)
{
    struct pending *p = arg;
    const char *text;
    int err = mgmt_amqp_error(s, &text);
    if (err > 0 && reply_is_hard((uint16_t)err)) {
        /* the session's connection was closed: RabbitMQ's get says so
         * as "CODE text" (a stream's 540), its purge does not */
        const char *dash = strstr(text, " - ");
        mgmt_bad_request(p->r, "%d %s", err, dash ? dash + 3 : text);
        pending_end(p, s);
        return;
    }
    if (err != 0) {
        amqp_error(p->r, err, text);
        pending_end(p, s);
        return;
    }
    json_t *arr = json_array();
    uint64_t last_tag = 0;
    for (size_t i = 0; i < mgmt_amqp_nreplies(s); i++) {
        const struct mgmt_amqp_reply *rp = mgmt_amqp_get(s, i);
        if (rp->m.id != AMQP_BASIC_GET_OK)
            continue;
        const struct amqp_basic_get_ok *g = &rp->m.a.basic_get_ok;
        last_tag = g->delivery_tag;
        json_t *o = json_pack(
            "{s:b, s:o, s:o, s:I, s:o}", "redelivered", g->redelivered,
            "exchange", bytes_str((const char *)g->exchange.ptr,
                                  g->exchange.len),
            "routing_key", bytes_str((const char *)g->routing_key.ptr,
                                     g->routing_key.len),
            "message_count", (json_int_t)g->message_count, "properties",
            mgmt_props_json(&rp->ch.props));
        mgmt_payload_json(o, rp->body, rp->body_len, p->truncate,
                          p->base64_always);
        json_array_append_new(arr, o);
    }
    /* Settle them all: ack, or requeue / reject (dead-letter) as the
     * ackmode says. The session's connection then goes. */
    if (last_tag) {
        struct amqp_method m;
        if (p->ack && !p->requeue) {
            m = (struct amqp_method){ .id = AMQP_BASIC_ACK };
            m.a.basic_ack.delivery_tag = last_tag;
            m.a.basic_ack.multiple = true;
        } else {
            m = (struct amqp_method){ .id = AMQP_BASIC_NACK };
            m.a.basic_nack.delivery_tag = last_tag;
            m.a.basic_nack.multiple = true;
            m.a.basic_nack.requeue = p->requeue;
        }
        mgmt_amqp_method(s, &m);
        mgmt_amqp_flush(s);
    }
    mgmt_reply(p->r, 200, arr);
    pending_end(p, s);
}

void
mgmt_queue_get(struct mgmt_req *r)
{
    static const char *const need[] = { "ackmode", "encoding", NULL };
    json_t *o;
    struct vhost *vh = mgmt_req_vhost(r);
    if (vh == NULL || mgmt_body_object(r, &o) != 0)
        return;
    if (mgmt_require(r, o, need) != 0) {
        json_decref(o);
        return;
    }
    const char *mode = json_string_value(json_object_get(o, "ackmode"));
    const char *enc = json_string_value(json_object_get(o, "encoding"));
    json_t *cnt = json_object_get(o, "count");
    json_t *tr = json_object_get(o, "truncate");
    long count = 1, truncate = -1;
    if (json_is_integer(cnt))
        count = (long)json_integer_value(cnt);
    else if (json_is_string(cnt))
        count = strtol(json_string_value(cnt), NULL, 10);
    if (json_is_integer(tr))
        truncate = (long)json_integer_value(tr);
    else if (json_is_string(tr) && json_string_length(tr) > 0)
        truncate = strtol(json_string_value(tr), NULL, 10);
    struct pending p0 = { 0 };
    if (mode && strcmp(mode, "ack_requeue_true") == 0)
        p0.ack = true, p0.requeue = true;
    else if (mode && strcmp(mode, "ack_requeue_false") == 0)
        p0.ack = true, p0.requeue = false;
    else if (mode && strcmp(mode, "reject_requeue_true") == 0)
        p0.ack = false, p0.requeue = true;
    else if (mode && strcmp(mode, "reject_requeue_false") == 0)
        p0.ack = false, p0.requeue = false;
    else {
        mgmt_bad_request(r, "Invalid ackmode value");
        json_decref(o);
        return;
    }
    if (enc == NULL || (strcmp(enc, "auto") != 0 && strcmp(enc, "base64"))) {
        mgmt_bad_request(r, "Unsupported encoding");
        json_decref(o);
        return;
    }
    if (count < 1 || count > MGMT_GET_MAX) {
        mgmt_bad_request(r, "count must be between 1 and %d", MGMT_GET_MAX);
        json_decref(o);
        return;
    }
    p0.base64_always = strcmp(enc, "base64") == 0;
    p0.truncate = truncate;
    json_decref(o);
    if (find_queue(vh, r->arg[1]) == NULL) {
        char reason[400];
        snprintf(reason, sizeof(reason), "NOT_FOUND - no queue '%s' in vhost "
                 "'%s'", r->arg[1], vh->name);
        mgmt_error(r, 404, "not_found", reason);
        return;
    }
    struct mgmt_amqp *s = session(r, vh);
    for (long i = 0; i < count; i++) {
        struct amqp_method m = { .id = AMQP_BASIC_GET };
        m.a.basic_get.queue = amqp_cstr(r->arg[1]);
        mgmt_amqp_method(s, &m);
    }
    struct pending *p = pending_new(r, 200);
    p->ack = p0.ack;
    p->requeue = p0.requeue;
    p->base64_always = p0.base64_always;
    p->truncate = p0.truncate;
    mgmt_amqp_run(s, get_done, p);
}

/* ---- the aliveness test (rabbit_mgmt_wm_aliveness_test.erl) ---- */

#define ALIVENESS_QUEUE "aliveness-test"
static const char aliveness_body[] = "test_message";

/*
 * How rabbit_mgmt_util:with_channel answers a channel or connection
 * closed, as the aliveness test does in RabbitMQ 3.10.8 (the routes
 * above answer as its amqp_request does, amqp_error): 403 is 401
 * not_authorised with the AMQP text as sent, codes other than 404 are
 * 400 bad_request "CODE TEXT".
 */
static void
channel_error(struct mgmt_req *r, int code, const char *text)
{
    if (code == 403)
        mgmt_error(r, 401, "not_authorised", text);
    else if (code > 0 && code != 404)
        mgmt_bad_request(r, "%d %s", code, text);
    else
        amqp_error(r, code, text);
}

/* The last reply 'id' of the session, or NULL. */
static const struct mgmt_amqp_reply *
last_reply(const struct mgmt_amqp *s, uint32_t id)
{
    for (size_t i = mgmt_amqp_nreplies(s); i-- > 0;)
        if (mgmt_amqp_get(s, i)->m.id == id)
            return mgmt_amqp_get(s, i);
    return NULL;
}

/* A message as the test publishes it: its body, no properties. */
static bool
is_test_message(const struct mgmt_amqp_reply *rp)
{
    return rp->ch.props.flags == 0 &&
           rp->body_len == sizeof(aliveness_body) - 1 &&
           memcmp(rp->body, aliveness_body, rp->body_len) == 0;
}

static void
aliveness_got(struct mgmt_amqp *s, void *arg)
{
    struct pending *p = arg;
    const char *text;
    int err = mgmt_amqp_error(s, &text);
    const struct mgmt_amqp_reply *rp;

    if (err != 0) {
        channel_error(p->r, err, text);
    } else if ((rp = last_reply(s, AMQP_BASIC_GET_OK)) == NULL) {
        mgmt_reply(p->r, 503, json_pack("{s:s, s:s}", "status", "failed",
                                        "reason", "aliveness-test queue is "
                                        "empty"));
    } else {
        /* A test message is taken; an application's goes back to its
         * place (docs/compatibility.md: RabbitMQ's no_ack get takes
         * it). */
        struct amqp_method m;
        uint64_t tag = rp->m.a.basic_get_ok.delivery_tag;
        if (is_test_message(rp)) {
            m = (struct amqp_method){ .id = AMQP_BASIC_ACK };
            m.a.basic_ack.delivery_tag = tag;
        } else {
            m = (struct amqp_method){ .id = AMQP_BASIC_NACK };
            m.a.basic_nack.delivery_tag = tag;
            m.a.basic_nack.requeue = true;
        }
        mgmt_amqp_method(s, &m);
        mgmt_amqp_flush(s);
        mgmt_reply(p->r, 200, json_pack("{s:s}", "status", "ok"));
    }
    pending_end(p, s);
}

static void
aliveness_declared(struct mgmt_amqp *s, void *arg)
{
    struct pending *p = arg;
    const char *text;
    int err = mgmt_amqp_error(s, &text);
    const struct mgmt_amqp_reply *rp = last_reply(s, AMQP_QUEUE_DECLARE_OK);

    if (err != 0 || rp == NULL) {
        channel_error(p->r, err, text);
        pending_end(p, s);
        return;
    }
    /* An empty queue (the test's own, as a rule) gets RabbitMQ's round
     * trip. One that holds messages may be an application's: nothing is
     * published, or a test message would pile up behind its messages at
     * each run; its head is got (and given back unless it is a test
     * message left by an earlier run). */
    if (rp->m.a.queue_declare_ok.message_count == 0) {
        struct amqp_basic_publish pub = {
            .exchange = amqp_cstr(""),
            .routing_key = amqp_cstr(ALIVENESS_QUEUE),
        };
        struct content_header h = { .class_id = AMQP_CLASS_BASIC };
        mgmt_amqp_publish(s, &pub, &h, aliveness_body,
                          sizeof(aliveness_body) - 1);
    }
    struct amqp_method m = { .id = AMQP_BASIC_GET };
    m.a.basic_get.queue = amqp_cstr(ALIVENESS_QUEUE);
    mgmt_amqp_method(s, &m);
    mgmt_amqp_run(s, aliveness_got, p);
}

/*
 * As RabbitMQ, over AMQP as the user who asks, so that its permissions
 * and the vhost's limits apply as to any client: queue.declare of
 * "aliveness-test" (not durable, not auto-delete), a publish of
 * "test_message" to it through the default exchange, a basic.get; 200
 * {"status":"ok"}, 503 {"status":"failed"} if the get finds nothing (a
 * consumer took the message). The queue stays, as in RabbitMQ.
 */
void
mgmt_aliveness(struct mgmt_req *r)
{
    struct vhost *vh = broker_vhost(r->arg[0], strlen(r->arg[0]));
    if (vh == NULL) {
        mgmt_not_found(r);
        return;
    }
    struct mgmt_amqp *s = session(r, vh);
    struct amqp_method m = { .id = AMQP_QUEUE_DECLARE };
    m.a.queue_declare.queue = amqp_cstr(ALIVENESS_QUEUE);
    mgmt_amqp_method(s, &m);
    mgmt_amqp_run(s, aliveness_declared, pending_new(r, 200));
}

/* ---- exchanges ---- */

static json_t *
exchange_json(struct exchange *x)
{
    const struct policy *pol = policy_for_exchange(x, POLICY_USER);
    json_t *o = json_pack(
        "{s:o, s:o, s:s, s:b, s:b, s:b, s:o, s:o, s:s}", "name",
        bytes_str(x->name, x->name_len), "vhost", mgmt_str(x->vh->name),
        "type", x->ops->type, "durable", x->durable, "auto_delete",
        x->auto_delete, "internal", x->internal, "arguments",
        defs_json_table(x->args), "policy", policy_name_json(pol),
        "user_who_performed_action", "rmq-internal");
    json_object_set_new(o, "message_stats",
                        mgmt_msg_stats(&x->ms, MS_KEYS_EXCHANGE, x->series));
    return o;
}

static void
add_exchange(struct exchange *x, void *arg)
{
    struct list *l = arg;
    json_array_append_new(l->arr, exchange_json(x));
}

static void
add_vhost_exchanges(struct vhost *vh, void *arg)
{
    struct list *l = arg;
    if (mgmt_is_visible_vhost(l->r->user, vh->name))
        vhost_foreach_exchange(vh, add_exchange, l);
}

void
mgmt_exchanges(struct mgmt_req *r)
{
    struct list l = { r, json_array() };
    if (r->arg[0] != NULL) {
        struct vhost *vh = mgmt_req_vhost(r);
        if (vh == NULL) {
            json_decref(l.arr);
            return;
        }
        vhost_foreach_exchange(vh, add_exchange, &l);
    } else {
        vhost_foreach(add_vhost_exchanges, &l);
    }
    mgmt_reply_list(r, l.arr, by_vhost_name);
}

static void
put_exchange(struct mgmt_req *r, struct vhost *vh)
{
    json_t *o;
    uint8_t *abuf;
    struct amqp_table args;

    if (!shortstr_ok(r, "exchange", r->arg[1]) || mgmt_body_object(r, &o) != 0)
        return;
    json_t *type = json_object_get(o, "type");
    int durable = opt_bool(o, "durable", false);
    int auto_delete = opt_bool(o, "auto_delete", false);
    int internal = opt_bool(o, "internal", false);
    if (durable < 0 || auto_delete < 0 || internal < 0) {
        mgmt_bad_request(r, "durable, auto_delete and internal must be "
                         "booleans");
        json_decref(o);
        return;
    }
    if (type != NULL && !json_is_string(type)) {
        mgmt_bad_request(r, "type must be a string");
        json_decref(o);
        return;
    }
    const char *t = type ? json_string_value(type) : "direct";
    if (exchange_ops_find(amqp_cstr(t)) == NULL) {
        mgmt_bad_request(r, "unknown exchange type '%s'", t);
        json_decref(o);
        return;
    }
    if (opt_table(r, o, "arguments", &abuf, &args) != 0) {
        json_decref(o);
        return;
    }
    bool created = find_exchange(vh, r->arg[1]) == NULL;
    struct mgmt_amqp *s = session(r, vh);
    struct amqp_method m = { .id = AMQP_EXCHANGE_DECLARE };
    m.a.exchange_declare.exchange = amqp_cstr(r->arg[1]);
    m.a.exchange_declare.type = amqp_cstr(t);
    m.a.exchange_declare.durable = durable;
    m.a.exchange_declare.auto_delete = auto_delete;
    m.a.exchange_declare.internal = internal;
    m.a.exchange_declare.arguments = args;
    mgmt_amqp_method(s, &m);
    free(abuf);
    json_decref(o);
    mgmt_amqp_run(s, simple_done, pending_new(r, created ? 201 : 204));
}

void
mgmt_exchange(struct mgmt_req *r)
{
    struct vhost *vh = mgmt_req_vhost(r);
    if (vh == NULL)
        return;
    if (r->method == EVHTTP_REQ_PUT) {
        put_exchange(r, vh);
        return;
    }
    struct exchange *x = find_exchange(vh, r->arg[1]);
    if (x == NULL) {
        mgmt_not_found(r);
        return;
    }
    if (r->method == EVHTTP_REQ_GET) {
        json_t *o = exchange_json(x);
        json_object_set_new(o, "incoming", json_array());
        json_object_set_new(o, "outgoing", json_array());
        mgmt_reply(r, 200, o);
        return;
    }
    const char *ifu = evhttp_find_header(&r->query, "if-unused");
    struct mgmt_amqp *s = session(r, vh);
    struct amqp_method m = { .id = AMQP_EXCHANGE_DELETE };
    m.a.exchange_delete.exchange = amqp_cstr(x->name);
    m.a.exchange_delete.if_unused = ifu && strcmp(ifu, "true") == 0;
    mgmt_amqp_method(s, &m);
    mgmt_amqp_run(s, simple_done, pending_new(r, 204));
}

/* ---- publish ---- */

/* The JSON "properties" into 'h' (strings borrow 'props'); the headers
 * table is encoded into '*hbuf'. -1 after answering 400. */
static int
props_from_json(struct mgmt_req *r, json_t *props, struct content_header *h,
                uint8_t **hbuf)
{
    static const struct {
        const char *key;
        uint16_t flag;
        size_t off;
    } strs[] = {
#define STR(k, F) { #k, AMQP_BASIC_##F##_FLAG, \
                    offsetof(struct amqp_basic_props, k) }
        STR(content_type, CONTENT_TYPE),
        STR(content_encoding, CONTENT_ENCODING),
        STR(correlation_id, CORRELATION_ID),
        STR(reply_to, REPLY_TO),
        STR(expiration, EXPIRATION),
        STR(message_id, MESSAGE_ID),
        STR(type, TYPE),
        STR(user_id, USER_ID),
        STR(app_id, APP_ID),
        STR(cluster_id, CLUSTER_ID),
#undef STR
    };
    struct amqp_basic_props *p = &h->props;
    *hbuf = NULL;
    if (props == NULL || json_is_null(props))
        return 0;
    if (!json_is_object(props)) {
        mgmt_bad_request(r, "properties must be an object");
        return -1;
    }
    for (size_t i = 0; i < NELEMS(strs); i++) {
        json_t *v = json_object_get(props, strs[i].key);
        if (v == NULL)
            continue;
        if (!json_is_string(v) || json_string_length(v) > 255) {
            mgmt_bad_request(r, "property %s must be a short string",
                             strs[i].key);
            return -1;
        }
        *(struct amqp_bytes *)((char *)p + strs[i].off) =
            (struct amqp_bytes){ (const uint8_t *)json_string_value(v),
                                 json_string_length(v) };
        p->flags |= strs[i].flag;
    }
    json_t *dm = json_object_get(props, "delivery_mode");
    json_t *pr = json_object_get(props, "priority");
    json_t *ts = json_object_get(props, "timestamp");
    if (dm) {
        long v = json_is_integer(dm) ? (long)json_integer_value(dm)
                 : json_is_string(dm) ? strtol(json_string_value(dm), NULL, 10)
                                      : -1;
        if (v < 0 || v > 255) {
            mgmt_bad_request(r, "delivery_mode must be a number");
            return -1;
        }
        p->delivery_mode = (uint8_t)v;
        p->flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
    }
    if (pr) {
        if (!json_is_integer(pr) || json_integer_value(pr) < 0 ||
            json_integer_value(pr) > 255) {
            mgmt_bad_request(r, "priority must be a number from 0 to 255");
            return -1;
        }
        p->priority = (uint8_t)json_integer_value(pr);
        p->flags |= AMQP_BASIC_PRIORITY_FLAG;
    }
    if (ts) {
        if (!json_is_integer(ts) || json_integer_value(ts) < 0) {
            mgmt_bad_request(r, "timestamp must be a number");
            return -1;
        }
        p->timestamp = (uint64_t)json_integer_value(ts);
        p->flags |= AMQP_BASIC_TIMESTAMP_FLAG;
    }
    struct amqp_table t;
    if (opt_table(r, props, "headers", hbuf, &t) != 0)
        return -1;
    if (*hbuf != NULL) {
        p->headers = t;
        p->flags |= AMQP_BASIC_HEADERS_FLAG;
    }
    return 0;
}

static void
publish_done(struct mgmt_amqp *s, void *arg)
{
    struct pending *p = arg;
    const char *text;
    int err = mgmt_amqp_error(s, &text);
    if (err != 0) {
        amqp_error(p->r, err, text);
        pending_end(p, s);
        return;
    }
    bool routed = true, acked = false;
    for (size_t i = 0; i < mgmt_amqp_nreplies(s); i++) {
        uint32_t id = mgmt_amqp_get(s, i)->m.id;
        if (id == AMQP_BASIC_RETURN)
            routed = false;
        acked |= id == AMQP_BASIC_ACK;
    }
    if (!acked)
        routed = false;     /* a nack: refused (reject-publish) */
    mgmt_reply(p->r, 200, json_pack("{s:b}", "routed", routed));
    pending_end(p, s);
}

void
mgmt_exchange_publish(struct mgmt_req *r)
{
    static const char *const need[] = { "routing_key", "payload",
                                        "payload_encoding", "properties",
                                        NULL };
    json_t *o;
    struct vhost *vh = mgmt_req_vhost(r);
    if (vh == NULL || mgmt_body_object(r, &o) != 0)
        return;
    if (mgmt_require(r, o, need) != 0) {
        json_decref(o);
        return;
    }
    const char *rk = json_string_value(json_object_get(o, "routing_key"));
    const char *enc =
        json_string_value(json_object_get(o, "payload_encoding"));
    json_t *payload = json_object_get(o, "payload");
    if (rk == NULL || strlen(rk) > 255 || !json_is_string(payload) ||
        enc == NULL) {
        mgmt_bad_request(r, "routing_key, payload and payload_encoding must "
                         "be strings");
        json_decref(o);
        return;
    }
    const uint8_t *body = (const uint8_t *)json_string_value(payload);
    size_t len = json_string_length(payload);
    uint8_t *decoded = NULL;
    if (strcmp(enc, "base64") == 0) {
        decoded = xmalloc(len + 1);
        int n = tls_unbase64(json_string_value(payload), decoded, len + 1);
        if (n < 0) {
            free(decoded);
            mgmt_bad_request(r, "payload is not base64");
            json_decref(o);
            return;
        }
        body = decoded;
        len = (size_t)n;
    } else if (strcmp(enc, "string") != 0) {
        mgmt_bad_request(r, "payload_encoding must be string or base64");
        json_decref(o);
        return;
    }
    struct content_header h = { .class_id = AMQP_CLASS_BASIC };
    uint8_t *hbuf;
    if (props_from_json(r, json_object_get(o, "properties"), &h, &hbuf) != 0) {
        free(decoded);
        json_decref(o);
        return;
    }
    struct exchange *x = find_exchange(vh, r->arg[1]);
    if (x == NULL) {
        /* RabbitMQ 3.10: a 400 with the AMQP text, not a 404 */
        char reason[600];
        snprintf(reason, sizeof(reason), "404 NOT_FOUND - no exchange '%s' "
                 "in vhost '%s'", r->arg[1], vh->name);
        mgmt_error(r, 400, "bad_request", reason);
        free(hbuf);
        free(decoded);
        json_decref(o);
        return;
    }
    struct mgmt_amqp *s = session(r, vh);
    struct amqp_method sel = { .id = AMQP_CONFIRM_SELECT };
    mgmt_amqp_method(s, &sel);
    struct amqp_basic_publish pub = {
        .exchange = amqp_cstr(x->name),
        .routing_key = amqp_cstr(rk),
        .mandatory = true,
    };
    mgmt_amqp_publish(s, &pub, &h, body, len);
    free(hbuf);
    free(decoded);
    json_decref(o);
    mgmt_amqp_run(s, publish_done, pending_new(r, 200));
}

/* ---- bindings ---- */

/* RabbitMQ's properties_key: the routing key, "~" for an empty one,
 * and with arguments "KEY~" and a hash of them (Roost's own hash: the
 * key names the binding within this broker only). */
static void
properties_key(const struct binding *b, char *out, size_t len)
{
    if (b->args.len == 0) {
        if (b->key_len == 0)
            snprintf(out, len, "~");
        else
            snprintf(out, len, "%.*s", (int)b->key_len, b->key);
        return;
    }
    uint64_t h = hash_bytes(b->args.ptr, b->args.len);
    uint8_t raw[4] = { (uint8_t)h, (uint8_t)(h >> 8), (uint8_t)(h >> 16),
                       (uint8_t)(h >> 24) };
    char b64[16];
    tls_base64(raw, sizeof(raw), b64);
    for (char *c = b64; *c; c++)
        *c = *c == '+' ? '-' : *c == '/' ? '_' : *c == '=' ? '\0' : *c;
    snprintf(out, len, "%.*s~%s", (int)b->key_len, b->key, b64);
}

static json_t *
binding_json(const struct binding *b)
{
    char pk[600];
    properties_key(b, pk, sizeof(pk));
    bool to_q = b->q != NULL;
    return json_pack(
        "{s:o, s:o, s:o, s:s, s:o, s:o, s:o}", "source",
        bytes_str(b->src->name, b->src->name_len), "vhost",
        mgmt_str(b->src->vh->name), "destination",
        to_q ? bytes_str(b->q->name, b->q->name_len)
             : bytes_str(b->dest_x->name, b->dest_x->name_len),
        "destination_type", to_q ? "queue" : "exchange", "routing_key",
        bytes_str(b->key, b->key_len), "arguments", defs_json_table(b->args),
        "properties_key", mgmt_str(pk));
}

/* The default exchange's binding to 'q', as RabbitMQ lists it. */
static json_t *
default_binding_json(const struct queue *q)
{
    json_t *name = bytes_str(q->name, q->name_len);
    return json_pack("{s:s, s:o, s:O, s:s, s:O, s:{}, s:o}", "source", "",
                     "vhost", mgmt_str(q->vh->name), "destination", name,
                     "destination_type", "queue", "routing_key", name,
                     "arguments", "properties_key", name);
}

struct bind_filter {
    json_t *arr;
    const char *dest;           /* NULL: any */
    bool dest_queue;
    const char *props;          /* NULL: any */
};

static void
add_binding(const struct binding *b, void *arg)
{
    struct bind_filter *f = arg;
    if (f->dest != NULL) {
        bool q = b->q != NULL;
        const char *n = q ? b->q->name : b->dest_x->name;
        if (q != f->dest_queue || strcmp(n, f->dest) != 0)
            return;
    }
    json_t *o = binding_json(b);
    if (f->props != NULL &&
        strcmp(json_string_value(json_object_get(o, "properties_key")),
               f->props) != 0) {
        json_decref(o);
        return;
    }
    json_array_append_new(f->arr, o);
}

/*
 * The binding list, a queue at a time (a broker with 100,000 queues has
 * as many default bindings): an item is a queue (a reference: its
 * default binding and the bindings to it), or a vhost's bindings
 * between exchanges, rendered when the list is made.
 */
struct bitem {
    struct queue *q;
    json_t *x2x;
    const char *vhost;          /* for sorting, while the list is made */
};

static void
push_bitem(struct qrefs *l, struct bitem *b)
{
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    struct bitem *copy = xmalloc(sizeof(*copy));
    *copy = *b;
    l->v[l->n++] = copy;
}

static void
bitem_queue(struct queue *q, void *arg)
{
    struct bitem b = { queue_ref(q), NULL, q->vh->name };
    push_bitem(arg, &b);
}

static void
add_x2x(const struct binding *b, void *arg)
{
    if (b->dest_x != NULL)
        json_array_append_new(arg, binding_json(b));
}

static void
x2x_of(struct exchange *x, void *arg)
{
    exchange_foreach_binding(x, add_x2x, arg);
}

static void
bitems_of(struct vhost *vh, struct qrefs *l)
{
    struct bitem b = { NULL, json_array(), vh->name };
    vhost_foreach_exchange(vh, x2x_of, b.x2x);
    push_bitem(l, &b);
    vhost_foreach_queue(vh, bitem_queue, l);
}

static void
bitems_visible(struct vhost *vh, void *arg)
{
    struct qrefs *l = arg;
    if (mgmt_is_visible_vhost(l->r->user, vh->name))
        bitems_of(vh, l);
}

static void
add_queue_binding(const struct binding *b, void *arg)
{
    json_array_append_new(arg, binding_json(b));
}

static json_t *
render_bitem(void *item)
{
    struct bitem *b = item;
    if (b->x2x != NULL)
        return json_incref(b->x2x);
    if (b->q->deleted)
        return NULL;
    json_t *arr = json_array();
    json_array_append_new(arr, default_binding_json(b->q));
    queue_foreach_binding(b->q, add_queue_binding, arr);
    return arr;
}

static void
release_bitem(void *item)
{
    struct bitem *b = item;
    if (b->q)
        queue_unref(b->q);
    json_decref(b->x2x);
    free(b);
}

static bool
bitem_sort_key(void *item, const char *key, const char **str, double *num)
{
    struct bitem *b = item;
    (void)num;
    if (strcmp(key, "vhost") == 0)
        *str = b->vhost;
    else if (strcmp(key, "destination") == 0)
        *str = b->q ? b->q->name : "";
    else
        return false;
    return true;
}

static const struct mgmt_list_ops binding_list_ops = {
    render_bitem, release_bitem, bitem_sort_key,
};

static const char *const by_binding[] = { "vhost", "destination", NULL };

void
mgmt_bindings(struct mgmt_req *r)
{
    struct qrefs l = { r, NULL, 0, 0 };
    if (r->arg[0] != NULL) {
        struct vhost *vh = mgmt_req_vhost(r);
        if (vh == NULL)
            return;
        bitems_of(vh, &l);
    } else {
        vhost_foreach(bitems_visible, &l);
    }
    mgmt_reply_items(r, l.v, l.n, &binding_list_ops, by_binding);
    free(l.v);
}

void
mgmt_queue_bindings(struct mgmt_req *r)
{
    struct vhost *vh = mgmt_req_vhost(r);
    if (vh == NULL)
        return;
    struct queue *q = find_queue(vh, r->arg[1]);
    if (q == NULL) {
        mgmt_not_found(r);
        return;
    }
    json_t *arr = json_array();
    json_array_append_new(arr, default_binding_json(q));
    struct bind_filter f = { arr, NULL, false, NULL };
    queue_foreach_binding(q, add_binding, &f);
    mgmt_reply(r, 200, arr);
}

/* /api/exchanges/V/X/bindings/source and .../destination */
static void
exchange_bindings(struct mgmt_req *r, bool source)
{
    struct vhost *vh = mgmt_req_vhost(r);
    if (vh == NULL)
        return;
    struct exchange *x = find_exchange(vh, r->arg[1]);
    if (x == NULL) {
        mgmt_not_found(r);
        return;
    }
    json_t *arr = json_array();
    struct bind_filter f = { arr, NULL, false, NULL };
    if (source)
        exchange_foreach_binding(x, add_binding, &f);
    else
        exchange_foreach_dest_binding(x, add_binding, &f);
    mgmt_reply(r, 200, arr);
}

void
mgmt_exchange_bindings_source(struct mgmt_req *r)
{
    exchange_bindings(r, true);
}

void
mgmt_exchange_bindings_destination(struct mgmt_req *r)
{
    exchange_bindings(r, false);
}

/* The binding's ends from the path: /bindings/V/e/SRC/{q,e}/DEST. */
static bool
binding_ends(struct mgmt_req *r, struct vhost *vh, bool to_queue,
             struct exchange **src)
{
    *src = find_exchange(vh, r->arg[1]);
    bool dest = to_queue ? find_queue(vh, r->arg[2]) != NULL
                         : find_exchange(vh, r->arg[2]) != NULL;
    if (*src == NULL || !dest) {
        mgmt_not_found(r);
        return false;
    }
    return true;
}

static void
bind_done(struct mgmt_amqp *s, void *arg)
{
    struct pending *p = arg;
    const char *text;
    int err = mgmt_amqp_error(s, &text);
    if (err != 0) {
        amqp_error(p->r, err, text);
    } else {
        const char *loc = json_string_value(p->ok_body);
        evhttp_add_header(evhttp_request_get_output_headers(p->r->ev),
                          "Location", loc);
        mgmt_reply(p->r, 201, NULL);
    }
    pending_end(p, s);
}

/* queue.bind or exchange.bind ('bind'), or their unbinds, of 'dest'
 * (a queue with 'to_queue') to 'src'. */
static void
send_binding(struct mgmt_amqp *s, bool to_queue, bool bind, const char *dest,
             const char *src, const char *rk, struct amqp_table args)
{
    struct amqp_method m = { .id = 0 };
    if (to_queue && bind) {
        m.id = AMQP_QUEUE_BIND;
        m.a.queue_bind = (struct amqp_queue_bind){
            .queue = amqp_cstr(dest), .exchange = amqp_cstr(src),
            .routing_key = amqp_cstr(rk), .arguments = args };
    } else if (to_queue) {
        m.id = AMQP_QUEUE_UNBIND;
        m.a.queue_unbind = (struct amqp_queue_unbind){
            .queue = amqp_cstr(dest), .exchange = amqp_cstr(src),
            .routing_key = amqp_cstr(rk), .arguments = args };
    } else {
        /* exchange.unbind has exchange.bind's fields (handle_exchange.c) */
        m.id = bind ? AMQP_EXCHANGE_BIND : AMQP_EXCHANGE_UNBIND;
        m.a.exchange_bind = (struct amqp_exchange_bind){
            .destination = amqp_cstr(dest), .source = amqp_cstr(src),
            .routing_key = amqp_cstr(rk), .arguments = args };
    }
    mgmt_amqp_method(s, &m);
}

static void
binding_list_or_create(struct mgmt_req *r, bool to_queue)
{
    struct vhost *vh = mgmt_req_vhost(r);
    struct exchange *src;
    if (vh == NULL || !binding_ends(r, vh, to_queue, &src))
        return;
    if (r->method == EVHTTP_REQ_GET) {
        json_t *arr = json_array();
        struct bind_filter f = { arr, r->arg[2], to_queue, NULL };
        exchange_foreach_binding(src, add_binding, &f);
        mgmt_reply(r, 200, arr);
        return;
    }
    json_t *o;
    uint8_t *abuf;
    struct amqp_table args;
    if (mgmt_body_object(r, &o) != 0)
        return;
    json_t *rkv = json_object_get(o, "routing_key");
    const char *rk = rkv == NULL ? "" : json_string_value(rkv);
    if (rk == NULL || strlen(rk) > 255) {
        mgmt_bad_request(r, "routing_key must be a short string");
        json_decref(o);
        return;
    }
    if (opt_table(r, o, "arguments", &abuf, &args) != 0) {
        json_decref(o);
        return;
    }
    struct mgmt_amqp *s = session(r, vh);
    send_binding(s, to_queue, true, r->arg[2], src->name, rk, args);
    struct binding b = { .key = (char *)rk, .key_len = strlen(rk),
                         .args = args };
    char pk[600], loc[700];
    properties_key(&b, pk, sizeof(pk));
    snprintf(loc, sizeof(loc), "%s/%s", r->arg[2], pk);
    free(abuf);
    json_decref(o);
    struct pending *p = pending_new(r, 201);
    p->ok_body = json_string(loc);
    mgmt_amqp_run(s, bind_done, p);
}

void
mgmt_bindings_eq(struct mgmt_req *r)
{
    binding_list_or_create(r, true);
}

void
mgmt_bindings_ee(struct mgmt_req *r)
{
    binding_list_or_create(r, false);
}

static void
binding_one(struct mgmt_req *r, bool to_queue)
{
    struct vhost *vh = mgmt_req_vhost(r);
    struct exchange *src;
    if (vh == NULL || !binding_ends(r, vh, to_queue, &src))
        return;
    json_t *arr = json_array();
    struct bind_filter f = { arr, r->arg[2], to_queue, r->arg[3] };
    exchange_foreach_binding(src, add_binding, &f);
    if (json_array_size(arr) == 0) {
        json_decref(arr);
        mgmt_not_found(r);
        return;
    }
    json_t *b = json_incref(json_array_get(arr, 0));
    json_decref(arr);
    if (r->method == EVHTTP_REQ_GET) {
        mgmt_reply(r, 200, b);
        return;
    }
    /* DELETE: unbind with the binding's own key and arguments */
    uint8_t *abuf;
    struct amqp_table args;
    if (opt_table(r, b, "arguments", &abuf, &args) != 0) {
        json_decref(b);
        return;
    }
    const char *rk = json_string_value(json_object_get(b, "routing_key"));
    struct mgmt_amqp *s = session(r, vh);
    send_binding(s, to_queue, false, r->arg[2], src->name, rk, args);
    free(abuf);
    json_decref(b);
    mgmt_amqp_run(s, simple_done, pending_new(r, 204));
}

void
mgmt_binding_eq(struct mgmt_req *r)
{
    binding_one(r, true);
}

void
mgmt_binding_ee(struct mgmt_req *r)
{
    binding_one(r, false);
}

/* ---- consumers ---- */

struct consumer_walk {
    struct mgmt_req *r;
    json_t *arr;
    const struct vhost *vh;     /* NULL: every visible one */
};

static void
add_chan_consumers(struct channel *ch, void *arg)
{
    struct consumer_walk *l = arg;
    channel_foreach_consumer(ch, add_consumer, l->arr);
}

static void
add_conn_consumers(struct conn *c, void *arg)
{
    struct consumer_walk *l = arg;
    if (c->vh == NULL || (l->vh != NULL && c->vh != l->vh) ||
        !mgmt_is_visible_vhost(l->r->user, c->vh->name))
        return;
    conn_foreach_channel(c, add_chan_consumers, l);
}

void
mgmt_consumers(struct mgmt_req *r)
{
    static const char *const by[] = { "consumer_tag", NULL };
    struct consumer_walk l = { r, json_array(), NULL };
    if (r->arg[0] != NULL && (l.vh = mgmt_req_vhost(r)) == NULL) {
        json_decref(l.arr);
        return;
    }
    conn_foreach(add_conn_consumers, &l);
    mgmt_reply_list(r, l.arr, by);
}
