/*
 * SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: content_header_decode() on the input, taken as a
 * content header frame's payload (class, weight, body size, property
 * flags, properties).
 *
 * Whatever decodes must hold up when written back: content_header_encode()
 * gives the input again, byte for byte, except that the continuation flag
 * words (which may not announce anything) are dropped; that encoding
 * decodes to the same header; flags naming a reserved bit are refused;
 * and an output buffer that is too small gives AMQP_E_OVERFLOW with the
 * size that was needed, without writing past its end. The headers table
 * is walked with the iterators, nested tables and arrays included.
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

#include "amqp/props.h"
#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_props";

/* ---- comparing decoded structs ---- */

/* ---- content headers: the same properties and the same bytes ---- */

/* class, weight, body size, first flag word */

static void
check_header(const uint8_t *in, size_t len, const struct content_header *h)
{
    struct content_header again, bad;
    struct wire_wr w;
    uint8_t *canon, *out, *out2, *small;
    size_t clen, caps[3], i;

    CHECK(h->class_id == AMQP_CLASS_BASIC && h->weight == 0);
    CHECK((h->props.flags & (PROPS_FLAG_CONTINUE | PROPS_FLAG_RESERVED)) == 0);
    canon = header_canon(in, len, &clen);

    /* The same bytes... */
    out = fuzz_xmalloc(clen);
    wire_wr_init(&w, out, clen);
    CHECK(content_header_encode(h, &w) == AMQP_OK);
    CHECK(w.len == clen);
    CHECK(memcmp(out, canon, clen) == 0);

    /* ...the same header, and once more the same bytes. */
    CHECK(content_header_decode(out, clen, &again) == AMQP_OK);
    CHECK(header_equal(h, &again));
    out2 = fuzz_xmalloc(clen);
    wire_wr_init(&w, out2, clen);
    CHECK(content_header_encode(&again, &w) == AMQP_OK);
    CHECK(w.len == clen && memcmp(out2, out, clen) == 0);

    /* Too small a buffer: the writer counts and writes nothing past the
     * end (each buffer is allocated to its exact size for ASan). */
    caps[0] = 0;
    caps[1] = clen / 2;
    caps[2] = clen - 1;
    for (i = 0; i < 3; i++) {
        small = caps[i] ? fuzz_xmalloc(caps[i]) : NULL;
        wire_wr_init(&w, small, caps[i]);
        CHECK(content_header_encode(h, &w) == AMQP_E_OVERFLOW);
        CHECK(w.len == clen);
        free(small);
    }

    /* Flags the encoder must refuse: it writes no continuation words. */
    bad = *h;
    bad.props.flags |= PROPS_FLAG_CONTINUE;
    wire_wr_init(&w, out2, clen);
    CHECK(content_header_encode(&bad, &w) == AMQP_E_PROPERTY_FLAGS);
    bad.props.flags = (uint16_t)(h->props.flags | PROPS_FLAG_RESERVED);
    wire_wr_init(&w, out2, clen);
    CHECK(content_header_encode(&bad, &w) == AMQP_E_PROPERTY_FLAGS);

    free(out2);
    free(out);
    free(canon);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct content_header h;
    enum amqp_status st;

    st = content_header_decode(data, size, &h);
    if (st != AMQP_OK) {
        /* Every way to fail has a reply code to close with. */
        CHECK(status_reply_code(st) != 0 && status_reply_code(st) != 200);
        CHECK(status_name(st) != NULL && status_text(st) != NULL);
        return 0;
    }
    check_header(data, size, &h);
    if (h.props.flags & AMQP_BASIC_HEADERS_FLAG)
        walk_table(h.props.headers, 1);
    return 0;
}
