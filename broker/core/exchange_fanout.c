/*
 * SPDX-License-Identifier: Apache-2.0
 * The fanout exchange: every binding matches. The index is the exchange's
 * own binding list, so it keeps nothing of its own.
 */
#include "broker/core/exchange.h"

#include <stdlib.h>

#include "broker/lib/util.h"

struct fanout {
    struct binding **v;
    size_t n, cap;
};

static void *
fanout_create(void)
{
    return xcalloc(1, sizeof(struct fanout));
}

static void
fanout_destroy(void *index)
{
    struct fanout *f = index;
    free(f->v);
    free(f);
}

static int
fanout_add(void *index, struct binding *b, char *err, size_t errlen)
{
    struct fanout *f = index;
    (void)err;
    (void)errlen;
    if (f->n == f->cap) {
        f->cap = f->cap ? f->cap * 2 : 4;
        f->v = xrealloc(f->v, f->cap * sizeof(*f->v));
    }
    f->v[f->n++] = b;
    return 0;
}

static void
fanout_remove(void *index, struct binding *b)
{
    struct fanout *f = index;
    for (size_t i = 0; i < f->n; i++)
        if (f->v[i] == b) {
            /* Keep binding order: deliveries follow it. */
            for (size_t j = i + 1; j < f->n; j++)
                f->v[j - 1] = f->v[j];
            f->n--;
            return;
        }
}

static void
fanout_route(void *index, const struct msg *m, struct route_ctx *rc)
{
    struct fanout *f = index;
    (void)m;
    for (size_t i = 0; i < f->n; i++)
        route_emit(rc, f->v[i]);
}

const struct exchange_ops exchange_fanout_ops = {
    "fanout", fanout_create, fanout_destroy, fanout_add, fanout_remove,
    fanout_route,
};
