/*
 * SPDX-License-Identifier: Apache-2.0
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

/* What this node is in a cluster: standalone today; a leader (the only
 * node that accepts publishes and confirms) or a follower (which only
 * applies what the leader sends) with replication. */
enum node_role { NODE_STANDALONE, NODE_LEADER, NODE_FOLLOWER };

struct broker {
    struct event_base *base;
    struct config cfg;
    struct hmap vhosts;         /* name -> struct vhost */
    struct hmap users;          /* name -> struct user */
    int port;                   /* the port actually bound */
    struct tls_ctx *tls;        /* AMQP over TLS; NULL: no TLS listener */
    bool shutting_down;
    enum node_role role;        /* broker_set_role only */
    uint64_t started_ms;        /* now_ms() at start, for uptime */
};

extern struct broker broker;

/* The core's registries (vhosts, users) empty, on the loop 'base'; and
 * everything in them freed with the message and input pools, the store
 * closed first (the teardown of a vhost then records nothing). */
void broker_core_init(struct event_base *base);
void broker_core_free(void);

/* Change the node's role, logged; a move that is not allowed (standalone
 * is a role for life; a follower becomes a leader and a leader steps
 * down to a follower) is a programming error and aborts. */
void broker_set_role(enum node_role role);
const char *broker_role_name(enum node_role role);

/* The vhost called 'name', or NULL. */
struct vhost *broker_vhost(const char *name, size_t len);

/* This broker's node name as RabbitMQ spells one, "rabbit@host" (the
 * short host name; "roost@host" with server_properties.rabbitmq off):
 * the management API's node and the cluster_name server property.
 * Computed once. */
const char *broker_node_name(void);

#endif
