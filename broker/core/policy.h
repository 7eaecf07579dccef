/*
 * SPDX-License-Identifier: Apache-2.0
 * Policies and operator policies, as RabbitMQ 3.10 has them: per vhost,
 * a name, a pattern (PCRE, unanchored, matched against a queue's or an
 * exchange's name), what it applies to (queues, exchanges, all), a
 * priority and a definition (the keys below). Of the policies whose
 * pattern matches, the one with the highest priority applies (of equals,
 * the first by name, as RabbitMQ 3.10.8 picks it); the same for operator
 * policies, separately. Then, key by key:
 *   - a queue's own argument beside a policy: the argument wins for
 *     dead-letter-exchange, dead-letter-routing-key, overflow,
 *     requeue-delay, requeue-delay-max (Roost's back-off) and
 *     alternate-exchange (an exchange's); the smaller value wins for the
 *     limits (message-ttl, expires, max-length, max-length-bytes,
 *     delivery-limit, consumer-timeout);
 *   - an operator policy takes only message-ttl, expires, max-length,
 *     max-length-bytes, delivery-limit (and max-in-memory-length and
 *     -bytes, which change nothing on one node), and its value applies
 *     where it is smaller than the others.
 * delivery-limit applies to quorum queues, as in RabbitMQ: a policy
 * imported from RabbitMQ changes nothing for classic queues. Roost's key
 * roost-delivery-limit applies to both.
 * Streams, as RabbitMQ 3.10.8's (rabbit_stream_queue): a policy (or
 * operator policy) holding a key streams do not take (message-ttl,
 * expires, max-length, dead-letter-*, overflow, ...: the type's
 * refused_policy_keys) does not apply to a stream at all, and the next
 * matching one may; of max-age, max-length-bytes and
 * stream-max-segment-size-bytes, the policy's value wins over the
 * argument, and of a policy's and an operator policy's max-length-bytes
 * the smaller.
 *
 * Policies are evaluated when a queue or exchange is added to its vhost
 * and when a policy is set or cleared (then on every queue and exchange
 * of the vhost), never on the AMQP path: the result is in the queue's
 * 'qa' and the exchange's 'policy_alternate'. Policies are definitions:
 * the store keeps them (with their vhost), export and import carry them.
 */
#ifndef ROOST_BROKER_POLICY_H
#define ROOST_BROKER_POLICY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

struct exchange;
struct queue;
struct vhost;

enum policy_kind { POLICY_USER, POLICY_OPERATOR, POLICY_KINDS };
enum policy_apply { POLICY_ALL, POLICY_QUEUES, POLICY_EXCHANGES };

/* At most this many of each kind in one vhost. */
#define POLICY_MAX 1000

/* What a definition sets; numbers are -1 where it does not. */
struct policy_values {
    int64_t message_ttl, expires, max_length, max_length_bytes;
    int64_t delivery_limit;         /* quorum queues only */
    int64_t roost_delivery_limit;   /* any queue */
    int64_t consumer_timeout;
    int64_t requeue_delay, requeue_delay_max;
    int64_t max_age, segment_size;  /* streams only; max-age in ms */
    int overflow;                   /* enum qargs_overflow, or -1 */
    char *dlx, *dlrk, *alternate;   /* NULL where not set */
};

struct policy {
    struct vhost *vh;
    enum policy_kind kind;
    char *name;
    char *pattern;
    void *re;                       /* compiled (perm_re_compile) */
    bool limit_logged;              /* re past its match limit, said once */
    enum policy_apply apply_to;
    double priority;
    json_t *definition;             /* as given: for the API and export */
    struct policy_values v;
};

/* RabbitMQ's names: "all", "queues", "exchanges". */
extern const char *const policy_apply_name[];

/*
 * Set (or replace) a policy of 'vh' from the API's or a definitions
 * file's values (borrowed; 'apply_to' and 'priority' may be NULL: "all"
 * and 0), announced unless 'quiet', and applied to the vhost's queues and
 * exchanges. Returns 1 if it is new, 0 if it replaced one, or -1 with
 * RabbitMQ's reasons in 'err' (one a line, each ending in "\n", as after
 * its "Validation failed\n\n"), and nothing changes then.
 */
int policy_set(struct vhost *vh, enum policy_kind kind, const char *name,
               const json_t *pattern, const json_t *apply_to,
               const json_t *priority, const json_t *definition, bool quiet,
               char *err, size_t errlen);

/* Check the same without setting anything: 0, or -1 with 'err'. */
int policy_check(enum policy_kind kind, const json_t *pattern,
                 const json_t *apply_to, const json_t *priority,
                 const json_t *definition, char *err, size_t errlen);

/* Remove one (announced unless 'quiet') and apply what remains; false if
 * there was none. */
bool policy_clear(struct vhost *vh, enum policy_kind kind, const char *name,
                  bool quiet);

/* One by name, or NULL. */
const struct policy *policy_get(const struct vhost *vh, enum policy_kind kind,
                                const char *name);

/* Every policy of a kind in 'vh', in the order they were set. */
void policy_foreach(const struct vhost *vh, enum policy_kind kind,
                    void (*fn)(const struct policy *p, void *arg), void *arg);

/* The policy (of 'kind') that applies to a queue or exchange, or NULL. */
const struct policy *policy_for_queue(const struct queue *q,
                                      enum policy_kind kind);
const struct policy *policy_for_exchange(const struct exchange *x,
                                         enum policy_kind kind);

/* Work out what applies to one queue or exchange (its arguments with the
 * policies) and apply it: at its addition to the vhost. */
void policy_apply_queue(struct queue *q);
void policy_apply_exchange(struct exchange *x);

/* The priority as JSON: an integer when it is one. */
json_t *policy_priority_json(const struct policy *p);

/* Free a vhost's policies (vhost_free). */
void policy_free_vhost(struct vhost *vh);

#endif
