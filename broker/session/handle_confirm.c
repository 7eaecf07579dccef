/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of class confirm: select. From then on every publish on the
 * channel gets a sequence number (1, 2, ...) and a basic.ack once every
 * queue it reached has taken it: transient messages right after routing,
 * unroutable ones too (after their basic.return when mandatory), as
 * RabbitMQ does. Acks are batched with multiple=true per read.
 */
#include "broker/session/conn.h"
#include "broker/session/handlers.h"

void
handle_confirm_select(struct channel *ch, const struct amqp_method *m)
{
    if (ch->tx) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, m->id,
                     "cannot switch from tx to confirm mode");
        return;
    }
    ch->confirm = true;
    channel_reply(ch, AMQP_CONFIRM_SELECT_OK, m->a.confirm_select.nowait);
}
