/*
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_frame";

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond))                                                      \
            check_failed(#cond, __LINE__);                                \
    } while (0)

static void
check_failed(const char *what, int line)
{
    fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, line, what);
    abort();
}

static void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (p == NULL)
        abort();
    return p;
}

static bool
bytes_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

/* ---- comparing decoded structs ---- */

/* As codec.c reads it: CODEC_ALL, or bit (15 - i) of the property flags. */
static bool
is_present(uint32_t present, size_t i)
{
    return present == CODEC_ALL || (present >> (15 - i) & 1);
}

/* Compare two decoded method argument or property structs field by field
 * (they have padding, and their strings borrow different buffers). */
static bool
fields_equal(const struct codec_field *f, size_t n, uint32_t present,
             const void *a, const void *b)
{
    for (size_t i = 0; i < n; i++) {
        const uint8_t *pa = (const uint8_t *)a + f[i].offset;
        const uint8_t *pb = (const uint8_t *)b + f[i].offset;
        const struct amqp_bytes *sa = (const void *)pa, *sb = (const void *)pb;
        const struct amqp_table *ta = (const void *)pa, *tb = (const void *)pb;
        bool same = false;

        if (!is_present(present, i))
            continue;
        switch (f[i].type) {
        case FIELD_OCTET:
            same = *pa == *pb;
            break;
        case FIELD_SHORT:
            same = *(const uint16_t *)(const void *)pa ==
                   *(const uint16_t *)(const void *)pb;
            break;
        case FIELD_LONG:
            same = *(const uint32_t *)(const void *)pa ==
                   *(const uint32_t *)(const void *)pb;
            break;
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP:
            same = *(const uint64_t *)(const void *)pa ==
                   *(const uint64_t *)(const void *)pb;
            break;
        case FIELD_BIT:
            same = *(const bool *)(const void *)pa ==
                   *(const bool *)(const void *)pb;
            break;
        case FIELD_SHORTSTR:
        case FIELD_LONGSTR:
            same = bytes_equal(sa->ptr, sa->len, sb->ptr, sb->len);
            break;
        case FIELD_TABLE:
            same = bytes_equal(ta->ptr, ta->len, tb->ptr, tb->len);
            break;
        }
        if (!same)
            return false;
    }
    return true;
}

/*
 * Turn 'buf', a copy of the payload 'm' was decoded from, into what
 * method_encode() must write: clear the bits of each bit octet that no
 * argument uses. The layout is worked out here from the field list,
 * independently of the codec; false if it does not account for exactly
 * 'len' bytes.
 */
static bool
method_canon(const struct method_info *mi, const struct amqp_method *m,
             uint8_t *buf, size_t len)
{
    size_t off = 4, bitpos = 0;
    unsigned nbits = 8; /* bits used in the octet at bitpos; 8: none open */
    uint8_t octet = 0, used = 0;

    for (size_t i = 0; i < mi->nfields; i++) {
        const struct codec_field *f = &mi->fields[i];
        const uint8_t *src = (const uint8_t *)&m->a + f->offset;
        const struct amqp_bytes *s = (const void *)src;
        const struct amqp_table *t = (const void *)src;

        if (f->type == FIELD_BIT) {
            if (nbits == 8) {
                if (off >= len)
                    return false;
                bitpos = off++;
                octet = buf[bitpos];
                nbits = 0;
                used = 0;
            }
            used |= (uint8_t)(1u << nbits++);
            buf[bitpos] = octet & used;
            continue;
        }
        nbits = 8;
        switch (f->type) {
        case FIELD_OCTET:
            off += 1;
            break;
        case FIELD_SHORT:
            off += 2;
            break;
        case FIELD_LONG:
            off += 4;
            break;
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP:
            off += 8;
            break;
        case FIELD_SHORTSTR:
            off += 1 + s->len;
            break;
        case FIELD_LONGSTR:
            off += 4 + s->len;
            break;
        case FIELD_TABLE:
            off += 4 + t->len;
            break;
        }
    }
    return off == len;
}

/* class, weight, body size, first flag word */
#define HEADER_FIXED_LEN 14

/*
 * What content_header_encode() must write for a header decoded from
 * 'in': the input without its continuation flag words, and with the
 * continuation bit cleared. Returns a new buffer of *outlen bytes.
 */
static uint8_t *
header_canon(const uint8_t *in, size_t len, size_t *outlen)
{
    uint16_t word = wire_load16(in + 12);
    size_t skip = 0;
    uint8_t *canon;

    /* The decoder accepted them, so the words are in the input. */
    while (word & PROPS_FLAG_CONTINUE) {
        CHECK(HEADER_FIXED_LEN + skip + 2 <= len);
        word = wire_load16(in + HEADER_FIXED_LEN + skip);
        skip += 2;
    }
    *outlen = len - skip;
    canon = xmalloc(*outlen);
    memcpy(canon, in, HEADER_FIXED_LEN);
    wire_store16(canon + 12,
                 (uint16_t)(wire_load16(in + 12) & ~PROPS_FLAG_CONTINUE));
    memcpy(canon + HEADER_FIXED_LEN, in + HEADER_FIXED_LEN + skip,
           len - HEADER_FIXED_LEN - skip);
    return canon;
}

static bool
header_equal(const struct content_header *a, const struct content_header *b)
{
    return a->class_id == b->class_id && a->weight == b->weight &&
           a->body_size == b->body_size && a->props.flags == b->props.flags &&
           fields_equal(basic_prop_fields, AMQP_BASIC_PROP_COUNT,
                        a->props.flags, &a->props, &b->props);
}

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
    canon = xmalloc(f->size);
    memcpy(canon, f->payload, f->size);
    CHECK(method_canon(mi, m, canon, f->size));

    out = xmalloc(f->wire_len);
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
    out = xmalloc(clen);
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
    out = xmalloc(f->wire_len);
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
