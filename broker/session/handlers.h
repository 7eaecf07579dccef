/*
 * SPDX-License-Identifier: Apache-2.0
 * The method handlers, one file per AMQP class (handle_connection.c,
 * handle_channel.c, handle_exchange.c, handle_queue.c, handle_basic.c,
 * handle_tx.c, handle_confirm.c), one function per method, each named in
 * its row of the method table (methods.c), and what they share. Private
 * to the session.
 */
#ifndef ROOST_BROKER_HANDLERS_H
#define ROOST_BROKER_HANDLERS_H

#include <stdbool.h>

#include "amqp/method.h"
#include "broker/session/channel.h"

struct conn;
struct exchange;
struct queue;

/* Channel 0 (handle_connection.c): the handshake, then the open
 * connection's methods. */
void handle_connection_start_ok(struct conn *c, const struct amqp_method *m);
void handle_connection_tune_ok(struct conn *c, const struct amqp_method *m);
void handle_connection_open(struct conn *c, const struct amqp_method *m);
void handle_connection_close(struct conn *c, const struct amqp_method *m);
void handle_connection_update_secret(struct conn *c,
                                     const struct amqp_method *m);

/* On an open channel, whose content state is idle. */
void handle_channel_open(struct channel *ch, const struct amqp_method *m);
void handle_channel_flow(struct channel *ch, const struct amqp_method *m);
void handle_channel_flow_ok(struct channel *ch, const struct amqp_method *m);
void handle_channel_close(struct channel *ch, const struct amqp_method *m);
void handle_channel_close_ok(struct channel *ch, const struct amqp_method *m);
void handle_access_request(struct channel *ch, const struct amqp_method *m);
void handle_exchange_declare(struct channel *ch, const struct amqp_method *m);
void handle_exchange_delete(struct channel *ch, const struct amqp_method *m);
void handle_exchange_bind(struct channel *ch, const struct amqp_method *m);
void handle_exchange_unbind(struct channel *ch, const struct amqp_method *m);
void handle_queue_declare(struct channel *ch, const struct amqp_method *m);
void handle_queue_bind(struct channel *ch, const struct amqp_method *m);
void handle_queue_unbind(struct channel *ch, const struct amqp_method *m);
void handle_queue_purge(struct channel *ch, const struct amqp_method *m);
void handle_queue_delete(struct channel *ch, const struct amqp_method *m);
void handle_basic_qos(struct channel *ch, const struct amqp_method *m);
void handle_basic_consume(struct channel *ch, const struct amqp_method *m);
void handle_basic_cancel(struct channel *ch, const struct amqp_method *m);
void handle_basic_publish(struct channel *ch, const struct amqp_method *m);
void handle_basic_get(struct channel *ch, const struct amqp_method *m);
void handle_basic_ack(struct channel *ch, const struct amqp_method *m);
void handle_basic_nack(struct channel *ch, const struct amqp_method *m);
void handle_basic_reject(struct channel *ch, const struct amqp_method *m);
void handle_basic_recover(struct channel *ch, const struct amqp_method *m);
void handle_tx_select(struct channel *ch, const struct amqp_method *m);
void handle_tx_commit(struct channel *ch, const struct amqp_method *m);
void handle_tx_rollback(struct channel *ch, const struct amqp_method *m);
void handle_confirm_select(struct channel *ch, const struct amqp_method *m);

/* Send a reply method on the channel. */
void channel_send(struct channel *ch, const struct amqp_method *m);

/* Send a reply with no arguments, unless 'nowait'. */
void channel_reply(struct channel *ch, uint32_t id, bool nowait);

/*
 * Look up an exchange for the method 'm'; on failure the channel is
 * already closed with 404 and NULL is returned.
 */
struct exchange *channel_find_exchange(struct channel *ch, uint32_t method_id,
                                       struct amqp_bytes name);

/*
 * Look up a queue; an empty name means the channel's last declared queue.
 * Fails the channel with 404 (none) or 405 (another connection's exclusive
 * queue) and returns NULL.
 */
struct queue *channel_find_queue(struct channel *ch, uint32_t method_id,
                                 struct amqp_bytes name);

/* "name" escaped for a reply text. */
const char *channel_esc(char *buf, size_t len, struct amqp_bytes name);

/* Random "prefix" + 22 base64url characters, as RabbitMQ names them. */
void channel_gen_name(char *out, size_t outlen, const char *prefix);

/* The queue last declared on the channel (for empty names). */
struct amqp_bytes channel_last_queue(const struct channel *ch);

/* Remember the queue last declared on the channel (for empty names). */
void channel_set_last_queue(struct channel *ch, const char *name, size_t len);

/* Release the consumer with 'tag' (basic.cancel); false if unknown. */
bool channel_cancel_consumer(struct channel *ch, struct amqp_bytes tag);

/* What a log (stream) queue 'q' does not do ('what': "basic.get",
 * ...): 540 with RabbitMQ 3.10.8's text, the connection closed. */
void channel_log_refuses(struct channel *ch, uint32_t method_id,
                         const struct queue *q, const char *what);

/* Acks, nacks and rejects: 'tag' 0 with 'multiple' means all. Returns
 * false if the tag is unknown. */
bool channel_settle(struct channel *ch, uint64_t tag, bool multiple,
                    bool ack, bool requeue);

/* Requeue every unacked delivery that no open transaction has settled
 * (basic.recover, close). */
void channel_requeue_all(struct channel *ch);

/* Send 'method' followed by the message's content frames. */
void channel_send_content(struct channel *ch, const struct amqp_method *m,
                          struct msg *msg);

/* The same for a queue entry, as its queue shows it (x-delivery-count
 * when the queue has a delivery limit). */
struct qentry;
void channel_send_entry(struct channel *ch, const struct amqp_method *m,
                        const struct queue *q, const struct qentry *e);

/* Record a delivery awaiting ack, made at 'now' (now_ms()); returns
 * its tag. */
uint64_t channel_track(struct channel *ch, struct queue *q,
                       struct consumer *c, struct qentry e, uint64_t now);

/* Count a delivery of 'e' from 'q' as 'kind' (MS_DELIVER, MS_GET, ...)
 * in the channel's and the queue's counters. */
void channel_count_delivery(struct channel *ch, struct queue *q,
                            const struct qentry *e, int kind, uint64_t now);

/* Whether the CC and BCC headers, if any, are arrays (RabbitMQ's rule);
 * otherwise the channel is closed with 406. */
bool channel_check_cc_bcc(struct channel *ch, struct amqp_table headers);

/* Route a message through its exchange now. */
void channel_route(struct channel *ch, struct msg *msg, bool mandatory);

/* Note that publish 'seq' may be confirmed: now if 'batch' is 0 (it
 * needs no disk), else once store batch 'batch' is durable, or once its
 * message 'm' turns out never to need writing (consumed and acked
 * before its batch went to disk: store_msg_unneeded), whichever is
 * first. 'q' (with a batch) is the first queue that stored it, whose
 * confirm latency it counts in. */
void channel_confirm(struct channel *ch, uint64_t seq, uint64_t batch,
                     struct msg *m, struct queue *q);

/* A queue refused publish 'seq' (x-overflow reject-publish): basic.nack,
 * after the acks due before it. */
void channel_confirm_nack(struct channel *ch, uint64_t seq);

/* Apply or forget what the transaction holds. Commit returns whether
 * it wrote to the store (commit-ok then waits for the disk). */
bool channel_tx_commit(struct channel *ch);
void channel_tx_rollback(struct channel *ch);

#endif
