/*
 * SPDX-License-Identifier: Apache-2.0
 * The content header frame (§4.2.6.1): class id, weight (always 0), body
 * size, property flags and the properties they announce. Only class basic
 * carries content in 0-9-1, so its 14 properties are the only ones.
 *
 * Property flags: bit 15 is the first property; bit 0 of each 16-bit flag
 * word says another flag word follows. No property is defined beyond the
 * first word, so further words must have no property bit set.
 */
#ifndef ROOST_AMQP_PROPS_H
#define ROOST_AMQP_PROPS_H

#include <stddef.h>
#include <stdint.h>

#include "amqp/codec.h"
#include "amqp/spec_gen.h"
#include "amqp/status.h"
#include "amqp/wire.h"

/* Generated (spec_gen.c): the basic class's properties in flag order. */
extern const struct codec_field basic_prop_fields[];

/* Bits of the first flag word that name no property: bit 1 is unused and
 * bit 0 is the continuation flag. */
#define PROPS_FLAG_CONTINUE 0x0001u
#define PROPS_FLAG_RESERVED 0x0002u

struct content_header {
    uint16_t class_id;
    uint16_t weight;
    uint64_t body_size;
    struct amqp_basic_props props;
};

/*
 * Decode a content header frame's payload. On AMQP_OK, strings and the
 * headers table in out->props borrow 'payload', which the broker keeps as
 * the message's encoded header and forwards byte for byte. Errors:
 * AMQP_E_HEADER_SHORT, AMQP_E_HEADER_CLASS (not basic), AMQP_E_HEADER_WEIGHT,
 * AMQP_E_PROPERTY_FLAGS, AMQP_E_TRUNCATED, AMQP_E_TRAILING, table errors.
 */
enum amqp_status content_header_decode(const uint8_t *payload, size_t len,
                                       struct content_header *out);

/*
 * Encode a content header payload from h (the properties whose flags are
 * set in h->props.flags). AMQP_E_PROPERTY_FLAGS if the flags name a
 * reserved bit; AMQP_E_VALUE, AMQP_E_OVERFLOW as for methods.
 */
enum amqp_status content_header_encode(const struct content_header *h,
                                       struct wire_wr *w);

#endif
