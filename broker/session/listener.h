/*
 * SPDX-License-Identifier: Apache-2.0
 * The AMQP listeners: sockets on the configured addresses and ports (all
 * IPv4 and IPv6 addresses by default), plain or TLS, handing accepted
 * sockets to conn_accept().
 */
#ifndef ROOST_BROKER_LISTENER_H
#define ROOST_BROKER_LISTENER_H

struct tls_ctx;

/* Start listening (over TLS with 'tls', else plain TCP); returns the
 * bound port, or -1 (logged). */
int listener_start(const char *bind_addr, int port, int backlog,
                   struct tls_ctx *tls);

/* The same for RabbitMQ's listener value: "PORT", "HOST:PORT" or
 * "[V6]:PORT" (a bare IPv6 address takes the text after its last colon
 * as the port, as RabbitMQ does). */
int listener_start_addr(const char *addr, int backlog, struct tls_ctx *tls);

/* Stop accepting (shutdown). */
void listener_stop(void);

#endif
