/*
 * SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: method_decode() on the input, taken as a method
 * frame's payload (class id, method id, arguments).
 *
 * Whatever decodes must hold up when written back: method_encode() gives
 * the input again, byte for byte, except for the unused bits of bit
 * octets (ignored when read, as RabbitMQ does, and written as 0); that
 * encoding decodes to the same arguments; method_frame_put() frames it;
 * and an output buffer that is too small gives AMQP_E_OVERFLOW with the
 * size that was needed, without writing past its end. Every table argument
 * is then walked with the iterators, nested tables and arrays included,
 * and its first entries are looked up again with table_get().
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
#include "amqp/status.h"
#include "amqp/table.h"
#include "amqp/wire.h"
#include "tests/fuzz/fuzz_common.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_method";

/* ---- methods: the same arguments and the same bytes ---- */

static void
check_method(const uint8_t *in, size_t len, const struct amqp_method *m)
{
    const struct method_info *mi = method_info_find(m->id);
    static const size_t frame_caps[] = { 0, 3, 7, 8 };
    struct amqp_method again;
    struct wire_wr w;
    uint8_t *canon, *out, *frame, *small;
    size_t caps[3], i;

    CHECK(mi != NULL && mi->id == m->id);
    CHECK(strcmp(method_name(m->id), mi->name) == 0);
    CHECK(class_is_known(method_class(m->id)));

    canon = fuzz_xmalloc(len);
    memcpy(canon, in, len);
    CHECK(method_canon(mi, m, canon, len));

    /* The same bytes... */
    out = fuzz_xmalloc(len);
    wire_wr_init(&w, out, len);
    CHECK(method_encode(m, &w) == AMQP_OK);
    CHECK(w.len == len);
    CHECK(memcmp(out, canon, len) == 0);

    /* ...and the same arguments. */
    memset(&again, 0, sizeof(again));
    CHECK(method_decode(out, len, &again) == AMQP_OK);
    CHECK(again.id == m->id);
    CHECK(fields_equal(mi->fields, mi->nfields, CODEC_ALL, &m->a, &again.a));

    /* Too small a buffer: the writer counts and writes nothing past the
     * end (each buffer is allocated to its exact size for ASan). */
    caps[0] = 0;
    caps[1] = len / 2;
    caps[2] = len - 1;
    for (i = 0; i < 3; i++) {
        small = caps[i] ? fuzz_xmalloc(caps[i]) : NULL;
        wire_wr_init(&w, small, caps[i]);
        CHECK(method_encode(m, &w) == AMQP_E_OVERFLOW);
        CHECK(w.len == len);
        free(small);
    }

    /* The whole frame, then the frame with too little room. */
    frame = fuzz_xmalloc(len + AMQP_FRAME_OVERHEAD);
    wire_wr_init(&w, frame, len + AMQP_FRAME_OVERHEAD);
    CHECK(method_frame_put(&w, 7, m) == AMQP_OK);
    CHECK(w.len == len + AMQP_FRAME_OVERHEAD);
    CHECK(frame[0] == AMQP_FRAME_METHOD && wire_load16(frame + 1) == 7);
    CHECK(frame_peek_size(frame) == len);
    CHECK(memcmp(frame + AMQP_FRAME_HEADER_LEN, canon, len) == 0);
    CHECK(frame[AMQP_FRAME_HEADER_LEN + len] == AMQP_FRAME_END);
    for (i = 0; i < sizeof(frame_caps) / sizeof(frame_caps[0]); i++) {
        size_t cap = len + AMQP_FRAME_OVERHEAD - 1 - frame_caps[i];
        small = fuzz_xmalloc(cap);
        wire_wr_init(&w, small, cap);
        CHECK(method_frame_put(&w, 7, m) == AMQP_E_OVERFLOW);
        free(small);
    }

    free(frame);
    free(out);
    free(canon);
}

static void
walk_arguments(const struct amqp_method *m)
{
    const struct method_info *mi = method_info_find(m->id);

    for (size_t i = 0; i < mi->nfields; i++) {
        const uint8_t *src = (const uint8_t *)&m->a + mi->fields[i].offset;
        if (mi->fields[i].type == FIELD_TABLE)
            walk_table(*(const struct amqp_table *)(const void *)src, 1);
    }
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct amqp_method m;
    enum amqp_status st;

    memset(&m, 0, sizeof(m));
    st = method_decode(data, size, &m);
    if (st != AMQP_OK) {
        /* Every way to fail has a reply code to close with. */
        CHECK(status_reply_code(st) != 0 && status_reply_code(st) != 200);
        CHECK(status_name(st) != NULL && status_text(st) != NULL);
        return 0;
    }
    check_method(data, size, &m);
    walk_arguments(&m);
    return 0;
}
