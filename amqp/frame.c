/*
 * SPDX-License-Identifier: Apache-2.0
 * Frame splitting and framing. The checks follow the order RabbitMQ applies
 * them, so that the same bad input gets the same reply code from both.
 */
#include "amqp/frame.h"

#include <string.h>

const uint8_t amqp_protocol_header[AMQP_PROTOCOL_HEADER_LEN] = {
    'A', 'M', 'Q', 'P', 0, 0, 9, 1
};

enum amqp_status
protocol_header_check(const uint8_t *buf, size_t len)
{
    size_t n = len < AMQP_PROTOCOL_HEADER_LEN ? len : AMQP_PROTOCOL_HEADER_LEN;
    size_t magic = n < 4 ? n : 4;

    if (memcmp(buf, amqp_protocol_header, magic) != 0)
        return AMQP_E_PROTOCOL_HEADER;
    if (memcmp(buf, amqp_protocol_header, n) != 0)
        return AMQP_E_PROTOCOL_VERSION;
    return n < AMQP_PROTOCOL_HEADER_LEN ? AMQP_INCOMPLETE : AMQP_OK;
}

static bool
is_known_type(uint8_t type)
{
    return type == AMQP_FRAME_METHOD || type == AMQP_FRAME_HEADER ||
           type == AMQP_FRAME_BODY || type == AMQP_FRAME_HEARTBEAT;
}

enum amqp_status
frame_decode(const uint8_t *buf, size_t len, uint32_t frame_max,
             struct frame *out)
{
    if (len < AMQP_FRAME_HEADER_LEN)
        return AMQP_INCOMPLETE;

    uint8_t type = buf[0];
    uint16_t channel = wire_load16(buf + 1);
    uint32_t size = frame_peek_size(buf);

    /* 0-9-1 §4.2.3: a peer must not send frames larger than the agreed
     * maximum; checked before waiting for the payload. */
    if (frame_max != 0 && (frame_max < AMQP_FRAME_OVERHEAD ||
                           size > frame_max - AMQP_FRAME_OVERHEAD))
        return AMQP_E_FRAME_TOO_LARGE;
    if ((uint64_t)size + AMQP_FRAME_OVERHEAD > len)
        return AMQP_INCOMPLETE;
    /* §4.2.3: a frame must end with 0xCE. */
    if (buf[AMQP_FRAME_HEADER_LEN + size] != AMQP_FRAME_END)
        return AMQP_E_FRAME_END;
    if (!is_known_type(type))
        return AMQP_E_FRAME_TYPE;
    if (type == AMQP_FRAME_HEARTBEAT) {
        /* §4.2.7: heartbeats use channel 0 and carry nothing. */
        if (size != 0)
            return AMQP_E_HEARTBEAT_SIZE;
        if (channel != 0)
            return AMQP_E_HEARTBEAT_CHANNEL;
    }

    out->type = type;
    out->channel = channel;
    out->size = size;
    out->payload = buf + AMQP_FRAME_HEADER_LEN;
    out->wire_len = (size_t)size + AMQP_FRAME_OVERHEAD;
    return AMQP_OK;
}

void
frame_put_header(struct wire_wr *w, uint8_t type, uint16_t channel,
                 uint32_t size)
{
    wire_put_u8(w, type);
    wire_put_u16(w, channel);
    wire_put_u32(w, size);
}

void
frame_put(struct wire_wr *w, uint8_t type, uint16_t channel,
          const void *payload, uint32_t size)
{
    frame_put_header(w, type, channel, size);
    wire_put_raw(w, payload, size);
    frame_put_end(w);
}

void
frame_put_heartbeat(struct wire_wr *w)
{
    frame_put(w, AMQP_FRAME_HEARTBEAT, 0, NULL, 0);
}
