/*
 * SPDX-License-Identifier: Apache-2.0
 * RabbitMQ's firehose (rabbit_trace.erl): while tracing is on in a vhost,
 * every publish into it and every delivery from it (basic.deliver and
 * basic.get-ok) is copied to its topic exchange amq.rabbitmq.trace, with
 * routing key "publish.EXCHANGE" or "deliver.QUEUE", the original body,
 * and headers saying what the message was (exchange_name, routing_keys,
 * properties, node) and who sent or took it (vhost, connection, channel,
 * user; routed_queues for a publish, redelivered for a delivery). A copy
 * has no other property: it is transient, and no one confirms it.
 * Messages of amq.rabbitmq.trace itself are never traced.
 *
 * Off, the firehose costs one test of a flag in the vhost on the publish
 * and the delivery paths (trace_is_on, with trace_set in vhost.h: the
 * flag is the core's, the copies the session's). As in RabbitMQ, the flag is not
 * kept across a restart: every vhost starts with tracing off
 * (docs/tracing.md).
 */
#ifndef ROOST_BROKER_TRACE_H
#define ROOST_BROKER_TRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/core/vhost.h"   /* trace_is_on */

struct channel;
struct msg;
struct qentry;
struct queue;

/*
 * A publish 'm' on 'ch' was routed to the 'n' queues 'qs': copy it to the
 * firehose. Its routing key and the keys of its CC and BCC headers make
 * routing_keys; its properties are shown without BCC, as RabbitMQ keeps
 * the message.
 */
void trace_publish(struct channel *ch, const struct msg *m,
                   struct queue *const *qs, size_t n);

/*
 * A publish that an open transaction holds: traced now, with the queues
 * it would be routed to now, as RabbitMQ traces at basic.publish and not
 * at tx.commit (a publish rolled back was traced all the same).
 */
void trace_publish_held(struct channel *ch, struct msg *m);

/*
 * Entry 'e' of 'q' goes to 'ch' (basic.deliver or basic.get-ok) with the
 * content header 'hdr' ('hdr_len' bytes: the message's own, or as a
 * delivery count rewrote it): copy it to the firehose.
 */
void trace_deliver(struct channel *ch, const struct queue *q,
                   const struct qentry *e, const uint8_t *hdr,
                   size_t hdr_len);

#endif
