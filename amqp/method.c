/*
 * SPDX-License-Identifier: Apache-2.0
 * Method lookup, decoding and encoding on top of the generated tables.
 */
#include "amqp/method.h"

#include "amqp/frame.h"

bool
class_is_known(uint16_t class_id)
{
    for (size_t i = 0; i < class_info_count; i++)
        if (class_infos[i].id == class_id)
            return true;
    return false;
}

const char *
method_name(uint32_t id)
{
    const struct method_info *mi = method_info_find(id);
    return mi ? mi->name : "unknown";
}

/*
 * Whether 'b' is UTF-8 as RabbitMQ's decoder (xmerl_ucs:from_utf8) sees
 * it: sequences of one to four bytes, none overlong. Like it, this lets
 * surrogates and code points up to 0x1FFFFF through.
 */
static bool
is_utf8(struct amqp_bytes b)
{
    static const uint32_t min[] = { 0, 0x80, 0x800, 0x10000 };
    size_t i = 0;

    while (i < b.len) {
        uint8_t c = b.ptr[i];
        size_t n = c < 0x80 ? 0 : c >= 0xC0 && c < 0xE0 ? 1
                              : c >= 0xE0 && c < 0xF0 ? 2
                              : c >= 0xF0 && c < 0xF8 ? 3 : 4;
        if (n == 4 || b.len - i - 1 < n)
            return false;
        uint32_t cp = n == 0 ? c : c & (0x3Fu >> n);
        for (size_t k = 1; k <= n; k++) {
            if ((b.ptr[i + k] & 0xC0) != 0x80)
                return false;
            cp = cp << 6 | (b.ptr[i + k] & 0x3Fu);
        }
        if (cp < min[n])
            return false;
        i += n + 1;
    }
    return true;
}

static enum amqp_status
check_shortstrs(const struct method_info *mi, const struct amqp_method *m)
{
    if (m->id == AMQP_BASIC_PUBLISH)
        return AMQP_OK;
    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];
        if (f->type == FIELD_SHORTSTR &&
            !is_utf8(*(const struct amqp_bytes *)(const void *)
                          ((const uint8_t *)&m->a + f->offset)))
            return AMQP_E_UTF8;
    }
    return AMQP_OK;
}

enum amqp_status
method_decode(const uint8_t *payload, size_t len, struct amqp_method *out)
{
    struct wire_rd r;
    uint16_t cls, meth;
    const struct method_info *mi;
    enum amqp_status st;

    if (len < 4)
        return AMQP_E_METHOD_SHORT;
    wire_rd_init(&r, payload, len);
    (void)wire_get_u16(&r, &cls);
    (void)wire_get_u16(&r, &meth);
    out->id = AMQP_METHOD_ID(cls, meth);
    mi = method_info_find(out->id);
    if (mi == NULL)
        return class_is_known(cls) ? AMQP_E_UNKNOWN_METHOD
                                   : AMQP_E_UNKNOWN_CLASS;
    st = codec_read(&r, mi->fields, mi->nfields, CODEC_ALL, &out->a);
    if (st == AMQP_OK && wire_rd_left(&r) != 0)
        st = AMQP_E_TRAILING;
    if (st == AMQP_OK)
        st = check_shortstrs(mi, out);
    return st;
}

enum amqp_status
method_encode(const struct amqp_method *m, struct wire_wr *w)
{
    const struct method_info *mi = method_info_find(m->id);

    if (mi == NULL)
        return AMQP_E_UNKNOWN_METHOD;
    wire_put_u16(w, method_class(m->id));
    wire_put_u16(w, method_index(m->id));
    return codec_write(w, mi->fields, mi->nfields, CODEC_ALL, &m->a);
}

enum amqp_status
method_frame_put(struct wire_wr *w, uint16_t channel,
                 const struct amqp_method *m)
{
    size_t start = w->len;
    enum amqp_status st;

    frame_put_header(w, AMQP_FRAME_METHOD, channel, 0);
    st = method_encode(m, w);
    /* On overflow keep counting through the end octet, so that w->len
     * tells the size of the whole frame. */
    if (st != AMQP_OK && st != AMQP_E_OVERFLOW)
        return st;
    frame_put_end(w);
    if (wire_wr_overflowed(w))
        return AMQP_E_OVERFLOW;
    wire_store32(w->buf + start + 3,
                 (uint32_t)(w->len - start - AMQP_FRAME_OVERHEAD));
    return AMQP_OK;
}
