/*
 * SPDX-License-Identifier: Apache-2.0
 * The permission checks a method needs before its handler runs: each
 * method's row in the method table (methods.c) lists them, in the order
 * RabbitMQ makes them, as struct access_rule; access_method runs them.
 * The handlers hold no permission checks of their own except the few
 * that depend on what the handler finds (a queue's dead-letter exchange
 * or an exchange's alternate one on creation, the name the server gives
 * a queue). The rules are RabbitMQ's: see docs/security.md.
 */
#ifndef ROOST_BROKER_ACCESS_H
#define ROOST_BROKER_ACCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/method.h"
#include "broker/core/perm.h"

struct channel;

enum access_res { RES_EXCHANGE, RES_QUEUE };

/* Besides permissions, two refusals RabbitMQ makes among them, in its
 * order: no operation on the default exchange, no new queue named
 * amq.* */
enum access_check { ACCESS_PERM, ACCESS_NOT_DEFAULT, ACCESS_NOT_RESERVED };

enum {
    ACCESS_PASSIVE_FREE = 1,    /* a passive declare needs nothing */
    ACCESS_LAST_QUEUE = 2,      /* an empty name is the channel's last
                                 * queue */
    ACCESS_SERVER_NAMED = 4,    /* an empty name: the handler checks the
                                 * name it makes */
    ACCESS_REPLY_FREE = 8,      /* the direct reply-to pseudo-queue needs
                                 * nothing (RabbitMQ checks none) */
};

/* One check: 'kind' of permission (ACCESS_PERM) on the resource named by
 * the struct amqp_bytes at offset 'name' in the method's arguments, or
 * one of the refusals. */
struct access_rule {
    uint8_t check;              /* enum access_check */
    uint8_t kind;               /* enum perm_kind */
    uint8_t res;                /* enum access_res */
    uint8_t flags;              /* ACCESS_* */
    uint16_t name;              /* offsetof(union amqp_method_args, ...) */
    uint16_t passive;           /* the bool, with ACCESS_PASSIVE_FREE */
};

/* Run the 'n' rules of method 'm' in order. True if all allow it;
 * otherwise the channel is closed with 403 ACCESS_REFUSED and RabbitMQ's
 * text. */
bool access_method(struct channel *ch, const struct amqp_method *m,
                   const struct access_rule *rules, size_t n);

/* One check, with the same failure ('method_id' names the method). The
 * default exchange is checked as "amq.default", as RabbitMQ does. */
bool access_allows(struct channel *ch, uint32_t method_id,
                   enum perm_kind kind, enum access_res res,
                   struct amqp_bytes name);

/* Whether the connection's user may open its vhost at all (it has
 * permissions there). */
struct conn;
bool access_vhost(struct conn *c, const char *vhost);

#endif
