/*
 * SPDX-License-Identifier: Apache-2.0
 * Content header decoding and encoding.
 */
#include "amqp/props.h"

#include <string.h>

/* class, weight, body size, first flag word */
#define HEADER_FIXED_LEN 14

enum amqp_status
content_header_decode(const uint8_t *payload, size_t len,
                      struct content_header *out)
{
    struct wire_rd r;
    uint16_t flags, more;
    enum amqp_status st;

    if (len < HEADER_FIXED_LEN)
        return AMQP_E_HEADER_SHORT;
    memset(out, 0, sizeof(*out));
    wire_rd_init(&r, payload, len);
    (void)wire_get_u16(&r, &out->class_id);
    (void)wire_get_u16(&r, &out->weight);
    (void)wire_get_u64(&r, &out->body_size);
    (void)wire_get_u16(&r, &flags);

    if (out->class_id != AMQP_CLASS_BASIC)
        return AMQP_E_HEADER_CLASS;
    if (out->weight != 0)
        return AMQP_E_HEADER_WEIGHT;
    if (flags & PROPS_FLAG_RESERVED)
        return AMQP_E_PROPERTY_FLAGS;
    /* Continuation words may follow but may not announce anything. */
    for (more = flags; more & PROPS_FLAG_CONTINUE;) {
        if (wire_get_u16(&r, &more) != AMQP_OK)
            return AMQP_E_TRUNCATED;
        if (more & ~PROPS_FLAG_CONTINUE)
            return AMQP_E_PROPERTY_FLAGS;
    }
    out->props.flags = flags & (uint16_t)~PROPS_FLAG_CONTINUE;
    st = codec_read(&r, basic_prop_fields, AMQP_BASIC_PROP_COUNT,
                    out->props.flags, &out->props);
    if (st == AMQP_OK && wire_rd_left(&r) != 0)
        st = AMQP_E_TRAILING;
    return st;
}

enum amqp_status
content_header_encode(const struct content_header *h, struct wire_wr *w)
{
    uint16_t flags = h->props.flags;

    if (flags & (PROPS_FLAG_RESERVED | PROPS_FLAG_CONTINUE))
        return AMQP_E_PROPERTY_FLAGS;
    wire_put_u16(w, h->class_id);
    wire_put_u16(w, h->weight);
    wire_put_u64(w, h->body_size);
    wire_put_u16(w, flags);
    return codec_write(w, basic_prop_fields, AMQP_BASIC_PROP_COUNT, flags,
                       &h->props);
}
