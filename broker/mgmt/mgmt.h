/*
 * SPDX-License-Identifier: Apache-2.0
 * The management HTTP API: RabbitMQ's /api/... (users, vhosts,
 * permissions, vhost limits, definitions, overview, health checks) on
 * libevent's evhttp, over HTTP (management.tcp.*) and HTTPS
 * (management.ssl.*), with basic auth against the broker's users and
 * RabbitMQ's tag rules. It runs on the event loop, never on the AMQP
 * path, and reads the broker only through the modules' read functions.
 * The same listeners serve Roost's web page (www/, docs/web.md) and
 * guard it and the API against cross-site requests and DNS rebinding
 * (mgmt_guard.c). docs/compatibility.md says what is implemented and
 * what differs.
 */
#ifndef ROOST_BROKER_MGMT_MGMT_H
#define ROOST_BROKER_MGMT_MGMT_H

#include <stdbool.h>
#include <stddef.h>

/*
 * Note an AMQP listener for GET /api/overview's "listeners": on 'host'
 * ("" for all addresses), or on 'addr' as listener_start_addr reads it
 * ("PORT", "HOST:PORT", "[V6]:PORT"); 'port' is the port actually
 * bound. Call before mgmt_start.
 */
void mgmt_add_listener(bool tls, const char *host, int port);
void mgmt_add_listener_addr(bool tls, const char *addr, int port);

/*
 * Start listening as the configuration says (after the AMQP listeners
 * are up). Logs "management API listening on http://IP:PORT/" (https://
 * for TLS) for each listener. 0 on success, also when the default HTTP
 * port is taken (logged: the broker runs without the API then); -1
 * (logged, naming the address) when a port the operator asked for
 * cannot be bound or the HTTPS certificate cannot be loaded.
 */
int mgmt_start(void);

/* Close the listeners and every HTTP connection (shutdown). Safe to
 * call twice, and when nothing was started. */
void mgmt_stop(void);

/*
 * SIGHUP, in two steps so that a reload applies all or nothing: make
 * the HTTPS listener's context again from the new configuration 'c'
 * ('*fresh': NULL when there is no HTTPS listener; -1 with 'err' when
 * its files do not load), then, once everything else loaded too, use
 * it (new connections get it, open ones keep theirs). A fresh context
 * that is not committed is freed with tls_ctx_free.
 */
struct config;
struct tls_ctx;
int mgmt_tls_prepare(const struct config *c, struct tls_ctx **fresh,
                     char *err, size_t errlen);
void mgmt_tls_commit(struct tls_ctx *fresh);

#endif
