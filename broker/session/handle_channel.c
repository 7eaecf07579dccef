/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of classes channel and access on an open channel. channel.open
 * itself comes before its channel exists (conn.c opens it); here it is a
 * second one. Reply codes and texts follow RabbitMQ 3.x.
 */
#include "broker/session/conn.h"
#include "broker/session/handlers.h"

/* On a channel that is open, or closing (channel.c): 504. */
void
handle_channel_open(struct channel *ch, const struct amqp_method *m)
{
    conn_fail(ch->conn, AMQP_CHANNEL_ERROR, m->id,
              "second 'channel.open' seen");
}

void
handle_channel_flow(struct channel *ch, const struct amqp_method *m)
{
    if (!m->a.channel_flow.active) {
        /* As RabbitMQ 3.x: clients may not stop the server's flow. */
        conn_fail(ch->conn, AMQP_NOT_IMPLEMENTED, m->id, "active=false");
        return;
    }
    struct amqp_method ok = { .id = AMQP_CHANNEL_FLOW_OK };
    ok.a.channel_flow_ok.active = true;
    channel_send(ch, &ok);
}

/* The broker never stops a client's flow: nothing to answer. */
void
handle_channel_flow_ok(struct channel *ch, const struct amqp_method *m)
{
    (void)ch;
    (void)m;
}

/* The client closes the channel: close-ok, and it is gone. */
void
handle_channel_close(struct channel *ch, const struct amqp_method *m)
{
    struct conn *c = ch->conn;
    uint16_t number = ch->number;
    struct amqp_method ok = { .id = AMQP_CHANNEL_CLOSE_OK };

    (void)m;
    channel_send(ch, &ok);
    conn_channel_closed(c, number);
    channel_free(ch);
}

/* On an open channel we did not ask: RabbitMQ treats it as an unknown
 * method. (The close-ok we ask for reaches a closing channel.) */
void
handle_channel_close_ok(struct channel *ch, const struct amqp_method *m)
{
    conn_fail(ch->conn, AMQP_COMMAND_INVALID, m->id, "unimplemented method");
}

/* 0-8's access control, gone from 0-9-1: any realm, ticket 1. */
void
handle_access_request(struct channel *ch, const struct amqp_method *m)
{
    struct amqp_method ok = { .id = AMQP_ACCESS_REQUEST_OK };

    (void)m;
    ok.a.access_request_ok.ticket = 1;
    channel_send(ch, &ok);
}
