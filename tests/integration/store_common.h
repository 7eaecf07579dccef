/*
 * SPDX-License-Identifier: Apache-2.0
 * Helpers shared by the tests of the durable store and of paging
 * (check_store.c, check_paging.c), on top of harness.h: a seeded random
 * number generator, so that a failing run can be repeated; message bodies
 * that carry their id, so that what a queue holds can be checked against
 * what was published; publishing with publisher confirms and keeping
 * track of which tags are settled; reading back every message of a queue
 * and checking the ids, in order; and looking at roostd's log and data
 * directory, and killing it.
 *
 * Like the harness, everything that can fail asserts with check's
 * ck_assert_msg and names the caller's file and line; the macros pass
 * them along.
 */
#ifndef ROOST_TESTS_INTEGRATION_STORE_COMMON_H
#define ROOST_TESTS_INTEGRATION_STORE_COMMON_H

#include <amqp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tests/integration/harness.h"

/* ---- seeds ---- */

/*
 * Seed the generator with ROOST_TEST_SEED when it is set, 'dflt'
 * otherwise, and print it ("<test>: seed N"); returns the seed.
 */
uint64_t seed(const char *test, uint64_t dflt);

/* The next number of the seeded sequence (splitmix64). */
uint64_t rnd(void);

/* A number in [lo, hi]. */
uint64_t rnd_in(uint64_t lo, uint64_t hi);

/* ---- bodies ---- */

/* The size of a buffer for make_body (bodies are shorter). */
#define BODY_MAX 8192

/* "<id:000042>" repeated (the last copy cut short) to 'len' bytes, at
 * least one whole copy, NUL-terminated in 'buf'; returns the length. */
size_t make_body(char *buf, int id, size_t len);

/* The id of a body made by make_body, or -1. */
int body_id(const char *body, size_t len);

/* Whether 'body' is exactly make_body(id, size). */
bool body_is(const void *body, size_t len, int id, size_t size);

/* Properties with delivery mode 'mode' (1 transient, 2 persistent) and
 * nothing else. */
amqp_basic_properties_t mode_props(uint8_t mode);

/* ---- the broker's log and files ---- */

/* The size of roostd's log now: a mark for log_has_since and the like. */
size_t log_mark(const struct harness *h);

/* Whether roostd's log contains 'needle' after byte 'from'. */
bool log_has_since(const struct harness *h, size_t from, const char *needle);

/* Poll (at most 5 s) for 'needle' in the log after 'from'. */
void wait_log_at(const char *file, int line, const struct harness *h,
                 size_t from, const char *needle);
#define WAIT_LOG(h, from, needle)                                              \
    wait_log_at(__FILE__, __LINE__, (h), (from), (needle))

/* The recovery line after 'from': how many messages in how many queues
 * ("store: recovered ..."; asserts there is one). */
void recovered_at(const char *file, int line, const struct harness *h,
                  size_t from, unsigned long long *msgs,
                  unsigned long long *queues);
#define RECOVERED(h, from, m, q)                                               \
    recovered_at(__FILE__, __LINE__, (h), (from), (m), (q))

/* The path of 'rel' in roostd's data directory: DATADIR/'rel'. */
void data_path(char *out, size_t len, const struct harness *h,
               const char *rel);

/* A path for a test hook's file (ROOST_TEST_IO_FAIL and the like), in
 * the run's directory (ROOST_TEST_SESSION, else /tmp): "<tag>-<pid>". */
void hook_path(char *out, size_t len, const char *tag);

/* How many *.seg files DATADIR/'rel' holds (0 when it does not exist). */
int count_segs(const struct harness *h, const char *rel);

/* SIGKILL and wait; the status must say so (not an earlier crash). */
void kill9_at(const char *file, int line, struct harness *h);
#define KILL9(h) kill9_at(__FILE__, __LINE__, (h))

/* ---- publisher confirms ---- */

/* Tags 1..n were published on one channel in confirm mode. Starts as
 * { 0 }; conf_free releases it. */
struct confirms {
    uint64_t n, settled, acks, nacks;
    uint64_t floor; /* every tag up to it is settled */
    size_t cap;
    uint8_t *st;    /* per tag: 0 open, 1 acked, 2 nacked */
    int blocked, unblocked;
    char blocked_reason[256];
};

void conf_free(struct confirms *t);

/*
 * Read one method within 'ms': a confirm is applied to 't' (it must name
 * an open tag, or with multiple=true settle those up to it),
 * connection.blocked and unblocked are counted, deliveries are refused.
 * Returns 1, or 0 on timeout.
 */
int conf_pump_at(const char *file, int line, amqp_connection_state_t c,
                 struct confirms *t, int ms);
#define CONF_PUMP(c, t, ms) conf_pump_at(__FILE__, __LINE__, (c), (t), (ms))

/* Wait (at most 'ms') until every tag is settled; all must be acks. */
void conf_wait_all_at(const char *file, int line, amqp_connection_state_t c,
                      struct confirms *t, int ms);
#define CONF_WAIT_ALL(c, t, ms)                                                \
    conf_wait_all_at(__FILE__, __LINE__, (c), (t), (ms))

/*
 * Publish message 'id' (a body of 'size' bytes) with properties 'p' to
 * exchange 'x' with routing key 'key' on channel 'ch', noting it in 't';
 * with 'window' unsettled (0: no limit), read confirms first, for at most
 * 'stall_ms' without one.
 */
void pub_at(const char *file, int line, amqp_connection_state_t c,
            amqp_channel_t ch, struct confirms *t, const char *x,
            const char *key, int id, size_t size,
            const amqp_basic_properties_t *p, uint64_t window, int stall_ms);

/* The same with delivery mode 'mode' (mode_props) for properties. */
void pub_mode_at(const char *file, int line, amqp_connection_state_t c,
                 amqp_channel_t ch, struct confirms *t, const char *x,
                 const char *key, int id, size_t size, uint8_t mode,
                 uint64_t window, int stall_ms);
#define PUB(c, ch, t, x, key, id, size, mode)                                  \
    pub_mode_at(__FILE__, __LINE__, (c), (ch), (t), (x), (key), (id), (size),  \
                (mode), 256, 5000)

/* confirm.select on channel 'ch', asserting confirm.select-ok. */
void confirm_select(amqp_connection_state_t c, amqp_channel_t ch);

/* ---- what a queue holds ---- */

struct qmsg {
    int id;       /* -1: not a body of make_body */
    bool body_ok; /* exactly make_body(id, size); true when size is 0 */
    bool redelivered;
    uint8_t mode;
};

/*
 * Every ready message of 'q', in order: a passive declare counts them,
 * then a consumer on channel 'ch' takes that many without acking (they
 * stay unacked there until the channel closes) and a sync shows that no
 * more came. Each body is compared with make_body(id, 'size'), or not
 * when 'size' is 0 (bodies of several sizes). Returns the count; *out is
 * malloc'd.
 */
int read_queue_at(const char *file, int line, amqp_connection_state_t c,
                  amqp_channel_t ch, const char *q, size_t size,
                  struct qmsg **out);
#define READ_QUEUE(c, ch, q, size, out)                                        \
    read_queue_at(__FILE__, __LINE__, (c), (ch), (q), (size), (out))
/* The same for a stream, from its first offset (a qos above its count). */
int read_stream_at(const char *file, int line, amqp_connection_state_t c,
                   amqp_channel_t ch, const char *q, size_t size,
                   struct qmsg **out);
#define READ_STREAM(c, ch, q, size, out)                                       \
    read_stream_at(__FILE__, __LINE__, (c), (ch), (q), (size), (out))

/*
 * The messages must be exactly ids from..to-1 in order, persistent, with
 * their bodies (body_ok), those below 'redelivered_below' marked
 * redelivered and, when 'exact', the others not. (After a crash a broker
 * may mark more than it delivered: redelivered=false promises only that
 * a message was not delivered.)
 */
void expect_ids_at(const char *file, int line, const struct qmsg *m, int n,
                   int from, int to, int redelivered_below, bool exact);
#define EXPECT_IDS(m, n, from, to, rb)                                         \
    expect_ids_at(__FILE__, __LINE__, (m), (n), (from), (to), (rb), true)
#define EXPECT_IDS_AFTER_CRASH(m, n, from, to, rb)                             \
    expect_ids_at(__FILE__, __LINE__, (m), (n), (from), (to), (rb), false)

#endif
