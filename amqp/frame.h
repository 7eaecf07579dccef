/*
 * SPDX-License-Identifier: Apache-2.0
 * The protocol header and the general frame format of AMQP 0-9-1 (§4.2.2,
 * §4.2.3): type octet, channel short, size long, payload, 0xCE.
 *
 * frame_decode() splits one frame off the front of a buffer without copying;
 * the caller owns the buffer and drains wire_len bytes once it is done with
 * the frame. Nothing here allocates.
 */
#ifndef ROOST_AMQP_FRAME_H
#define ROOST_AMQP_FRAME_H

#include <stddef.h>
#include <stdint.h>

#include "amqp/spec_gen.h"
#include "amqp/status.h"
#include "amqp/wire.h"

#define AMQP_PROTOCOL_HEADER_LEN 8
#define AMQP_FRAME_HEADER_LEN 7 /* type, channel, size */
#define AMQP_FRAME_OVERHEAD 8   /* header plus the end octet */

/* "AMQP" 0 0 9 1: what a 0-9-1 peer sends first, and what the server
 * answers a header it does not accept with before closing (§4.2.2). */
extern const uint8_t amqp_protocol_header[AMQP_PROTOCOL_HEADER_LEN];

/*
 * Check the first 'len' bytes a client sent. AMQP_OK for exactly the 0-9-1
 * header; AMQP_INCOMPLETE while fewer than 8 bytes have arrived and they
 * could still become one; AMQP_E_PROTOCOL_VERSION for "AMQP" followed by
 * another version; AMQP_E_PROTOCOL_HEADER for anything else.
 */
enum amqp_status protocol_header_check(const uint8_t *buf, size_t len);

struct frame {
    uint8_t type;            /* AMQP_FRAME_METHOD, _HEADER, _BODY, _HEARTBEAT */
    uint16_t channel;
    uint32_t size;           /* payload length */
    const uint8_t *payload;  /* borrows the input buffer */
    size_t wire_len;         /* size + AMQP_FRAME_OVERHEAD */
};

/*
 * Decode one frame from the front of 'buf'. On AMQP_OK, 'out' borrows 'buf'
 * and is valid until 'buf' is modified; the caller then drains out->wire_len
 * bytes. AMQP_INCOMPLETE means more bytes are needed (a frame's size is
 * checked against 'frame_max' as soon as its header is in, so a peer can
 * never make us wait for more than frame_max bytes). 'frame_max' is the
 * negotiated maximum frame size including header and end octet; 0 means
 * no limit. Never allocates.
 */
enum amqp_status frame_decode(const uint8_t *buf, size_t len,
                              uint32_t frame_max, struct frame *out);

/* The size of a frame header announced in the first 7 bytes of 'buf'
 * (at least AMQP_FRAME_HEADER_LEN long). */
static inline uint32_t
frame_peek_size(const uint8_t *buf)
{
    return wire_load32(buf + 3);
}

/*
 * Write the 7-byte frame header for a payload of 'size' bytes. The caller
 * writes the payload and then frame_put_end().
 */
void frame_put_header(struct wire_wr *w, uint8_t type, uint16_t channel,
                      uint32_t size);

static inline void
frame_put_end(struct wire_wr *w)
{
    wire_put_u8(w, AMQP_FRAME_END);
}

/* Write a whole frame around 'payload'. */
void frame_put(struct wire_wr *w, uint8_t type, uint16_t channel,
               const void *payload, uint32_t size);

/* A heartbeat frame: type 8, channel 0, empty payload (§4.2.7). */
void frame_put_heartbeat(struct wire_wr *w);

#endif
