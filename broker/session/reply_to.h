/*
 * SPDX-License-Identifier: Apache-2.0
 * Direct reply-to, as RabbitMQ has it: a requester consumes (no-ack)
 * from the pseudo-queue "amq.rabbitmq.reply-to" and publishes requests
 * with reply_to set to that name; the broker rewrites it into an
 * address "amq.rabbitmq.reply-to.TOKEN" naming the requester's channel;
 * a reply published to that address through the default exchange goes
 * straight to the requester's consumer, without a queue, or nowhere if
 * the channel is gone.
 */
#ifndef ROOST_BROKER_REPLY_TO_H
#define ROOST_BROKER_REPLY_TO_H

#include <stdbool.h>

#include "amqp/method.h"
#include "amqp/props.h"

struct channel;
struct msg;

#define REPLY_TO "amq.rabbitmq.reply-to"

/* The pseudo-queue's name, or an address ("amq.rabbitmq.reply-to."...). */
bool reply_to_is_pseudo(struct amqp_bytes name);
bool reply_to_is_address(struct amqp_bytes name);

/* basic.consume on the pseudo-queue: RabbitMQ's checks (no-ack, one per
 * channel), consume-ok. */
void reply_to_consume(struct channel *ch, const struct amqp_basic_consume *a);

/* basic.cancel: true if 'tag' was the channel's reply consumer (gone
 * now). */
bool reply_to_cancel(struct channel *ch, struct amqp_bytes tag);

/* The channel closes: its address stops working. */
void reply_to_channel_gone(struct channel *ch);

/*
 * A publish whose content header 'h' (encoded in 'hdr', 'len' bytes)
 * has reply_to = "amq.rabbitmq.reply-to": the header with the channel's
 * address instead, a new allocation (*out, *out_len, free it), or false
 * with the channel closed (406) when it has no reply consumer.
 */
bool reply_to_rewrite(struct channel *ch, const struct content_header *h,
                      const uint8_t *hdr, size_t len, uint8_t **out,
                      size_t *out_len);

/* A reply to the address 'rkey': delivered to its requester; false if
 * the address names no open channel (the reply is dropped). */
bool reply_to_deliver(struct amqp_bytes rkey, struct msg *m);

/* Whether 'name' is the pseudo-queue or a live address (passive
 * declares of them succeed, as in RabbitMQ). */
bool reply_to_exists(struct amqp_bytes name);

#endif
