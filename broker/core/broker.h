/*
 * The broker's process-wide state: the event loop, the configuration in
 * force, the virtual hosts and the users. roostd has exactly one broker;
 * everything here is owned by the event-loop thread.
 */
#ifndef ROOST_BROKER_BROKER_H
#define ROOST_BROKER_BROKER_H

#include <stdbool.h>
#include <stdint.h>

#include "broker/lib/config.h"
#include "broker/lib/hmap.h"

struct event_base;
struct tls_ctx;
struct vhost;

struct broker {
    struct event_base *base;
    struct config cfg;
    struct hmap vhosts;         /* name -> struct vhost */
    struct hmap users;          /* name -> struct user */
    int port;                   /* the port actually bound */
    struct tls_ctx *tls;        /* AMQP over TLS; NULL: no TLS listener */
    bool shutting_down;
    uint64_t started_ms;        /* now_ms() at start, for uptime */
};

extern struct broker broker;

struct vhost *broker_vhost(const char *name, size_t len);

/* This broker's node name as RabbitMQ spells one, "rabbit@host" (the
 * short host name; "roost@host" with server_properties.rabbitmq off):
 * the management API's node and the cluster_name server property.
 * Computed once. */
const char *broker_node_name(void);

#endif
