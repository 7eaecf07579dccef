/*
 * SPDX-License-Identifier: Apache-2.0
 * A connection's input: bytes read from the socket and not yet split into
 * frames, held contiguously in a reference-counted block, so every frame
 * is decoded in place.
 *
 * A message whose whole body arrives in one large body frame does not copy
 * it: the message points into the block and holds a reference to it
 * (msg_borrow_body), and delivery hands the same bytes to the consumer's
 * output by reference. The block outlives the connection's use of it for
 * as long as such a message or output reference does.
 *
 * Bounds: a block holds at most what one read asked for plus the frame
 * that was cut short before it, or twice the connection's read size
 * (conn.c keeps both under 512 KiB plus two frames). Once a second has
 * passed since a block was retired (the connection moved on from it),
 * inbuf_compact() gives the messages in it their own copies if their
 * bodies fill less than a quarter of it, and the block is freed: kept
 * messages never hold more than four times their size for long. Output
 * references to lent bodies count the rest of their block against the
 * consumer connection's output watermarks (conn_output_lend), so a
 * consumer that stops reading holds at most its watermark's worth.
 */
#ifndef ROOST_BROKER_INBUF_H
#define ROOST_BROKER_INBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>

struct msg;

struct inblock {
    uint32_t refs;              /* the connection's (until retired), one
                                   per message body in it, one per output
                                   reference to it */
    bool retired;               /* the connection reads into another now */
    uint64_t retired_ms;        /* since when */
    TAILQ_ENTRY(inblock) retired_link;
    size_t cap;                 /* bytes of data[] */
    size_t pinned;              /* body bytes of the messages in 'msgs' */
    TAILQ_HEAD(, msg_ext) msgs; /* messages whose body lies in data[] */
    uint8_t data[];
};

struct inbuf {
    struct inblock *blk;        /* NULL while nothing is buffered */
    size_t off, len;            /* the unread bytes: data[off, off + len) */
};

static inline size_t
inbuf_len(const struct inbuf *in)
{
    return in->len;
}

/* The unread bytes, contiguous; valid until the next inbuf_space(). */
static inline uint8_t *
inbuf_data(const struct inbuf *in)
{
    return in->blk->data + in->off;
}

/*
 * Room for at least 'want' more bytes after the unread ones, contiguous.
 * The unread bytes are moved to the front of the block when nothing else
 * references it, or copied into a new block (the old one is retired)
 * when something does. 'hint' is a capacity to give a new block if it is
 * larger than needed (so that a busy connection fills a block over several
 * reads). Returns where to write; NULL if memory is exhausted.
 */
uint8_t *inbuf_space(struct inbuf *in, size_t want, size_t hint);

/* 'n' bytes were written where inbuf_space() said. */
static inline void
inbuf_commit(struct inbuf *in, size_t n)
{
    in->len += n;
}

/* The first 'n' unread bytes are consumed. */
static inline void
inbuf_drain(struct inbuf *in, size_t n)
{
    in->off += n;
    in->len -= n;
}

/* When nothing is unread, let go of the block (it is freed, or retired if
 * message bodies lie in it), so that an idle connection holds no input
 * memory. */
void inbuf_trim(struct inbuf *in);

/* Drop the unread bytes and the connection's reference (teardown). */
void inbuf_release(struct inbuf *in);

static inline struct inblock *
inblock_ref(struct inblock *b)
{
    b->refs++;
    return b;
}

void inblock_unref(struct inblock *b);

/*
 * Blocks retired at least 'older_than_ms' ago and less than a quarter
 * full of message bodies: copy those bodies out (msg_unborrow_all), so
 * the block can go. Called once a second.
 */
void inbuf_compact(uint64_t older_than_ms);

/* Free the spare blocks kept for reuse (at exit). */
void inbuf_spares_free(void);

/* Bytes held by every live block, retired ones included (not spares:
 * at most 8 of 256 KiB). */
uint64_t inbuf_bytes_in_use(void);

#endif
