/*
 * SPDX-License-Identifier: Apache-2.0
 * What each method needs of the user's permissions (DESIGN.md, "Seams"):
 * one table beside the handlers (access.c), consulted before a handler
 * runs, so that the handlers hold no permission checks of their own
 * except the few that depend on what the handler finds (a queue's
 * dead-letter exchange or an exchange's alternate one on creation, the
 * name the server gives a queue). The rules are RabbitMQ's: see
 * docs/security.md.
 */
#ifndef ROOST_BROKER_ACCESS_H
#define ROOST_BROKER_ACCESS_H

#include <stdbool.h>

#include "amqp/method.h"
#include "broker/core/perm.h"

struct channel;

enum access_res { RES_EXCHANGE, RES_QUEUE };

/* Check what method 'm' needs. True if allowed; otherwise the channel is
 * closed with 403 ACCESS_REFUSED and RabbitMQ's text. */
bool access_method(struct channel *ch, const struct amqp_method *m);

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
