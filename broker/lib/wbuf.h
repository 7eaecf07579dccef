/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A growable byte buffer that little-endian integers and strings are
 * appended to: records are built in one (broker/store/record.h), and the
 * store's read-back jobs carry one (broker/core/store.h). It grows by
 * doubling from 4 KiB; the caller bounds what it puts in.
 */
#ifndef ROOST_BROKER_LIB_WBUF_H
#define ROOST_BROKER_LIB_WBUF_H

#include <stddef.h>
#include <stdint.h>

struct wbuf {
    uint8_t *p;
    size_t len, cap;
};

void wbuf_reserve(struct wbuf *b, size_t more);
void wbuf_free(struct wbuf *b);
void wbuf_u8(struct wbuf *b, uint8_t v);
void wbuf_u32(struct wbuf *b, uint32_t v);
void wbuf_u64(struct wbuf *b, uint64_t v);
void wbuf_bytes(struct wbuf *b, const void *p, size_t n);
/* A u32 length and the bytes. */
void wbuf_str(struct wbuf *b, const void *p, size_t n);

/* 'v' little-endian into p[0..3]. */
void le32_put(uint8_t *p, uint32_t v);

#endif
