/*
 * SPDX-License-Identifier: Apache-2.0
 * Prometheus metrics: rabbitmq_prometheus' endpoints on their own
 * listener (prometheus.tcp.*, loopback by default, unauthenticated as in
 * RabbitMQ): PATH (aggregated), PATH/per-object (per queue and vhost,
 * bounded by prometheus.max_series) and PATH/detailed?family=..., in the
 * text exposition format 0.0.4, with rabbitmq_prometheus' family names
 * for what Roost has and Roost's own roost_* families (latency
 * histograms, lag, dead-lettered and dropped counts by reason). It reads
 * the broker only through the modules' read functions, on the event
 * loop; a large scrape is written in slices across loop turns
 * (docs/operations.md, "Metrics").
 */
#ifndef ROOST_BROKER_MGMT_PROM_H
#define ROOST_BROKER_MGMT_PROM_H

#include <stdint.h>

/*
 * Start listening as the configuration says (after mgmt_start). Logs
 * "Prometheus metrics on http://IP:PORT/metrics". 0 on success, also
 * when prometheus.tcp.port is -1 or the default port is taken (warned:
 * roostd runs without metrics then); -1 (logged) when a port the
 * operator asked for cannot be bound.
 */
int prom_start(void);

/* Close the listener, abandon scrapes under way, close every HTTP
 * connection. Safe to call twice, and when nothing was started. */
void prom_stop(void);

#endif
