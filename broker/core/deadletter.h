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
 * original). NULL when the message already died in this queue for this
 * reason and the reason is not "rejected": RabbitMQ drops such cycles.
 */
struct msg *deadletter_msg(const struct msg *m, const char *queue,
                           const char *reason, const char *dlx,
                           const char *dlrk);

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
