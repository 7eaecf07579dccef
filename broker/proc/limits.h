/*
 * SPDX-License-Identifier: Apache-2.0
 * The process's descriptor budget. At start the soft RLIMIT_NOFILE is
 * raised to the hard one; then connection_max must fit it: the AMQP
 * sockets a broker may hold are connection_max plus CONN_HANDSHAKE_SLACK
 * still in their handshake (conn.c), and LIMITS_FD_RESERVE more are kept
 * for everything else (store segments, the management API and
 * Prometheus, the log, definitions files). A connection_max that does
 * not fit is lowered, with a warning naming both numbers; at a limit
 * too small for even that, the listeners' back-off (accept_guard.h) is
 * what holds.
 */
#ifndef ROOST_BROKER_LIMITS_H
#define ROOST_BROKER_LIMITS_H

#include <stdbool.h>
#include <stdint.h>

struct config;

/* The reserve: 256 descriptors, or an eighth of a limit under 2,048. */
#define LIMITS_FD_RESERVE(limit) ((limit) >= 2048 ? 256 : (limit) / 8)

/* Raise the soft descriptor limit to the hard one (logged if it moved);
 * the limit in force. */
uint64_t limits_raise_nofile(void);

/* Lower cfg->connection_max to fit the descriptor limit in force, with
 * a warning if 'warn'; at start (warned) and on each reload (before the
 * new configuration is compared with the running one: not warned). */
void limits_fit_connections(struct config *cfg, bool warn);

#endif
