/*
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

#endif
