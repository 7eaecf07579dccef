/*
 * SPDX-License-Identifier: Apache-2.0
 * Open-addressing hash map. The load factor stays below 3/4.
 */
#include "broker/lib/hmap.h"

#include <stdlib.h>
#include <string.h>

#include "broker/lib/util.h"

void
hmap_init(struct hmap *m)
{
    m->slots = NULL;
    m->cap = 0;
    m->count = 0;
}

void
hmap_destroy(struct hmap *m)
{
    for (size_t i = 0; i < m->cap; i++)
        free(m->slots[i].key);
    free(m->slots);
    hmap_init(m);
}

static size_t
find(const struct hmap *m, const void *key, size_t klen, uint64_t h)
{
    size_t mask = m->cap - 1;
    size_t i = (size_t)h & mask;
    while (m->slots[i].key != NULL) {
        if (m->slots[i].hash == h && m->slots[i].klen == klen &&
            memcmp(m->slots[i].key, key, klen) == 0)
            return i;
        i = (i + 1) & mask;
    }
    return i;
}

static void
grow(struct hmap *m)
{
    struct hmap_slot *old = m->slots;
    size_t oldcap = m->cap;

    m->cap = oldcap ? oldcap * 2 : 16;
    m->slots = xcalloc(m->cap, sizeof(*m->slots));
    for (size_t i = 0; i < oldcap; i++) {
        if (old[i].key == NULL)
            continue;
        size_t j = find(m, old[i].key, old[i].klen, old[i].hash);
        m->slots[j] = old[i];
    }
    free(old);
}

void *
hmap_get(const struct hmap *m, const void *key, size_t klen)
{
    if (m->count == 0)
        return NULL;
    size_t i = find(m, key, klen, hash_bytes(key, klen));
    return m->slots[i].key ? m->slots[i].val : NULL;
}

void *
hmap_put(struct hmap *m, const void *key, size_t klen, void *val)
{
    if ((m->count + 1) * 4 > m->cap * 3)
        grow(m);
    uint64_t h = hash_bytes(key, klen);
    size_t i = find(m, key, klen, h);
    struct hmap_slot *s = &m->slots[i];
    if (s->key) {
        void *prev = s->val;
        s->val = val;
        return prev;
    }
    s->key = xstrndup(key, klen);
    s->klen = klen;
    s->hash = h;
    s->val = val;
    m->count++;
    return NULL;
}

void *
hmap_del(struct hmap *m, const void *key, size_t klen)
{
    if (m->count == 0)
        return NULL;
    size_t mask = m->cap - 1;
    size_t i = find(m, key, klen, hash_bytes(key, klen));
    if (m->slots[i].key == NULL)
        return NULL;
    void *val = m->slots[i].val;
    free(m->slots[i].key);
    m->slots[i].key = NULL;
    m->count--;
    /* Shift back the entries of the probe run that follows, so lookups
     * never stop early at the hole. */
    for (size_t j = (i + 1) & mask; m->slots[j].key; j = (j + 1) & mask) {
        size_t home = (size_t)m->slots[j].hash & mask;
        /* Move j into the hole i if its home is not in (i, j]. */
        bool between = i <= j ? (home > i && home <= j)
                              : (home > i || home <= j);
        if (!between) {
            m->slots[i] = m->slots[j];
            m->slots[j].key = NULL;
            i = j;
        }
    }
    return val;
}

struct hmap_slot *
hmap_next(const struct hmap *m, size_t *pos)
{
    while (*pos < m->cap) {
        struct hmap_slot *s = &m->slots[(*pos)++];
        if (s->key)
            return s;
    }
    return NULL;
}
