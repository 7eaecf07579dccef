/*
 * SPDX-License-Identifier: Apache-2.0
 * Small helpers used everywhere in the broker: allocation that aborts on
 * exhaustion (for small metadata only; anything a client can make large is
 * checked and counted before it is allocated), a monotonic clock, and a
 * string hash.
 */
#ifndef ROOST_BROKER_UTIL_H
#define ROOST_BROKER_UTIL_H

#include <stddef.h>
#include <stdint.h>

void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
/* A NUL-terminated copy of 'len' bytes. */
char *xstrndup(const void *s, size_t len);

/*
 * Double a ring buffer of '*cap' elements of 'size' bytes (a power of two,
 * or 0 before the first element) holding 'len' elements from index
 * '*head' on: the new one holds them from index 0. ring_resize gives it
 * 'ncap' elements (a power of two, at least 'len') the same way.
 */
void ring_resize(void *ring_ptr, size_t size, size_t *cap, size_t *head,
                 size_t len, size_t ncap);
void ring_grow(void *ring_ptr, size_t size, size_t *cap, size_t *head,
               size_t len);

/* Make '*arr' (of '*n' elements of 'size' bytes) hold index 'i', the
 * new elements zeroed: it doubles, from 16. */
void array_reach(void *arr_ptr, size_t size, size_t *n, size_t i);

/* Milliseconds from a monotonic clock, to the kernel tick (1-10 ms). */
uint64_t now_ms(void);
/* now_ms() as the last read of a connection took it: for what needs the
 * time only roughly (statistics), without reading the clock. */
extern uint64_t loop_ms;

/* The wall clock, in ms since the epoch. */
uint64_t wall_ms(void);

/* The same to the millisecond (CLOCK_MONOTONIC): for delays and rates
 * that must not run early by a tick. */
int64_t mono_ms(void);

/* FNV-1a over bytes. */
uint64_t hash_bytes(const void *p, size_t len);

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

#endif
