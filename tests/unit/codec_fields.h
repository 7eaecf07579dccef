/*
 * SPDX-License-Identifier: Apache-2.0
 * Reading and writing a method's or a property struct's string and table
 * fields through their codec_field descriptors, for the tests that fill
 * structs generically (check_method, check_random).
 */
#ifndef ROOST_TESTS_CODEC_FIELDS_H
#define ROOST_TESTS_CODEC_FIELDS_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "amqp/codec.h"
#include "amqp/wire.h"

/* Strings and tables share a layout: a borrowed {ptr, len}. */
static inline struct amqp_bytes
get_range(const void *base, const struct codec_field *f)
{
    struct amqp_bytes b;
    struct amqp_table t;

    if (f->type == FIELD_TABLE) {
        memcpy(&t, (const uint8_t *)base + f->offset, sizeof(t));
        b.ptr = t.ptr;
        b.len = t.len;
    } else {
        memcpy(&b, (const uint8_t *)base + f->offset, sizeof(b));
    }
    return b;
}

static inline void
set_range(void *base, const struct codec_field *f, const uint8_t *p,
          size_t len)
{
    struct amqp_bytes b = { p, len };
    struct amqp_table t = { p, len };

    if (f->type == FIELD_TABLE)
        memcpy((uint8_t *)base + f->offset, &t, sizeof(t));
    else
        memcpy((uint8_t *)base + f->offset, &b, sizeof(b));
}

static inline bool
is_range(uint8_t type)
{
    return type == FIELD_SHORTSTR || type == FIELD_LONGSTR ||
           type == FIELD_TABLE;
}

/* Integers and bits. A bit is read as its storage octet so that a bool
 * left unset by the decoder fails the comparison instead of tripping
 * UBSan's bool check. */
static inline uint64_t
get_int(const void *base, const struct codec_field *f)
{
    const uint8_t *p = (const uint8_t *)base + f->offset;
    uint8_t u8;
    uint16_t u16;
    uint32_t u32;
    uint64_t u64;

    switch (f->type) {
    case FIELD_OCTET:
    case FIELD_BIT:
        memcpy(&u8, p, 1);
        return u8;
    case FIELD_SHORT:
        memcpy(&u16, p, 2);
        return u16;
    case FIELD_LONG:
        memcpy(&u32, p, 4);
        return u32;
    default:
        memcpy(&u64, p, 8);
        return u64;
    }
}

#endif
