/*
 * SPDX-License-Identifier: Apache-2.0
 * Rate and depth history (docs/operations.md, "History"): what the
 * management API serves as RabbitMQ's samples (?lengths_age=&
 * lengths_incr=, ?msg_rates_age=&msg_rates_incr=) and the web page
 * draws. The stats tick records, for the broker and for each queue that
 * has counted something, a few values at fixed resolutions in three
 * rings: the last 10 minutes, hour and 8 hours. Nothing is recorded on
 * the AMQP path; a queue's history is one allocation of at most
 * HISTORY_QUEUE_MAX bytes, made at its first nonzero sample and kept
 * until the queue goes.
 */
#ifndef ROOST_BROKER_HISTORY_H
#define ROOST_BROKER_HISTORY_H

#include <stddef.h>
#include <stdint.h>

/* The values a history keeps: two depths, then five cumulative counters
 * (their samples are counts; a rate is the difference of two). */
enum history_col {
    HC_READY,
    HC_UNACKED,
    HC_PUBLISH,
    HC_DELIVER_GET,     /* deliver, deliver_no_ack, get, get_no_ack */
    HC_ACK,
    HC_REDELIVER,
    HC_DEAD_LETTER,     /* dead-lettered or dropped, every reason */
    HC_COUNT
};

/*
 * Whose history: the resolutions (in stats ticks, 5 s by default) and
 * lengths of the three rings. The broker's are RabbitMQ's global
 * retention policy (5 s for 10 minutes, 60 s for an hour, 600 s for 8
 * hours); a queue's are coarser so that it stays under
 * HISTORY_QUEUE_MAX (25 s, 150 s, 1200 s, 24 samples each).
 */
enum history_kind { HISTORY_BROKER, HISTORY_QUEUE };
#define HISTORY_TIERS 3
#define HISTORY_QUEUE_MAX 2048

struct history;

/* Record 'v' (the values now) into '*h' at the tick 'tick' (wall clock
 * 'wall_ms'): into each ring whose resolution divides the tick. '*h' is
 * made at the first sample with a nonzero value. */
void history_record(struct history **h, enum history_kind kind,
                    uint64_t tick, uint64_t wall_ms,
                    const uint64_t v[HC_COUNT]);
void history_free(struct history **h);
/* The bytes '*h' holds (0 for NULL). */
size_t history_memory(const struct history *h);

/* How far back each ring of a kind reaches, in ms, at the tick interval
 * 'interval_ms' (sample_retention_policies: 605 s, 3660 s, 29400 s for
 * the broker and 600 s, 3600 s, 28800 s for a queue at 5 s). */
void history_ages(enum history_kind kind, uint64_t interval_ms,
                  uint64_t out_ms[HISTORY_TIERS]);

struct history_sample {
    uint64_t ts_ms;     /* wall clock, ms since the epoch */
    uint64_t value;
};

/*
 * The samples of 'col' over the last 'age_s' seconds, one every 'incr_s'
 * (rounded up to the ring's resolution; the finest ring that covers
 * 'age_s' is used, or the longest), newest first, into 'out' (at most
 * 'max'); their count. 'now' is the column's value now: counters are
 * kept in 32 bits and widened against it.
 */
size_t history_samples(const struct history *h, enum history_col col,
                       uint64_t now, uint64_t interval_ms, uint64_t age_s,
                       uint64_t incr_s, struct history_sample *out,
                       size_t max);

#endif
