/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The journal's stream logs (streams-spec.md P1; docs/storage.md,
 * "Streams"). A durable stream queue keeps its messages in a segment log
 * of its own, dir/streams/<queue id>/NNNNNNNNNN.seg (seglog.h), not in
 * the journal: the journal frees space by copying the live part of its
 * oldest segment forward, and a stream's messages stay live until
 * retention lets them go. A stream's log is freed by deleting whole
 * segments once retention has let go of every message in them, and is
 * never compacted.
 *
 * Each message appended to a stream becomes a J_SMSG record (journal.h)
 * in the next job of the I/O thread, beside the journal's records of the
 * same batch (io.h's io_stream parts), synced before any confirm of the
 * batch goes out. Where retention stands is a J_STRIM record in the same
 * job as the segments it frees. A stream's entry in memory knows where
 * its record is (qentry.log_seg, log_off), so paging it out is free, and
 * reading it back is a pread on the pager thread.
 *
 * Recovery reads each stream's log back (torn tail cut, corrupt record
 * skipped and logged, as the journal's) into paged entries, from the
 * first retained offset on; the next append takes the offset after the
 * last. A directory of a queue that no longer exists is deleted.
 *
 * Everything here runs on the event loop, except what io.c does with the
 * parts it is handed.
 */
#ifndef ROOST_BROKER_STORE_STREAMS_H
#define ROOST_BROKER_STORE_STREAMS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "broker/lib/wbuf.h"

struct hmap;
struct io_job;
struct msg;
struct msg_env_cache;
struct pager_read;
struct qentry;
struct queue;

/* A stream's segments hold at least this much (x-stream-max-segment-
 * size-bytes and its policy are raised to it), and are preallocated to
 * at most STREAM_PREALLOC_MAX. */
#define STREAM_SEG_MIN (64u << 10)
#define STREAM_PREALLOC_MAX (4u << 20)

/* Start keeping stream logs under 'dir'/streams (made if missing; 0, or
 * -1 with errno), with 'seg_size' the segment size of a stream that asks
 * for none; 'envs' is where decoded messages share their envelopes. */
int slogs_open(const char *dir, uint64_t seg_size,
               struct msg_env_cache *envs);
/* Free every log (the I/O thread is stopped). */
void slogs_close(void);

/* Entry 'e' was appended to stream 'q': its record is due. */
void slog_append(struct queue *q, const struct qentry *e);
/* Entry 'e' left stream 'q' (retention): no offset up to it is kept. */
void slog_settled(struct queue *q, const struct qentry *e);
/* Stream 'q' is deleted: its log goes, files and directory. */
void slog_gone(struct queue *q);

/* Whether a stream has something for the next job. */
bool slogs_pending(void);
/* Put what is due of every stream into job 'j' (its parts), records at
 * most about 'limit' bytes each; returns the lowest batch that had to
 * wait for a later job (UINT64_MAX: none did). */
uint64_t slogs_serialise(struct io_job *j, size_t limit);
/* Job 'j' failed: each part's records go again, whole, at the start of
 * a new segment of its log (seglog_rewrite), its entries told. */
void slogs_rewrite(struct io_job *j);
/* Job 'j' is done and synced: its records can be read back, its parts
 * let go; whether it wrote any message. */
bool slogs_job_done(struct io_job *j);

/* Paging a stream's entry (core store.h's page_out, page_prepare,
 * page_in): its record is where the entry says. */
bool slog_page_out(struct queue *q, struct qentry *e);
int slog_page_prepare(struct queue *q, struct qentry *e);
void slog_page_in(struct queue *q, struct qentry *e, struct msg *m);
/* The message in J_SMSG record 'r', read back for entry 'e'. */
struct msg *slog_page_decode(const struct qentry *e,
                             const struct pager_read *r);

/* What the management API shows of stream 'q''s files. */
void slog_files(const struct queue *q, uint64_t *segments, uint64_t *bytes,
                uint64_t *segment_size);

/*
 * Recovery, before the I/O thread starts: read every stream's log back
 * into its queue ('queues': every kept queue by store id), delete the
 * logs of queues that are gone, and after an unclean stop ('clean'
 * false) mark each log's newest segment (seglog_mark_crashed). Returns
 * the messages restored; '*corrupt' and '*torn' count what was skipped.
 */
uint64_t slogs_recover(const struct hmap *queues, bool clean,
                       uint64_t *corrupt, uint64_t *torn);

/* A message's fields as a record holds them after its id (journal.h:
 * str exchange, str routing key, str content header, u64 body length,
 * the body): store.c's, for both kinds of record. */
void store_put_fields(struct wbuf *b, const struct msg *m);
/* The J_SEG record each segment opens with, the journal's and a
 * stream's (seglog.h's header). */
void store_seg_header(struct wbuf *b, uint64_t seg);
/* The monotonic 32-bit born of something that happened at wall-clock
 * 'wall', now being 'now' (monotonic) and 'now_wall'. */
uint32_t store_born_at(uint64_t now, uint64_t now_wall, uint64_t wall);

#endif
