/*
 * SPDX-License-Identifier: Apache-2.0
 * Journal replay (broker/store/replay.c), the rules recovery and the
 * offline check share: which enqueue record of an entry counts, settled
 * ranges, delivery counts, transactions, orphans, message copies, and
 * what is said about bad records. Segments are built here record by
 * record with the store's own framing.
 */
#include "tests/unit/testutil.h"

#include "broker/store/journal.h"
#include "broker/store/record.h"
#include "broker/store/replay.h"

/* ---- building segments ---- */

static void
put_seg(struct wbuf *b, uint64_t n)
{
    size_t at = rec_begin(b, J_SEG);
    wbuf_u32(b, 1);
    wbuf_u64(b, n);
    rec_end(b, at);
}

/* A message whose content header gives the body's length, or (bad) one
 * more than it. */
static void
put_msg_hdr(struct wbuf *b, uint64_t id, const char *body, bool bad)
{
    size_t blen = strlen(body);
    uint8_t h[14] = { 0, 60, 0, 0 };
    uint64_t size = blen + (bad ? 1 : 0);

    for (int i = 0; i < 8; i++)
        h[4 + i] = (uint8_t)(size >> (56 - 8 * i));
    size_t at = rec_begin(b, J_MSG);
    wbuf_u64(b, id);
    wbuf_str(b, "", 0);
    wbuf_str(b, "rk", 2);
    wbuf_str(b, h, sizeof(h));
    wbuf_u64(b, blen);
    wbuf_bytes(b, body, blen);
    rec_end(b, at);
}

static void
put_msg(struct wbuf *b, uint64_t id, const char *body)
{
    put_msg_hdr(b, id, body, false);
}

static void
put_enq(struct wbuf *b, uint32_t qid, uint64_t seq, uint64_t id,
        uint32_t deliveries)
{
    size_t at = rec_begin(b, J_ENQ);
    wbuf_u32(b, qid);
    wbuf_u64(b, seq);
    wbuf_u64(b, id);
    wbuf_u64(b, 0);
    wbuf_u32(b, deliveries);
    rec_end(b, at);
}

static void
put_del(struct wbuf *b, uint32_t qid, uint64_t seq, uint32_t deliveries)
{
    size_t at = rec_begin(b, J_DELIVER);
    wbuf_u32(b, qid);
    wbuf_u64(b, seq);
    wbuf_u32(b, deliveries);
    rec_end(b, at);
}

static void
put_ack(struct wbuf *b, uint32_t qid, uint64_t lo, uint64_t hi)
{
    size_t at = rec_begin(b, J_ACK);
    wbuf_u32(b, qid);
    wbuf_u64(b, lo);
    wbuf_u64(b, hi);
    rec_end(b, at);
}

static void
put_tx(struct wbuf *b, uint8_t type, uint64_t txid)
{
    size_t at = rec_begin(b, type);
    wbuf_u64(b, txid);
    rec_end(b, at);
}

/* A segment that starts with one entry: queue 1, position 0, message 1. */
static void
put_first(struct wbuf *b)
{
    put_seg(b, 1);
    put_msg(b, 1, "a");
    put_enq(b, 1, 0, 1, 0);
}

/* ---- reading them back ---- */

/* What the report callbacks heard. */
struct heard {
    unsigned records, short_records, corrupt, torn, cuts;
    size_t cut_msgs, cut_enqs, cut_acks, cut_dels;
    size_t fault_off, fault_len;
};

static void
on_record(void *arg, const struct rec *r, size_t off, bool fits)
{
    struct heard *h = arg;
    (void)r;
    (void)off;
    h->records++;
    h->short_records += !fits;
}

static void
on_fault(void *arg, enum rec_fault f, size_t off, size_t n)
{
    struct heard *h = arg;
    if (f == REC_TORN)
        h->torn++;
    else
        h->corrupt++;
    h->fault_off = off;
    h->fault_len = n;
}

static void
on_cut(void *arg, size_t msgs, size_t enqs, size_t acks, size_t dels)
{
    struct heard *h = arg;
    h->cuts++;
    h->cut_msgs = msgs;
    h->cut_enqs = enqs;
    h->cut_acks = acks;
    h->cut_dels = dels;
}

/* Queue ids 1 to 9 exist (each its own "queue": the id itself, as a
 * pointer); lookups are counted. */
static unsigned lookups;

static void *
known_queue(void *arg, uint32_t qid)
{
    (void)arg;
    lookups++;
    return qid >= 1 && qid <= 9 ? (void *)(uintptr_t)qid : NULL;
}

#define MAX_ENTRIES 32

struct result {
    struct replay rp;
    struct heard heard;
    struct replay_entry e[MAX_ENTRIES];
    size_t n;
    uint64_t queues;
};

/* Replay the segments (each a wbuf) and collect every entry. */
static void
replay_all(struct result *r, struct wbuf *segs, size_t nsegs)
{
    struct replay_report rep = {
        .record = on_record, .fault = on_fault, .tx_cut = on_cut,
        .arg = &r->heard,
    };
    struct replay_walk w;
    struct replay_entry e;

    memset(r, 0, sizeof(*r));
    for (size_t i = 0; i < nsegs; i++)
        replay_segment(&r->rp, (uint32_t)i, segs[i].p, segs[i].len, &rep);
    replay_resolve(&r->rp);
    lookups = 0;
    replay_walk_init(&w, &r->rp, known_queue, NULL);
    while (replay_next(&w, &e)) {
        ck_assert_uint_lt(r->n, MAX_ENTRIES);
        r->e[r->n++] = e;
    }
    r->queues = w.queues;
}

static void
done(struct result *r, struct wbuf *segs, size_t nsegs)
{
    replay_free(&r->rp);
    for (size_t i = 0; i < nsegs; i++)
        wbuf_free(&segs[i]);
}

/* The body of a live entry's message. */
static const char *
body_of(const struct replay_entry *e)
{
    static char out[64];
    struct replay_fields f;

    if (e->msg == NULL || !replay_msg_decode(e->msg, &f))
        return "(none)";
    snprintf(out, sizeof(out), "%.*s", (int)f.body_len, (const char *)f.body);
    return out;
}

/* ---- entries ---- */

START_TEST(newest_enqueue_counts)
{
    struct wbuf s[2] = { { 0 } };
    struct result r;

    put_seg(&s[0], 1);
    put_msg(&s[0], 1, "one");
    put_msg(&s[0], 2, "two");
    put_enq(&s[0], 1, 0, 1, 0);
    put_seg(&s[1], 2);
    /* the same entry again (moved, or copied forward) */
    put_enq(&s[1], 1, 0, 2, 4);
    replay_all(&r, s, 2);
    ck_assert_uint_eq(r.n, 1);
    ck_assert_int_eq(r.e[0].fate, REPLAY_LIVE);
    ck_assert_uint_eq(r.e[0].msg_id, 2);
    ck_assert_uint_eq(r.e[0].deliveries, 4);
    ck_assert_str_eq(body_of(&r.e[0]), "two");
    done(&r, s, 2);
}
END_TEST

START_TEST(settled_range_ends_entries)
{
    struct wbuf s[1] = { { 0 } };
    struct result r;

    put_seg(&s[0], 1);
    put_msg(&s[0], 1, "m");
    for (uint64_t seq = 0; seq < 6; seq++)
        put_enq(&s[0], 1, seq, 1, 0);
    put_ack(&s[0], 1, 1, 2);
    put_ack(&s[0], 1, 4, 4);
    put_ack(&s[0], 2, 0, 100);     /* another queue's range */
    replay_all(&r, s, 1);
    ck_assert_uint_eq(r.n, 6);
    static const enum replay_fate want[6] = {
        REPLAY_LIVE, REPLAY_SETTLED, REPLAY_SETTLED, REPLAY_LIVE,
        REPLAY_SETTLED, REPLAY_LIVE,
    };
    for (size_t i = 0; i < 6; i++) {
        ck_assert_uint_eq(r.e[i].seq, i);
        ck_assert_msg(r.e[i].fate == want[i], "seq %zu: fate %d", i,
                      (int)r.e[i].fate);
    }
    done(&r, s, 1);
}
END_TEST

START_TEST(deliveries_take_the_highest)
{
    struct wbuf s[1] = { { 0 } };
    struct result r;

    put_seg(&s[0], 1);
    put_msg(&s[0], 1, "m");
    put_enq(&s[0], 1, 0, 1, 2);
    put_enq(&s[0], 1, 1, 1, 0);
    put_del(&s[0], 1, 0, 1);       /* lower than the enqueue's */
    put_del(&s[0], 1, 1, 3);
    put_del(&s[0], 1, 1, 2);
    put_del(&s[0], 3, 0, 9);       /* another queue's */
    replay_all(&r, s, 1);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_uint_eq(r.e[0].deliveries, 2);
    ck_assert_uint_eq(r.e[1].deliveries, 3);
    done(&r, s, 1);
}
END_TEST

START_TEST(unknown_queue_is_orphan)
{
    struct wbuf s[1] = { { 0 } };
    struct result r;

    put_seg(&s[0], 1);
    put_msg(&s[0], 1, "m");
    put_enq(&s[0], 12, 0, 1, 0);
    put_enq(&s[0], 12, 1, 1, 0);
    put_enq(&s[0], 2, 0, 1, 0);
    put_ack(&s[0], 12, 0, 0);      /* settled, but orphaned first */
    replay_all(&r, s, 1);
    ck_assert_uint_eq(r.n, 3);
    /* in queue id order: queue 2, then 12 */
    ck_assert_int_eq(r.e[0].fate, REPLAY_LIVE);
    ck_assert_ptr_eq(r.e[0].queue, (void *)(uintptr_t)2);
    ck_assert_int_eq(r.e[1].fate, REPLAY_ORPHAN);
    ck_assert_int_eq(r.e[2].fate, REPLAY_ORPHAN);
    ck_assert_ptr_null(r.e[2].queue);
    /* once per queue id */
    ck_assert_uint_eq(lookups, 2);
    ck_assert_uint_eq(r.queues, 1);
    done(&r, s, 1);
}
END_TEST

/* ---- messages ---- */

START_TEST(newest_message_copy)
{
    struct wbuf s[2] = { { 0 } };
    struct result r;

    put_seg(&s[0], 1);
    put_msg(&s[0], 5, "old");
    put_enq(&s[0], 1, 0, 5, 0);
    put_enq(&s[0], 1, 1, 6, 0);    /* no such message */
    put_seg(&s[1], 2);
    put_msg(&s[1], 5, "new");      /* compaction's copy */
    replay_all(&r, s, 2);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_str_eq(body_of(&r.e[0]), "new");
    ck_assert_uint_eq(r.e[0].msg->seg, 1);
    ck_assert_ptr_null(r.e[1].msg);
    ck_assert_uint_eq(r.rp.max_id, 5);
    done(&r, s, 2);
}
END_TEST

START_TEST(message_that_does_not_decode)
{
    struct wbuf s[1] = { { 0 } };
    struct result r;

    put_seg(&s[0], 1);
    put_msg_hdr(&s[0], 1, "body", true);
    /* only the id: kept, as recovery keeps it, and said to be short */
    size_t at = rec_begin(&s[0], J_MSG);
    wbuf_u64(&s[0], 2);
    rec_end(&s[0], at);
    put_enq(&s[0], 1, 0, 1, 0);
    put_enq(&s[0], 1, 1, 2, 0);
    replay_all(&r, s, 1);
    ck_assert_uint_eq(r.heard.records, 5);
    ck_assert_uint_eq(r.heard.short_records, 1);
    ck_assert_uint_eq(r.n, 2);
    struct replay_fields f;
    ck_assert_ptr_nonnull(r.e[0].msg);
    ck_assert(!replay_msg_decode(r.e[0].msg, &f));
    ck_assert_ptr_nonnull(r.e[1].msg);
    ck_assert(!replay_msg_decode(r.e[1].msg, &f));
    done(&r, s, 1);
}
END_TEST

/* ---- transactions ---- */

/* Where the commit record of a transaction stands: its records count
 * only with a commit in the same segment (one batch). */
static const struct tx_vec {
    const char *name;
    int commit;                 /* 0 none, 1 in its segment, 2 the next */
    bool counts;
} tx_vecs[] = {
    { "committed", 1, true },
    { "commit in the next segment", 2, false },
    { "no commit", 0, false },
};

START_TEST(transaction_counts_with_its_commit)
{
    const struct tx_vec *v = &tx_vecs[_i];
    struct wbuf s[2] = { { 0 } };
    struct result r;

    put_first(&s[0]);
    put_tx(&s[0], J_TX_BEGIN, 1);
    put_msg(&s[0], 2, "b");
    put_enq(&s[0], 1, 1, 2, 0);
    put_ack(&s[0], 1, 0, 0);
    put_del(&s[0], 1, 1, 7);
    if (v->commit == 1)
        put_tx(&s[0], J_TX_COMMIT, 1);
    put_seg(&s[1], 2);
    if (v->commit == 2)
        put_tx(&s[1], J_TX_COMMIT, 1);
    replay_all(&r, s, 2);
    ck_assert_msg(r.heard.cuts == (v->counts ? 0 : 1), "%s", v->name);
    if (v->counts) {
        ck_assert_uint_eq(r.n, 2);
        ck_assert_int_eq(r.e[0].fate, REPLAY_SETTLED);
        ck_assert_int_eq(r.e[1].fate, REPLAY_LIVE);
        ck_assert_uint_eq(r.e[1].deliveries, 7);
        ck_assert_str_eq(body_of(&r.e[1]), "b");
    } else {
        ck_assert_uint_eq(r.heard.cut_msgs, 1);
        ck_assert_uint_eq(r.heard.cut_enqs, 1);
        ck_assert_uint_eq(r.heard.cut_acks, 1);
        ck_assert_uint_eq(r.heard.cut_dels, 1);
        ck_assert_uint_eq(r.n, 1);
        ck_assert_int_eq(r.e[0].fate, REPLAY_LIVE);
        ck_assert_uint_eq(r.rp.nmsgs, 1);
    }
    done(&r, s, 2);
}
END_TEST

/* ---- bad records ---- */

START_TEST(corrupt_record_is_skipped)
{
    struct wbuf s[1] = { { 0 } };
    struct result r;

    put_first(&s[0]);
    size_t bad = s[0].len;
    put_enq(&s[0], 1, 1, 1, 0);
    size_t next = s[0].len;
    put_enq(&s[0], 1, 2, 1, 0);
    s[0].p[bad + REC_HDR] ^= 0x40;  /* its payload: the CRC fails */
    replay_all(&r, s, 1);
    ck_assert_uint_eq(r.heard.corrupt, 1);
    ck_assert_uint_eq(r.heard.fault_off, bad);
    ck_assert_uint_eq(r.heard.fault_len, next - bad);
    ck_assert_uint_eq(r.rp.corrupt, 1);
    ck_assert_uint_eq(r.rp.torn, 0);
    ck_assert_uint_eq(r.n, 2);
    ck_assert_uint_eq(r.e[1].seq, 2);
    done(&r, s, 1);
}
END_TEST

/* What stands after the last record: a write cut short, or zeros (the
 * preallocated rest of a segment) with a record behind them. */
START_TEST(tail_ends_the_segment)
{
    static const uint8_t zeros[64];
    struct wbuf s[1] = { { 0 } };
    struct replay rp = { 0 };
    bool torn = _i == 0;

    put_first(&s[0]);
    size_t end = s[0].len;
    if (!torn)
        wbuf_bytes(&s[0], zeros, sizeof(zeros));
    put_enq(&s[0], 1, 1, 1, 0);
    if (torn)
        s[0].len -= 3;
    ck_assert_uint_eq(replay_segment(&rp, 0, s[0].p, s[0].len, NULL),
                      torn ? s[0].len : end);
    ck_assert_uint_eq(rp.torn, torn ? 1 : 0);
    ck_assert_uint_eq(rp.corrupt, 0);
    ck_assert_uint_eq(rp.nenqs, 1);
    replay_free(&rp);
    wbuf_free(&s[0]);
}
END_TEST

static Suite *
replay_suite(void)
{
    Suite *s = suite_create("replay");
    TCase *tc = tcase_create("entries");
    tcase_add_test(tc, newest_enqueue_counts);
    tcase_add_test(tc, settled_range_ends_entries);
    tcase_add_test(tc, deliveries_take_the_highest);
    tcase_add_test(tc, unknown_queue_is_orphan);
    suite_add_tcase(s, tc);
    tc = tcase_create("messages");
    tcase_add_test(tc, newest_message_copy);
    tcase_add_test(tc, message_that_does_not_decode);
    suite_add_tcase(s, tc);
    tc = tcase_create("transactions");
    tcase_add_loop_test(tc, transaction_counts_with_its_commit, 0,
                        NELEMS(tx_vecs));
    suite_add_tcase(s, tc);
    tc = tcase_create("bad records");
    tcase_add_test(tc, corrupt_record_is_skipped);
    tcase_add_loop_test(tc, tail_ends_the_segment, 0, 2);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(replay_suite());
}
