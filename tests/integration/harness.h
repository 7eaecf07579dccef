/*
 * SPDX-License-Identifier: Apache-2.0
 * The integration-test harness: start a real roostd on a free port with a
 * fresh data directory and log file, wait for it by polling its log, stop
 * it with SIGTERM and insist on exit status 0 (under ASan a leak turns it
 * into a failure); then helpers over rabbitmq-c (0.11) to connect, to read
 * deliveries and other asynchronous methods, and to assert on the replies
 * and closes the broker sends.
 *
 * With ROOST_TEST_REMOTE=host:port in the environment no roostd is started:
 * the tests talk to that broker instead (the RabbitMQ 3.10 reference node,
 * say), to check what they expect against RabbitMQ. Tests that have to
 * configure, signal or measure the broker skip themselves there.
 *
 * Everything that can fail asserts with check's ck_assert_msg and names the
 * caller's file and line; the macros at the bottom pass them along.
 *
 * Cases that are the same steps with other values are rows of a table run
 * by a loop test (H_LOOP): the test names its row with h_case() so that
 * every failure says which row; struct h_refusal and h_refused() make a
 * table of methods the broker must refuse, H_FIELDS field tables as data.
 */
#ifndef ROOST_TESTS_INTEGRATION_HARNESS_H
#define ROOST_TESTS_INTEGRATION_HARNESS_H

#include <amqp.h>
#include <amqp_framing.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <check.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>

/* ---- the broker process ---- */

struct harness {
    pid_t pid; /* 0 when remote or stopped */
    int port;
    char host[64]; /* where to connect: "127.0.0.1" */
    char dir[128]; /* temp dir: data/, roostd.log, stderr.txt */
    char log_path[192];
    char err_path[192];
    bool remote;
};

/* The broker of the current test, started by harness_setup(). */
extern struct harness *H;

/* True when ROOST_TEST_REMOTE names a broker to use instead of roostd. */
bool harness_is_remote(void);

/*
 * Start roostd with '--port 0 --data-dir --log-file --log-level debug' and
 * then 'args' (a NULL-terminated list, may be NULL), and wait (at most
 * 10 s, polling) for "ready for connections on port N" in its log. In
 * remote mode: fills in the remote address; returns false (the caller
 * skips its test) when 'args' asks for a configuration, true otherwise.
 */
bool harness_start(struct harness *h, const char *const *args);

/*
 * The same, appending 'asan_extra' (e.g. "quarantine_size_mb=1") to this
 * roostd's ASAN_OPTIONS: for tests that measure its memory, which ASan's
 * quarantine of freed blocks would otherwise inflate by up to 256 MiB.
 */
bool harness_start_asan(struct harness *h, const char *const *args,
                        const char *asan_extra);

/*
 * SIGTERM, wait (at most 10 s) and assert that roostd exited with status 0;
 * on anything else print the tails of its log and stderr and fail. Removes
 * the temp dir when all went well. No-op in remote mode.
 */
void harness_stop(struct harness *h);

/*
 * The same as harness_stop (SIGTERM, exit status 0 or fail) but keep the
 * temp dir, its data/ and logs, for harness_restart.
 */
void harness_stop_keep(struct harness *h);

/*
 * After harness_kill (a signal that ends roostd, SIGKILL say): wait (at
 * most 10 s) for roostd to exit and return its wait status; the temp dir
 * stays. -1 when none runs or in remote mode.
 */
int harness_reap(struct harness *h);

/*
 * Start a new roostd on the temp dir of 'h' (its data/, appending to its
 * log) with 'args' as harness_start does, after harness_stop_keep or
 * harness_kill and harness_reap, and wait for a ready line that follows
 * the log's end at the time of the call. The port changes. False in
 * remote mode.
 */
bool harness_restart(struct harness *h, const char *const *args);

/* Send 'sig' to roostd (not in remote mode). */
void harness_kill(const struct harness *h, int sig);

/* Like h_connect, announcing the connection.blocked capability (which
 * rabbitmq-c 0.11 does not announce by itself); channel 1 is open. */
amqp_connection_state_t h_connect_blocked_cap(const struct harness *h);

/* Resident set size of roostd in KiB (VmRSS), or -1. */
long harness_rss_kb(const struct harness *h);

/* Whether roostd's log contains 'needle' now. */
bool harness_log_contains(const struct harness *h, const char *needle);

/* For a case of a table that runs on Roost only: with 'why' not NULL and a
 * remote broker, say that the case is skipped and why, and return true. */
bool h_skipped_remote(const char *why);

/* Skip the rest of a test in remote mode, with a note. */
#define SKIP_IF_REMOTE(why)                                                    \
    do {                                                                       \
        if (harness_is_remote()) {                                             \
            fprintf(stderr, "%s: skipped against a remote broker: %s\n",       \
                    __func__, why);                                            \
            return;                                                            \
        }                                                                      \
    } while (0)

/*
 * Name the case a loop test runs (its table row's name, borrowed): until
 * the test ends, every failure reported through H_ASSERT_AT (the helpers
 * and EXPECT_ macros here, H_ASSERT in tests) starts with "<name>: ", so
 * that it says which row failed. NULL clears it; each test starts without.
 */
void h_case(const char *name);

/* What _ck_assert_failed reports, after the name h_case() set. */
void h_assert_failed(const char *file, int line, const char *expr,
                     const char *fmt, ...)
    __attribute__((format(printf, 4, 5), noreturn));

/* ck_assert_msg, reported at 'file':'line' (a helper's caller). */
#define H_ASSERT_AT(file, line, expr, ...)                                     \
    ((expr) ? (void)0                                                          \
            : h_assert_failed((file), (line), "Assertion '" #expr "' failed",  \
                              __VA_ARGS__))

/* ck_assert_msg that names the case (h_case) when it fails. */
#define H_ASSERT(expr, ...) H_ASSERT_AT(__FILE__, __LINE__, expr, __VA_ARGS__)

/* The same for two strings that must be equal. */
#define H_ASSERT_STR_EQ(got, want)                                             \
    do {                                                                       \
        const char *h_got_ = (got), *h_want_ = (want);                         \
        H_ASSERT(strcmp(h_got_, h_want_) == 0,                                 \
                 "%s is \"%s\", expected \"%s\"", #got, h_got_, h_want_);      \
    } while (0)

/* A list of roostd arguments for harness_start(). */
#define ARGS(...) ((const char *const[]){ __VA_ARGS__, NULL })

/* A name unique to this test process: "t<pid>-<tag>" into 'buf'. */
const char *h_name(char *buf, size_t len, const char *tag);

/* Milliseconds from a monotonic clock. */
uint64_t h_now_ms(void);

/* Sleep 'ms' milliseconds (only for tests that are about time). */
void h_sleep_ms(unsigned ms);

/* The first non-loopback IPv4 address of this machine, or false. */
bool h_non_loopback_ipv4(char *out, size_t len);

/* The number of rows of a table. */
#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Run loop test 'fn' once for each row of 'table' (its _i the row). */
#define H_LOOP(tc, fn, table)                                                  \
    tcase_add_loop_test((tc), (fn), 0, (int)NELEMS(table))

/* Add a table to a suite with the given timeout (s), with the fixture. */
TCase *h_tcase(Suite *s, const char *name, double timeout, bool fixture);

/* Run a suite and return the exit status for main(). */
int h_run(Suite *s);

/* ---- rabbitmq-c connections ---- */

struct hconn_opts {
    const char *host;                /* default: the harness's host */
    int port;                        /* default: the harness's port */
    const char *user, *pass, *vhost; /* guest, guest, "/" */
    int channel_max;    /* passed to amqp_login: 0 = the server's */
    int frame_max;      /* 0 = 131072 */
    int heartbeat;      /* 0 = none */
    bool cancel_notify; /* announce consumer_cancel_notify */
    bool no_channel;    /* do not open channel 1 */
    /* TLS (rabbitmq-c's OpenSSL socket) when 'tls': verify the server
     * against 'tls_ca' (NULL: no verification), present 'tls_cert' and
     * 'tls_key' (NULL: none), offer versions tls_min..tls_max (rabbitmq-c's
     * amqp_tls_version_t; 0: 1.2 and up) */
    bool tls;
    const char *tls_ca, *tls_cert, *tls_key;
    int tls_min, tls_max;
};

/* Connect as guest to "/" and open channel 1. */
amqp_connection_state_t h_connect(const struct harness *h);

/*
 * Connect with options. When the login does not succeed, returns NULL and
 * stores the reply in *login (if not NULL; a connection.close it carries
 * is a static copy, valid until the next failed login); the close-ok has
 * been sent and the connection destroyed. With 'login' NULL a failed login
 * fails the test.
 */
amqp_connection_state_t h_connect_opts(const struct harness *h,
                                       const struct hconn_opts *o,
                                       amqp_rpc_reply_t *login);

/* connection.close, expect close-ok, destroy. */
void h_close_at(const char *file, int line, amqp_connection_state_t c);
#define h_close(c) h_close_at(__FILE__, __LINE__, (c))

/* Destroy without a close handshake (the socket just drops). */
void h_drop(amqp_connection_state_t c);

/* The socket of a rabbitmq-c connection. */
int h_fd(amqp_connection_state_t c);

/* ---- assertions on replies ---- */

/* A short description of a reply, for messages. */
const char *h_reply_str(amqp_rpc_reply_t r, char *buf, size_t len);

void h_expect_ok_at(const char *file, int line, amqp_rpc_reply_t r,
                    const char *what);
#define EXPECT_OK(c, what)                                                     \
    h_expect_ok_at(__FILE__, __LINE__, amqp_get_rpc_reply(c), (what))

/*
 * The reply must be channel.close on 'ch' with 'code' and a reply text
 * that starts with 'prefix' (NULL: any). Sends channel.close-ok.
 */
void h_expect_channel_close_at(const char *file, int line,
                               amqp_connection_state_t c, amqp_rpc_reply_t r,
                               amqp_channel_t ch, int code, const char *prefix);
#define EXPECT_CHANNEL_CLOSE(c, ch, code, prefix)                              \
    h_expect_channel_close_at(__FILE__, __LINE__, (c), amqp_get_rpc_reply(c),  \
                              (ch), (code), (prefix))

/*
 * The reply must be connection.close with 'code' and a text starting with
 * 'prefix' (NULL: any). Sends connection.close-ok, then destroys 'c'.
 */
void h_expect_conn_close_at(const char *file, int line,
                            amqp_connection_state_t c, amqp_rpc_reply_t r,
                            int code, const char *prefix);
#define EXPECT_CONN_CLOSE(c, code, prefix)                                     \
    h_expect_conn_close_at(__FILE__, __LINE__, (c), amqp_get_rpc_reply(c),     \
                           (code), (prefix))

/* ---- asynchronous input ---- */

/*
 * The next method (within 5 s) must be channel.close on 'ch' with 'code'
 * and a text starting with 'prefix' (NULL: any); sends close-ok.
 */
void h_expect_async_channel_close_at(const char *file, int line,
                                     amqp_connection_state_t c,
                                     amqp_channel_t ch, int code,
                                     const char *prefix);
#define EXPECT_ASYNC_CHANNEL_CLOSE(c, ch, code, prefix)                        \
    h_expect_async_channel_close_at(__FILE__, __LINE__, (c), (ch), (code),     \
                                    (prefix))

/* The same for connection.close; sends close-ok and destroys 'c'. */
void h_expect_async_conn_close_at(const char *file, int line,
                                  amqp_connection_state_t c, int code,
                                  const char *prefix);
#define EXPECT_ASYNC_CONN_CLOSE(c, code, prefix)                               \
    h_expect_async_conn_close_at(__FILE__, __LINE__, (c), (code), (prefix))

/* ---- tables of refused methods ---- */

/*
 * The reply of an asynchronous method (publish, ack), which has none: a
 * refusal is then waited for. (rabbitmq-c leaves no reply of this type
 * after a synchronous method; its failures are exceptions.)
 */
#define H_NO_REPLY ((amqp_rpc_reply_t){ .reply_type = AMQP_RESPONSE_NONE })

/*
 * The close that refuses a method: channel.close on 'ch' or, when 'ch' is
 * 0, connection.close, with 'code' and a text starting with 'prefix'. 'r'
 * is the reply of a synchronous method (amqp_get_rpc_reply), or
 * H_NO_REPLY. Sends the close-ok; a connection.close destroys 'c'.
 */
void h_expect_refused_at(const char *file, int line, amqp_connection_state_t c,
                         amqp_rpc_reply_t r, amqp_channel_t ch, int code,
                         const char *prefix);
#define EXPECT_REFUSED(c, r, ch, code, prefix)                                 \
    h_expect_refused_at(__FILE__, __LINE__, (c), (r), (ch), (code), (prefix))

/* One row of a table of methods the broker refuses. */
struct h_refusal {
    const char *name; /* the case, for h_case() */
    /* On a new connection with channel 1 open: provoke the refusal. 'obj'
     * is a name made for this case (h_name) for what it declares. Returns
     * the reply of its last method, or H_NO_REPLY. */
    amqp_rpc_reply_t (*send)(amqp_connection_state_t c, const char *obj);
    amqp_channel_t ch; /* the channel closed; 0: the connection */
    int code;
    const char *text; /* how the reply text starts; "%s" stands for 'obj' */
    /* NULL, or what follows on the connection once channel 'ch' is open
     * again (deleting what 'send' declared, say) */
    void (*after)(amqp_connection_state_t c, const char *obj);
    const char *roost_only; /* NULL, or why it is skipped when remote */
};

/*
 * Run a row against H, for a loop test over a table: h_case(v->name),
 * connect, v->send, expect the close; after a channel close open the
 * channel again, synchronise on it and run v->after; close the connection.
 */
void h_refused(const struct h_refusal *v);

/* One method the broker sent, with its content when it has one. */
struct h_event {
    amqp_channel_t channel;
    amqp_method_number_t id; /* 0 when nothing arrived */
    /* basic.deliver, basic.get-ok, basic.return; basic.ack and
     * basic.nack from the broker (publisher confirms) */
    uint64_t tag;
    bool redelivered;
    bool multiple, requeue;     /* basic.ack, basic.nack */
    uint32_t message_count; /* get-ok */
    char ctag[256], exchange[256], rkey[256];
    /* basic.return, channel.close, connection.close; text is also
     * connection.blocked's reason */
    int code;
    char text[256];
    /* content */
    bool has_content;
    char *body; /* malloc'd, NUL-terminated */
    size_t len;
    amqp_flags_t flags; /* which properties are present */
    uint8_t delivery_mode, priority;
    uint64_t timestamp;
    char content_type[64], correlation_id[64], message_id[64], app_id[64];
    int nheaders;
    char header0[64]; /* the first header's key */
};

void h_event_free(struct h_event *e);

/*
 * Wait up to 'timeout_ms' for the next method frame on any channel and
 * read its content if it has one. Returns 1 with *e filled, 0 on timeout,
 * -1 when the connection is gone (EOF or error).
 */
int h_next(amqp_connection_state_t c, int timeout_ms, struct h_event *e);

/*
 * Expect a delivery (basic.deliver) within 5 s whose body is 'body' (NULL:
 * any); returns it in *e (free with h_event_free) when e is not NULL.
 */
uint64_t h_expect_delivery_at(const char *file, int line,
                              amqp_connection_state_t c, const char *body,
                              struct h_event *e);
#define EXPECT_DELIVERY(c, body, e)                                            \
    h_expect_delivery_at(__FILE__, __LINE__, (c), (body), (e))

/* Expect some method 'id' within 5 s (any channel); fills *e if not NULL. */
void h_expect_method_at(const char *file, int line, amqp_connection_state_t c,
                        amqp_method_number_t id, struct h_event *e);
#define EXPECT_METHOD(c, id, e)                                                \
    h_expect_method_at(__FILE__, __LINE__, (c), (id), (e))

/*
 * Synchronise with the broker on channel 'ch' (a passive declare of
 * amq.direct) and return how many basic.deliver methods arrived before the
 * reply; they are stored in evs[0..max-1] (free each) when evs is not NULL.
 * Fails on anything but deliveries. Deterministic for deliveries caused
 * by earlier methods on the same connection, and in practice for those of
 * another connection that synchronised first.
 */
int h_sync_at(const char *file, int line, amqp_connection_state_t c,
              amqp_channel_t ch, struct h_event *evs, int max);
#define SYNC(c, ch, evs, max)                                                  \
    h_sync_at(__FILE__, __LINE__, (c), (ch), (evs), (max))

/* Expect that nothing arrives for 'ms' ms (for negative checks in tests
 * about time only; prefer SYNC). */
void h_expect_silence_at(const char *file, int line, amqp_connection_state_t c,
                         int ms);
#define EXPECT_SILENCE(c, ms) h_expect_silence_at(__FILE__, __LINE__, (c), (ms))

/* ---- shorthands that assert success ---- */

/* queue.declare; returns the name (static buffer per call site is the
 * caller's 'out', at least 256 bytes) and the counts. */
void h_declare_queue_at(const char *file, int line, amqp_connection_state_t c,
                        amqp_channel_t ch, const char *name, bool durable,
                        bool exclusive, bool auto_delete, amqp_table_t args,
                        char *out, uint32_t *messages, uint32_t *consumers);
#define DECLARE_QUEUE(c, ch, name, dur, excl, ad, out)                         \
    h_declare_queue_at(__FILE__, __LINE__, (c), (ch), (name), (dur), (excl),   \
                       (ad), amqp_empty_table, (out), NULL, NULL)

/* Passive declare: message count of a queue (asserts it exists). */
uint32_t h_queue_count_at(const char *file, int line, amqp_connection_state_t c,
                          amqp_channel_t ch, const char *name,
                          uint32_t *consumers);
#define QUEUE_COUNT(c, ch, name)                                               \
    h_queue_count_at(__FILE__, __LINE__, (c), (ch), (name), NULL)

/*
 * Poll (passive declares, at most 5 s) until the queue holds 'want' ready
 * messages; asserts. RabbitMQ counts publishes asynchronously, so a count
 * right after a publish may lag there.
 */
void h_wait_count_at(const char *file, int line, amqp_connection_state_t c,
                     amqp_channel_t ch, const char *name, uint32_t want);
#define WAIT_COUNT(c, ch, name, want)                                          \
    h_wait_count_at(__FILE__, __LINE__, (c), (ch), (name), (want))

void h_bind_at(const char *file, int line, amqp_connection_state_t c,
               amqp_channel_t ch, const char *queue, const char *exchange,
               const char *key, amqp_table_t args);
#define BIND(c, ch, q, x, key)                                                 \
    h_bind_at(__FILE__, __LINE__, (c), (ch), (q), (x), (key), amqp_empty_table)

void h_declare_exchange_at(const char *file, int line,
                           amqp_connection_state_t c, amqp_channel_t ch,
                           const char *name, const char *type, bool durable,
                           bool auto_delete, bool internal, amqp_table_t args);
#define DECLARE_EXCHANGE(c, ch, name, type)                                    \
    h_declare_exchange_at(__FILE__, __LINE__, (c), (ch), (name), (type),       \
                          false, false, false, amqp_empty_table)

/* basic.publish of a string body, asserting the library accepted it. */
void h_publish_at(const char *file, int line, amqp_connection_state_t c,
                  amqp_channel_t ch, const char *exchange, const char *key,
                  const void *body, size_t len, bool mandatory,
                  const amqp_basic_properties_t *props);
#define PUBLISH(c, ch, x, key, body)                                           \
    h_publish_at(__FILE__, __LINE__, (c), (ch), (x), (key), (body),            \
                 strlen(body), false, NULL)

/* Publish "<prefix><i>" for i in [from, to) to 'q' by the default
 * exchange. */
void h_publish_n_at(const char *file, int line, amqp_connection_state_t c,
                    amqp_channel_t ch, const char *q, const char *prefix,
                    int from, int to);
#define PUBLISH_N(c, ch, q, prefix, from, to)                                  \
    h_publish_n_at(__FILE__, __LINE__, (c), (ch), (q), (prefix), (from), (to))

/* basic.consume; returns the consumer tag (into 'out', >= 256 bytes). */
void h_consume_at(const char *file, int line, amqp_connection_state_t c,
                  amqp_channel_t ch, const char *queue, const char *tag,
                  bool no_ack, bool exclusive, char *out);
#define CONSUME(c, ch, q, tag, no_ack, out)                                    \
    h_consume_at(__FILE__, __LINE__, (c), (ch), (q), (tag), (no_ack), false,   \
                 (out))

/*
 * basic.get: returns 1 and fills *e (get-ok with content) or 0 for
 * get-empty; asserts on anything else.
 */
int h_get_at(const char *file, int line, amqp_connection_state_t c,
             amqp_channel_t ch, const char *queue, bool no_ack,
             struct h_event *e);
#define GET(c, ch, q, no_ack, e)                                               \
    h_get_at(__FILE__, __LINE__, (c), (ch), (q), (no_ack), (e))

/* Send a method and assert the library sent it. */
void h_send_at(const char *file, int line, amqp_connection_state_t c,
               amqp_channel_t ch, amqp_method_number_t id, void *decoded);
#define SEND(c, ch, id, decoded)                                               \
    h_send_at(__FILE__, __LINE__, (c), (ch), (id), (decoded))

/* A table of 'n' entries in a caller-provided array. */
static inline amqp_table_t
h_table(amqp_table_entry_t *entries, int n)
{
    amqp_table_t t = { n, entries };
    return t;
}

static inline amqp_table_entry_t
h_entry_str(const char *key, const char *value)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_UTF8;
    e.value.value.bytes = amqp_cstring_bytes(value);
    return e;
}

static inline amqp_table_entry_t
h_entry_int(const char *key, int32_t v)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = AMQP_FIELD_KIND_I32;
    e.value.value.i32 = v;
    return e;
}

static inline amqp_table_entry_t
h_entry_kind(const char *key, uint8_t kind)
{
    amqp_table_entry_t e;
    e.key = amqp_cstring_bytes(key);
    e.value.kind = kind;
    e.value.value.u64 = 0;
    return e;
}

/* ---- field tables as data, for tables of cases ---- */

#define H_BYTES(s) { sizeof(s) - 1, (void *)(s) }
#define H_STR(k, v)                                                            \
    { H_BYTES(k), { AMQP_FIELD_KIND_UTF8, { .bytes = H_BYTES(v) } } }
#define H_I8(k, v) { H_BYTES(k), { AMQP_FIELD_KIND_I8, { .i8 = (v) } } }
#define H_I32(k, v) { H_BYTES(k), { AMQP_FIELD_KIND_I32, { .i32 = (v) } } }
#define H_I64(k, v) { H_BYTES(k), { AMQP_FIELD_KIND_I64, { .i64 = (v) } } }
#define H_VOID(k) { H_BYTES(k), { AMQP_FIELD_KIND_VOID } }

/* A field table in a static table of cases: H_FIELDS(H_STR("k", "v"), ...)
 * or { 0 } (empty). A negative 'n' is the caller's "no table at all". */
struct h_fields {
    int n;
    amqp_table_entry_t e[4];
};
#define H_FIELDS(...)                                                          \
    { (int)(sizeof((amqp_table_entry_t[]){ __VA_ARGS__ }) /                    \
            sizeof(amqp_table_entry_t)),                                       \
      { __VA_ARGS__ } }

/* The table of 'f' (empty when f->n < 1), borrowing its entries. */
static inline amqp_table_t
h_fields_table(const struct h_fields *f)
{
    return h_table((amqp_table_entry_t *)f->e, f->n > 0 ? f->n : 0);
}

/* A string for a method number, e.g. "basic.deliver". */
const char *h_method_name(amqp_method_number_t id);

/*
 * queue.declare of a new queue (named for 'tag') with argument 'arg' on
 * channel 1 must get RabbitMQ's 406 "invalid arg 'K' for queue 'Q' in
 * vhost '/': WHY"; channel 1 is open again after it.
 */
void h_expect_arg_refused_at(const char *file, int line,
                             amqp_connection_state_t c, const char *tag,
                             amqp_table_entry_t arg, const char *why);
#define EXPECT_ARG_REFUSED(c, tag, arg, why)                                   \
    h_expect_arg_refused_at(__FILE__, __LINE__, (c), (tag), (arg), (why))

#endif
