/*
 * SPDX-License-Identifier: Apache-2.0
 * A hash map from byte-string keys to pointers: open addressing, linear
 * probing, backward-shift deletion (no tombstones). The map owns copies of
 * its keys, never its values. Used for the names of vhosts, exchanges,
 * queues, users, consumer tags and routing keys.
 */
#ifndef ROOST_BROKER_HMAP_H
#define ROOST_BROKER_HMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

struct hmap_slot {
    char *key;      /* NUL-terminated copy; NULL for an empty slot */
    size_t klen;
    uint64_t hash;
    void *val;
};

struct hmap {
    struct hmap_slot *slots;
    size_t cap;     /* power of two, or 0 before the first insert */
    size_t count;
};

void hmap_init(struct hmap *m);
/* Free the slots and keys (not the values). */
void hmap_destroy(struct hmap *m);

void *hmap_get(const struct hmap *m, const void *key, size_t klen);
/* Insert or replace; returns the value it replaced, or NULL. */
void *hmap_put(struct hmap *m, const void *key, size_t klen, void *val);
/* Remove; returns the value removed, or NULL. */
void *hmap_del(struct hmap *m, const void *key, size_t klen);

static inline void *
hmap_get_str(const struct hmap *m, const char *key)
{
    return hmap_get(m, key, strlen(key));
}

/*
 * Iterate: start with *pos = 0; each call returns the next occupied slot
 * or NULL at the end. The map must not change during iteration.
 */
struct hmap_slot *hmap_next(const struct hmap *m, size_t *pos);

#endif
