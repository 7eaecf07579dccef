/*
 * SPDX-License-Identifier: Apache-2.0
 * Dead-lettering: the copy of a message that a queue republishes to its
 * dead-letter exchange, with RabbitMQ's x-death header (an array of
 * tables, newest first, one per queue and reason with a count) and the
 * x-first-death-* headers, and without the expiration property (which
 * moves into x-death as original-expiration).
 */
#ifndef ROOST_BROKER_DEADLETTER_H
#define ROOST_BROKER_DEADLETTER_H

#include <stdbool.h>
#include <stdint.h>

#include "amqp/wire.h"

struct msg;

/*
 * A new message (one reference) for dead-lettering 'm' from 'queue' for
 * 'reason' to exchange 'dlx', with routing key 'dlrk' (NULL: keep the
 * original). NULL when its headers with x-death would be larger than a
 * table may be.
 */
struct msg *deadletter_msg(const struct msg *m, const char *queue,
                           const char *reason, const char *dlx,
                           const char *dlrk);

/*
 * Whether delivering the dead-lettered 'dm' (its x-death already says
 * this death) into 'queue' closes a fully automatic cycle, which
 * RabbitMQ 3.10 drops for that queue: x-death names 'queue' (the
 * message died there before, or is dying there now), and neither that
 * entry nor any newer one has reason "rejected" (a client's decision
 * breaks the cycle). A message published again (a replay) keeps its
 * x-death and is judged by the same rule.
 */
bool deadletter_is_cycle(const struct msg *dm, const char *queue);

/* The first (newest) entry of a message's x-death header, borrowing
 * the message's bytes; a field it lacks is empty ('count' 0). */
struct deadletter_death {
    struct amqp_bytes reason, queue, exchange;
    struct amqp_bytes rkey;     /* routing-keys[0] */
    bool has_rkey;
    int64_t count;
};

/* False if 'm' has no x-death header with a table in it. */
bool deadletter_first_death(const struct msg *m,
                            struct deadletter_death *out);

#endif
