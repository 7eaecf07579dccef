/*
 * SPDX-License-Identifier: Apache-2.0
 * AMQP 0-9-1 by hand over a TCP socket, for tests that must send what no
 * client library would (hostile frames, wrong method order, silence) and
 * see exactly what the broker answers. It builds and splits frames itself
 * from bytes, so it includes neither rabbitmq-c nor Roost's amqp/ headers
 * (both define amqp_ and AMQP_ names); everything here is rs_/RS_.
 *
 * Conventions: functions that talk to the broker return 0 (or a positive
 * count) on success and -1 on failure; they never assert, so a test can
 * assert on the exact outcome. The last connection.close or channel.close
 * read is recorded in the struct.
 */
#ifndef ROOST_TESTS_INTEGRATION_RAWSOCK_H
#define ROOST_TESTS_INTEGRATION_RAWSOCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RS_FRAME_METHOD 1
#define RS_FRAME_HEADER 2
#define RS_FRAME_BODY 3
#define RS_FRAME_HEARTBEAT 8

/* A method as one number: class id << 16 | method id. */
#define RS_M(cls, meth) (((uint32_t)(cls) << 16) | (uint32_t)(meth))
#define RS_CONNECTION_START RS_M(10, 10)
#define RS_CONNECTION_START_OK RS_M(10, 11)
#define RS_CONNECTION_TUNE RS_M(10, 30)
#define RS_CONNECTION_TUNE_OK RS_M(10, 31)
#define RS_CONNECTION_OPEN RS_M(10, 40)
#define RS_CONNECTION_OPEN_OK RS_M(10, 41)
#define RS_CONNECTION_CLOSE RS_M(10, 50)
#define RS_CONNECTION_CLOSE_OK RS_M(10, 51)
#define RS_CHANNEL_OPEN RS_M(20, 10)
#define RS_CHANNEL_OPEN_OK RS_M(20, 11)
#define RS_CHANNEL_FLOW RS_M(20, 20)
#define RS_CHANNEL_CLOSE RS_M(20, 40)
#define RS_CHANNEL_CLOSE_OK RS_M(20, 41)
#define RS_EXCHANGE_DECLARE RS_M(40, 10)
#define RS_QUEUE_DECLARE RS_M(50, 10)
#define RS_QUEUE_DECLARE_OK RS_M(50, 11)
#define RS_QUEUE_BIND RS_M(50, 20)
#define RS_BASIC_QOS RS_M(60, 10)
#define RS_BASIC_CONSUME RS_M(60, 20)
#define RS_BASIC_CONSUME_OK RS_M(60, 21)
#define RS_BASIC_PUBLISH RS_M(60, 40)
#define RS_BASIC_DELIVER RS_M(60, 60)
#define RS_BASIC_GET RS_M(60, 70)
#define RS_BASIC_GET_OK RS_M(60, 71)
#define RS_BASIC_GET_EMPTY RS_M(60, 72)
#define RS_BASIC_ACK RS_M(60, 80)

/* ---- building payloads: a growable byte buffer ---- */

struct rs_buf {
    uint8_t *p;
    size_t len, cap;
};

void rb_init(struct rs_buf *b);
void rb_free(struct rs_buf *b);
void rb_u8(struct rs_buf *b, uint8_t v);
void rb_u16(struct rs_buf *b, uint16_t v);
void rb_u32(struct rs_buf *b, uint32_t v);
void rb_u64(struct rs_buf *b, uint64_t v);
void rb_raw(struct rs_buf *b, const void *p, size_t n);
void rb_shortstr(struct rs_buf *b, const char *s);
void rb_longstr(struct rs_buf *b, const void *p, size_t n);
/* Reserve a 32-bit length and later fill it with the bytes written since
 * (for tables and long strings built in place). */
size_t rb_mark32(struct rs_buf *b);
void rb_patch32(struct rs_buf *b, size_t mark);

/* ---- the socket ---- */

struct rs_frame {
    uint8_t type;
    uint16_t channel;
    uint32_t size;
    uint8_t *payload; /* malloc'd copy of 'size' bytes */
    uint32_t method;  /* RS_M(class, method) for method frames */
};

void rs_frame_free(struct rs_frame *f);

struct rawsock {
    int fd;
    uint8_t *in; /* bytes read and not consumed yet */
    size_t in_len, in_cap;
    bool eof;
    /* from connection.start and connection.tune */
    char mechanisms[256];
    uint16_t tune_channel_max;
    uint32_t tune_frame_max;
    uint16_t tune_heartbeat;
    /* what this side sent in tune-ok (frame_max splits bodies) */
    uint32_t frame_max;
    /* the last connection.close or channel.close received */
    uint16_t close_channel, close_code, close_class, close_method;
    char close_text[256];
};

/*
 * Connect to host:port; 'rcvbuf' > 0 sets SO_RCVBUF first (a small window
 * for a consumer that never reads). 0 or -1.
 */
int rs_connect(struct rawsock *rs, const char *host, int port, int rcvbuf);
void rs_close(struct rawsock *rs);

/* Write everything; 0, or -1 when the peer is gone. */
int rs_send(struct rawsock *rs, const void *p, size_t n);
int rs_send_frame(struct rawsock *rs, uint8_t type, uint16_t channel,
                  const void *payload, size_t size);
int rs_send_method(struct rawsock *rs, uint16_t channel, uint32_t method,
                   const void *args, size_t len);
int rs_send_heartbeat(struct rawsock *rs);

/*
 * Read one frame: 1 with *f filled (free it), 0 on EOF, -1 on timeout, -2
 * when the bytes are not a frame (no 0xCE where the end should be).
 */
int rs_read_frame(struct rawsock *rs, struct rs_frame *f, int timeout_ms);

/* Read up to 'n' raw bytes (stops early at EOF or timeout); the count. */
size_t rs_read_raw(struct rawsock *rs, void *buf, size_t n, int timeout_ms);

/*
 * Discard everything until EOF. Returns the milliseconds waited, or -1 on
 * timeout. *close_code (if not NULL) gets the code of a connection.close
 * seen on the way, or 0.
 */
long rs_wait_eof(struct rawsock *rs, int timeout_ms, int *close_code);

/* ---- the handshake ---- */

struct rs_login {
    const char *mechanism;   /* "PLAIN" (default) or "AMQPLAIN" or any */
    const char *user, *pass; /* guest, guest */
    bool no_capabilities;    /* announce no capabilities table at all */
    const char *vhost;       /* "/" */
    /*
     * tune-ok: with exact_tune false, channel_max and frame_max 0 echo the
     * server's offer; with exact_tune true all three are sent as given.
     * heartbeat is sent as given either way (0: none).
     */
    bool exact_tune;
    uint16_t channel_max;
    uint32_t frame_max;
    uint16_t heartbeat;
};

int rs_send_header(struct rawsock *rs);
/* Read connection.start (records the mechanisms). */
int rs_expect_start(struct rawsock *rs, int timeout_ms);
int rs_send_start_ok(struct rawsock *rs, const struct rs_login *o);
/* Read connection.tune (records the offer). */
int rs_expect_tune(struct rawsock *rs, int timeout_ms);
int rs_send_tune_ok(struct rawsock *rs, const struct rs_login *o);
int rs_send_open(struct rawsock *rs, const char *vhost);

/*
 * Read frames until a method frame arrives; 0 if it is 'method' on
 * 'channel' (stored in *out if not NULL), -1 otherwise (a close is
 * recorded; heartbeats are skipped).
 */
int rs_expect_method(struct rawsock *rs, uint16_t channel, uint32_t method,
                     int timeout_ms, struct rs_frame *out);

/* The whole handshake up to open-ok; 0 or -1. 'o' may be NULL. */
int rs_handshake(struct rawsock *rs, const struct rs_login *o);

/* rs_connect + rs_handshake. */
int rs_open(struct rawsock *rs, const char *host, int port,
            const struct rs_login *o);

/*
 * Read until connection.close (other frames are skipped), record it,
 * answer close-ok. Returns its reply code, 0 on EOF first, -1 on timeout.
 */
int rs_expect_close(struct rawsock *rs, int timeout_ms);

/* ---- a few methods, encoded by hand ---- */

/* channel.open and wait for open-ok: 0 or -1. */
int rs_channel_open(struct rawsock *rs, uint16_t channel);
int rs_queue_declare(struct rawsock *rs, uint16_t channel, const char *name,
                     bool durable, bool exclusive, bool auto_delete);
int rs_basic_consume(struct rawsock *rs, uint16_t channel, const char *queue,
                     const char *tag, bool no_ack);
int rs_basic_get(struct rawsock *rs, uint16_t channel, const char *queue,
                 bool no_ack);
/* basic.publish, a content header with no properties, and the body split
 * into frames of at most rs->frame_max bytes. */
int rs_basic_publish(struct rawsock *rs, uint16_t channel, const char *exchange,
                     const char *key, const void *body, size_t len);

/* Big-endian loads, for reading payloads in tests. */
static inline uint16_t
rs_load16(const uint8_t *p)
{
    return (uint16_t)(p[0] << 8 | p[1]);
}

static inline uint32_t
rs_load32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
           p[3];
}

static inline uint64_t
rs_load64(const uint8_t *p)
{
    return (uint64_t)rs_load32(p) << 32 | rs_load32(p + 4);
}

#endif
