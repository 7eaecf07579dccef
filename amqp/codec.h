/*
 * SPDX-License-Identifier: Apache-2.0
 * The table-driven engine behind methods and content properties: each
 * method's arguments (and each property) is described by a codec_field
 * generated from the specification, and one loop reads or writes them,
 * packing consecutive bits into shared octets as §4.2.5.2 requires.
 */
#ifndef ROOST_AMQP_CODEC_H
#define ROOST_AMQP_CODEC_H

#include <stddef.h>
#include <stdint.h>

#include "amqp/status.h"
#include "amqp/wire.h"

enum codec_field_type {
    FIELD_OCTET,
    FIELD_SHORT,
    FIELD_LONG,
    FIELD_LONGLONG,
    FIELD_TIMESTAMP,
    FIELD_BIT,
    FIELD_SHORTSTR,
    FIELD_LONGSTR,
    FIELD_TABLE,
};

struct codec_field {
    const char *name;   /* as in the specification, e.g. "routing-key" */
    uint8_t type;       /* enum codec_field_type */
    uint16_t offset;    /* into the method or property struct */
};

/*
 * Read 'n' fields into the struct at 'base'. Field i is read only when bit
 * (15 - i) of 'present' is set (properties); methods pass 0xFFFF... via
 * CODEC_ALL. Tables are validated; strings and tables borrow r's buffer.
 */
#define CODEC_ALL UINT32_MAX
enum amqp_status codec_read(struct wire_rd *r, const struct codec_field *f,
                            size_t n, uint32_t present, void *base);

/* Write the fields of 'base' selected as above. */
enum amqp_status codec_write(struct wire_wr *w, const struct codec_field *f,
                             size_t n, uint32_t present, const void *base);

#endif
