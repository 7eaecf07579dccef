/*
 * SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the store's record reader (broker/store/record.c),
 * which recovery runs over data files that a crash, a power cut or a
 * failing disk may have left in any state. The input is read as a file:
 *
 *  - rec_read() either finds a record that lies wholly inside the input,
 *    or says REC_END or REC_BAD; rec_resync() from a bad record returns
 *    the input's end or the offset of a record that checks out, past the
 *    bad one; so the walk ends, and never reads out of bounds;
 *  - each record's payload is parsed field by field with the rbuf
 *    readers, which never read past it and, once short, stay failed;
 *  - rec_walk() sees the same records and faults as the walk above;
 *  - the input, read as a journal segment by replay.c (what recovery and
 *    the offline check run), resolves into entries in queue id and
 *    position order, one per position, each live one's message (if any)
 *    with the id it names and its payload inside the input;
 *  - the input, framed as the payload of a new record (rec_begin,
 *    rec_end), reads back whole, and any single flipped bit in that
 *    record makes it fail to check out.
 */
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/store/record.h"
#include "broker/store/replay.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

const char fuzz_target_name[] = "fuzz_record";

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond)) {                                                    \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__,        \
                    __LINE__, #cond);                                     \
            abort();                                                      \
        }                                                                 \
    } while (0)

static void
parse_fields(const struct rec *r)
{
    struct rbuf b;
    uint32_t len;

    rbuf_init(&b, r->payload, r->len);
    /* A mix of the field kinds the records use, until the payload ends. */
    for (int i = 0; i < 64 && !b.bad; i++) {
        switch ((r->type + i) % 4) {
        case 0: (void)rbuf_u8(&b); break;
        case 1: (void)rbuf_u32(&b); break;
        case 2: (void)rbuf_u64(&b); break;
        case 3: {
            const uint8_t *p = rbuf_str(&b, &len);
            if (p != NULL)
                CHECK(p >= r->payload && p + len <= r->payload + r->len);
            break;
        }
        }
        CHECK(b.off <= b.len);
    }
    if (b.bad)
        CHECK(rbuf_u64(&b) == 0 && b.bad);
}

/* What a walk met, to compare rec_walk() with the walk by hand. */
struct walked {
    size_t records, faults, last_end;
};

static void
walk_record(void *arg, const struct rec *r, size_t off)
{
    struct walked *w = arg;

    CHECK(off >= w->last_end);
    w->last_end = off + r->size;
    w->records++;
}

static void
walk_fault(void *arg, enum rec_fault f, size_t off, size_t n)
{
    struct walked *w = arg;

    (void)f;
    CHECK(off >= w->last_end && n > 0);
    w->last_end = off + n;
    w->faults++;
}

/* Queues with odd ids exist; even ones were deleted. */
static void *
odd_queue(void *arg, uint32_t qid)
{
    return qid % 2 ? arg : NULL;
}

static void
replay_input(const uint8_t *data, size_t size)
{
    struct replay rp = { 0 };
    struct replay_walk w;
    struct replay_entry e;
    struct replay_fields f;
    static int queue;
    bool first = true;
    uint32_t qid = 0;
    uint64_t seq = 0;

    CHECK(replay_segment(&rp, 0, data, size, NULL) <= size);
    replay_resolve(&rp);
    replay_walk_init(&w, &rp, odd_queue, &queue);
    while (replay_next(&w, &e)) {
        CHECK(first || e.qid > qid || (e.qid == qid && e.seq > seq));
        first = false;
        qid = e.qid;
        seq = e.seq;
        CHECK((e.queue != NULL) == (e.qid % 2 == 1));
        CHECK((e.fate == REPLAY_ORPHAN) == (e.queue == NULL));
        if (e.fate != REPLAY_LIVE || e.msg == NULL)
            continue;
        CHECK(e.msg->id == e.msg_id);
        CHECK(e.msg->payload >= data &&
              e.msg->payload + e.msg->len <= data + size);
        if (replay_msg_decode(e.msg, &f))
            CHECK(f.body + f.body_len <= e.msg->payload + e.msg->len);
    }
    replay_free(&rp);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    size_t off = 0, records = 0, faults = 0;
    struct rec r;

    while (off < size) {
        enum rec_status st = rec_read(data + off, size - off, &r);
        if (st == REC_END)
            break;
        if (st == REC_BAD) {
            size_t next = rec_resync(data, size, off);
            CHECK(next == size || next > off);
            if (next < size)
                CHECK(rec_read(data + next, size - next, &r) == REC_OK);
            off = next;
            faults++;
            continue;
        }
        CHECK(r.size == REC_HDR + (size_t)r.len && r.size <= size - off);
        parse_fields(&r);
        off += r.size;
        records++;
    }
    struct walked wk = { 0 };
    CHECK(rec_walk(data, size, walk_record, walk_fault, &wk) == off);
    CHECK(wk.records == records && wk.faults == faults);
    replay_input(data, size);

    struct wbuf w = { 0 };
    uint8_t type = size ? data[0] : 0;
    size_t at = rec_begin(&w, type);
    wbuf_bytes(&w, data, size);
    rec_end(&w, at);
    CHECK(rec_read(w.p, w.len, &r) == REC_OK);
    CHECK(r.type == type && r.len == size && r.size == w.len);
    CHECK(size == 0 || memcmp(r.payload, data, size) == 0);
    size_t bit = size ? ((size_t)data[size - 1] * 131 + size) % (w.len * 8)
                      : 3;
    w.p[bit / 8] ^= (uint8_t)(1u << (bit % 8));
    CHECK(rec_read(w.p, w.len, &r) != REC_OK);
    wbuf_free(&w);
    return 0;
}
