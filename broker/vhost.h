/*
 * A virtual host: its exchanges (including the default exchange and the
 * predeclared amq.* ones) and its queues, by name.
 */
#ifndef ROOST_BROKER_VHOST_H
#define ROOST_BROKER_VHOST_H

#include <stdint.h>

#include "amqp/wire.h"
#include "broker/hmap.h"

struct exchange;
struct queue;

struct vhost {
    char *name;
    struct hmap exchanges;
    struct hmap queues;
    struct exchange *default_x;
    uint64_t route_epoch;
};

/* A vhost with the default exchange and amq.direct, amq.fanout,
 * amq.topic, amq.headers, amq.match predeclared. */
struct vhost *vhost_new(const char *name);
void vhost_free(struct vhost *vh);

struct exchange *vhost_exchange(struct vhost *vh, struct amqp_bytes name);
struct queue *vhost_queue(struct vhost *vh, struct amqp_bytes name);

void vhost_add_exchange(struct vhost *vh, struct exchange *x);
void vhost_remove_exchange(struct vhost *vh, struct exchange *x);
void vhost_add_queue(struct vhost *vh, struct queue *q);
void vhost_remove_queue(struct vhost *vh, struct queue *q);

#endif
