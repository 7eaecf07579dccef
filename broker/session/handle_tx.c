/*
 * SPDX-License-Identifier: Apache-2.0
 * Methods of class tx: select, commit, rollback, with RabbitMQ's
 * semantics. While a channel is transactional its publishes and its acks,
 * nacks and rejects are held; commit applies them in order (publishes,
 * then settlements) before commit-ok; rollback forgets them, and the
 * messages they named are unacked again.
 */
#include "broker/session/conn.h"
#include "broker/session/handlers.h"

void
handle_tx(struct channel *ch, const struct amqp_method *m)
{
    switch (m->id) {
    case AMQP_TX_SELECT:
        if (ch->confirm) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, m->id,
                         "cannot switch from confirm to tx mode");
            return;
        }
        ch->tx = true;
        channel_reply(ch, AMQP_TX_SELECT_OK, false);
        break;
    case AMQP_TX_COMMIT:
    case AMQP_TX_ROLLBACK:
        if (!ch->tx) {
            channel_fail(ch, AMQP_PRECONDITION_FAILED, m->id,
                         "channel is not transactional");
            return;
        }
        if (m->id == AMQP_TX_COMMIT) {
            bool stored = channel_tx_commit(ch);
            channel_reply(ch, AMQP_TX_COMMIT_OK, false);
            /* Persistent messages: commit-ok only once they are synced. */
            if (stored)
                conn_hold_for_store(ch->conn);
        } else {
            channel_tx_rollback(ch);
            channel_reply(ch, AMQP_TX_ROLLBACK_OK, false);
        }
        break;
    default:
        conn_fail(ch->conn, AMQP_COMMAND_INVALID, m->id, "unexpected %s",
                  method_name(m->id));
        break;
    }
}
