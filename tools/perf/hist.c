/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The latency histogram: 64 linear sub-buckets per power of two of
 * nanoseconds, so that a percentile is read to within 1/64 of its value,
 * over the whole range of uint64_t, in a fixed 30 KiB.
 */
#include <math.h>

#include "perf.h"

static unsigned
hist_index(uint64_t v)
{
    unsigned e, shift;
    if (v < H_SUB)
        return (unsigned)v;
    e = 63u - (unsigned)__builtin_clzll(v);
    shift = e - H_SUB_BITS;
    return (shift + 1) * H_SUB + (unsigned)((v >> shift) - H_SUB);
}

/* The highest value that falls in bucket 'i' (HdrHistogram's convention). */
static uint64_t
hist_upper(unsigned i)
{
    unsigned shift;
    if (i < H_SUB)
        return i;
    shift = i / H_SUB - 1;
    return (((uint64_t)H_SUB + i % H_SUB) << shift) + ((uint64_t)1 << shift) - 1;
}

void
hist_add(struct hist *h, uint64_t v)
{
    h->b[hist_index(v)]++;
    if (h->n == 0 || v < h->min)
        h->min = v;
    if (v > h->max)
        h->max = v;
    h->n++;
    h->sum += v;
}

void
hist_merge(struct hist *into, const struct hist *h)
{
    if (h->n == 0)
        return;
    for (unsigned i = 0; i < H_BUCKETS; i++)
        into->b[i] += h->b[i];
    if (into->n == 0 || h->min < into->min)
        into->min = h->min;
    if (h->max > into->max)
        into->max = h->max;
    into->n += h->n;
    into->sum += h->sum;
}

uint64_t
hist_pct(const struct hist *h, double q)
{
    uint64_t rank, seen = 0;
    if (h->n == 0)
        return 0;
    rank = (uint64_t)ceil(q * (double)h->n);
    if (rank < 1)
        rank = 1;
    for (unsigned i = 0; i < H_BUCKETS; i++) {
        seen += h->b[i];
        if (seen >= rank) {
            uint64_t v = hist_upper(i);
            return v > h->max ? h->max : v < h->min ? h->min : v;
        }
    }
    return h->max;
}
