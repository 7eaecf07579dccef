/*
 * SPDX-License-Identifier: Apache-2.0
 * Replays of dead letters: messages moved out of a queue (usually a
 * dead-letter queue) back to the exchange and routing key of their first
 * x-death entry, or to an exchange and routing key chosen, in delivery
 * order, at a rate (messages a second, on a libevent timer), in the
 * broker: a replay goes on whoever started it and whether or not they
 * follow it. Each move is one store transaction (queue_move_next), so
 * that a crash leaves every message once, in the source or its target.
 *
 * Replays are kept in memory only: a restart forgets them (the messages
 * not yet moved are still in the source, and a new replay takes them).
 * docs/dead-letters.md has the rules; the management API starts, lists
 * and cancels them (mgmt_deadletters.c).
 */
#ifndef ROOST_BROKER_DLREPLAY_H
#define ROOST_BROKER_DLREPLAY_H

#include <stdbool.h>
#include <stdint.h>

struct queue;

#define DLREPLAY_RUNNING_MAX 16     /* at once, broker-wide */
#define DLREPLAY_KEPT_MAX 100       /* finished ones remembered */
#define DLREPLAY_RATE_MAX 1000000   /* messages a second */
#define DLREPLAY_DEFAULT_RATE 100

#define DLREPLAY_STATES(X) \
    X(DLREPLAY_RUNNING, "running") X(DLREPLAY_DONE, "done") \
    X(DLREPLAY_CANCELLED, "cancelled") X(DLREPLAY_FAILED, "failed")

enum dlreplay_state {
#define AS_ENUM(s, name) s,
    DLREPLAY_STATES(AS_ENUM)
#undef AS_ENUM
};

/* A replay, as its readers see it (the rest is dlreplay.c's). */
struct dlreplay {
    char id[17];                /* 16 hex digits, unique across restarts */
    char *vhost, *queue, *user;
    enum dlreplay_state state;
    uint64_t moved, skipped, total;
    uint32_t rate;              /* 0: as fast as the loop allows */
    char *exchange, *rkey;      /* chosen; NULL: each message's x-death */
    char *error;                /* why it failed or was cancelled, or NULL */
};

/* RabbitMQ-like name of a state: "running", "done", ... */
const char *dlreplay_state_name(enum dlreplay_state s);

enum dlreplay_refusal {
    DLREPLAY_OK,
    DLREPLAY_TOO_MANY,          /* DLREPLAY_RUNNING_MAX are running */
    DLREPLAY_QUEUE_BUSY,        /* one of this queue is running */
};

/*
 * Start replaying at most 'count' messages of 'q' (0: as many as are
 * ready now) at 'rate' a second, to 'exchange' (NULL: each message's
 * x-death exchange; "" the default exchange) with 'rkey' (NULL: the
 * x-death's first routing key, else the message's own), for 'user', whose
 * write permission each target exchange needs (a message whose target
 * it may not write to, or whose target is internal, is left in place,
 * counted as skipped, as one without x-death and no exchange chosen).
 * The caller checked that a chosen exchange exists and is not internal.
 * Returns the replay, or NULL and '*why'.
 */
struct dlreplay *dlreplay_start(struct queue *q, uint32_t rate,
                                uint64_t count, const char *exchange,
                                const char *rkey, const char *user,
                                enum dlreplay_refusal *why);

/* The replay 'id', or NULL. */
struct dlreplay *dlreplay_find(const char *id);

/* Call 'fn' for each replay kept, oldest first. */
void dlreplay_foreach(void (*fn)(struct dlreplay *d, void *arg), void *arg);

/* Stop a running replay (state cancelled); a finished one stays as it
 * is. */
void dlreplay_cancel(struct dlreplay *d, const char *why);

/* At shutdown: stop and forget every replay. */
void dlreplay_free_all(void);

#endif
