/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Sequence checking: what the consumers received of what the producers
 * sent, per (queue, producer) pair. Each pair has a bitmap of the
 * sequences seen, allocated in chunks as they come, shared by the
 * consumers of the queue (a bit set twice is a duplicate); each consumer
 * also remembers the highest sequence it saw from each producer (a lower
 * one after it is a reordering). At the end, what a queue was sent but
 * nobody received is lost.
 */
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "perf.h"

#define SEQ_CHUNK_BITS 20       /* 2^20 sequence bits (128 KiB) per chunk */
#define SEQ_CHUNKS 4096         /* so sequences below 2^32 are tracked */

struct seqtrack {
    _Atomic(uint64_t *) chunk[SEQ_CHUNKS];
    atomic_uint_fast64_t dups, reordered;
};

/* Returns the tracker, allocating it on first use (rare: once per pair). */
static struct seqtrack *
trk_get(struct pq *q, unsigned pid)
{
    struct seqtrack *t = atomic_load_explicit(&q->trk[pid],
                                              memory_order_acquire);
    if (t == NULL) {
        struct seqtrack *nt = xcalloc(1, sizeof(*nt));
        if (atomic_compare_exchange_strong(&q->trk[pid], &t, nt))
            t = nt;
        else
            free(nt);           /* another consumer won; 't' is theirs */
    }
    return t;
}

/* Sets the bit of 'seq'; returns true if it was already set (duplicate). */
static bool
trk_mark(struct seqtrack *t, uint64_t seq)
{
    size_t ci = (size_t)(seq >> SEQ_CHUNK_BITS);
    uint64_t *c = atomic_load_explicit(&t->chunk[ci], memory_order_acquire);
    uint64_t bit, old, off;
    if (c == NULL) {
        uint64_t *nc = xcalloc((size_t)1 << (SEQ_CHUNK_BITS - 6), 8);
        if (atomic_compare_exchange_strong(&t->chunk[ci], &c, nc))
            c = nc;
        else
            free(nc);
    }
    off = seq & (((uint64_t)1 << SEQ_CHUNK_BITS) - 1);
    bit = (uint64_t)1 << (off & 63);
    old = atomic_fetch_or_explicit((_Atomic uint64_t *)&c[off >> 6], bit,
                                   memory_order_relaxed);
    return (old & bit) != 0;
}

/* Counts the distinct sequences seen and the highest one plus one. */
static void
trk_count(struct seqtrack *t, uint64_t *unique, uint64_t *high)
{
    *unique = 0;
    *high = 0;
    if (t == NULL)
        return;
    for (size_t ci = 0; ci < SEQ_CHUNKS; ci++) {
        uint64_t *c = atomic_load(&t->chunk[ci]);
        size_t words = (size_t)1 << (SEQ_CHUNK_BITS - 6);
        if (c == NULL)
            continue;
        for (size_t w = 0; w < words; w++) {
            if (c[w] == 0)
                continue;
            *unique += (uint64_t)__builtin_popcountll(c[w]);
            *high = ((uint64_t)ci << SEQ_CHUNK_BITS) + w * 64 +
                    (64 - (uint64_t)__builtin_clzll(c[w]));
        }
    }
}

static void
trk_free(struct seqtrack *t)
{
    if (t == NULL)
        return;
    for (size_t ci = 0; ci < SEQ_CHUNKS; ci++)
        free(atomic_load(&t->chunk[ci]));
    free(t);
}

enum seq_mark
seq_mark(struct pq *q, uint64_t *last, unsigned pid, uint64_t seq)
{
    struct seqtrack *tr;
    enum seq_mark m = SEQ_NEW;

    if (pid >= MAX_PRODUCERS || seq >= ((uint64_t)SEQ_CHUNKS << SEQ_CHUNK_BITS))
        return SEQ_UNTRACKED;
    tr = trk_get(q, pid);
    bool seen = trk_mark(tr, seq);
    /* A stream's consumers each read every message: one consumer's own
     * order is all there is to check (back or again is a duplicate). */
    if (o.stream_offset)
        seen = seq + 1 <= last[pid];
    if (seen) {
        m = SEQ_DUPLICATE;
        atomic_fetch_add_explicit(&tr->dups, 1, memory_order_relaxed);
    } else if (seq + 1 < last[pid]) {
        m = SEQ_REORDERED;
        atomic_fetch_add_explicit(&tr->reordered, 1, memory_order_relaxed);
    }
    if (seq + 1 > last[pid])
        last[pid] = seq + 1;
    return m;
}

void
seq_tally(struct pq *q, struct seq_tally *out)
{
    memset(out, 0, sizeof(*out));
    for (int p = 0; p < MAX_PRODUCERS; p++) {
        struct seqtrack *t = atomic_load(&q->trk[p]);
        uint64_t u, h;
        trk_count(t, &u, &h);
        out->received += u;
        out->high += h;
        if (t != NULL) {
            out->dups += atomic_load(&t->dups);
            out->reordered += atomic_load(&t->reordered);
        }
    }
}

void
seq_free(struct pq *q)
{
    for (int p = 0; p < MAX_PRODUCERS; p++)
        trk_free(atomic_load(&q->trk[p]));
}
