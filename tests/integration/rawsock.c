/*
 * SPDX-License-Identifier: Apache-2.0
 * Raw AMQP 0-9-1 over TCP (see rawsock.h): a byte builder, a buffered
 * frame reader with timeouts, the connection handshake, and a few methods
 * encoded by hand.
 */
#define _GNU_SOURCE
#include "tests/integration/rawsock.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* ---- the byte builder ---- */

void
rb_init(struct rs_buf *b)
{
    b->p = NULL;
    b->len = b->cap = 0;
}

void
rb_free(struct rs_buf *b)
{
    free(b->p);
    rb_init(b);
}

static uint8_t *
rb_grow(struct rs_buf *b, size_t n)
{
    if (b->cap - b->len < n) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap - b->len < n)
            cap *= 2;
        uint8_t *p = realloc(b->p, cap);
        if (p == NULL)
            abort();
        b->p = p;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->len;
    b->len += n;
    return at;
}

void
rb_u8(struct rs_buf *b, uint8_t v)
{
    *rb_grow(b, 1) = v;
}

void
rb_u16(struct rs_buf *b, uint16_t v)
{
    uint8_t *p = rb_grow(b, 2);
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

void
rb_u32(struct rs_buf *b, uint32_t v)
{
    uint8_t *p = rb_grow(b, 4);
    p[0] = (uint8_t)(v >> 24);
    p[1] = (uint8_t)(v >> 16);
    p[2] = (uint8_t)(v >> 8);
    p[3] = (uint8_t)v;
}

void
rb_u64(struct rs_buf *b, uint64_t v)
{
    rb_u32(b, (uint32_t)(v >> 32));
    rb_u32(b, (uint32_t)v);
}

void
rb_raw(struct rs_buf *b, const void *p, size_t n)
{
    if (n)
        memcpy(rb_grow(b, n), p, n);
}

void
rb_shortstr(struct rs_buf *b, const char *s)
{
    size_t n = strlen(s);
    rb_u8(b, (uint8_t)n);
    rb_raw(b, s, n);
}

void
rb_longstr(struct rs_buf *b, const void *p, size_t n)
{
    rb_u32(b, (uint32_t)n);
    rb_raw(b, p, n);
}

size_t
rb_mark32(struct rs_buf *b)
{
    size_t at = b->len;
    rb_u32(b, 0);
    return at;
}

void
rb_patch32(struct rs_buf *b, size_t mark)
{
    uint32_t n = (uint32_t)(b->len - mark - 4);
    b->p[mark] = (uint8_t)(n >> 24);
    b->p[mark + 1] = (uint8_t)(n >> 16);
    b->p[mark + 2] = (uint8_t)(n >> 8);
    b->p[mark + 3] = (uint8_t)n;
}

/* Table entries: key, type octet, value. */
static void
rb_field_str(struct rs_buf *b, const char *key, const char *value)
{
    rb_shortstr(b, key);
    rb_u8(b, 'S');
    rb_longstr(b, value, strlen(value));
}

static void
rb_field_bool(struct rs_buf *b, const char *key, bool value)
{
    rb_shortstr(b, key);
    rb_u8(b, 't');
    rb_u8(b, value ? 1 : 0);
}

/* ---- the socket ---- */

static uint64_t
now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
rs_frame_free(struct rs_frame *f)
{
    if (f) {
        free(f->payload);
        f->payload = NULL;
    }
}

int
rs_connect(struct rawsock *rs, const char *host, int port, int rcvbuf)
{
    struct sockaddr_in sa;
    int one = 1;

    memset(rs, 0, sizeof(*rs));
    rs->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (rs->fd < 0)
        return -1;
    if (rcvbuf > 0)
        setsockopt(rs->fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
    setsockopt(rs->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    memset(&sa, 0, sizeof(sa));
    sa.sin_family = AF_INET;
    sa.sin_port = htons((uint16_t)port);
    if (inet_pton(AF_INET, host, &sa.sin_addr) != 1 ||
        connect(rs->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
        close(rs->fd);
        rs->fd = -1;
        return -1;
    }
    rs->frame_max = 131072;
    return 0;
}

void
rs_close(struct rawsock *rs)
{
    if (rs->fd >= 0)
        close(rs->fd);
    rs->fd = -1;
    free(rs->in);
    rs->in = NULL;
    rs->in_len = rs->in_cap = 0;
}

int
rs_send(struct rawsock *rs, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) {
        ssize_t w = send(rs->fd, b, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        b += w;
        n -= (size_t)w;
    }
    return 0;
}

int
rs_send_frame(struct rawsock *rs, uint8_t type, uint16_t channel,
              const void *payload, size_t size)
{
    struct rs_buf b;
    int rc;

    rb_init(&b);
    rb_u8(&b, type);
    rb_u16(&b, channel);
    rb_u32(&b, (uint32_t)size);
    rb_raw(&b, payload, size);
    rb_u8(&b, 0xCE);
    rc = rs_send(rs, b.p, b.len);
    rb_free(&b);
    return rc;
}

int
rs_send_method(struct rawsock *rs, uint16_t channel, uint32_t method,
               const void *args, size_t len)
{
    struct rs_buf b;
    int rc;

    rb_init(&b);
    rb_u16(&b, (uint16_t)(method >> 16));
    rb_u16(&b, (uint16_t)method);
    rb_raw(&b, args, len);
    rc = rs_send_frame(rs, RS_FRAME_METHOD, channel, b.p, b.len);
    rb_free(&b);
    return rc;
}

int
rs_send_heartbeat(struct rawsock *rs)
{
    return rs_send_frame(rs, RS_FRAME_HEARTBEAT, 0, NULL, 0);
}

/* Read more input, waiting until 'deadline'. 1 got bytes, 0 EOF, -1
 * timeout. */
static int
fill(struct rawsock *rs, uint64_t deadline)
{
    if (rs->eof)
        return 0;
    for (;;) {
        uint64_t now = now_ms();
        int wait = now >= deadline ? 0 : (int)(deadline - now);
        struct pollfd pfd = { rs->fd, POLLIN, 0 };
        int n = poll(&pfd, 1, wait);
        if (n < 0 && errno == EINTR)
            continue;
        if (n == 0)
            return -1;
        if (rs->in_cap - rs->in_len < 65536) {
            size_t cap = rs->in_cap ? rs->in_cap * 2 : 131072;
            uint8_t *p = realloc(rs->in, cap);
            if (p == NULL)
                abort();
            rs->in = p;
            rs->in_cap = cap;
        }
        ssize_t r =
            recv(rs->fd, rs->in + rs->in_len, rs->in_cap - rs->in_len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            /* ECONNRESET counts as the end too. */
            rs->eof = true;
            return 0;
        }
        rs->in_len += (size_t)r;
        return 1;
    }
}

static void
consume(struct rawsock *rs, size_t n)
{
    memmove(rs->in, rs->in + n, rs->in_len - n);
    rs->in_len -= n;
}

int
rs_read_frame(struct rawsock *rs, struct rs_frame *f, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

    memset(f, 0, sizeof(*f));
    for (;;) {
        if (rs->in_len >= 7) {
            uint32_t size = rs_load32(rs->in + 3);
            size_t need = (size_t)size + 8;
            if (rs->in_len >= need) {
                if (rs->in[need - 1] != 0xCE)
                    return -2;
                f->type = rs->in[0];
                f->channel = rs_load16(rs->in + 1);
                f->size = size;
                f->payload = malloc(size ? size : 1);
                if (f->payload == NULL)
                    abort();
                memcpy(f->payload, rs->in + 7, size);
                if (f->type == RS_FRAME_METHOD && size >= 4)
                    f->method =
                        RS_M(rs_load16(f->payload), rs_load16(f->payload + 2));
                consume(rs, need);
                return 1;
            }
        }
        int r = fill(rs, deadline);
        if (r <= 0)
            return r;
    }
}

size_t
rs_read_raw(struct rawsock *rs, void *buf, size_t n, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;

    while (rs->in_len < n && fill(rs, deadline) > 0)
        ;
    size_t got = rs->in_len < n ? rs->in_len : n;
    memcpy(buf, rs->in, got);
    consume(rs, got);
    return got;
}

/* Record a connection.close or channel.close. */
static void
record_close(struct rawsock *rs, const struct rs_frame *f)
{
    const uint8_t *p = f->payload + 4, *end = f->payload + f->size;
    size_t tl;

    rs->close_channel = f->channel;
    rs->close_code = 0;
    rs->close_text[0] = '\0';
    rs->close_class = rs->close_method = 0;
    if (end - p < 3)
        return;
    rs->close_code = rs_load16(p);
    tl = p[2];
    p += 3;
    if ((size_t)(end - p) < tl + 4)
        return;
    /* a shortstr is at most 255 bytes: it fits */
    memcpy(rs->close_text, p, tl);
    rs->close_text[tl] = '\0';
    p += tl;
    rs->close_class = rs_load16(p);
    rs->close_method = rs_load16(p + 2);
}

long
rs_wait_eof(struct rawsock *rs, int timeout_ms, int *close_code)
{
    uint64_t start = now_ms(), deadline = start + (uint64_t)timeout_ms;

    if (close_code)
        *close_code = 0;
    for (;;) {
        /* Look at whole frames for a close; drop anything else. */
        struct rs_frame f;
        uint64_t now = now_ms();
        int r =
            rs_read_frame(rs, &f, now >= deadline ? 0 : (int)(deadline - now));
        if (r == 1) {
            if (f.method == RS_CONNECTION_CLOSE) {
                record_close(rs, &f);
                if (close_code)
                    *close_code = rs->close_code;
            }
            rs_frame_free(&f);
            continue;
        }
        if (r == -2) {
            /* Not frames: discard the bytes. */
            rs->in_len = 0;
            continue;
        }
        if (r == 0)
            return (long)(now_ms() - start);
        return -1;
    }
}

/* ---- the handshake ---- */

static const struct rs_login default_login;

int
rs_send_header(struct rawsock *rs)
{
    return rs_send(rs, "AMQP\x00\x00\x09\x01", 8);
}

int
rs_expect_method(struct rawsock *rs, uint16_t channel, uint32_t method,
                 int timeout_ms, struct rs_frame *out)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    struct rs_frame f;

    for (;;) {
        uint64_t now = now_ms();
        int r =
            rs_read_frame(rs, &f, now >= deadline ? 0 : (int)(deadline - now));
        if (r != 1)
            return -1;
        if (f.type == RS_FRAME_HEARTBEAT) {
            rs_frame_free(&f);
            continue;
        }
        if (f.method == RS_CONNECTION_CLOSE || f.method == RS_CHANNEL_CLOSE)
            record_close(rs, &f);
        if (f.type == RS_FRAME_METHOD && f.channel == channel &&
            f.method == method) {
            if (out)
                *out = f;
            else
                rs_frame_free(&f);
            return 0;
        }
        rs_frame_free(&f);
        return -1;
    }
}

int
rs_expect_start(struct rawsock *rs, int timeout_ms)
{
    struct rs_frame f;

    if (rs_expect_method(rs, 0, RS_CONNECTION_START, timeout_ms, &f) != 0)
        return -1;
    /* version-major, version-minor, server-properties, mechanisms. */
    const uint8_t *p = f.payload + 6, *end = f.payload + f.size;
    if (end - p >= 4) {
        uint32_t n = rs_load32(p);
        p += 4;
        if ((size_t)(end - p) >= (size_t)n + 4) {
            p += n;
            uint32_t m = rs_load32(p);
            p += 4;
            if ((size_t)(end - p) >= m) {
                size_t k = m < sizeof(rs->mechanisms) - 1
                               ? m
                               : sizeof(rs->mechanisms) - 1;
                memcpy(rs->mechanisms, p, k);
                rs->mechanisms[k] = '\0';
            }
        }
    }
    rs_frame_free(&f);
    return 0;
}

int
rs_send_start_ok(struct rawsock *rs, const struct rs_login *o)
{
    struct rs_buf b, resp;
    const char *mech, *user, *pass;
    size_t mark, caps;
    int rc;

    if (o == NULL)
        o = &default_login;
    mech = o->mechanism ? o->mechanism : "PLAIN";
    user = o->user ? o->user : "guest";
    pass = o->pass ? o->pass : "guest";
    rb_init(&b);
    rb_init(&resp);
    /* client-properties */
    mark = rb_mark32(&b);
    rb_field_str(&b, "product", "roost rawsock");
    rb_field_str(&b, "platform", "C");
    if (!o->no_capabilities) {
        rb_shortstr(&b, "capabilities");
        rb_u8(&b, 'F');
        caps = rb_mark32(&b);
        rb_field_bool(&b, "authentication_failure_close", true);
        rb_field_bool(&b, "consumer_cancel_notify", true);
        rb_field_bool(&b, "basic.nack", true);
        rb_field_bool(&b, "exchange_exchange_bindings", true);
        rb_patch32(&b, caps);
    }
    rb_patch32(&b, mark);
    rb_shortstr(&b, mech);
    if (strcmp(mech, "AMQPLAIN") == 0) {
        /* A field table without its length prefix. */
        rb_field_str(&resp, "LOGIN", user);
        rb_field_str(&resp, "PASSWORD", pass);
    } else {
        rb_u8(&resp, 0);
        rb_raw(&resp, user, strlen(user));
        rb_u8(&resp, 0);
        rb_raw(&resp, pass, strlen(pass));
    }
    rb_longstr(&b, resp.p, resp.len);
    rb_shortstr(&b, "en_US");
    rc = rs_send_method(rs, 0, RS_CONNECTION_START_OK, b.p, b.len);
    rb_free(&resp);
    rb_free(&b);
    return rc;
}

int
rs_expect_tune(struct rawsock *rs, int timeout_ms)
{
    struct rs_frame f;

    if (rs_expect_method(rs, 0, RS_CONNECTION_TUNE, timeout_ms, &f) != 0)
        return -1;
    if (f.size >= 12) {
        rs->tune_channel_max = rs_load16(f.payload + 4);
        rs->tune_frame_max = rs_load32(f.payload + 6);
        rs->tune_heartbeat = rs_load16(f.payload + 10);
    }
    rs_frame_free(&f);
    return 0;
}

int
rs_send_tune_ok(struct rawsock *rs, const struct rs_login *o)
{
    struct rs_buf b;
    uint16_t cm;
    uint32_t fm;
    int rc;

    if (o == NULL)
        o = &default_login;
    cm =
        o->exact_tune || o->channel_max ? o->channel_max : rs->tune_channel_max;
    fm = o->exact_tune || o->frame_max ? o->frame_max : rs->tune_frame_max;
    rb_init(&b);
    rb_u16(&b, cm);
    rb_u32(&b, fm);
    rb_u16(&b, o->heartbeat);
    rc = rs_send_method(rs, 0, RS_CONNECTION_TUNE_OK, b.p, b.len);
    rb_free(&b);
    rs->frame_max = fm ? fm : rs->tune_frame_max;
    return rc;
}

int
rs_send_open(struct rawsock *rs, const char *vhost)
{
    struct rs_buf b;
    int rc;

    rb_init(&b);
    rb_shortstr(&b, vhost ? vhost : "/");
    rb_shortstr(&b, ""); /* reserved-1 (capabilities) */
    rb_u8(&b, 0);        /* reserved-2 (insist) */
    rc = rs_send_method(rs, 0, RS_CONNECTION_OPEN, b.p, b.len);
    rb_free(&b);
    return rc;
}

int
rs_handshake(struct rawsock *rs, const struct rs_login *o)
{
    if (o == NULL)
        o = &default_login;
    if (rs_send_header(rs) != 0 || rs_expect_start(rs, 5000) != 0 ||
        rs_send_start_ok(rs, o) != 0 || rs_expect_tune(rs, 5000) != 0 ||
        rs_send_tune_ok(rs, o) != 0 || rs_send_open(rs, o->vhost) != 0 ||
        rs_expect_method(rs, 0, RS_CONNECTION_OPEN_OK, 5000, NULL) != 0)
        return -1;
    return 0;
}

int
rs_open(struct rawsock *rs, const char *host, int port,
        const struct rs_login *o)
{
    if (rs_connect(rs, host, port, 0) != 0)
        return -1;
    return rs_handshake(rs, o);
}

int
rs_expect_close(struct rawsock *rs, int timeout_ms)
{
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    struct rs_frame f;

    for (;;) {
        uint64_t now = now_ms();
        int r =
            rs_read_frame(rs, &f, now >= deadline ? 0 : (int)(deadline - now));
        if (r == 0)
            return 0;
        if (r < 0)
            return -1;
        if (f.method == RS_CONNECTION_CLOSE && f.channel == 0) {
            record_close(rs, &f);
            rs_frame_free(&f);
            (void)rs_send_method(rs, 0, RS_CONNECTION_CLOSE_OK, NULL, 0);
            return rs->close_code;
        }
        rs_frame_free(&f);
    }
}

/* ---- methods ---- */

int
rs_channel_open(struct rawsock *rs, uint16_t channel)
{
    uint8_t reserved = 0; /* out-of-band: an empty shortstr */
    if (rs_send_method(rs, channel, RS_CHANNEL_OPEN, &reserved, 1) != 0)
        return -1;
    return rs_expect_method(rs, channel, RS_CHANNEL_OPEN_OK, 5000, NULL);
}

int
rs_queue_declare(struct rawsock *rs, uint16_t channel, const char *name,
                 bool durable, bool exclusive, bool auto_delete)
{
    struct rs_buf b;
    int rc;

    rb_init(&b);
    rb_u16(&b, 0);
    rb_shortstr(&b, name);
    rb_u8(&b, (uint8_t)((durable ? 2 : 0) | (exclusive ? 4 : 0) |
                        (auto_delete ? 8 : 0)));
    rb_u32(&b, 0); /* arguments: empty table */
    rc = rs_send_method(rs, channel, RS_QUEUE_DECLARE, b.p, b.len);
    rb_free(&b);
    return rc;
}

int
rs_basic_consume(struct rawsock *rs, uint16_t channel, const char *queue,
                 const char *tag, bool no_ack)
{
    struct rs_buf b;
    int rc;

    rb_init(&b);
    rb_u16(&b, 0);
    rb_shortstr(&b, queue);
    rb_shortstr(&b, tag ? tag : "");
    rb_u8(&b,
          (uint8_t)(no_ack ? 2 : 0)); /* no-local, no-ack, exclusive, nowait */
    rb_u32(&b, 0);
    rc = rs_send_method(rs, channel, RS_BASIC_CONSUME, b.p, b.len);
    rb_free(&b);
    return rc;
}

int
rs_basic_get(struct rawsock *rs, uint16_t channel, const char *queue,
             bool no_ack)
{
    struct rs_buf b;
    int rc;

    rb_init(&b);
    rb_u16(&b, 0);
    rb_shortstr(&b, queue);
    rb_u8(&b, no_ack ? 1 : 0);
    rc = rs_send_method(rs, channel, RS_BASIC_GET, b.p, b.len);
    rb_free(&b);
    return rc;
}

int
rs_basic_publish(struct rawsock *rs, uint16_t channel, const char *exchange,
                 const char *key, const void *body, size_t len)
{
    struct rs_buf b;
    size_t chunk = (rs->frame_max ? rs->frame_max : 131072) - 8;
    int rc;

    rb_init(&b);
    rb_u16(&b, 0);
    rb_shortstr(&b, exchange);
    rb_shortstr(&b, key);
    rb_u8(&b, 0);
    rc = rs_send_method(rs, channel, RS_BASIC_PUBLISH, b.p, b.len);
    b.len = 0;
    rb_u16(&b, 60); /* class basic */
    rb_u16(&b, 0);  /* weight */
    rb_u64(&b, len);
    rb_u16(&b, 0); /* no properties */
    if (rc == 0)
        rc = rs_send_frame(rs, RS_FRAME_HEADER, channel, b.p, b.len);
    rb_free(&b);
    for (size_t off = 0; rc == 0 && off < len; off += chunk) {
        size_t n = len - off < chunk ? len - off : chunk;
        rc = rs_send_frame(rs, RS_FRAME_BODY, channel,
                           (const uint8_t *)body + off, n);
    }
    return rc;
}
