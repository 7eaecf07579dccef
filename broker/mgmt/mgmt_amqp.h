/*
 * SPDX-License-Identifier: Apache-2.0
 * The management API's AMQP session: what RabbitMQ's management plugin
 * does over a direct connection (declare, delete, bind, unbind, purge,
 * publish, get), Roost does the same way, on a connection inside the
 * broker (conn_direct_new) as the user who asked, so that every check,
 * limit and error text is the AMQP one. Not for use outside
 * broker/mgmt/.
 *
 * A session opens channel 1, takes the methods to send, sends them all
 * at once when run, and calls back once every synchronous one has had
 * its reply (with its content, for basic.get-ok), or the channel or the
 * connection was closed, or MGMT_AMQP_TIMEOUT_MS passed. Replies that
 * wait for the disk (a durable declare) come when they are durable.
 */
#ifndef ROOST_BROKER_MGMT_MGMT_AMQP_H
#define ROOST_BROKER_MGMT_MGMT_AMQP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/method.h"
#include "amqp/props.h"

struct vhost;
struct mgmt_amqp;

#define MGMT_AMQP_TIMEOUT_MS 15000
/* The most body bytes the replies of one session may hold (a get of
 * many large messages): past it the session ends with MGMT_AMQP_TOO_BIG
 * and its connection goes, which requeues what it got. */
#define MGMT_AMQP_BODY_MAX (64u * 1024 * 1024)
#define MGMT_AMQP_TOO_BIG (-2)

/* A method the broker sent on channel 1, with its content if it has
 * one. Strings in 'm' and 'ch' borrow the reply's own copies. */
struct mgmt_amqp_reply {
    struct amqp_method m;
    bool has_content;
    struct content_header ch;
    uint8_t *body;
    size_t body_len;
    /* the copies 'm' and 'ch' borrow */
    uint8_t *method_bytes, *header_bytes;
    uint64_t body_want;
};

struct mgmt_amqp *mgmt_amqp_open(const char *user, struct vhost *vh);

/* Queue a method (without content) to send on channel 1. */
void mgmt_amqp_method(struct mgmt_amqp *s, const struct amqp_method *m);

/* Queue basic.publish 'p' with the content 'h' (body size set from
 * 'len') and 'body'. In confirm mode (confirm.select sent before) its
 * basic.ack or basic.nack is awaited. */
void mgmt_amqp_publish(struct mgmt_amqp *s, const struct amqp_basic_publish *p,
                       struct content_header *h, const void *body,
                       size_t len);

/* Send what is queued; 'done' is called once (never from inside this
 * call) when it is over. The session stays the caller's: free it. Once
 * a run ended with every reply (error 0), the caller may queue more and
 * run it again (what it sends next depends on a reply); the replies
 * add up. */
void mgmt_amqp_run(struct mgmt_amqp *s,
                   void (*done)(struct mgmt_amqp *s, void *arg), void *arg);

/* Send what is queued now, after the end (a settlement that needs no
 * reply). */
void mgmt_amqp_flush(struct mgmt_amqp *s);

/* The replies in order; the first is channel.open-ok. */
size_t mgmt_amqp_nreplies(const struct mgmt_amqp *s);
const struct mgmt_amqp_reply *mgmt_amqp_get(const struct mgmt_amqp *s,
                                            size_t i);

/* How it ended: 0 (every reply came), or the reply code of the
 * channel.close or connection.close the broker sent (its text in
 * 'text'), -1 for the timeout, or MGMT_AMQP_TOO_BIG. */
int mgmt_amqp_error(const struct mgmt_amqp *s, const char **text);

/* Drop the session and its connection. */
void mgmt_amqp_free(struct mgmt_amqp *s);

#endif
