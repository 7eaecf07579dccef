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
handle_tx_select(struct channel *ch, const struct amqp_method *m)
{
    if (ch->confirm) {
        channel_fail(ch, AMQP_PRECONDITION_FAILED, m->id,
                     "cannot switch from confirm to tx mode");
        return;
    }
    ch->tx = true;
    channel_reply(ch, AMQP_TX_SELECT_OK, false);
}

/* Commit and rollback need a transaction. */
static bool
is_transactional(struct channel *ch, const struct amqp_method *m)
{
    if (!ch->tx)
        channel_fail(ch, AMQP_PRECONDITION_FAILED, m->id,
                     "channel is not transactional");
    return ch->tx;
}

void
handle_tx_commit(struct channel *ch, const struct amqp_method *m)
{
    if (!is_transactional(ch, m))
        return;
    bool stored = channel_tx_commit(ch);
    channel_reply(ch, AMQP_TX_COMMIT_OK, false);
    /* Persistent messages: commit-ok only once they are synced. */
    if (stored)
        conn_hold_for_store(ch->conn);
}

void
handle_tx_rollback(struct channel *ch, const struct amqp_method *m)
{
    if (!is_transactional(ch, m))
        return;
    channel_tx_rollback(ch);
    channel_reply(ch, AMQP_TX_ROLLBACK_OK, false);
}
