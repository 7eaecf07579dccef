/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The core without a session, for its unit tests (core_fixture.h): the
 * broker as roostd sets it up below the session (configuration defaults,
 * broker_core_init, a vhost), the RAM store opened, and helpers that call
 * the core as the session's handlers do.
 */
#include "tests/unit/core_fixture.h"

#include <dirent.h>
#include <event2/event.h>
#include <unistd.h>

#include "amqp/props.h"
#include "broker/core/broker.h"
#include "broker/core/qargs.h"
#include "broker/core/store.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

struct vhost *fx_vh;

/* The fakes made by fx_consume, freed by fx_teardown. */
static struct fx_consumer *consumers[32];
static size_t nconsumers;

/* The delivery log (fx_deliveries). */
static char dlog[8192];
static size_t dlog_len;

void
fx_setup(void)
{
    config_defaults(&broker.cfg);
    log_set_level(LOG_LVL_WARN);
    struct event_base *base = event_base_new();
    ck_assert_ptr_nonnull(base);
    broker_core_init(base);
    store_ram_open();
    fx_vh = vhost_create("/", false);
    nconsumers = 0;
    dlog_len = 0;
    dlog[0] = '\0';
}

static void settle(struct fx_consumer *f, size_t i, enum fx_settle how);

/* Nothing here reaches the network or the disk: no descriptor of the
 * process is a socket, and the store in use is still the RAM store (the
 * journal, which would open a data directory, never was). */
static void
assert_no_socket_no_disk(void)
{
    DIR *d = opendir("/proc/self/fd");
    struct dirent *de;

    ck_assert_str_eq(store_impl->name, "ram");
    if (d == NULL)
        return;     /* no /proc: nothing to look at */
    while ((de = readdir(d)) != NULL) {
        char path[300], link[300];
        snprintf(path, sizeof(path), "/proc/self/fd/%s", de->d_name);
        ssize_t n = readlink(path, link, sizeof(link) - 1);
        if (n <= 0)
            continue;
        link[n] = '\0';
        ck_assert_msg(strncmp(link, "socket:", 7) != 0,
                      "descriptor %s is a socket (%s)", de->d_name, link);
    }
    closedir(d);
}

void
fx_teardown(void)
{
    assert_no_socket_no_disk();
    /* As a channel closes: its deliveries settled, its consumers off
     * their queues, then the broker as roostd puts it away. */
    for (size_t i = 0; i < nconsumers; i++) {
        struct fx_consumer *f = consumers[i];
        while (f->nheld > 0)
            settle(f, 0, FX_ACK);
        if (!f->c.cancelled)
            queue_remove_consumer(f->c.q, &f->c);
        consumer_unref(&f->c);
    }
    nconsumers = 0;
    store_close();
    broker_core_free();
    event_base_free(broker.base);
    broker.base = NULL;
    config_free(&broker.cfg);
    fx_vh = NULL;
}

TCase *
fx_tcase(Suite *s, const char *name)
{
    TCase *tc = tcase_create(name);
    tcase_add_checked_fixture(tc, fx_setup, fx_teardown);
    suite_add_tcase(s, tc);
    return tc;
}

/* ---- tables ---- */

/* One entry of a spec, "k=v", "k#12", "k:true", "k!" or "k=[a,b]". */
static void
put_entry(struct wire_wr *w, const char *tok, size_t n)
{
    size_t k = strcspn(tok, "=#:!");
    ck_assert_msg(k < n, "table entry '%.*s' has no =, #, : or !", (int)n,
                  tok);
    struct amqp_bytes key = { (const uint8_t *)tok, k };
    const char *v = tok + k + 1;
    size_t vlen = n - k - 1;
    struct amqp_field f;

    ck_assert_int_eq(table_put_key(w, key), AMQP_OK);
    if (tok[k] == '!') {
        f = (struct amqp_field){ .kind = AMQP_FIELD_VOID };
        field_put(w, &f);
    } else if (tok[k] == ':') {
        bool b = vlen == 4 && memcmp(v, "true", 4) == 0;
        f = (struct amqp_field){ .kind = AMQP_FIELD_BOOL, .v.b = b };
        field_put(w, &f);
    } else if (tok[k] == '#') {
        char num[32];
        ck_assert_uint_lt(vlen, sizeof(num));
        memcpy(num, v, vlen);
        num[vlen] = '\0';
        f = (struct amqp_field){ .kind = AMQP_FIELD_I64,
                                 .v.i = strtoll(num, NULL, 10) };
        field_put(w, &f);
    } else if (vlen >= 2 && v[0] == '[' && v[vlen - 1] == ']') {
        wire_put_u8(w, AMQP_FIELD_ARRAY);
        size_t mark = table_begin(w);
        for (size_t i = 1; i < vlen - 1;) {
            size_t e = i;
            while (e < vlen - 1 && v[e] != ',')
                e++;
            f = (struct amqp_field){ .kind = AMQP_FIELD_LONGSTR,
                                     .v.str = { (const uint8_t *)v + i,
                                                e - i } };
            field_put(w, &f);
            i = e + 1;
        }
        table_end(w, mark);
    } else {
        f = (struct amqp_field){ .kind = AMQP_FIELD_LONGSTR,
                                 .v.str = { (const uint8_t *)v, vlen } };
        field_put(w, &f);
    }
}

struct amqp_table
fx_table(struct fx_table *t, const char *spec)
{
    struct wire_wr w;
    wire_wr_init(&w, t->buf, sizeof(t->buf));
    size_t mark = table_begin(&w);
    for (const char *p = spec ? spec : ""; *p != '\0';) {
        size_t n = strcspn(p, " ");
        if (n > 0)
            put_entry(&w, p, n);
        p += n;
        p += strspn(p, " ");
    }
    table_end(&w, mark);
    ck_assert_msg(!wire_wr_overflowed(&w), "table '%s' too long", spec);
    struct amqp_table out = { t->buf + 4, w.len - 4 };
    ck_assert_int_eq(table_validate(out.ptr, out.len, 1), AMQP_OK);
    return out;
}

/* ---- declaring ---- */

struct queue *
fx_find_queue(const char *name)
{
    return vhost_queue(fx_vh, amqp_cstr(name));
}

struct exchange *
fx_find_exchange(const char *name)
{
    return vhost_exchange(fx_vh, amqp_cstr(name));
}

struct queue *
fx_queue(const char *name, bool durable, const char *args)
{
    struct fx_table t;
    struct amqp_table a = fx_table(&t, args);
    char what[300], err[1024];
    struct qargs qa;

    snprintf(what, sizeof(what), "queue '%s' in vhost '/'", name);
    enum qargs_result r = qargs_parse(a, what, &qa, err, sizeof(err));
    ck_assert_msg(r == QARGS_OK, "declare %s: %s", name, err);
    const struct queue_ops *type = qa.type ? qa.type : &queue_classic_ops;
    const char *refused = type->refused_property(durable, false, false);
    ck_assert_msg(refused == NULL, "declare %s: type %s refuses '%s'", name,
                  type->type, refused);
    ck_assert_ptr_null(fx_find_queue(name));
    struct queue *q = queue_new(fx_vh, amqp_cstr(name), durable, false,
                                false, NULL, a, &qa);
    vhost_add_queue(fx_vh, q);
    return q;
}

struct exchange *
fx_exchange(const char *name, const char *type, const char *args)
{
    struct fx_table t;
    struct amqp_table a = fx_table(&t, args);
    const struct exchange_ops *ops = exchange_ops_find(amqp_cstr(type));
    char err[400];

    ck_assert_msg(ops != NULL, "no exchange type %s", type);
    ck_assert_msg(ops->check_args == NULL ||
                  ops->check_args(a, err, sizeof(err)) == 0,
                  "declare %s: %s", name, err);
    ck_assert_ptr_null(fx_find_exchange(name));
    struct exchange *x = exchange_new(fx_vh, amqp_cstr(name), ops, false,
                                      false, false, a);
    vhost_add_exchange(fx_vh, x);
    return x;
}

static void
bind_to(const char *src, struct queue *q, struct exchange *dest,
     const char *key, const char *args)
{
    struct exchange *x = fx_find_exchange(src);
    struct fx_table t;
    char err[400] = "";

    ck_assert_msg(x != NULL, "no exchange %s", src);
    ck_assert_msg(exchange_bind(x, q, dest, amqp_cstr(key), fx_table(&t, args),
                                err, sizeof(err)) == 0,
                  "bind %s '%s': %s", src, key, err);
}

void
fx_bind(const char *x, const char *q, const char *key, const char *args)
{
    struct queue *dest = fx_find_queue(q);
    ck_assert_msg(dest != NULL, "no queue %s", q);
    bind_to(x, dest, NULL, key, args);
}

void
fx_bind_x(const char *src, const char *dest, const char *key,
          const char *args)
{
    struct exchange *d = fx_find_exchange(dest);
    ck_assert_msg(d != NULL, "no exchange %s", dest);
    bind_to(src, NULL, d, key, args);
}

/* ---- messages ---- */

struct msg *
fx_msg(const char *exchange, const char *rkey, const char *body,
       const struct fx_props *p)
{
    static const struct fx_props none;
    struct content_header h = { .class_id = AMQP_CLASS_BASIC,
                                .body_size = strlen(body) };
    struct fx_table ht;
    uint8_t hdr[4096];
    struct wire_wr w;

    if (p == NULL)
        p = &none;
    if (p->persistent) {
        h.props.flags |= AMQP_BASIC_DELIVERY_MODE_FLAG;
        h.props.delivery_mode = 2;
    }
    if (p->has_priority) {
        h.props.flags |= AMQP_BASIC_PRIORITY_FLAG;
        h.props.priority = p->priority;
    }
    if (p->expiration) {
        h.props.flags |= AMQP_BASIC_EXPIRATION_FLAG;
        h.props.expiration = amqp_cstr(p->expiration);
    }
    if (p->headers) {
        h.props.flags |= AMQP_BASIC_HEADERS_FLAG;
        h.props.headers = fx_table(&ht, p->headers);
    }
    if (p->message_id) {
        h.props.flags |= AMQP_BASIC_MESSAGE_ID_FLAG;
        h.props.message_id = amqp_cstr(p->message_id);
    }
    wire_wr_init(&w, hdr, sizeof(hdr));
    ck_assert_int_eq(content_header_encode(&h, &w), AMQP_OK);
    ck_assert(!wire_wr_overflowed(&w));
    /* The message keeps the encoded header; 'dh' reads it, as the
     * channel's decode of the frame does. */
    struct content_header dh;
    ck_assert_int_eq(content_header_decode(hdr, w.len, &dh), AMQP_OK);
    struct msg *m = msg_new(amqp_cstr(exchange), amqp_cstr(rkey), hdr, w.len,
                            &dh, false, NULL);
    msg_body_copy_in(m, (const uint8_t *)body);
    m->born = (uint32_t)now_ms();
    return m;
}

struct fx_pub
fx_publish(const char *exchange, const char *rkey, const char *body,
           const struct fx_props *p)
{
    struct exchange *x = fx_find_exchange(exchange);
    struct route_result rr;
    struct fx_pub r = { 0, 0, 0 };

    ck_assert_msg(x != NULL, "no exchange '%s'", exchange);
    struct msg *m = fx_msg(exchange, rkey, body, p);
    route_result_init(&rr);
    struct msg *out = exchange_route_msg(x, m, &rr);
    r.routed = rr.n;
    for (size_t i = 0; i < rr.n; i++) {
        int v = queue_push(rr.qs[i], out);
        r.stored += v > 0;
        r.refused += v < 0;
    }
    route_result_free(&rr);
    if (out != m)
        msg_unref(out);
    msg_unref(m);
    return r;
}

static int
by_name(const void *a, const void *b)
{
    const struct queue *qa = *(struct queue *const *)a;
    const struct queue *qb = *(struct queue *const *)b;
    return strcmp(qa->name, qb->name);
}

const char *
fx_route(const char *exchange, const char *rkey, const struct fx_props *p)
{
    static char out[1024];
    struct exchange *x = fx_find_exchange(exchange);
    struct route_result rr;
    size_t n = 0;

    ck_assert_msg(x != NULL, "no exchange '%s'", exchange);
    struct msg *m = fx_msg(exchange, rkey, "", p);
    route_result_init(&rr);
    struct msg *copy = exchange_route_msg(x, m, &rr);
    if (rr.n > 1)
        qsort(rr.qs, rr.n, sizeof(*rr.qs), by_name);
    out[0] = '\0';
    for (size_t i = 0; i < rr.n; i++)
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s",
                              i ? "," : "", rr.qs[i]->name);
    route_result_free(&rr);
    if (copy != m)
        msg_unref(copy);
    msg_unref(m);
    return out;
}

const char *
fx_body(const struct msg *m, bool redelivered)
{
    static char bufs[4][256];
    static unsigned next;
    char *b = bufs[next++ % 4];

    ck_assert_uint_lt(m->body_len, sizeof(bufs[0]) - 1);
    msg_body_copy(m, (uint8_t *)b);
    b[m->body_len] = '\0';
    if (redelivered)
        strcat(b, "*");
    return b;
}

const char *
fx_drain(struct queue *q)
{
    static char out[4096];
    struct qentry e;
    size_t n = 0;

    out[0] = '\0';
    while (queue_take(q, &e)) {
        n += (size_t)snprintf(out + n, sizeof(out) - n, "%s%s", n ? " " : "",
                              fx_body(e.m, e.redelivered));
        queue_ack(q, e);
    }
    return out;
}

/* ---- the fake consumer ---- */

/* The fake around its struct consumer, its first member. */
static struct fx_consumer *
fake_of(struct consumer *c)
{
    return (struct fx_consumer *)c;
}

static bool
fake_can_take(const struct consumer *c)
{
    const struct fx_consumer *f = (const struct fx_consumer *)c;
    return !f->blocked && (c->prefetch == 0 || c->unacked < c->prefetch);
}

static bool
fake_backs_up(const struct consumer *c)
{
    (void)c;
    return false;
}

/* As channel_deliver for an acked delivery (channel_track): held with a
 * reference to its queue and to its consumer, counted unacked. */
static void
fake_deliver(struct consumer *c, struct queue *q, struct qentry e)
{
    struct fx_consumer *f = fake_of(c);

    ck_assert_uint_lt(f->nheld, FX_HELD_MAX);
    dlog_len += (size_t)snprintf(dlog + dlog_len, sizeof(dlog) - dlog_len,
                                 "%s%s:%s", dlog_len ? " " : "", f->name,
                                 fx_body(e.m, e.redelivered));
    ck_assert_uint_lt(dlog_len, sizeof(dlog));
    f->held[f->nheld].q = queue_ref(q);
    f->held[f->nheld].e = e;
    f->nheld++;
    c->refs++;
    c->unacked++;
}

static void
fake_cancelled(struct consumer *c)
{
    fake_of(c)->told_cancelled = true;
}

static const struct consumer_ops fake_ops = {
    .can_take = fake_can_take,
    .backs_up = fake_backs_up,
    .deliver = fake_deliver,
    .cancelled = fake_cancelled,
};

struct fx_consumer *
fx_consume(struct queue *q, const char *name, uint32_t prefetch,
           int64_t priority)
{
    struct fx_consumer *f = xcalloc(1, sizeof(*f));

    ck_assert_uint_lt(nconsumers, NELEMS(consumers));
    snprintf(f->name, sizeof(f->name), "%s", name);
    f->c.q = q;
    f->c.ops = &fake_ops;
    f->c.tag = xstrdup(name);
    f->c.tag_len = strlen(name);
    f->c.prefetch = prefetch;
    f->c.priority = priority;
    f->c.refs = 1;      /* ours, as the channel's tag map */
    consumers[nconsumers++] = f;
    queue_add_consumer(q, &f->c);
    queue_dispatch(q);
    return f;
}

void
fx_cancel(struct fx_consumer *f)
{
    queue_remove_consumer(f->c.q, &f->c);
}

/* Settle held delivery 'i' as the channel's settle_one does. */
static void
settle(struct fx_consumer *f, size_t i, enum fx_settle how)
{
    struct fx_held h = f->held[i];

    memmove(&f->held[i], &f->held[i + 1],
            (f->nheld - i - 1) * sizeof(f->held[0]));
    f->nheld--;
    switch (how) {
    case FX_ACK:
        queue_ack(h.q, h.e);
        break;
    case FX_REQUEUE:
        queue_requeue(h.q, h.e);
        break;
    case FX_RETRY:
        queue_retry(h.q, h.e);
        break;
    case FX_REJECT:
        queue_reject(h.q, h.e);
        break;
    }
    f->c.unacked--;
    consumer_unref(&f->c);
    queue_unref(h.q);
}

uint32_t
fx_settle(struct fx_consumer *f, const char *body, enum fx_settle how)
{
    for (size_t i = 0; i < f->nheld; i++) {
        if (strcmp(fx_body(f->held[i].e.m, false), body) != 0)
            continue;
        struct queue *q = queue_ref(f->held[i].q);
        uint32_t n = f->held[i].e.deliveries;
        settle(f, i, how);
        /* The channel dispatches the queues it settled into. */
        queue_dispatch(q);
        queue_unref(q);
        return n;
    }
    ck_abort_msg("%s holds no delivery '%s'", f->name, body);
    return 0;
}

const char *
fx_deliveries(void)
{
    static char out[sizeof(dlog)];
    memcpy(out, dlog, dlog_len + 1);
    dlog_len = 0;
    dlog[0] = '\0';
    return out;
}

/* ---- the loop ---- */

bool
fx_loop_until(bool (*done)(void *arg), void *arg, int ms)
{
    uint64_t end = now_ms() + (uint64_t)ms;
    while (!done(arg)) {
        if (now_ms() >= end)
            return false;
        struct timeval tv = { 0, 5000 };
        event_base_loopexit(broker.base, &tv);
        event_base_dispatch(broker.base);
    }
    return true;
}
