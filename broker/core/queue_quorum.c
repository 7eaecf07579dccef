/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The quorum queue type on one node (queue.h; docs/compatibility.md,
 * "Quorum queues"): durable, shared and kept, as RabbitMQ wants it; it
 * stores every message, transient or not, counts deliveries, and takes
 * the delivery-limit policy; the classic queue's own arguments are
 * refused with RabbitMQ's text.
 */
#include "broker/core/queue_int.h"

#include <stddef.h>

#include "broker/core/qargs.h"

static const char *
quorum_refused_property(bool durable, bool exclusive, bool auto_delete)
{
    return !durable ? "non-durable"
           : exclusive ? "exclusive-owner"
           : auto_delete ? "auto-delete" : NULL;
}

static const char *
quorum_refused_arg(const struct qargs *qa)
{
    return qa->classic_only ? qa->classic_only : qa->stream_only;
}

const struct queue_ops queue_quorum_ops = {
    .type = "quorum",
    .rabbit_name = "rabbit_quorum_queue",
    .stores_messages = true,
    .stores_transient = true,
    .counts_deliveries = true,
    .takes_delivery_limit_policy = true,
    .refused_property = quorum_refused_property,
    .refused_arg = quorum_refused_arg,
    QUEUE_RING_OPS,
};
