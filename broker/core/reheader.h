/*
 * SPDX-License-Identifier: Apache-2.0
 * The one slow path that changes a message's content header: its
 * properties decoded, its headers table rewritten, the header encoded
 * again. Dead-lettering (x-death), x-delivery-count on deliveries from
 * a queue with a delivery limit, BCC removed at publish and reply_to
 * rewritten for direct reply-to take it; every other message goes out
 * with the header it came with, byte for byte.
 */
#ifndef ROOST_BROKER_REHEADER_H
#define ROOST_BROKER_REHEADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/props.h"
#include "amqp/wire.h"

struct msg;

/*
 * Writes the new headers table (with its length prefix) into 'w' from
 * the decoded header 'h', whose other properties it may change; false
 * to give up. It may be called again with a larger 'w' when the first
 * did not fit: it must write the same each time.
 */
typedef bool (*reheader_fn)(struct wire_wr *w, struct content_header *h,
                            void *arg);

/*
 * 'm's content header with its headers table as 'fn' writes it: a new
 * allocation (free it) of *len bytes, or NULL when 'fn' gives up or the
 * result does not decode (a table over the codec's bounds).
 */
uint8_t *reheader(const struct msg *m, reheader_fn fn, void *arg,
                  size_t *len);

/*
 * A copy of 'm' (its body copied) whose headers 'fn' writes, published
 * to 'exchange' with 'rkey' (NULL: m's own): a new reference, or NULL
 * as reheader() gives up.
 */
struct amqp_bytes;
struct msg *reheader_copy(const struct msg *m, reheader_fn fn, void *arg,
                          const struct amqp_bytes *exchange,
                          const struct amqp_bytes *rkey);

/* The same with the content header 'from' (the message's own, or one a
 * delivery rewrote) in place of m's. */
struct msg *reheader_copy_header(const struct msg *m, const uint8_t *from,
                                 size_t from_len, reheader_fn fn, void *arg,
                                 const struct amqp_bytes *exchange,
                                 const struct amqp_bytes *rkey);

/* The same for an encoded content header not yet in a message. */
uint8_t *reheader_bytes(const uint8_t *hdr, size_t hdr_len, reheader_fn fn,
                        void *arg, size_t *len);

#endif
