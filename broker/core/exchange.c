/*
 * SPDX-License-Identifier: Apache-2.0
 * Exchanges and bindings common to every type, and the routing walk that
 * follows exchange-to-exchange bindings and alternate exchanges.
 */
#include "broker/core/exchange.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/defs.h"
#include "broker/core/msg.h"
#include "broker/core/queue.h"
#include "broker/core/reheader.h"
#include "broker/core/vhost.h"
#include "broker/lib/util.h"

/* Exchange-to-exchange chains are followed this deep at most, so that a
 * long chain cannot exhaust the stack. */
#define ROUTE_MAX_DEPTH 64

static const struct exchange_ops *const all_ops[] = {
    &exchange_direct_ops, &exchange_fanout_ops, &exchange_topic_ops,
    &exchange_headers_ops, &exchange_delayed_ops,
};

const struct exchange_ops *
exchange_ops_find(struct amqp_bytes type)
{
    for (size_t i = 0; i < NELEMS(all_ops); i++)
        if (amqp_bytes_eq(type, all_ops[i]->type))
            return all_ops[i];
    return NULL;
}

static uint8_t *
copy_table(struct amqp_table t, struct amqp_table *out)
{
    uint8_t *buf = xmalloc(t.len ? t.len : 1);
    if (t.len)
        memcpy(buf, t.ptr, t.len);
    out->ptr = buf;
    out->len = t.len;
    return buf;
}

struct exchange *
exchange_new(struct vhost *vh, struct amqp_bytes name,
             const struct exchange_ops *ops, bool durable, bool auto_delete,
             bool internal, struct amqp_table args)
{
    struct exchange *x = xcalloc(1, sizeof(*x));
    struct amqp_field v;

    x->name = xstrndup(name.ptr, name.len);
    x->name_len = name.len;
    x->vh = vh;
    x->ops = ops;
    x->durable = durable;
    x->auto_delete = auto_delete;
    x->internal = internal;
    x->args_buf = copy_table(args, &x->args);
    if (table_get(x->args, "alternate-exchange", &v) &&
        v.kind == AMQP_FIELD_LONGSTR)
        x->alternate = xstrndup(v.v.str.ptr, v.v.str.len);
    TAILQ_INIT(&x->bindings);
    TAILQ_INIT(&x->dest_bindings);
    x->index = ops->create_for ? ops->create_for(x) : ops->create();
    return x;
}

void
exchange_foreach_binding(struct exchange *x,
                         void (*fn)(const struct binding *b, void *arg),
                         void *arg)
{
    const struct binding *b;
    TAILQ_FOREACH(b, &x->bindings, src_link)
        fn(b, arg);
}

void
exchange_foreach_dest_binding(struct exchange *x,
                              void (*fn)(const struct binding *b, void *arg),
                              void *arg)
{
    const struct binding *b;
    TAILQ_FOREACH(b, &x->dest_bindings, dest_link)
        fn(b, arg);
}

void
exchange_free(struct exchange *x)
{
    struct binding *b;

    while ((b = TAILQ_FIRST(&x->dest_bindings)) != NULL)
        binding_free(b);
    /* No auto-delete cascade into ourselves while we tear down. */
    x->auto_delete = false;
    while ((b = TAILQ_FIRST(&x->bindings)) != NULL)
        binding_free(b);
    x->ops->destroy(x->index);
    free(x->alternate);
    free(x->policy_alternate);
    free(x->args_buf);
    stats_series_free(&x->series);
    free(x->name);
    free(x);
}

static void
describe(char *out, size_t len, bool present, const struct amqp_field *v,
         bool typed)
{
    char val[128];

    if (!present) {
        snprintf(out, len, "none");
        return;
    }
    struct amqp_bytes text;
    if (!field_text(v, val, sizeof(val), &text)) {
        snprintf(val, sizeof(val), "...");
    } else if (text.ptr != (const uint8_t *)val) {
        size_t n = text.len < 100 ? text.len : 100;
        memcpy(val, text.ptr, n);
        val[n] = '\0';
    }
    if (typed)
        snprintf(out, len, "the value '%s' of type '%s'", val,
                 field_type_name(v->kind));
    else
        snprintf(out, len, "'%s'", val);
}

bool
args_equivalent(struct amqp_table cur, struct amqp_table got,
                const char *const *keys, const char *what, char *err,
                size_t errlen)
{
    for (; *keys; keys++) {
        struct amqp_field a, b;
        bool has_a = table_get(cur, *keys, &a), has_b = table_get(got, *keys, &b);
        if (has_a == has_b && (!has_a || field_values_equal(&a, &b)))
            continue;
        char da[200], db[200];
        /* RabbitMQ names the types only when one side is missing. */
        describe(da, sizeof(da), has_a, &a, !(has_a && has_b));
        describe(db, sizeof(db), has_b, &b, !(has_a && has_b));
        snprintf(err, errlen,
                 "inequivalent arg '%s' for %s: received %s but current is %s",
                 *keys, what, db, da);
        return false;
    }
    return true;
}

static bool
binding_matches(const struct binding *b, struct queue *q,
                struct exchange *dest_x, struct amqp_bytes key,
                struct amqp_table args)
{
    return b->q == q && b->dest_x == dest_x && b->key_len == key.len &&
           memcmp(b->key, key.ptr, key.len) == 0 && table_values_equal(b->args, args);
}

int
exchange_bind(struct exchange *src, struct queue *q, struct exchange *dest_x,
              struct amqp_bytes key, struct amqp_table args, char *err,
              size_t errlen)
{
    struct binding *b;

    TAILQ_FOREACH(b, &src->bindings, src_link)
        if (binding_matches(b, q, dest_x, key, args))
            return 0;
    b = xcalloc(1, sizeof(*b));
    b->src = src;
    b->q = q;
    b->dest_x = dest_x;
    b->key = xstrndup(key.ptr, key.len);
    b->key_len = key.len;
    b->args_buf = copy_table(args, &b->args);
    if (src->ops->add(src->index, b, err, errlen) != 0) {
        free(b->args_buf);
        free(b->key);
        free(b);
        return -1;
    }
    TAILQ_INSERT_TAIL(&src->bindings, b, src_link);
    src->nbindings++;
    if (q)
        TAILQ_INSERT_TAIL(&q->bindings, b, dest_link);
    else
        TAILQ_INSERT_TAIL(&dest_x->dest_bindings, b, dest_link);
    defs_changed(DEFS_BINDING_ADDED, b);
    return 0;
}

static struct binding *
binding_find(struct exchange *src, struct queue *q, struct exchange *dest_x,
             struct amqp_bytes key, struct amqp_table args)
{
    struct binding *b;

    TAILQ_FOREACH(b, &src->bindings, src_link)
        if (binding_matches(b, q, dest_x, key, args))
            return b;
    return NULL;
}

bool
exchange_is_bound(struct exchange *src, struct queue *q,
                  struct exchange *dest_x, struct amqp_bytes key,
                  struct amqp_table args)
{
    return binding_find(src, q, dest_x, key, args) != NULL;
}

bool
exchange_unbind(struct exchange *src, struct queue *q,
                struct exchange *dest_x, struct amqp_bytes key,
                struct amqp_table args)
{
    struct binding *b = binding_find(src, q, dest_x, key, args);

    if (b == NULL)
        return false;
    binding_free(b);
    return true;
}

void
binding_free(struct binding *b)
{
    struct exchange *src = b->src;

    defs_changed(DEFS_BINDING_REMOVED, b);
    src->ops->remove(src->index, b);
    TAILQ_REMOVE(&src->bindings, b, src_link);
    src->nbindings--;
    if (b->q)
        TAILQ_REMOVE(&b->q->bindings, b, dest_link);
    else
        TAILQ_REMOVE(&b->dest_x->dest_bindings, b, dest_link);
    free(b->args_buf);
    free(b->key);
    free(b);
    /* An auto-delete exchange goes when its last binding (as source)
     * goes. */
    if (src->auto_delete && src->nbindings == 0 && !src->is_default) {
        vhost_remove_exchange(src->vh, src);
        exchange_free(src);
    }
}

/* ---- routing ---- */

struct route_ctx {
    const struct msg *m;
    struct amqp_bytes key;      /* the routing key of this pass */
    struct route_result *out;
    uint64_t epoch;             /* queues: each once over every pass */
    uint64_t xepoch;            /* exchanges: each once per pass */
    unsigned depth;
};

struct amqp_bytes
route_key(const struct route_ctx *rc)
{
    return rc->key;
}

void
route_result_init(struct route_result *r)
{
    r->qs = NULL;
    r->n = r->cap = 0;
}

void
route_result_free(struct route_result *r)
{
    free(r->qs);
    route_result_init(r);
}

static void route_into(struct route_ctx *rc, struct exchange *x);

void
route_emit(struct route_ctx *rc, struct binding *b)
{
    if (b->dest_x) {
        route_into(rc, b->dest_x);
        return;
    }
    struct queue *q = b->q;
    if (q->epoch == rc->epoch)
        return;
    q->epoch = rc->epoch;
    if (rc->out->n == rc->out->cap) {
        rc->out->cap = rc->out->cap ? rc->out->cap * 2 : 8;
        rc->out->qs = xrealloc(rc->out->qs, rc->out->cap * sizeof(*rc->out->qs));
    }
    rc->out->qs[rc->out->n++] = q;
}

static void
route_into(struct route_ctx *rc, struct exchange *x)
{
    if (x->epoch == rc->xepoch || rc->depth >= ROUTE_MAX_DEPTH)
        return;
    x->epoch = rc->xepoch;
    rc->depth++;
    size_t before = rc->out->n;
    if (x->is_default) {
        struct queue *q = vhost_queue(x->vh, rc->key);
        if (q && q->epoch != rc->epoch) {
            struct binding implicit = { .q = q };
            route_emit(rc, &implicit);
        }
    } else {
        x->ops->route(x->index, rc->m, rc);
    }
    /* The argument wins over a policy, as in RabbitMQ. */
    const char *alt = x->alternate ? x->alternate : x->policy_alternate;
    if (rc->out->n == before && alt) {
        struct exchange *ae = vhost_exchange(x->vh, amqp_cstr(alt));
        if (ae)
            route_into(rc, ae);
    }
    rc->depth--;
}

void
exchange_route_keys(struct exchange *x, const struct msg *m,
                    const struct amqp_bytes *extra, size_t nextra,
                    struct route_result *out)
{
    struct amqp_bytes key = { (const uint8_t *)msg_rkey(m), msg_rkey_len(m) };
    uint64_t epoch = ++x->vh->route_epoch;
    struct route_ctx rc = { m, key, out, epoch, epoch, 0 };

    out->n = 0;
    route_into(&rc, x);
    for (size_t i = 0; i < nextra; i++) {
        rc.key = extra[i];
        rc.xepoch = ++x->vh->route_epoch;
        route_into(&rc, x);
    }
}

void
exchange_route(struct exchange *x, const struct msg *m,
               struct route_result *out)
{
    exchange_route_keys(x, m, NULL, 0, out);
}

/* ---- sender-selected distribution (CC, BCC) ---- */

static const char *const cc_bcc[] = { "CC", "BCC" };

/* The headers without BCC (reheader.h). */
static bool
without_bcc(struct wire_wr *w, struct content_header *h, void *arg)
{
    (void)arg;
    wire_put_table_without(w, h->props.headers, "BCC");
    return true;
}

static struct msg *
sender_selected(struct exchange *x, struct msg *m, struct route_result *rr)
{
    struct amqp_table headers = msg_headers(m);
    struct amqp_bytes *keys = NULL;
    size_t n = 0, cap = 0;
    struct amqp_field v, e;
    struct table_iter it;
    bool bcc = false;

    for (size_t i = 0; i < NELEMS(cc_bcc); i++) {
        if (!table_get(headers, cc_bcc[i], &v) || v.kind != AMQP_FIELD_ARRAY)
            continue;
        bcc |= i == 1;
        array_iter_init(&it, v.v.array);
        while (array_next(&it, &e)) {
            if (e.kind != AMQP_FIELD_LONGSTR)
                continue;
            if (n == cap) {
                cap = cap ? cap * 2 : 8;
                keys = xrealloc(keys, cap * sizeof(*keys));
            }
            keys[n++] = e.v.str;
        }
    }
    exchange_route_keys(x, m, keys, n, rr);
    free(keys);
    if (!bcc || rr->n == 0)
        return m;
    struct msg *copy = reheader_copy(m, without_bcc, NULL, NULL, NULL);
    return copy ? copy : m;   /* NULL cannot happen: a table only shrinks */
}

struct msg *
exchange_route_msg(struct exchange *x, struct msg *m, struct route_result *out)
{
    if (msg_cc_bcc(m))
        return sender_selected(x, m, out);
    exchange_route(x, m, out);
    return m;
}
