/*
 * SPDX-License-Identifier: Apache-2.0
 * Records on disk, as the journal and the definitions log frame them
 * (docs/storage.md): a 16-byte header (magic "RSR1", payload length, type,
 * three zero bytes, CRC32C of the first twelve header bytes and the
 * payload) and the payload. Integers are little-endian. A reader stops at
 * a zero header (the preallocated end of a segment), and after a record
 * that does not check out looks for the next magic to tell a torn tail
 * (nothing valid after it) from a corrupt record in the middle.
 *
 * Records are built in a growable buffer (broker/lib/wbuf.h); also the
 * field readers.
 * Pure: no I/O, no globals.
 */
#ifndef ROOST_BROKER_STORE_RECORD_H
#define ROOST_BROKER_STORE_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/lib/wbuf.h"

#define REC_MAGIC 0x31525352u   /* "RSR1" */
#define REC_HDR 16
/* Larger than any message Roost accepts (max_message_size is at most
 * 512 MiB) with its header: a length beyond it is corrupt. */
#define REC_MAX (600u * 1024 * 1024)

/* Open a record of 'type' in 'b'; rec_end fills in its header. Returns
 * the record's offset in 'b'. */
size_t rec_begin(struct wbuf *b, uint8_t type);
void rec_end(struct wbuf *b, size_t at);

enum rec_status { REC_OK, REC_END, REC_BAD };

struct rec {
    uint8_t type;
    const uint8_t *payload;
    uint32_t len;
    size_t size;            /* header + payload */
};

/* The record at 'p' (at most 'len' bytes). REC_END: a zero header or
 * too little left for one; REC_BAD: it does not check out. */
enum rec_status rec_read(const uint8_t *p, size_t len, struct rec *out);

/* The offset of the next record that checks out after 'from', or 'len'
 * if none does. */
size_t rec_resync(const uint8_t *p, size_t len, size_t from);

/* What rec_walk() found at a record that does not check out. */
enum rec_fault {
    REC_CORRUPT,        /* records that check out follow: skipped */
    REC_TORN,           /* none does: the tail a crash cut, the walk ends */
};

/*
 * Walk the records of a whole file in 'p' as every reader of the store
 * does: call 'each' for each record that checks out, with its offset; at
 * one that does not, call 'fault' (if not NULL) with its offset and the
 * bytes skipped (up to the next record that checks out, or to the end).
 * The walk stops at a zero header or at fewer bytes than a header.
 * Returns where the records end: 'len' after the last record or a torn
 * tail, else the offset the walk stopped at. 'arg' is passed on.
 */
size_t rec_walk(const uint8_t *p, size_t len,
                void (*each)(void *arg, const struct rec *r, size_t off),
                void (*fault)(void *arg, enum rec_fault f, size_t off,
                              size_t n),
                void *arg);

/* Reading fields from a payload: each fails (returns false, and keeps
 * failing) once the payload is exhausted. */
struct rbuf {
    const uint8_t *p;
    size_t len, off;
    bool bad;
};

void rbuf_init(struct rbuf *r, const uint8_t *p, size_t len);
uint8_t rbuf_u8(struct rbuf *r);
uint32_t rbuf_u32(struct rbuf *r);
uint64_t rbuf_u64(struct rbuf *r);
/* A u32-prefixed string: points into the payload. */
const uint8_t *rbuf_str(struct rbuf *r, uint32_t *len);
const uint8_t *rbuf_bytes(struct rbuf *r, size_t n);

#endif
