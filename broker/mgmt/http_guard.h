/*
 * SPDX-License-Identifier: Apache-2.0
 * What evhttp (libevent 2.1) does not bound on its own, for the
 * management API's and Prometheus's listeners: how many connections are
 * open, how long a request may take to arrive, and how large a body it
 * reads before the route, and so the login, is known.
 *
 * Each accepted connection's input buffer is watched: the request's
 * framing (request line, headers, Content-Length or chunks) is followed
 * as bytes are added, before evhttp reads them, without changing one:
 *
 * - The connections of a server are counted; at 'conn_max' its listener
 *   stops accepting (the next wait in the backlog, as RabbitMQ's ranch
 *   does at max_connections) until one closes.
 * - A request must arrive whole within 'request_ms' of its first byte
 *   (management.tcp.request_timeout), however it trickles; then the
 *   connection is closed. evhttp's own timeout, re-armed by every byte,
 *   stays the idle timeout.
 * - Once a request's headers are in, its path decides the largest body
 *   evhttp will read: 'large_body' for the definitions routes (a
 *   definitions file), 'small_body' (1 MiB) for every other; past it,
 *   413 before the body is read.
 * - The bytes of requests still arriving count against the memory alarm
 *   (alarm_http_bytes).
 *
 * A request whose framing the guard cannot follow (a header block
 * larger than evhttp takes, a malformed chunk) leaves the connection to
 * evhttp, which refuses it, and to the deadline.
 */
#ifndef ROOST_MGMT_HTTP_GUARD_H
#define ROOST_MGMT_HTTP_GUARD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <event2/bufferevent.h>

#include "broker/lib/accept_guard.h"

#define HTTP_GUARD_SMALL_BODY (1024 * 1024)

struct http_guard_limits {
    size_t conn_max;
    int request_ms;
    int64_t small_body, large_body;
    /* Whether a request for 'path' (no query) takes 'large_body'. */
    bool (*large)(const char *path);
    /* The bufferevent a connection is read through (TLS), or NULL: a
     * plain socket. */
    struct bufferevent *(*under)(struct event_base *base);
};

struct http_guard;

/* A guard for the server listening through 'listener' (its accepts are
 * held at the cap); 'what' names it in the log. */
struct http_guard *http_guard_new(struct accept_guard *listener,
                                  const struct http_guard_limits *lim,
                                  const char *what);

/* Give every connection 'http' accepts from now on to the guard
 * (evhttp_set_bevcb). */
struct evhttp;
void http_guard_attach(struct http_guard *g, struct evhttp *http);

/* As evhttp_connection_set_closecb for a connection of a guarded
 * server (the guard hears of its close itself, then calls 'cb'). */
struct evhttp_connection;
void http_guard_set_closecb(struct evhttp_connection *evcon,
                            void (*cb)(struct evhttp_connection *, void *),
                            void *arg);

/* Connections open now. */
size_t http_guard_count(const struct http_guard *g);

/* Its listener is about to go: hold no more accepts (before the evhttp
 * is freed, whose connections then close). http_guard_free frees it,
 * after that evhttp. */
void http_guard_stop(struct http_guard *g);
void http_guard_free(struct http_guard *g);

#endif
