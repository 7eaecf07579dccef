/*
 * SPDX-License-Identifier: Apache-2.0
 * Rate and depth history: three rings of 32-bit samples in one
 * allocation (history.h).
 */
#include "broker/core/history.h"

#include <stdbool.h>
#include <stdlib.h>

#include "broker/lib/util.h"

struct shape {
    uint16_t every[HISTORY_TIERS];      /* ticks per sample */
    uint8_t len[HISTORY_TIERS];         /* samples kept */
};

static const struct shape shapes[] = {
    [HISTORY_BROKER] = { { 1, 12, 120 }, { 121, 61, 49 } },
    [HISTORY_QUEUE] = { { 5, 30, 240 }, { 24, 24, 24 } },
};

/*
 * The newest sample of ring i was taken at the last multiple of its
 * resolution up to 'last_tick' (every tick records, from the first):
 * one wall time serves all three.
 */
struct history {
    uint64_t last_tick;
    uint64_t last_wall_ms;
    uint8_t kind;
    uint8_t head[HISTORY_TIERS];        /* the next slot */
    uint8_t n[HISTORY_TIERS];           /* samples held */
    uint32_t v[][HC_COUNT];             /* ring 0's rows, then 1's, 2's */
};

static size_t
rows_of(const struct shape *s)
{
    size_t n = 0;
    for (int i = 0; i < HISTORY_TIERS; i++)
        n += s->len[i];
    return n;
}

static size_t
bytes_of(enum history_kind kind)
{
    return sizeof(struct history) +
           rows_of(&shapes[kind]) * sizeof(uint32_t[HC_COUNT]);
}

_Static_assert(sizeof(struct history) +
               (24 * 3) * sizeof(uint32_t[HC_COUNT]) <= HISTORY_QUEUE_MAX,
               "a queue's history stays within HISTORY_QUEUE_MAX");

/* The first row of ring 'tier'. */
static uint32_t (*ring_rows(const struct history *h, int tier))[HC_COUNT]
{
    const struct shape *s = &shapes[h->kind];
    size_t off = 0;
    for (int i = 0; i < tier; i++)
        off += s->len[i];
    return (uint32_t (*)[HC_COUNT])h->v[off];
}

void
history_record(struct history **hp, enum history_kind kind, uint64_t tick,
               uint64_t wall_ms, const uint64_t v[HC_COUNT])
{
    struct history *h = *hp;
    if (h == NULL) {
        bool any = false;
        for (int c = 0; c < HC_COUNT; c++)
            any |= v[c] != 0;
        if (!any)
            return;
        h = *hp = xcalloc(1, bytes_of(kind));
        h->kind = (uint8_t)kind;
    }
    const struct shape *s = &shapes[h->kind];
    for (int t = 0; t < HISTORY_TIERS; t++) {
        if (tick % s->every[t] != 0)
            continue;
        uint32_t *row = ring_rows(h, t)[h->head[t]];
        for (int c = 0; c < HC_COUNT; c++)
            /* depths saturate; counters keep their low 32 bits */
            row[c] = c <= HC_UNACKED && v[c] > UINT32_MAX ? UINT32_MAX
                                                          : (uint32_t)v[c];
        h->head[t] = (uint8_t)((h->head[t] + 1) % s->len[t]);
        if (h->n[t] < s->len[t])
            h->n[t]++;
    }
    h->last_tick = tick;
    h->last_wall_ms = wall_ms;
}

void
history_free(struct history **h)
{
    free(*h);
    *h = NULL;
}

size_t
history_memory(const struct history *h)
{
    return h ? bytes_of((enum history_kind)h->kind) : 0;
}

void
history_ages(enum history_kind kind, uint64_t interval_ms,
             uint64_t out_ms[HISTORY_TIERS])
{
    for (int t = 0; t < HISTORY_TIERS; t++)
        out_ms[t] = (uint64_t)shapes[kind].len[t] * shapes[kind].every[t] *
                    interval_ms;
}

/* The finest ring that covers 'age_s' and holds samples (the longest
 * one that holds any when none covers it); -1: none holds any. */
static int
pick_ring(const struct history *h, uint64_t interval_ms, uint64_t age_ms)
{
    const struct shape *s = &shapes[h->kind];
    int best = -1;
    for (int t = 0; t < HISTORY_TIERS; t++) {
        if (h->n[t] == 0)
            continue;
        best = t;
        if ((uint64_t)s->len[t] * s->every[t] * interval_ms >= age_ms)
            break;
    }
    return best;
}

size_t
history_samples(const struct history *h, enum history_col col, uint64_t now,
                uint64_t interval_ms, uint64_t age_s, uint64_t incr_s,
                struct history_sample *out, size_t max)
{
    uint64_t age_ms = age_s * 1000, incr_ms = incr_s * 1000;
    int t = h ? pick_ring(h, interval_ms, age_ms) : -1;
    if (t < 0 || interval_ms == 0)
        return 0;
    const struct shape *s = &shapes[h->kind];
    uint64_t res_ms = s->every[t] * interval_ms;
    size_t step = incr_ms > res_ms ? (incr_ms + res_ms - 1) / res_ms : 1;
    uint64_t newest_tick = h->last_tick - h->last_tick % s->every[t];
    uint64_t newest_ms = h->last_wall_ms -
                         (h->last_tick - newest_tick) * interval_ms;
    uint32_t (*rows)[HC_COUNT] = ring_rows(h, t);
    size_t k = 0;
    for (size_t i = 0; i < h->n[t] && k < max && i * res_ms <= age_ms;
         i += step) {
        uint32_t v = rows[(h->head[t] + s->len[t] - 1 - i) % s->len[t]][col];
        out[k].ts_ms = newest_ms - i * res_ms;
        out[k].value = col <= HC_UNACKED ? v : now - (uint32_t)((uint32_t)now
                                                               - v);
        k++;
    }
    return k;
}
