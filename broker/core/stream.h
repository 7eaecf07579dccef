/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * A stream's consumer names (docs/streams.md, "Named consumers"): a
 * consumer that gives x-stream-consumer-name (or LavinMQ's
 * x-stream-automatic-offset-tracking, which names it by its tag) starts
 * where the name's committed offset is, and moves it as it acks. The
 * committed offset is the ack watermark: the lowest offset delivered to
 * a consumer of the name and not yet settled, or, with none
 * outstanding, the offset its consumers read next; never the read
 * position. The store keeps the names (store_offsets_save), written at
 * most STREAM_SAVE_MS after they change, so that a crash resumes a name
 * at most that far back and never past a message not acked.
 *
 * Bounds: stream.consumer_names_max names a stream (a new name beyond
 * it is refused, 406); a name unused for stream.offset_retention is
 * forgotten.
 */
#ifndef ROOST_BROKER_CORE_STREAM_H
#define ROOST_BROKER_CORE_STREAM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct amqp_table;
struct queue;

/* How long a changed name waits before it is written. */
#define STREAM_SAVE_MS 100

/* What the management API and the metrics show of one name. */
struct stream_name_info {
    const char *name;
    size_t len;
    uint64_t offset;            /* committed */
    uint64_t lag;               /* messages from it to the end */
    uint64_t updated_wall;      /* wall-clock ms */
    uint32_t consumers;         /* attached under the name */
};

/* What the management API, the metrics and roostctl stream_status show
 * of a stream as a whole. */
struct stream_info {
    uint64_t first_offset;      /* the oldest kept (= next_offset if none) */
    uint64_t next_offset;       /* the one the next append takes */
    uint64_t messages, bytes;   /* kept; body bytes */
    int64_t first_timestamp, last_timestamp;    /* wall ms; -1: empty */
    uint64_t retention_dropped; /* let go by x-max-age, x-max-length-bytes */
    uint64_t names;             /* consumer names kept */
    /* its own segment files (0 without a store that keeps them), their
     * bytes on disk, and the size a segment takes before the next */
    uint64_t segments, disk_bytes, segment_size;
    /* messages filtering consumers passed over unread (the filter
     * index said none of theirs was there) */
    uint64_t filter_skipped;
};
void stream_info(const struct queue *q, struct stream_info *out);

/* The hash of x-stream-filter-value in a message's 'headers' (false if
 * it has none), as the filter index keeps it. */
bool stream_filter_hash(const struct amqp_table *headers, uint64_t *hash);

/* Recovery: the message at 'offset' of stream 'q' had such a value
 * ('has'; its 'hash'), for the filter index. In offset order. */
void stream_restore_filter(struct queue *q, uint64_t offset, bool has,
                           uint64_t hash);

/* Recovery: stream 'q' had name 'name' at 'offset', last changed at
 * 'updated_wall'. */
void stream_restore_offset(struct queue *q, const char *name, size_t len,
                           uint64_t offset, uint64_t updated_wall);

/* Each name of stream 'q' that is kept, in no order. */
void stream_foreach_name(const struct queue *q,
                         void (*each)(const struct stream_name_info *ni,
                                      void *arg),
                         void *arg);

/* Where "first", "last" and a wall-clock time (ms; the first message
 * appended at or after it) are in stream 'q'; an offset clamped to what
 * is kept. */
enum stream_pos { STREAM_FIRST, STREAM_LAST, STREAM_AT_OFFSET, STREAM_AT_TIME };
uint64_t stream_position(const struct queue *q, enum stream_pos how,
                         uint64_t value);

enum stream_name_result {
    STREAM_NAME_OK,
    STREAM_NAME_ATTACHED,       /* a consumer of the name is attached */
    STREAM_NAME_UNKNOWN,        /* no such name */
    STREAM_NAME_FULL,           /* stream.consumer_names_max reached */
};

/* Set name 'name''s committed offset (made if new), or forget it:
 * refused while a consumer of it is attached. */
enum stream_name_result stream_set_offset(struct queue *q, const char *name,
                                          size_t len, uint64_t offset);
enum stream_name_result stream_forget_name(struct queue *q, const char *name,
                                           size_t len);

/* Write every stream's changed names now (a clean stop). */
void stream_flush_offsets(void);

#endif
