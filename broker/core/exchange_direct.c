/*
 * SPDX-License-Identifier: Apache-2.0
 * The direct exchange: a binding matches when its key equals the routing
 * key. The index hashes binding keys to the list of bindings with that key.
 */
#include "broker/core/exchange.h"

#include <stdlib.h>

#include "broker/core/msg.h"
#include "broker/lib/hmap.h"
#include "broker/lib/util.h"

struct key_list {
    struct binding **v;
    size_t n, cap;
};

static void *
direct_create(void)
{
    struct hmap *h = xmalloc(sizeof(*h));
    hmap_init(h);
    return h;
}

static void
direct_destroy(void *index)
{
    struct hmap *h = index;
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(h, &pos)) != NULL) {
        struct key_list *l = s->val;
        free(l->v);
        free(l);
    }
    hmap_destroy(h);
    free(h);
}

static int
direct_add(void *index, struct binding *b, char *err, size_t errlen)
{
    struct hmap *h = index;
    struct key_list *l = hmap_get(h, b->key, b->key_len);
    (void)err;
    (void)errlen;
    if (l == NULL) {
        l = xcalloc(1, sizeof(*l));
        hmap_put(h, b->key, b->key_len, l);
    }
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 2;
        l->v = xrealloc(l->v, l->cap * sizeof(*l->v));
    }
    l->v[l->n++] = b;
    return 0;
}

static void
direct_remove(void *index, struct binding *b)
{
    struct hmap *h = index;
    struct key_list *l = hmap_get(h, b->key, b->key_len);
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i] == b) {
            for (size_t j = i + 1; j < l->n; j++)
                l->v[j - 1] = l->v[j];
            l->n--;
            break;
        }
    if (l->n == 0) {
        hmap_del(h, b->key, b->key_len);
        free(l->v);
        free(l);
    }
}

static void
direct_route(void *index, const struct msg *m, struct route_ctx *rc)
{
    struct amqp_bytes key = route_key(rc);
    struct key_list *l = hmap_get(index, key.ptr, key.len);

    (void)m;
    if (l == NULL)
        return;
    for (size_t i = 0; i < l->n; i++)
        route_emit(rc, l->v[i]);
}

const struct exchange_ops exchange_direct_ops = {
    "direct", direct_create, direct_destroy, direct_add, direct_remove,
    direct_route,
};
