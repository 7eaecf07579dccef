/*
 * SPDX-License-Identifier: Apache-2.0
 * A listener that backs off when accept() fails. Out of descriptors
 * (EMFILE, ENFILE) or kernel memory (ENOBUFS, ENOMEM), the connection
 * that could not be taken stays in the backlog and the socket stays
 * readable: left enabled, a listener would be called again on every
 * turn of the loop, logging each time, and starve everything else. A
 * guarded listener is disabled on any accept error and enabled again
 * ACCEPT_GUARD_RETRY_MS later, as RabbitMQ's acceptor sleeps 100 ms;
 * the first failure is logged at once and the rest once per
 * ACCEPT_GUARD_LOG_MS, with how many times it backed off.
 *
 * Every listener of the broker is one: AMQP (session/listener.c), the
 * management API and Prometheus (evhttp_bind_listener on a guarded
 * listener, so that evhttp's own "Error from accept() call" never
 * spins).
 */
#ifndef ROOST_BROKER_ACCEPT_GUARD_H
#define ROOST_BROKER_ACCEPT_GUARD_H

#include <stdbool.h>

#include <event2/listener.h>

#define ACCEPT_GUARD_RETRY_MS 100
#define ACCEPT_GUARD_LOG_MS 10000
/* Guards at once: AMQP's 16 listeners, the management API's two and
 * Prometheus's one fit; one more is refused (NULL, logged). */
#define ACCEPT_GUARD_MAX 32

struct accept_guard;

/* A listener on the listening socket 'fd' (listen() already called, with
 * its backlog, which is kept; closed with the listener),
 * calling 'cb' with 'arg' for each connection ('cb' NULL: evhttp sets
 * its own), guarded. 'what' names it in the log ("AMQP listener
 * [::]:5672"; truncated to 95 bytes). NULL if libevent cannot make one
 * or ACCEPT_GUARD_MAX are in use ('fd' is then still open). */
struct accept_guard *accept_guard_new(struct event_base *base, int fd,
                                      evconnlistener_cb cb, void *arg,
                                      const char *what);

/* Its listener: to give to evhttp_bind_listener, which then owns it. */
struct evconnlistener *accept_guard_listener(struct accept_guard *g);

/* Hold its accepts (a server at its connection cap) or let them go on;
 * a back-off under way still runs its course. */
void accept_guard_hold(struct accept_guard *g, bool held);

/* How many times it has backed off since it was made. */
unsigned long accept_guard_backoffs(const struct accept_guard *g);

/* Free the guard and its timer; its listener too if 'with_listener'
 * (false when evhttp owns it: free the guard first, then the evhttp). */
void accept_guard_free(struct accept_guard *g, bool with_listener);

#endif
