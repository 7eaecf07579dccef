/*
 * Dead-lettering: the copy of a message that a queue republishes to its
 * dead-letter exchange, with RabbitMQ's x-death header (an array of
 * tables, newest first, one per queue and reason with a count) and the
 * x-first-death-* headers, and without the expiration property (which
 * moves into x-death as original-expiration).
 */
#ifndef ROOST_BROKER_DEADLETTER_H
#define ROOST_BROKER_DEADLETTER_H

struct msg;

/*
 * A new message (one reference) for dead-lettering 'm' from 'queue' for
 * 'reason' to exchange 'dlx', with routing key 'dlrk' (NULL: keep the
 * original). NULL when the message already died in this queue for this
 * reason and the reason is not "rejected": RabbitMQ drops such cycles.
 */
struct msg *deadletter_msg(const struct msg *m, const char *queue,
                           const char *reason, const char *dlx,
                           const char *dlrk);

#endif
