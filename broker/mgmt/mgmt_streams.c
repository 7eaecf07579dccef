/*
 * SPDX-License-Identifier: Apache-2.0
 * A stream's consumer names (broker/core/stream.h) in the management
 * API: listed in the queue's object as consumer_offsets, and one at a
 * time at /api/queues/VHOST/Q/offsets/NAME: GET shows it, PUT sets it
 * ({"offset": N, "first", "last" or "next"} or {"timestamp": ms}),
 * DELETE forgets it; both refused (409) while a consumer of the name is
 * attached. Offsets are data, not definitions: not exported.
 */
#include <stdio.h>
#include <string.h>

#include "broker/core/queue.h"
#include "broker/core/stream.h"
#include "broker/core/vhost.h"
#include "broker/mgmt/mgmt_int.h"

static json_t *
name_json(const struct stream_name_info *ni)
{
    return json_pack("{s:s%, s:I, s:I, s:I, s:I}", "name", ni->name, ni->len,
                     "offset", (json_int_t)ni->offset, "lag",
                     (json_int_t)ni->lag, "consumers",
                     (json_int_t)ni->consumers, "updated_at",
                     (json_int_t)ni->updated_wall);
}

static void
add_name(const struct stream_name_info *ni, void *arg)
{
    json_array_append_new(arg, name_json(ni));
}

static json_t *
int_or_null(bool some, int64_t v)
{
    return some ? json_integer((json_int_t)v) : json_null();
}

json_t *
mgmt_stream_json(const struct queue *q)
{
    struct stream_info si;
    stream_info(q, &si);
    bool some = si.messages > 0;
    return json_pack("{s:I, s:o, s:o, s:o, s:I, s:I, s:I, s:I, s:I, s:I, "
                     "s:I, s:I}",
                     "first_offset", (json_int_t)si.first_offset,
                     "last_offset", int_or_null(some,
                                                (int64_t)si.next_offset - 1),
                     "first_timestamp", int_or_null(some, si.first_timestamp),
                     "last_timestamp", int_or_null(some, si.last_timestamp),
                     "next_offset", (json_int_t)si.next_offset,
                     "bytes", (json_int_t)si.bytes, "retention_dropped",
                     (json_int_t)si.retention_dropped, "consumer_names",
                     (json_int_t)si.names, "segments",
                     (json_int_t)si.segments, "segment_size",
                     (json_int_t)si.segment_size, "disk_bytes",
                     (json_int_t)si.disk_bytes, "filter_skipped",
                     (json_int_t)si.filter_skipped);
}

void
mgmt_stream_consumer_json(json_t *o, const struct consumer *c)
{
    json_object_set_new(o, "offset", json_integer((json_int_t)c->offset));
    json_object_set_new(o, "lag", json_integer((json_int_t)(c->q->next_seq -
                                                            c->offset)));
}

json_t *
mgmt_stream_offsets_json(const struct queue *q)
{
    json_t *a = json_array();
    stream_foreach_name(q, add_name, a);
    return a;
}

struct find {
    const char *name;
    json_t *found;
};

static void
find_name(const struct stream_name_info *ni, void *arg)
{
    struct find *f = arg;
    if (ni->len == strlen(f->name) && memcmp(ni->name, f->name, ni->len) == 0)
        f->found = name_json(ni);
}

/* Where a PUT's body puts the name; false after a 400. */
static bool
parse_position(struct mgmt_req *r, const struct queue *q, json_t *o,
               uint64_t *out)
{
    json_t *off = json_object_get(o, "offset");
    json_t *ts = json_object_get(o, "timestamp");

    if ((off == NULL) == (ts == NULL)) {
        mgmt_bad_request(r, "give one of \"offset\" (an integer, \"first\", "
                         "\"last\" or \"next\") and \"timestamp\" (ms)");
        return false;
    }
    if (ts != NULL) {
        if (!json_is_integer(ts) || json_integer_value(ts) < 0) {
            mgmt_bad_request(r, "\"timestamp\" must be milliseconds since "
                             "the epoch");
            return false;
        }
        *out = stream_position(q, STREAM_AT_TIME,
                               (uint64_t)json_integer_value(ts));
        return true;
    }
    const char *s = json_string_value(off);
    if (json_is_integer(off) && json_integer_value(off) >= 0)
        *out = stream_position(q, STREAM_AT_OFFSET,
                               (uint64_t)json_integer_value(off));
    else if (s && strcmp(s, "first") == 0)
        *out = stream_position(q, STREAM_FIRST, 0);
    else if (s && strcmp(s, "last") == 0)
        *out = stream_position(q, STREAM_LAST, 0);
    else if (s && strcmp(s, "next") == 0)
        *out = q->next_seq;
    else {
        mgmt_bad_request(r, "\"offset\" must be a non-negative integer, "
                         "\"first\", \"last\" or \"next\"");
        return false;
    }
    return true;
}

void
mgmt_stream_offset(struct mgmt_req *r)
{
    struct queue *q = mgmt_path_queue(r);
    const char *name = r->arg[2];
    size_t len = strlen(name);
    char text[800];

    if (q == NULL || !mgmt_allowed(r, q, PERM_READ, "queue", q->name))
        return;
    if (!q->ops->log) {
        mgmt_bad_request(r, "queue '%.200s' in vhost '%.200s' is not a "
                         "stream", q->name, q->vh->name);
        return;
    }
    if (len == 0 || len > 255) {
        mgmt_bad_request(r, "a consumer name is 1 to 255 bytes");
        return;
    }
    if (r->method == EVHTTP_REQ_GET) {
        struct find f = { name, NULL };
        stream_foreach_name(q, find_name, &f);
        if (f.found)
            mgmt_reply(r, 200, f.found);
        else
            mgmt_not_found(r);
        return;
    }
    enum stream_name_result res;
    if (r->method == EVHTTP_REQ_PUT) {
        json_t *o;
        uint64_t off;
        if (mgmt_body_object(r, &o) != 0)
            return;
        bool ok = parse_position(r, q, o, &off);
        json_decref(o);
        if (!ok)
            return;
        res = stream_set_offset(q, name, len, off);
    } else {
        res = stream_forget_name(q, name, len);
    }
    switch (res) {
    case STREAM_NAME_OK:
        mgmt_reply(r, 204, NULL);
        break;
    case STREAM_NAME_UNKNOWN:
        mgmt_not_found(r);
        break;
    case STREAM_NAME_ATTACHED:
        snprintf(text, sizeof(text), "consumer name '%.255s' of stream "
                 "'%.200s' in vhost '%.200s' has a consumer attached; cancel "
                 "it first", name, q->name, q->vh->name);
        mgmt_error(r, 409, "conflict", text);
        break;
    case STREAM_NAME_FULL:
        snprintf(text, sizeof(text), "stream '%.200s' in vhost '%.200s' "
                 "keeps as many consumer names as it may "
                 "(stream.consumer_names_max)", q->name, q->vh->name);
        mgmt_bad_request(r, "%s", text);
        break;
    }
}
