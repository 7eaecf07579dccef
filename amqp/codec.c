/*
 * SPDX-License-Identifier: Apache-2.0
 * One loop to read and one to write any list of fields described by
 * codec_field. Bits: a run of consecutive bit fields shares octets, the
 * first bit in the lowest position, eight to an octet (§4.2.5.2).
 */
#include "amqp/codec.h"

#include "amqp/table.h"

static bool
is_present(uint32_t present, size_t i)
{
    return present == CODEC_ALL || (present >> (15 - i) & 1);
}

enum amqp_status
codec_read(struct wire_rd *r, const struct codec_field *f, size_t n,
           uint32_t present, void *base)
{
    uint8_t bits = 0;
    unsigned nbits = 0; /* bits left in 'bits'; 0 means read a new octet */
    enum amqp_status st = AMQP_OK;

    for (size_t i = 0; i < n && st == AMQP_OK; i++) {
        uint8_t *dst = (uint8_t *)base + f[i].offset;

        if (!is_present(present, i))
            continue;
        if (f[i].type != FIELD_BIT)
            nbits = 0;
        switch (f[i].type) {
        case FIELD_OCTET:
            st = wire_get_u8(r, (uint8_t *)dst);
            break;
        case FIELD_SHORT:
            st = wire_get_u16(r, (uint16_t *)(void *)dst);
            break;
        case FIELD_LONG:
            st = wire_get_u32(r, (uint32_t *)(void *)dst);
            break;
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP:
            st = wire_get_u64(r, (uint64_t *)(void *)dst);
            break;
        case FIELD_BIT:
            if (nbits == 0) {
                st = wire_get_u8(r, &bits);
                nbits = 8;
            }
            *(bool *)(void *)dst = bits & 1;
            bits >>= 1;
            nbits--;
            break;
        case FIELD_SHORTSTR:
            st = wire_get_shortstr(r, (struct amqp_bytes *)(void *)dst);
            break;
        case FIELD_LONGSTR:
            st = wire_get_longstr(r, (struct amqp_bytes *)(void *)dst);
            break;
        case FIELD_TABLE:
            st = wire_get_table(r, 1, (struct amqp_table *)(void *)dst);
            break;
        }
    }
    return st;
}

enum amqp_status
codec_write(struct wire_wr *w, const struct codec_field *f, size_t n,
            uint32_t present, const void *base)
{
    uint8_t *bitp = NULL; /* the octet the current run of bits goes into */
    unsigned nbits = 8;   /* bits used in *bitp; 8 means start a new one */
    enum amqp_status st = AMQP_OK;

    for (size_t i = 0; i < n && st == AMQP_OK; i++) {
        const uint8_t *src = (const uint8_t *)base + f[i].offset;

        if (!is_present(present, i))
            continue;
        if (f[i].type != FIELD_BIT)
            nbits = 8;
        switch (f[i].type) {
        case FIELD_OCTET:
            wire_put_u8(w, *src);
            break;
        case FIELD_SHORT:
            wire_put_u16(w, *(const uint16_t *)(const void *)src);
            break;
        case FIELD_LONG:
            wire_put_u32(w, *(const uint32_t *)(const void *)src);
            break;
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP:
            wire_put_u64(w, *(const uint64_t *)(const void *)src);
            break;
        case FIELD_BIT:
            if (nbits == 8) {
                bitp = wire_wr_reserve(w, 1);
                if (bitp)
                    *bitp = 0;
                nbits = 0;
            }
            if (bitp && *(const bool *)(const void *)src)
                *bitp |= (uint8_t)(1u << nbits);
            nbits++;
            break;
        case FIELD_SHORTSTR:
            st = wire_put_shortstr(w, *(const struct amqp_bytes *)(const void *)src);
            break;
        case FIELD_LONGSTR:
            st = wire_put_longstr(w, *(const struct amqp_bytes *)(const void *)src);
            break;
        case FIELD_TABLE:
            wire_put_table(w, *(const struct amqp_table *)(const void *)src);
            break;
        }
    }
    if (st == AMQP_OK && wire_wr_overflowed(w))
        st = AMQP_E_OVERFLOW;
    return st;
}
