/*
 * Reading and writing a method's or a property struct's string and table
 * fields through their codec_field descriptors, for the tests that fill
 * structs generically (check_method, check_random).
 */
#ifndef ROOST_TESTS_CODEC_FIELDS_H
#define ROOST_TESTS_CODEC_FIELDS_H

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

#endif
