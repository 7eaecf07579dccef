/*
 * SPDX-License-Identifier: Apache-2.0
 * Input blocks: allocation, reuse, retirement, and the compaction of
 * retired blocks that kept messages hold on to.
 */
#include "broker/core/inbuf.h"

#include <stdlib.h>
#include <string.h>

#include "broker/core/msg.h"
#include "broker/lib/asan.h"
#include "broker/lib/util.h"

#define BLOCK_ALIGN 4096

/*
 * Freed blocks of up to SPARE_CAP bytes wait, at most SPARES of them, for
 * the next block_new. A connection lets go of its block whenever a read
 * leaves nothing unread (inbuf_trim), which a publisher waiting for its
 * confirms does at every read: without spares each such read freed a
 * block and allocated the next, and the messages allocated meanwhile
 * carved the freed block up, leaving a hole of up to a message's size in
 * the heap per read (about 15 bytes per queued 1 KiB message).
 */
#define SPARES 8
#define SPARE_CAP (256u * 1024)

static struct inblock *spare[SPARES];
static size_t nspare;

static uint64_t bytes_in_use;

/* Retired blocks that something still references, oldest first. */
static TAILQ_HEAD(, inblock) retired = TAILQ_HEAD_INITIALIZER(retired);

static struct inblock *
block_new(size_t cap)
{
    struct inblock *b = NULL;

    /* A spare of at least 'cap' and at most twice as large. */
    for (size_t i = 0; i < nspare; i++)
        if (spare[i]->cap >= cap && spare[i]->cap / 2 <= cap) {
            b = spare[i];
            spare[i] = spare[--nspare];
            ASAN_UNPOISON_MEMORY_REGION(b->data, b->cap);
            cap = b->cap;
            break;
        }
    if (b == NULL)
        b = malloc(sizeof(*b) + cap);
    if (b == NULL)
        return NULL;
    b->refs = 1;
    b->retired = false;
    b->cap = cap;
    b->pinned = 0;
    TAILQ_INIT(&b->msgs);
    bytes_in_use += sizeof(*b) + cap;
    return b;
}

void
inblock_unref(struct inblock *b)
{
    if (--b->refs > 0)
        return;
    bytes_in_use -= sizeof(*b) + b->cap;
    if (b->retired)
        TAILQ_REMOVE(&retired, b, retired_link);
    if (b->cap > SPARE_CAP || nspare == SPARES) {
        free(b);
        return;
    }
    spare[nspare++] = b;
    ASAN_POISON_MEMORY_REGION(b->data, b->cap);
}

void
inbuf_spares_free(void)
{
    while (nspare > 0) {
        struct inblock *b = spare[--nspare];
        ASAN_UNPOISON_MEMORY_REGION(b->data, b->cap);
        free(b);
    }
}

/* The connection moves on from 'b': drop its reference, and remember the
 * block if messages still hold it. */
static void
retire(struct inblock *b)
{
    b->retired = true;
    b->retired_ms = now_ms();
    TAILQ_INSERT_TAIL(&retired, b, retired_link);
    inblock_unref(b);
}

uint8_t *
inbuf_space(struct inbuf *in, size_t want, size_t hint)
{
    struct inblock *b = in->blk;

    if (b != NULL && b->cap - in->off - in->len < want &&
        b->refs == 1 && b->cap >= in->len + want) {
        /* No message holds the block: reuse it from the front. */
        memmove(b->data, b->data + in->off, in->len);
        in->off = 0;
    }
    if (b == NULL || b->cap - in->off - in->len < want) {
        size_t cap = in->len + want > hint ? in->len + want : hint;
        cap = (cap + BLOCK_ALIGN - 1) / BLOCK_ALIGN * BLOCK_ALIGN;
        struct inblock *nb = block_new(cap);
        if (nb == NULL)
            return NULL;
        if (b != NULL) {
            /* The frame cut short by the last read starts the new block. */
            memcpy(nb->data, b->data + in->off, in->len);
            retire(b);
        }
        in->blk = nb;
        in->off = 0;
    }
    return in->blk->data + in->off + in->len;
}

void
inbuf_trim(struct inbuf *in)
{
    if (in->len == 0)
        inbuf_release(in);
}

void
inbuf_release(struct inbuf *in)
{
    if (in->blk != NULL)
        retire(in->blk);
    in->blk = NULL;
    in->off = in->len = 0;
}

void
inbuf_compact(uint64_t older_than_ms)
{
    uint64_t now = now_ms();
    struct inblock *b, *next;

    for (b = TAILQ_FIRST(&retired); b != NULL; b = next) {
        if (now - b->retired_ms < older_than_ms)
            break;
        /* Copying the bodies out may free 'b'; keep it until we have
         * its successor. */
        inblock_ref(b);
        if (b->pinned > 0 && b->pinned * 4 < b->cap)
            msg_unborrow_all(b);
        next = TAILQ_NEXT(b, retired_link);
        inblock_unref(b);
    }
}

uint64_t
inbuf_bytes_in_use(void)
{
    return bytes_in_use;
}
