/*
 * SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the bytes a client sends, read as the broker reads
 * them. The input is
 *
 *   mode (1 octet), frame_max selector (2 octets, big-endian), stream
 *
 * mode bit 0: the stream begins with the 8-byte protocol header, which is
 *   checked with protocol_header_check() one byte at a time, as it may
 *   arrive; otherwise the stream starts with frames (as after a header).
 * mode bit 1: frame_max is the selector itself, any value from 0 up
 *   (including ones below the frame overhead that no peer may agree on);
 *   otherwise it is 0 (no limit) for selector 0 and else selector * 4
 *   kept within 4096..131072, the sizes peers negotiate.
 *
 * Frames are split off with frame_decode() until the input ends or an
 * error, where a broker would stop reading and close. Each frame must
 * frame again to its own bytes with frame_put(), and must be
 * AMQP_INCOMPLETE for any shorter prefix. Method frames go through
 * method_decode() and header frames through content_header_decode(); what
 * decodes is written back (method_frame_put(), content_header_encode())
 * and must give the same bytes (bit octets without their unused bits,
 * headers without continuation flag words) and decode to the same
 * arguments or properties.
 *
 * A failed check prints the line and calls abort(), which libFuzzer and
 * the replay driver report as a crash. Every buffer is sized from the
 * input's actual length, never from a length field inside it.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "amqp/frame.h"
#include "amqp/method.h"
#include "amqp/props.h"
#include "amqp/status.h"
#include "amqp/wire.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_frame";

/* ---- comparing decoded structs ---- */

/* class, weight, body size, first flag word */

/* ---- one frame ---- */

#define MODE_HEADER 0x01
#define MODE_RAW_FRAME_MAX 0x02
#define PREFIX_LEN 3

static void
check_method_frame(const struct frame *f, const struct amqp_method *m)
{
    const struct method_info *mi = method_info_find(m->id);
    struct amqp_method again;
    struct wire_wr w;
    uint8_t *canon, *out;

    CHECK(mi != NULL);
    canon = fuzz_xmalloc(f->size);
    memcpy(canon, f->payload, f->size);
    CHECK(method_canon(mi, m, canon, f->size));

    out = fuzz_xmalloc(f->wire_len);
    wire_wr_init(&w, out, f->wire_len);
    CHECK(method_frame_put(&w, f->channel, m) == AMQP_OK);
    CHECK(w.len == f->wire_len);
    CHECK(memcmp(out, f->payload - AMQP_FRAME_HEADER_LEN,
                 AMQP_FRAME_HEADER_LEN) == 0);
    CHECK(memcmp(out + AMQP_FRAME_HEADER_LEN, canon, f->size) == 0);
    CHECK(out[f->wire_len - 1] == AMQP_FRAME_END);

    memset(&again, 0, sizeof(again));
    CHECK(method_decode(out + AMQP_FRAME_HEADER_LEN, f->size, &again) ==
          AMQP_OK);
    CHECK(again.id == m->id);
    CHECK(fields_equal(mi->fields, mi->nfields, CODEC_ALL, &m->a, &again.a));
    free(out);
    free(canon);
}

static void
check_header_frame(const struct frame *f, const struct content_header *h)
{
    struct content_header again;
    struct wire_wr w;
    uint8_t *canon, *out;
    size_t clen;

    canon = header_canon(f->payload, f->size, &clen);
    out = fuzz_xmalloc(clen);
    wire_wr_init(&w, out, clen);
    CHECK(content_header_encode(h, &w) == AMQP_OK);
    CHECK(w.len == clen);
    CHECK(memcmp(out, canon, clen) == 0);
    CHECK(content_header_decode(out, clen, &again) == AMQP_OK);
    CHECK(header_equal(h, &again));
    free(out);
    free(canon);
}

/* Check the frame at 'p' that decoded to 'f'; false if the broker would
 * close the connection over its payload. */
static bool
check_frame(const uint8_t *p, const struct frame *f, uint32_t frame_max)
{
    static const size_t cuts[] = { 0, 1, AMQP_FRAME_HEADER_LEN - 1,
                                   AMQP_FRAME_HEADER_LEN };
    struct frame g;
    struct amqp_method m;
    struct content_header h;
    struct wire_wr w;
    enum amqp_status st = AMQP_OK;
    uint8_t *out;
    size_t i;

    CHECK(f->wire_len == (size_t)f->size + AMQP_FRAME_OVERHEAD);
    CHECK(f->payload == p + AMQP_FRAME_HEADER_LEN && f->type == p[0]);
    CHECK(frame_max == 0 || f->wire_len <= frame_max);
    CHECK(f->type != AMQP_FRAME_HEARTBEAT ||
          (f->size == 0 && f->channel == 0));

    /* A frame is never complete before its last byte has arrived. */
    for (i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++)
        CHECK(frame_decode(p, cuts[i], frame_max, &g) == AMQP_INCOMPLETE);
    CHECK(frame_decode(p, f->wire_len - 1, frame_max, &g) ==
          AMQP_INCOMPLETE);

    /* Framing the payload again gives the same bytes. */
    out = fuzz_xmalloc(f->wire_len);
    wire_wr_init(&w, out, f->wire_len);
    if (f->type == AMQP_FRAME_HEARTBEAT)
        frame_put_heartbeat(&w);
    else
        frame_put(&w, f->type, f->channel, f->payload, f->size);
    CHECK(w.len == f->wire_len && memcmp(out, p, f->wire_len) == 0);
    free(out);

    switch (f->type) {
    case AMQP_FRAME_METHOD:
        memset(&m, 0, sizeof(m));
        st = method_decode(f->payload, f->size, &m);
        if (st == AMQP_OK)
            check_method_frame(f, &m);
        break;
    case AMQP_FRAME_HEADER:
        st = content_header_decode(f->payload, f->size, &h);
        if (st == AMQP_OK)
            check_header_frame(f, &h);
        break;
    }
    /* Every way to fail has a reply code to close with. */
    CHECK(st == AMQP_OK || (status_reply_code(st) != 0 &&
                            status_reply_code(st) != 200));
    return st == AMQP_OK;
}

/* ---- the stream ---- */

/* protocol_header_check() over each prefix of the header as it arrives:
 * once it has decided, more bytes do not change its mind. */
static bool
check_protocol_header(const uint8_t *p, size_t len)
{
    enum amqp_status prev = AMQP_INCOMPLETE, st = AMQP_INCOMPLETE;
    size_t n, max = len < AMQP_PROTOCOL_HEADER_LEN ? len
                                                   : AMQP_PROTOCOL_HEADER_LEN;

    for (n = 0; n <= max; n++) {
        st = protocol_header_check(p, n);
        if (n < AMQP_PROTOCOL_HEADER_LEN)
            CHECK(st != AMQP_OK);
        CHECK(prev == AMQP_INCOMPLETE || st == prev);
        CHECK(st == AMQP_OK || st == AMQP_INCOMPLETE ||
              st == AMQP_E_PROTOCOL_HEADER || st == AMQP_E_PROTOCOL_VERSION);
        prev = st;
    }
    CHECK((st == AMQP_OK) ==
          (len >= AMQP_PROTOCOL_HEADER_LEN &&
           memcmp(p, amqp_protocol_header, AMQP_PROTOCOL_HEADER_LEN) == 0));
    return st == AMQP_OK;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t mode;
    uint32_t frame_max, sel;
    const uint8_t *p;
    size_t len, off = 0;
    struct frame f;
    enum amqp_status st;

    if (size < PREFIX_LEN)
        return 0;
    mode = data[0];
    sel = wire_load16(data + 1);
    if (mode & MODE_RAW_FRAME_MAX)
        frame_max = sel;
    else if (sel == 0)
        frame_max = 0;
    else if (sel * 4 < AMQP_FRAME_MIN_SIZE)
        frame_max = AMQP_FRAME_MIN_SIZE;
    else
        frame_max = sel * 4 > 131072 ? 131072 : sel * 4;
    p = data + PREFIX_LEN;
    len = size - PREFIX_LEN;

    if (mode & MODE_HEADER) {
        if (!check_protocol_header(p, len))
            return 0;
        off = AMQP_PROTOCOL_HEADER_LEN;
    }
    while (off < len) {
        st = frame_decode(p + off, len - off, frame_max, &f);
        if (st != AMQP_OK) {
            CHECK(st == AMQP_INCOMPLETE || (status_reply_code(st) != 0 &&
                                            status_reply_code(st) != 200));
            break;
        }
        if (!check_frame(p + off, &f, frame_max))
            break;
        off += f.wire_len;
    }
    return 0;
}
