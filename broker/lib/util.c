/*
 * SPDX-License-Identifier: Apache-2.0
 * Allocation wrappers, the clock and hashing.
 */
#include "broker/lib/util.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "broker/lib/log.h"

void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        fatalx("out of memory allocating %zu bytes", n);
    return p;
}

void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        fatalx("out of memory allocating %zu x %zu bytes", n, size);
    return p;
}

void *
xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (q == NULL)
        fatalx("out of memory reallocating %zu bytes", n);
    return q;
}

char *
xstrdup(const char *s)
{
    return xstrndup(s, strlen(s));
}

char *
xstrndup(const void *s, size_t len)
{
    char *p = xmalloc(len + 1);
    if (len)
        memcpy(p, s, len);
    p[len] = '\0';
    return p;
}

/*
 * The coarse clock (a few milliseconds' resolution, at the kernel's tick)
 * costs a fifth of the precise one, and the broker reads it several times
 * per message. Every use is a timeout or an age in milliseconds; a timer
 * that fires before the coarse clock reaches its deadline re-arms for
 * the rest (queue.c), so nothing happens early.
 */
void
ring_grow(void *ring_ptr, size_t size, size_t *cap, size_t *head, size_t len)
{
    ring_resize(ring_ptr, size, cap, head, len, *cap ? *cap * 2 : 16);
}

void
ring_resize(void *ring_ptr, size_t size, size_t *cap, size_t *head,
            size_t len, size_t ncap)
{
    uint8_t **ring = ring_ptr;
    uint8_t *n = xmalloc(ncap * size);

    if (len > 0) {
        /* The elements from the head to the end, then those that wrapped. */
        size_t first = *cap - *head < len ? *cap - *head : len;
        memcpy(n, *ring + *head * size, first * size);
        memcpy(n + first * size, *ring, (len - first) * size);
    }
    free(*ring);
    *ring = n;
    *cap = ncap;
    *head = 0;
}

uint64_t loop_ms;

int64_t
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t
now_ms(void)
{
    struct timespec ts;
#ifdef CLOCK_MONOTONIC_COARSE
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
#else
    clock_gettime(CLOCK_MONOTONIC, &ts);
#endif
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

uint64_t
hash_bytes(const void *p, size_t len)
{
    const unsigned char *s = p;
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < len; i++) {
        h ^= s[i];
        h *= 1099511628211ull;
    }
    return h;
}

void
array_reach(void *arr_ptr, size_t size, size_t *n, size_t i)
{
    uint8_t **arr = arr_ptr;
    if (i < *n)
        return;
    size_t cap = *n ? *n : 16;
    while (cap <= i)
        cap *= 2;
    *arr = xrealloc(*arr, cap * size);
    memset(*arr + *n * size, 0, (cap - *n) * size);
    *n = cap;
}
