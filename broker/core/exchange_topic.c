/*
 * SPDX-License-Identifier: Apache-2.0
 * The topic exchange: binding keys are dot-separated words where '*'
 * matches exactly one word and '#' zero or more. The index is a trie over
 * binding-key words, so routing walks only the branches the routing key
 * can match instead of every binding. A per-route memo of (node, word
 * position) pairs keeps patterns like "#.a.#.a.#" from exploding: each
 * pair is visited at most once.
 *
 * Routing results are cached by routing key (up to TOPIC_CACHE_MAX keys)
 * and the cache is dropped whenever a binding is added or removed, so a
 * stable set of bindings routes each known key with one hash lookup.
 */
#include "broker/core/exchange.h"

#include <stdlib.h>
#include <string.h>

#include "broker/core/msg.h"
#include "broker/lib/hmap.h"
#include "broker/lib/util.h"

/* A routing key is at most 255 bytes, so it has at most 256 words. */
#define MAX_WORDS 256

#define TOPIC_CACHE_MAX 4096

struct tnode {
    struct tnode *parent;
    char *word;                 /* key in the parent's map; NULL for root */
    size_t word_len;
    struct hmap kids;           /* literal words */
    struct tnode *star;         /* '*' */
    struct tnode *hash;         /* '#' */
    struct binding **v;         /* bindings whose key ends here */
    size_t n, cap;
    uint64_t memo_epoch;
    uint64_t memo[MAX_WORDS / 64 + 1];
};

/* The bindings one routing key matched. */
struct cached {
    struct binding **v;
    size_t n;
};

struct topic {
    struct tnode root;
    uint64_t epoch;
    struct hmap cache;          /* routing key -> struct cached */
};

static void
cache_clear(struct topic *t)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&t->cache, &pos)) != NULL) {
        struct cached *c = s->val;
        free(c->v);
        free(c);
    }
    hmap_destroy(&t->cache);
    hmap_init(&t->cache);
}

static void *
topic_create(void)
{
    struct topic *t = xcalloc(1, sizeof(*t));
    hmap_init(&t->root.kids);
    hmap_init(&t->cache);
    return t;
}

static void
node_free(struct tnode *n)
{
    size_t pos = 0;
    struct hmap_slot *s;
    while ((s = hmap_next(&n->kids, &pos)) != NULL)
        node_free(s->val);
    hmap_destroy(&n->kids);
    if (n->star)
        node_free(n->star);
    if (n->hash)
        node_free(n->hash);
    free(n->v);
    free(n->word);
    if (n->parent)
        free(n);
}

static void
topic_destroy(void *index)
{
    struct topic *t = index;
    cache_clear(t);
    node_free(&t->root);
    free(t);
}

static struct tnode *
child(struct tnode *n, const char *w, size_t len)
{
    struct tnode **slot = NULL;
    struct tnode *k;

    if (len == 1 && w[0] == '*')
        slot = &n->star;
    else if (len == 1 && w[0] == '#')
        slot = &n->hash;
    k = slot ? *slot : hmap_get(&n->kids, w, len);
    if (k)
        return k;
    k = xcalloc(1, sizeof(*k));
    k->parent = n;
    k->word = xstrndup(w, len);
    k->word_len = len;
    hmap_init(&k->kids);
    if (slot)
        *slot = k;
    else
        hmap_put(&n->kids, w, len, k);
    return k;
}

static int
topic_add(void *index, struct binding *b, char *err, size_t errlen)
{
    struct topic *t = index;
    struct tnode *n = &t->root;
    const char *p = b->key, *end = b->key + b->key_len;
    bool prev_hash = false;
    (void)err;
    (void)errlen;

    cache_clear(t);
    /* An empty key is zero words, as in RabbitMQ: only "#" matches it. */
    for (; b->key_len > 0;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t len = dot ? (size_t)(dot - p) : (size_t)(end - p);
        bool is_hash = len == 1 && p[0] == '#';
        /* "#.#" matches what "#" matches: fold runs of '#'. */
        if (!(is_hash && prev_hash))
            n = child(n, p, len);
        prev_hash = is_hash;
        if (dot == NULL)
            break;
        p = dot + 1;
    }
    if (n->n == n->cap) {
        n->cap = n->cap ? n->cap * 2 : 2;
        n->v = xrealloc(n->v, n->cap * sizeof(*n->v));
    }
    n->v[n->n++] = b;
    b->index_data = n;
    return 0;
}

static bool
node_is_empty(const struct tnode *n)
{
    return n->n == 0 && n->kids.count == 0 && !n->star && !n->hash;
}

static void
topic_remove(void *index, struct binding *b)
{
    struct tnode *n = b->index_data;

    cache_clear(index);
    for (size_t i = 0; i < n->n; i++)
        if (n->v[i] == b) {
            memmove(&n->v[i], &n->v[i + 1], (n->n - i - 1) * sizeof(*n->v));
            n->n--;
            break;
        }
    /* Prune the branch back to the first node still in use. */
    while (n->parent && node_is_empty(n)) {
        struct tnode *p = n->parent;
        if (p->star == n)
            p->star = NULL;
        else if (p->hash == n)
            p->hash = NULL;
        else
            hmap_del(&p->kids, n->word, n->word_len);
        hmap_destroy(&n->kids);
        free(n->v);
        free(n->word);
        free(n);
        n = p;
    }
}

struct walk {
    struct cached *out;
    size_t cap;
    uint64_t epoch;
    const char *w[MAX_WORDS];
    size_t wl[MAX_WORDS];
    size_t nw;
};

static void
match(struct walk *wk, struct tnode *n, size_t i)
{
    if (n->memo_epoch != wk->epoch) {
        n->memo_epoch = wk->epoch;
        memset(n->memo, 0, sizeof(n->memo));
    }
    if (n->memo[i / 64] & (1ull << (i % 64)))
        return;
    n->memo[i / 64] |= 1ull << (i % 64);

    if (n->hash)
        for (size_t j = i; j <= wk->nw; j++)
            match(wk, n->hash, j);
    if (i == wk->nw) {
        for (size_t k = 0; k < n->n; k++) {
            if (wk->out->n == wk->cap) {
                wk->cap = wk->cap ? wk->cap * 2 : 4;
                wk->out->v = xrealloc(wk->out->v, wk->cap * sizeof(*wk->out->v));
            }
            wk->out->v[wk->out->n++] = n->v[k];
        }
        return;
    }
    struct tnode *k = hmap_get(&n->kids, wk->w[i], wk->wl[i]);
    if (k)
        match(wk, k, i + 1);
    if (n->star)
        match(wk, n->star, i + 1);
}

static void
topic_route(void *index, const struct msg *m, struct route_ctx *rc)
{
    struct topic *t = index;
    struct walk wk;
    struct amqp_bytes key = route_key(rc);
    const char *p = (const char *)key.ptr, *end = p + key.len;
    struct cached *c = hmap_get(&t->cache, key.ptr, key.len);

    (void)m;
    if (c == NULL) {
        if (t->cache.count >= TOPIC_CACHE_MAX)
            cache_clear(t);
        c = xcalloc(1, sizeof(*c));
        hmap_put(&t->cache, key.ptr, key.len, c);
    } else {
        for (size_t k = 0; k < c->n; k++)
            route_emit(rc, c->v[k]);
        return;
    }
    wk.out = c;
    wk.cap = 0;
    wk.epoch = ++t->epoch;
    wk.nw = 0;
    for (; key.len > 0;) {
        const char *dot = memchr(p, '.', (size_t)(end - p));
        size_t len = dot ? (size_t)(dot - p) : (size_t)(end - p);
        wk.w[wk.nw] = p;
        wk.wl[wk.nw] = len;
        wk.nw++;
        if (dot == NULL)
            break;
        p = dot + 1;
    }
    match(&wk, &t->root, 0);
    for (size_t k = 0; k < c->n; k++)
        route_emit(rc, c->v[k]);
}

const struct exchange_ops exchange_topic_ops = {
    "topic", topic_create, topic_destroy, topic_add, topic_remove,
    topic_route,
};
