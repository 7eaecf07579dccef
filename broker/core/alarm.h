/*
 * SPDX-License-Identifier: Apache-2.0
 * Resource alarms, as RabbitMQ has them: a memory high watermark over the
 * broker's own accounting (message bytes plus connection buffers) and a
 * free-disk low watermark on the data directory's filesystem. While an
 * alarm is set, a connection that publishes is blocked: it gets
 * connection.blocked (when the client announced the capability) and is no
 * longer read, while consumers go on draining. When every alarm clears,
 * blocked connections get connection.unblocked and are read again.
 */
#ifndef ROOST_BROKER_ALARM_H
#define ROOST_BROKER_ALARM_H

#include <stdbool.h>
#include <stdint.h>

/* Compute the limits and start the periodic checks. */
void alarm_init(void);
void alarm_shutdown(void);

/* The watermarks changed (a reload): the limits again from the
 * configuration, and both alarms checked now. */
void alarm_reconfigure(void);

/* True while any alarm is set: publishers must block. */
bool alarm_is_set(void);

/* Each of them. */
bool alarm_memory_set(void);
bool alarm_disk_set(void);

/* "low on memory" or "low on disk", as RabbitMQ says in
 * connection.blocked. */
const char *alarm_reason(void);

/* Re-check memory now (after a publish grew it). */
void alarm_check_memory(void);

/* True while memory use is above vm_memory_high_watermark_paging_ratio
 * of the limit: queues page more (queue.h). */
bool alarm_paging(void);

/* The memory limit in bytes, and what is counted against it now. */
uint64_t alarm_memory_limit(void);
uint64_t alarm_memory_used(void);

/* What the memory alarm counts, by kind (RabbitMQ's memory breakdown,
 * in Roost's terms); their sum is alarm_memory_used(). */
struct mem_kinds {
    uint64_t messages;          /* messages and their bodies */
    uint64_t input_blocks;      /* connections' input, lent bodies */
    uint64_t queue_entries;     /* the queues' rings */
    uint64_t output_buffers;    /* output not yet written (each tick) */
    uint64_t http_requests;     /* HTTP requests still arriving */
};
void alarm_memory_kinds(struct mem_kinds *out);

/* Bytes of HTTP requests still arriving, up or down by 'delta' (the
 * management API's and Prometheus's listeners: mgmt/http_guard.c). */
void alarm_http_bytes(int64_t delta);

/* Free bytes on the data directory's filesystem (every second). */
uint64_t alarm_disk_free(void);

#endif
