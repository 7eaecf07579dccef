/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The classic queue type (queue.h): any properties; every argument but
 * the quorum queue's own; persistent messages of durable queues stored.
 */
#include "broker/core/queue_int.h"

#include <stddef.h>

#include "broker/core/qargs.h"

static const char *
classic_refused_property(bool durable, bool exclusive, bool auto_delete)
{
    (void)durable;
    (void)exclusive;
    (void)auto_delete;
    return NULL;
}

static const char *
classic_refused_arg(const struct qargs *qa)
{
    return qa->quorum_only ? qa->quorum_only
           : qa->stream_only ? qa->stream_only : qa->not_classic;
}

const struct queue_ops queue_classic_ops = {
    .type = "classic",
    .rabbit_name = "rabbit_classic_queue",
    .stores_messages = true,
    .refused_property = classic_refused_property,
    .refused_arg = classic_refused_arg,
    QUEUE_RING_OPS,
};
