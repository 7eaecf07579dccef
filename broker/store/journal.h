/*
 * SPDX-License-Identifier: Apache-2.0
 * The record types of the journal (dir/msgs/NNNNNNNNNN.seg), shared by
 * the store (store.c writes and recovers them) and the offline checker
 * (check.c). The payloads, little-endian as record.h frames them:
 *
 *   J_SEG        u32 format, u64 segment number (first in each segment)
 *   J_MSG        u64 id, str exchange, str routing key, str content
 *                header, u64 body length, the body
 *   J_ENQ        u32 queue id, u64 seq, u64 message id, u64 expiry (wall
 *                ms; 0 never, 1 already expired), u32 deliveries, and
 *                when it entered the queue (u64 wall ms; older records
 *                end before it)
 *   J_DELIVER    u32 queue id, u64 seq, u32 deliveries, and for an entry
 *                returned to wait out a requeue delay, u64 when it is
 *                due (wall ms; older records end before it)
 *   J_ACK        u32 queue id, u64 first seq, u64 last seq
 *   J_TX_BEGIN   u64 transaction id
 *   J_TX_COMMIT  u64 transaction id
 *   J_OFFSET     u32 queue id, str consumer name, u64 committed offset,
 *                u64 when it last changed (wall ms): a stream's consumer
 *                name, in dir/offsets/<queue id> only (offsets.h)
 *
 * A stream's own log (dir/streams/<queue id>/NNNNNNNNNN.seg; streams.h)
 * holds, after each segment's J_SEG:
 *
 *   J_SMSG       u64 offset, u64 append time (wall ms), then what J_MSG
 *                holds after its id: str exchange, str routing key, str
 *                content header, u64 body length, the body
 *   J_STRIM      u64 the first offset retained: every message below it
 *                is gone, and the next one appended takes at least it
 *
 * A queue id may also name a durable x-delayed-message exchange (its
 * store id, from the same space): its J_ENQ records are the messages it
 * holds, the expiry field their due time (delayed.h), and J_ACK ends
 * them when they are routed.
 */
#ifndef ROOST_BROKER_STORE_JOURNAL_H
#define ROOST_BROKER_STORE_JOURNAL_H

enum { J_SEG = 1, J_MSG, J_ENQ, J_DELIVER, J_ACK, J_TX_BEGIN, J_TX_COMMIT,
       J_OFFSET, J_SMSG, J_STRIM };

#endif
