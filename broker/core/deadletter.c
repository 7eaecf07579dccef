/*
 * SPDX-License-Identifier: Apache-2.0
 * Building the dead-lettered copy of a message: its content header
 * through reheader (reheader.h) with x-death updated; the body is
 * copied. Dead-lettering is rare, so clarity wins over avoiding the
 * copy.
 */
#include "broker/core/deadletter.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "amqp/props.h"
#include "broker/core/msg.h"
#include "broker/core/reheader.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

/* Does an x-death entry name this queue and reason? */
static bool
entry_is(struct amqp_table t, const char *queue, const char *reason)
{
    struct amqp_field q, r;
    return table_get(t, "queue", &q) && q.kind == AMQP_FIELD_LONGSTR &&
           amqp_bytes_eq(q.v.str, queue) && table_get(t, "reason", &r) &&
           r.kind == AMQP_FIELD_LONGSTR && amqp_bytes_eq(r.v.str, reason);
}

/* One x-death entry: count, reason, queue, time, exchange, routing-keys,
 * and original-expiration when the message had one. */
static void
put_death(struct wire_wr *w, int64_t count, const char *reason,
          const char *queue, const struct msg *m,
          const struct content_header *h)
{
    struct amqp_field f;
    size_t t = table_begin(w), a;

    f = (struct amqp_field){ .kind = AMQP_FIELD_I64, .v.i = count };
    (void)table_put_key(w, amqp_cstr("count"));
    field_put(w, &f);
    (void)table_put_str(w, "reason", reason);
    (void)table_put_str(w, "queue", queue);
    f = (struct amqp_field){ .kind = AMQP_FIELD_TIMESTAMP,
                             .v.u = (uint64_t)time(NULL) };
    (void)table_put_key(w, amqp_cstr("time"));
    field_put(w, &f);
    struct amqp_bytes x = { (const uint8_t *)msg_exchange(m),
                            msg_exchange_len(m) };
    (void)table_put_bytes(w, "exchange", x);
    (void)table_put_key(w, amqp_cstr("routing-keys"));
    wire_put_u8(w, AMQP_FIELD_ARRAY);
    a = table_begin(w);
    f = (struct amqp_field){ .kind = AMQP_FIELD_LONGSTR,
                             .v.str = { (const uint8_t *)msg_rkey(m),
                                        msg_rkey_len(m) } };
    field_put(w, &f);
    table_end(w, a);
    if (h->props.flags & AMQP_BASIC_EXPIRATION_FLAG)
        (void)table_put_bytes(w, "original-expiration",
                              h->props.expiration);
    table_end(w, t);
}

/* Write the new headers table (entries only, with its length prefix)
 * into 'w': this death first in x-death, its (queue, reason) entry's
 * count one more. */
static bool
build_headers(struct wire_wr *w, const struct msg *m,
              const struct content_header *h, const char *queue,
              const char *reason)
{
    struct amqp_table old = h->props.headers;
    struct amqp_field deaths = { .kind = AMQP_FIELD_VOID }, v;
    struct table_iter it;
    struct amqp_bytes k;
    int64_t count = 1;
    bool have_deaths = table_get(old, "x-death", &deaths) &&
                       deaths.kind == AMQP_FIELD_ARRAY;

    if (have_deaths) {
        array_iter_init(&it, deaths.v.array);
        while (array_next(&it, &v))
            if (v.kind == AMQP_FIELD_TABLE && entry_is(v.v.table, queue, reason)) {
                struct amqp_field c;
                if (table_get(v.v.table, "count", &c) &&
                    (c.kind == AMQP_FIELD_I64 || c.kind == AMQP_FIELD_L64))
                    count = c.v.i + 1;
            }
    }

    size_t outer = table_begin(w);
    table_iter_init(&it, old);
    while (table_next(&it, &k, &v)) {
        if (amqp_bytes_eq(k, "x-death"))
            continue;
        (void)table_put_key(w, k);
        field_put(w, &v);
    }
    (void)table_put_key(w, amqp_cstr("x-death"));
    wire_put_u8(w, AMQP_FIELD_ARRAY);
    size_t arr = table_begin(w);
    wire_put_u8(w, AMQP_FIELD_TABLE);
    put_death(w, count, reason, queue, m, h);
    if (have_deaths) {
        array_iter_init(&it, deaths.v.array);
        while (array_next(&it, &v))
            if (!(v.kind == AMQP_FIELD_TABLE &&
                  entry_is(v.v.table, queue, reason)))
                field_put(w, &v);
    }
    table_end(w, arr);
    if (!table_get(old, "x-first-death-reason", &v)) {
        (void)table_put_str(w, "x-first-death-reason", reason);
        (void)table_put_str(w, "x-first-death-queue", queue);
        struct amqp_bytes x = { (const uint8_t *)msg_exchange(m),
                                msg_exchange_len(m) };
        (void)table_put_bytes(w, "x-first-death-exchange", x);
    }
    table_end(w, outer);
    return true;
}

/* What build_headers needs, for reheader. */
struct death {
    const struct msg *m;
    const char *queue, *reason;
};

static bool
death_headers(struct wire_wr *w, struct content_header *h, void *arg)
{
    struct death *d = arg;
    if (!build_headers(w, d->m, h, d->queue, d->reason))
        return false;
    /* The expiration moved into x-death as original-expiration. */
    h->props.flags &= (uint16_t)~AMQP_BASIC_EXPIRATION_FLAG;
    return true;
}

struct msg *
deadletter_msg(const struct msg *m, const char *queue, const char *reason,
               const char *dlx, const char *dlrk)
{
    struct death d = { m, queue, reason };
    struct amqp_bytes xn = amqp_cstr(dlx), rk;

    if (dlrk)
        rk = amqp_cstr(dlrk);
    struct msg *dm = reheader_copy(m, death_headers, &d, &xn,
                                   dlrk ? &rk : NULL);
    /* With x-death added, the headers can outgrow what a table may
     * hold (16 MiB): such a message cannot be dead-lettered. */
    if (dm == NULL)
        return NULL;
    dm->born = (uint32_t)now_ms();   /* its time in the DLQ starts now */
    return dm;
}

bool
deadletter_is_cycle(const struct msg *dm, const char *queue)
{
    struct amqp_field deaths, v, f;
    struct table_iter it;
    bool automatic = true;

    if (!table_get(msg_headers(dm), "x-death", &deaths) ||
        deaths.kind != AMQP_FIELD_ARRAY)
        return false;
    array_iter_init(&it, deaths.v.array);
    while (array_next(&it, &v)) {
        /* Something RabbitMQ would not have written there: a client
         * did, so the cycle is not fully automatic. */
        if (v.kind != AMQP_FIELD_TABLE) {
            automatic = false;
            continue;
        }
        if (table_get(v.v.table, "reason", &f) &&
            f.kind == AMQP_FIELD_LONGSTR && amqp_bytes_eq(f.v.str, "rejected"))
            automatic = false;
        if (table_get(v.v.table, "queue", &f) &&
            f.kind == AMQP_FIELD_LONGSTR && amqp_bytes_eq(f.v.str, queue))
            return automatic;
    }
    return false;
}

static struct amqp_bytes
str_of(struct amqp_table t, const char *key)
{
    struct amqp_field f;
    if (table_get(t, key, &f) &&
        (f.kind == AMQP_FIELD_LONGSTR || f.kind == AMQP_FIELD_BYTES))
        return f.v.str;
    return (struct amqp_bytes){ (const uint8_t *)"", 0 };
}

bool
deadletter_first_death(const struct msg *m, struct deadletter_death *out)
{
    struct amqp_field deaths, d, f;
    struct table_iter it;

    memset(out, 0, sizeof(*out));
    if (!table_get(msg_headers(m), "x-death", &deaths) ||
        deaths.kind != AMQP_FIELD_ARRAY)
        return false;
    array_iter_init(&it, deaths.v.array);
    if (!array_next(&it, &d) || d.kind != AMQP_FIELD_TABLE)
        return false;
    out->reason = str_of(d.v.table, "reason");
    out->queue = str_of(d.v.table, "queue");
    out->exchange = str_of(d.v.table, "exchange");
    if (table_get(d.v.table, "count", &f) &&
        (f.kind == AMQP_FIELD_I64 || f.kind == AMQP_FIELD_L64 ||
         f.kind == AMQP_FIELD_I32 || f.kind == AMQP_FIELD_I16 ||
         f.kind == AMQP_FIELD_I8))
        out->count = f.v.i;
    if (table_get(d.v.table, "routing-keys", &f) &&
        f.kind == AMQP_FIELD_ARRAY) {
        struct amqp_field k;
        array_iter_init(&it, f.v.array);
        if (array_next(&it, &k) && k.kind == AMQP_FIELD_LONGSTR) {
            out->rkey = k.v.str;
            out->has_rkey = true;
        }
    }
    return true;
}
