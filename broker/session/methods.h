/*
 * SPDX-License-Identifier: Apache-2.0
 * Method dispatch: the AMQP methods the broker takes from a client are
 * one table (methods.c), a row each: the function that handles it, its
 * flags (of class connection and so on channel 0 only; followed by
 * content; changes definitions the store must sync before the reply),
 * the connection states it is valid in, and the permission checks that
 * run before it (access.h). Dispatch is a lookup of the row and these
 * checks, here and nowhere else, with RabbitMQ's reply codes and texts
 * for every method that comes where it may not.
 */
#ifndef ROOST_BROKER_METHODS_H
#define ROOST_BROKER_METHODS_H

#include "amqp/method.h"

struct channel;
struct conn;

/* A method on channel 0 of 'c', before or after connection.open (not
 * while closing: conn.c answers only close and close-ok then). */
void methods_conn(struct conn *c, const struct amqp_method *m);

/* A method on 'ch', which is open and expects no content. */
void methods_channel(struct channel *ch, const struct amqp_method *m);

#endif
