/*
 * SPDX-License-Identifier: Apache-2.0
 * What the session's state setters share (conn_set_state and the other
 * setters in conn.c, channel_set_state and the content setter in
 * channel.c): a machine's description, the names of its states and for
 * each the states it may move to. A setter refuses a move that is not a
 * transition (fatalx: a broken invariant) and traces the others at debug
 * level through its object's log helper (conn_log, channel_log).
 */
#ifndef ROOST_BROKER_MACHINE_H
#define ROOST_BROKER_MACHINE_H

#include <stdbool.h>
#include <stdint.h>

struct machine {
    const char *name;               /* "state", "pause", "content", ... */
    const char *const *states;      /* the names, by value */
    const uint16_t *next;           /* by value: a bit for each state it
                                     * may move to */
};

/* The bit of state 's' in a 'next' mask. */
#define MACHINE_TO(s) (1u << (s))

static inline bool
machine_allows(const struct machine *m, unsigned from, unsigned to)
{
    return (m->next[from] >> to) & 1u;
}

#endif
