/*
 * SPDX-License-Identifier: Apache-2.0
 * The clock of the load generators (roost-perf, bench/relay-ceiling):
 * nanoseconds on the monotonic clock, and an absolute sleep until one.
 */
#ifndef ROOST_TOOLS_PERF_CLOCK_H
#define ROOST_TOOLS_PERF_CLOCK_H

#include <errno.h>
#include <stdint.h>
#include <time.h>

static inline uint64_t
now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static inline void
sleep_until(uint64_t t)
{
    struct timespec ts = { (time_t)(t / 1000000000u),
                           (long)(t % 1000000000u) };
    while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
        ;
}

#endif
