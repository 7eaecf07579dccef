/*
 * SPDX-License-Identifier: Apache-2.0
 * Delayed messages: the exchange type x-delayed-message, as the RabbitMQ
 * plugin rabbitmq-delayed-message-exchange has it (docs/compatibility.md,
 * "Delayed messages"). The exchange routes as its x-delayed-type (its
 * bindings are that type's); a message published to it with an x-delay
 * header of 1 .. 2^32-1 ms is held, and routed through the exchange when
 * it is due, to the queues bound at that moment, with x-delay set to
 * minus the delay (as the plugin does, so that it is not held again).
 * Any other x-delay (none, zero, negative, not a number) routes at once.
 *
 * Each exchange holds its messages in a heap by due time (ties in publish
 * order) with one timer, armed for its first. A persistent message held
 * by a durable exchange is in the journal before its publisher confirm:
 * an enqueue record under the exchange's store id (exchange.sid) whose
 * expiry field is the due time on the wall clock (docs/storage.md); its
 * routing and the settled record that ends it are one transaction, so
 * a crash leaves it either held or routed, never both or neither.
 * Anything else is held in memory only.
 *
 * Bound: delayed_message.max_messages held at once, over every exchange;
 * a publish beyond it is refused (basic.nack in confirm mode, dropped
 * otherwise; logged once per time the bound is reached), as a queue with
 * x-overflow=reject-publish refuses. Held messages are not paged: each
 * stays in memory whole until it is due, and counts towards the memory
 * alarm as any message.
 */
#ifndef ROOST_BROKER_DELAYED_H
#define ROOST_BROKER_DELAYED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/table.h"

struct exchange;
struct msg;

/* The longest delay held, as the plugin's (an Erlang timer's limit). */
#define DELAYED_MAX_MS UINT64_C(4294967295)

/* The delay 'm' asks for in ms, as the plugin reads x-delay: an integer
 * of any width, a float or decimal truncated, a longstr holding an
 * integer. 0 if it is to route at once (none, 0 or less, over
 * DELAYED_MAX_MS, another type). */
uint64_t delayed_delay(const struct msg *m);

/*
 * Hold 'm' (a reference is taken) in 'x' for 'delay' ms: -1 if the
 * bound refuses it, 1 if it went to the store (its confirm waits for
 * store_open_batch()), 0 if it is held in memory only.
 */
int delayed_hold(struct exchange *x, struct msg *m, uint64_t delay);

/* Recovery (store.c): entry 'seq' of 'x', due at 'due_wall' (wall-clock
 * ms; in the past: due at once, in due order), held again with 'm'
 * (whose store reference the store counted). */
void delayed_restore(struct exchange *x, uint64_t seq, uint64_t due_wall,
                     struct msg *m);

/* Recovery: position 'seq' of 'x' is named in the journal: new entries
 * are numbered after it. */
void delayed_note_seq(struct exchange *x, uint64_t seq);

/* Every held message that is in the store (compaction). */
void delayed_foreach_stored(void (*fn)(uint32_t sid, uint64_t seq,
                                       uint64_t due_wall, struct msg *m,
                                       void *arg),
                            void *arg);

#endif
