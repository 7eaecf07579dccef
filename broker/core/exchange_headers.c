/*
 * SPDX-License-Identifier: Apache-2.0
 * The headers exchange: a binding's arguments are matched against the
 * message's headers table. x-match is "all" (the default: every argument
 * must match), "any" (one is enough), or "all-with-x"/"any-with-x", which
 * also compare arguments whose names start with "x-" (plain all/any skip
 * them). An argument of type void matches when the header is present.
 * Routing checks every binding, as RabbitMQ does: there is no index that
 * would avoid it for arbitrary header sets.
 */
#include "broker/core/exchange.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/msg.h"
#include "broker/lib/util.h"

enum xmatch { XM_ALL, XM_ANY, XM_ALL_X, XM_ANY_X };

struct hbind {
    struct binding *b;
    enum xmatch mode;
};

struct headers {
    struct hbind *v;
    size_t n, cap;
};

static void *
headers_create(void)
{
    return xcalloc(1, sizeof(struct headers));
}

static void
headers_destroy(void *index)
{
    struct headers *h = index;
    free(h->v);
    free(h);
}

static int
headers_add(void *index, struct binding *b, char *err, size_t errlen)
{
    struct headers *h = index;
    struct amqp_field v;
    enum xmatch mode = XM_ALL;

    if (table_get(b->args, "x-match", &v)) {
        struct amqp_bytes s = v.kind == AMQP_FIELD_LONGSTR ? v.v.str
                                                           : amqp_cstr("");
        if (amqp_bytes_eq(s, "all"))
            mode = XM_ALL;
        else if (amqp_bytes_eq(s, "any"))
            mode = XM_ANY;
        else if (amqp_bytes_eq(s, "all-with-x"))
            mode = XM_ALL_X;
        else if (amqp_bytes_eq(s, "any-with-x"))
            mode = XM_ANY_X;
        else {
            char esc[64];
            size_t n = s.len < sizeof(esc) - 1 ? s.len : sizeof(esc) - 1;
            memcpy(esc, s.ptr, n);
            esc[n] = '\0';
            snprintf(err, errlen,
                     "Invalid x-match field value <<\"%s\">>; expected all, any, "
                     "all-with-x, or any-with-x", esc);
            return -1;
        }
    }
    if (h->n == h->cap) {
        h->cap = h->cap ? h->cap * 2 : 4;
        h->v = xrealloc(h->v, h->cap * sizeof(*h->v));
    }
    h->v[h->n].b = b;
    h->v[h->n].mode = mode;
    h->n++;
    return 0;
}

static void
headers_remove(void *index, struct binding *b)
{
    struct headers *h = index;
    for (size_t i = 0; i < h->n; i++)
        if (h->v[i].b == b) {
            memmove(&h->v[i], &h->v[i + 1], (h->n - i - 1) * sizeof(*h->v));
            h->n--;
            return;
        }
}

static bool
binding_matches(const struct hbind *hb, struct amqp_table headers)
{
    bool any = hb->mode == XM_ANY || hb->mode == XM_ANY_X;
    bool with_x = hb->mode == XM_ALL_X || hb->mode == XM_ANY_X;
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field want, got;

    table_iter_init(&it, hb->b->args);
    while (table_next(&it, &k, &want)) {
        if (amqp_bytes_eq(k, "x-match"))
            continue;
        if (!with_x && k.len >= 2 && memcmp(k.ptr, "x-", 2) == 0)
            continue;
        char key[256];
        memcpy(key, k.ptr, k.len);
        key[k.len] = '\0';
        bool ok = table_get(headers, key, &got) &&
                  (want.kind == AMQP_FIELD_VOID || field_values_equal(&want, &got));
        if (any && ok)
            return true;
        if (!any && !ok)
            return false;
    }
    return !any;
}

static void
headers_route(void *index, const struct msg *m, struct route_ctx *rc)
{
    struct headers *h = index;
    for (size_t i = 0; i < h->n; i++)
        if (binding_matches(&h->v[i], msg_headers(m)))
            route_emit(rc, h->v[i].b);
}

const struct exchange_ops exchange_headers_ops = {
    "headers", headers_create, headers_destroy, headers_add, headers_remove,
    headers_route,
};
