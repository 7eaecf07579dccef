/*
 * SPDX-License-Identifier: Apache-2.0
 * Helpers shared by the store and paging tests (see store_common.h).
 */
#define _GNU_SOURCE
#include "tests/integration/store_common.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- seeds ---- */

static uint64_t rng;

uint64_t
rnd(void)
{
    /* splitmix64 */
    uint64_t z = (rng += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t
rnd_in(uint64_t lo, uint64_t hi)
{
    return lo + rnd() % (hi - lo + 1);
}

uint64_t
seed(const char *test, uint64_t dflt)
{
    const char *env = getenv("ROOST_TEST_SEED");
    rng = env && env[0] ? strtoull(env, NULL, 0) : dflt;
    fprintf(stderr, "%s: seed %" PRIu64 " (ROOST_TEST_SEED=N to change)\n",
            test, rng);
    return rng;
}

/* ---- bodies ---- */

size_t
make_body(char *buf, int id, size_t len)
{
    char unit[32];
    int ul = snprintf(unit, sizeof(unit), "<id:%06d>", id);

    if (len < (size_t)ul)
        len = (size_t)ul;
    ck_assert(len < BODY_MAX);
    for (size_t i = 0; i < len; i++)
        buf[i] = unit[i % (size_t)ul];
    buf[len] = '\0';
    return len;
}

int
body_id(const char *body, size_t len)
{
    char head[16];
    size_t n = len < sizeof(head) - 1 ? len : sizeof(head) - 1;
    int id;

    if (body == NULL || len < 11)
        return -1;
    memcpy(head, body, n);
    head[n] = '\0';
    if (sscanf(head, "<id:%d>", &id) != 1)
        return -1;
    return id;
}

bool
body_is(const void *body, size_t len, int id, size_t size)
{
    char want[BODY_MAX];
    size_t wl = make_body(want, id, size);
    return len == wl && memcmp(body, want, wl) == 0;
}

amqp_basic_properties_t
mode_props(uint8_t mode)
{
    amqp_basic_properties_t p;
    memset(&p, 0, sizeof(p));
    p._flags = AMQP_BASIC_DELIVERY_MODE_FLAG;
    p.delivery_mode = mode;
    return p;
}

/* ---- the broker's log and files ---- */

size_t
log_mark(const struct harness *h)
{
    struct stat sb;
    return stat(h->log_path, &sb) == 0 ? (size_t)sb.st_size : 0;
}

/* roostd's log from byte 'from' on (malloc'd, NUL-terminated). */
static char *
log_since(const struct harness *h, size_t from)
{
    FILE *fp = fopen(h->log_path, "r");
    char *buf;
    size_t len = 0, cap = 65536, n;

    ck_assert_msg(fp != NULL, "cannot open %s: %s", h->log_path,
                  strerror(errno));
    buf = malloc(cap + 1);
    ck_assert(buf != NULL);
    ck_assert(fseek(fp, (long)from, SEEK_SET) == 0);
    while ((n = fread(buf + len, 1, cap - len, fp)) > 0) {
        len += n;
        if (len == cap) {
            cap *= 2;
            buf = realloc(buf, cap + 1);
            ck_assert(buf != NULL);
        }
    }
    fclose(fp);
    buf[len] = '\0';
    return buf;
}

bool
log_has_since(const struct harness *h, size_t from, const char *needle)
{
    char *log = log_since(h, from);
    bool found = strstr(log, needle) != NULL;
    free(log);
    return found;
}

void
wait_log_at(const char *file, int line, const struct harness *h, size_t from,
            const char *needle)
{
    uint64_t deadline = h_now_ms() + 5000;
    while (!log_has_since(h, from, needle) && h_now_ms() < deadline)
        h_sleep_ms(5);
    H_ASSERT_AT(file, line, log_has_since(h, from, needle),
                "roostd's log does not say \"%s\"", needle);
}

void
recovered_at(const char *file, int line, const struct harness *h, size_t from,
             unsigned long long *msgs, unsigned long long *queues)
{
    char *log = log_since(h, from);
    const char *p = strstr(log, "store: recovered ");
    int defs = 0;

    H_ASSERT_AT(file, line, p != NULL, "no \"store: recovered\" line in the "
                "log of the restarted roostd");
    H_ASSERT_AT(file, line,
                sscanf(p, "store: recovered %d definitions, %llu messages in "
                       "%llu durable queues", &defs, msgs, queues) == 3,
                "cannot parse the recovery line: %.200s", p);
    free(log);
}

void
data_path(char *out, size_t len, const struct harness *h, const char *rel)
{
    snprintf(out, len, "%s/data/%s", h->dir, rel);
}

void
hook_path(char *out, size_t len, const char *tag)
{
    const char *session = getenv("ROOST_TEST_SESSION");
    snprintf(out, len, "%s/%s-%d", session && session[0] ? session : "/tmp",
             tag, (int)getpid());
}

int
count_segs(const struct harness *h, const char *rel)
{
    char dir[512];
    struct dirent *de;
    int n = 0;

    data_path(dir, sizeof(dir), h, rel);
    DIR *d = opendir(dir);
    if (d == NULL) {
        ck_assert_msg(errno == ENOENT, "cannot open %s: %s", dir,
                      strerror(errno));
        return 0;
    }
    while ((de = readdir(d)) != NULL) {
        size_t l = strlen(de->d_name);
        if (l > 4 && strcmp(de->d_name + l - 4, ".seg") == 0)
            n++;
    }
    closedir(d);
    return n;
}

void
kill9_at(const char *file, int line, struct harness *h)
{
    harness_kill(h, SIGKILL);
    int status = harness_reap(h);
    H_ASSERT_AT(file, line, WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL,
                "roostd ended with status 0x%x before the SIGKILL", status);
}

/* ---- publisher confirms ---- */

void
conf_free(struct confirms *t)
{
    free(t->st);
    memset(t, 0, sizeof(*t));
}

static void
settle(struct confirms *t, uint64_t tag, bool nack)
{
    t->st[tag] = nack ? 2 : 1;
    t->settled++;
    if (nack)
        t->nacks++;
    else
        t->acks++;
}

/* Note one more publish. */
static void
conf_published(struct confirms *t)
{
    if (t->n + 2 > t->cap) {
        t->cap = t->cap ? t->cap * 2 : 4096;
        t->st = realloc(t->st, t->cap);
        ck_assert(t->st != NULL);
    }
    t->st[++t->n] = 0;
}

int
conf_pump_at(const char *file, int line, amqp_connection_state_t c,
             struct confirms *t, int ms)
{
    struct h_event e;
    int r = h_next(c, ms, &e);

    H_ASSERT_AT(file, line, r >= 0, "connection closed while waiting for "
                "confirms (%" PRIu64 " of %" PRIu64 " settled)", t->settled,
                t->n);
    if (r == 0)
        return 0;
    switch (e.id) {
    case AMQP_BASIC_ACK_METHOD:
    case AMQP_BASIC_NACK_METHOD:
        H_ASSERT_AT(file, line, e.tag >= 1 && e.tag <= t->n,
                    "%s of tag %" PRIu64 ", but %" PRIu64 " were published",
                    h_method_name(e.id), e.tag, t->n);
        if (e.multiple) {
            for (uint64_t k = t->floor + 1; k <= e.tag; k++)
                if (t->st[k] == 0)
                    settle(t, k, e.id == AMQP_BASIC_NACK_METHOD);
        } else {
            H_ASSERT_AT(file, line, t->st[e.tag] == 0,
                        "tag %" PRIu64 " confirmed twice", e.tag);
            settle(t, e.tag, e.id == AMQP_BASIC_NACK_METHOD);
        }
        while (t->floor < t->n && t->st[t->floor + 1] != 0)
            t->floor++;
        break;
    case AMQP_CONNECTION_BLOCKED_METHOD:
        t->blocked++;
        snprintf(t->blocked_reason, sizeof(t->blocked_reason), "%s", e.text);
        break;
    case AMQP_CONNECTION_UNBLOCKED_METHOD:
        t->unblocked++;
        break;
    default:
        h_event_free(&e);
        H_ASSERT_AT(file, line, 0, "expected confirms, got %s on channel %u",
                    h_method_name(e.id), e.channel);
    }
    h_event_free(&e);
    return 1;
}

void
conf_wait_all_at(const char *file, int line, amqp_connection_state_t c,
                 struct confirms *t, int ms)
{
    uint64_t deadline = h_now_ms() + (uint64_t)ms;
    while (t->settled < t->n && h_now_ms() < deadline)
        conf_pump_at(file, line, c, t, 50);
    H_ASSERT_AT(file, line, t->settled == t->n,
                "%" PRIu64 " of %" PRIu64 " publishes confirmed within %d ms "
                "(connection.blocked %d, unblocked %d)", t->settled, t->n, ms,
                t->blocked, t->unblocked);
    H_ASSERT_AT(file, line, t->nacks == 0, "%" PRIu64 " publishes nacked",
                t->nacks);
}

void
pub_at(const char *file, int line, amqp_connection_state_t c, amqp_channel_t ch,
       struct confirms *t, const char *x, const char *key, int id, size_t size,
       const amqp_basic_properties_t *p, uint64_t window, int stall_ms)
{
    char body[BODY_MAX];
    size_t len = make_body(body, id, size);

    while (window && t->n - t->settled >= window)
        if (conf_pump_at(file, line, c, t, stall_ms) == 0)
            H_ASSERT_AT(file, line, 0, "no confirm within %d ms (%" PRIu64
                        " of %" PRIu64 " settled; connection.blocked %d, "
                        "unblocked %d)", stall_ms, t->settled, t->n,
                        t->blocked, t->unblocked);
    h_publish_at(file, line, c, ch, x, key, body, len, false, p);
    conf_published(t);
}

void
pub_mode_at(const char *file, int line, amqp_connection_state_t c,
            amqp_channel_t ch, struct confirms *t, const char *x,
            const char *key, int id, size_t size, uint8_t mode,
            uint64_t window, int stall_ms)
{
    amqp_basic_properties_t p = mode_props(mode);
    pub_at(file, line, c, ch, t, x, key, id, size, &p, window, stall_ms);
}

void
confirm_select(amqp_connection_state_t c, amqp_channel_t ch)
{
    amqp_confirm_select(c, ch);
    EXPECT_OK(c, "confirm.select");
}

/* ---- what a queue holds ---- */

/* The 'n' deliveries a consumer on 'ch' was just started for, and none
 * more (read_queue_at, read_stream_at). */
static int
read_n(const char *file, int line, amqp_connection_state_t c,
       amqp_channel_t ch, const char *q, uint32_t n, size_t size,
       struct qmsg **out)
{
    struct qmsg *m = calloc(n + 1, sizeof(*m));

    ck_assert(m != NULL);
    for (uint32_t i = 0; i < n; i++) {
        struct h_event e;
        int r = h_next(c, 10000, &e);
        H_ASSERT_AT(file, line, r == 1, "reading '%s': message %u of %u: %s",
                    q, i + 1, n,
                    r == 0 ? "nothing within 10 s" : "connection closed");
        H_ASSERT_AT(file, line,
                    e.id == AMQP_BASIC_DELIVER_METHOD && e.channel == ch,
                    "reading '%s': got %s on channel %u", q,
                    h_method_name(e.id), e.channel);
        m[i].id = body_id(e.body, e.len);
        m[i].body_ok = size == 0 ||
                       (m[i].id > 0 && body_is(e.body, e.len, m[i].id, size));
        m[i].redelivered = e.redelivered;
        m[i].mode = e.delivery_mode;
        h_event_free(&e);
    }
    int extra = h_sync_at(file, line, c, ch, NULL, 0);
    H_ASSERT_AT(file, line, extra == 0,
                "reading '%s': %d deliveries beyond the %u it counted", q,
                extra, n);
    *out = m;
    return (int)n;
}

int
read_queue_at(const char *file, int line, amqp_connection_state_t c,
              amqp_channel_t ch, const char *q, size_t size, struct qmsg **out)
{
    uint32_t n = h_queue_count_at(file, line, c, ch, q, NULL);
    h_consume_at(file, line, c, ch, q, NULL, false, false, NULL);
    return read_n(file, line, c, ch, q, n, size, out);
}

int
read_stream_at(const char *file, int line, amqp_connection_state_t c,
               amqp_channel_t ch, const char *q, size_t size,
               struct qmsg **out)
{
    uint32_t n = h_queue_count_at(file, line, c, ch, q, NULL);
    amqp_table_entry_t first = h_entry_str("x-stream-offset", "first");
    amqp_basic_qos(c, ch, 0, (uint16_t)(n < 65535 ? n + 1 : 65535), 0);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "basic.qos");
    amqp_basic_consume(c, ch, amqp_cstring_bytes(q), amqp_empty_bytes, 0, 0,
                       0, h_table(&first, 1));
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "basic.consume");
    return read_n(file, line, c, ch, q, n, size, out);
}

void
expect_ids_at(const char *file, int line, const struct qmsg *m, int n,
              int from, int to, int redelivered_below, bool exact)
{
    for (int i = 0; i < n && i < to - from; i++) {
        int want = from + i;
        H_ASSERT_AT(file, line, m[i].id == want,
                    "message %d of the queue is id %d, expected %d%s", i + 1,
                    m[i].id, want,
                    m[i].id < 0 ? " (not a message of the test)" : "");
        H_ASSERT_AT(file, line, m[i].body_ok,
                    "id %d does not have the body it was published with",
                    want);
        if (want < redelivered_below || exact)
            H_ASSERT_AT(file, line,
                        m[i].redelivered == (want < redelivered_below),
                        "id %d has redelivered=%d, expected %d", want,
                        m[i].redelivered, want < redelivered_below);
        H_ASSERT_AT(file, line, m[i].mode == 2,
                    "id %d has delivery mode %u, expected 2", want,
                    m[i].mode);
    }
    H_ASSERT_AT(file, line, n == to - from,
                "the queue holds %d messages, expected %d (ids %d..%d)", n,
                to - from, from, to - 1);
}
