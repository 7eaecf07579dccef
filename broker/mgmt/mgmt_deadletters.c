/*
 * SPDX-License-Identifier: Apache-2.0
 * Roost's dead-letter tools in the management API (docs/dead-letters.md):
 *
 *   GET    /api/queues/V/Q/browse        ready messages, not consumed
 *   GET    /api/queues/V/Q/dead-letters  the same, those with x-death
 *   POST   /api/queues/V/Q/replay        start a replay (dlreplay.h)
 *   GET    /api/replays, /api/replays/ID the replays kept
 *   DELETE /api/replays/ID               cancel one
 *
 * A browse takes a snapshot of the entries it answers (queue_peek_new):
 * messages in memory are referenced at once, paged ones are read by the
 * pager thread into copies of their own (queue_peek_load), and the
 * request is answered when they are back, so the event loop never reads
 * the disk and the queue is not touched. What a request may cost is
 * bounded: at most BROWSE_COUNT_MAX messages, and a filtered request
 * (search, dead-letters) looks at no more than SCAN_MAX entries and
 * SCAN_MAX_BYTES of bodies from its offset; it says how far it looked in
 * the X-Roost-Scanned and X-Roost-Scan-Limit headers.
 */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/queue.h>

#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <jansson.h>

#include "amqp/props.h"
#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/deadletter.h"
#include "broker/core/dlreplay.h"
#include "broker/core/exchange.h"
#include "broker/core/msg.h"
#include "broker/core/perm.h"
#include "broker/core/queue.h"
#include "broker/core/vhost.h"
#include "broker/defs/defs_json.h"
#include "broker/lib/util.h"
#include "broker/mgmt/mgmt_int.h"

#define BROWSE_COUNT_DEFAULT 50
#define BROWSE_COUNT_MAX 1000
/* Body bytes one unfiltered browse answers at most (at least one
 * message, whatever its size). */
#define BROWSE_MAX_BYTES (64u * 1024 * 1024)
#define SCAN_MAX 10000
#define SCAN_MAX_BYTES (64u * 1024 * 1024)
#define REPLAY_COUNT_MAX 1000000000000ull
/* Browses waiting for the pager at once, each holding up to
 * SCAN_MAX_BYTES of messages read: beyond, 503 (try again). */
#define WAITING_MAX 8

/* What a browse asks for. */
struct browse {
    struct mgmt_req *req;       /* deferred while reads are under way */
    struct queue_peek *peek;
    uint64_t offset;
    size_t count;
    bool base64;                /* encoding=base64 (else auto) */
    bool truncate;
    uint64_t truncate_at;
    bool dead_letters;          /* only messages with x-death, and their
                                 * first death's keys */
    const char *message_id, *correlation_id, *header, *value;
    char *strings;              /* the filters' copies, for a deferred one */
    TAILQ_ENTRY(browse) link;
};

static TAILQ_HEAD(, browse) waiting = TAILQ_HEAD_INITIALIZER(waiting);
static size_t nwaiting;

/* ---- parameters ---- */

/* A decimal number in [0, max]. */
static bool
parse_u64(const char *s, uint64_t max, uint64_t *out)
{
    uint64_t v = 0;

    if (s == NULL || *s == '\0')
        return false;
    for (; *s; s++) {
        if (*s < '0' || *s > '9')
            return false;
        if (v > (max - (uint64_t)(*s - '0')) / 10)
            return false;
        v = v * 10 + (uint64_t)(*s - '0');
    }
    *out = v;
    return true;
}

struct queue *
mgmt_path_queue(struct mgmt_req *r)
{
    struct vhost *vh = broker_vhost(r->arg[0], strlen(r->arg[0]));
    struct queue *q = vh ? vhost_queue(vh, amqp_cstr(r->arg[1])) : NULL;
    if (q == NULL || q->deleted)
        mgmt_not_found(r);
    return q;
}

bool
mgmt_allowed(struct mgmt_req *r, const struct queue *q, enum perm_kind kind,
        const char *what, const char *name)
{
    const struct perm *p = perm_get(q->vh->name, r->user->name);
    char reason[600];

    if (p != NULL && perm_allows(p, kind, name, strlen(name)))
        return true;
    snprintf(reason, sizeof(reason), "access to %s '%.200s' in vhost "
             "'%.200s' refused for user '%.100s'", what, name, q->vh->name,
             r->user->name);
    mgmt_error(r, 401, "not_authorised", reason);
    return false;
}

static const char *
query(struct mgmt_req *r, const char *key)
{
    return evhttp_find_header(&r->query, key);
}

/* Read the query into 'b'; 400 and false on a bad parameter. */
static bool
parse_browse(struct mgmt_req *r, struct browse *b)
{
    const char *s;
    uint64_t v;

    b->count = BROWSE_COUNT_DEFAULT;
    if ((s = query(r, "offset")) != NULL &&
        !parse_u64(s, UINT64_C(1) << 62, &b->offset)) {
        mgmt_bad_request(r, "offset must be a whole number");
        return false;
    }
    if ((s = query(r, "count")) != NULL) {
        if (!parse_u64(s, UINT64_MAX, &v) || v == 0 || v > BROWSE_COUNT_MAX) {
            mgmt_bad_request(r, "count must be a whole number from 1 to %d",
                             BROWSE_COUNT_MAX);
            return false;
        }
        b->count = (size_t)v;
    }
    if ((s = query(r, "encoding")) != NULL) {
        if (strcmp(s, "base64") != 0 && strcmp(s, "auto") != 0) {
            mgmt_bad_request(r, "encoding must be auto or base64");
            return false;
        }
        b->base64 = strcmp(s, "base64") == 0;
    }
    if ((s = query(r, "truncate")) != NULL) {
        if (!parse_u64(s, MSG_BODY_MAX, &b->truncate_at)) {
            mgmt_bad_request(r, "truncate must be a whole number of bytes");
            return false;
        }
        b->truncate = true;
    }
    b->message_id = query(r, "message_id");
    b->correlation_id = query(r, "correlation_id");
    b->header = query(r, "header");
    b->value = query(r, "value");
    if ((b->header == NULL) != (b->value == NULL)) {
        mgmt_bad_request(r, "header and value go together");
        return false;
    }
    if (b->header != NULL && b->header[0] == '\0') {
        mgmt_bad_request(r, "header must name a header");
        return false;
    }
    return true;
}

static bool
is_filtered(const struct browse *b)
{
    return b->dead_letters || b->message_id || b->correlation_id ||
           b->header;
}

/* ---- one message as JSON ---- */

static json_t *
bytes_json(struct amqp_bytes s)
{
    return defs_json_str(s.ptr, s.len);
}

/* The payload, as RabbitMQ's /get gives it (mgmt_payload_json). */
static void
payload_json(json_t *o, const struct msg *m, const struct browse *b)
{
    uint8_t *body = xmalloc(m->body_len ? m->body_len : 1);

    msg_body_copy(m, body);
    mgmt_payload_json(o, body, m->body_len,
                      b->truncate ? (long)b->truncate_at : -1, b->base64);
    free(body);
}

static bool
prop_is(const struct amqp_basic_props *p, uint16_t flag,
        struct amqp_bytes v, const char *want)
{
    return (p->flags & flag) && v.len == strlen(want) &&
           memcmp(v.ptr, want, v.len) == 0;
}

/* Whether the message passes the browse's filters. */
static bool
matches(const struct browse *b, const struct content_header *h,
        const struct msg *m)
{
    const struct amqp_basic_props *p = &h->props;
    struct deadletter_death d;

    if (b->dead_letters && !deadletter_first_death(m, &d))
        return false;
    if (b->message_id && !prop_is(p, AMQP_BASIC_MESSAGE_ID_FLAG,
                                  p->message_id, b->message_id))
        return false;
    if (b->correlation_id && !prop_is(p, AMQP_BASIC_CORRELATION_ID_FLAG,
                                      p->correlation_id, b->correlation_id))
        return false;
    if (b->header) {
        struct amqp_field f;
        struct amqp_bytes v;
        char buf[32];
        if (!table_get(msg_headers(m), b->header, &f) ||
            !field_text(&f, buf, sizeof(buf), &v) ||
            v.len != strlen(b->value) || memcmp(v.ptr, b->value, v.len) != 0)
            return false;
    }
    return true;
}

static json_t *
entry_json(const struct browse *b, const struct queue_peek_entry *pe,
           const struct content_header *h)
{
    const struct msg *m = pe->m;
    json_t *o = json_object();

    json_object_set_new(o, "position", json_integer((json_int_t)pe->position));
    json_object_set_new(o, "exchange",
                        defs_json_str(msg_exchange(m), msg_exchange_len(m)));
    json_object_set_new(o, "routing_key",
                        defs_json_str(msg_rkey(m), msg_rkey_len(m)));
    json_object_set_new(o, "redelivered", json_boolean(pe->redelivered));
    json_object_set_new(o, "delivery_count", json_integer(pe->deliveries));
    json_object_set_new(o, "properties", mgmt_props_json(&h->props));
    payload_json(o, m, b);
    struct deadletter_death d;
    if (b->dead_letters && deadletter_first_death(m, &d)) {
        json_object_set_new(o, "reason", bytes_json(d.reason));
        json_object_set_new(o, "original_exchange", bytes_json(d.exchange));
        json_object_set_new(o, "original_routing_key",
                            d.has_rkey ? bytes_json(d.rkey) : json_null());
        json_object_set_new(o, "original_queue", bytes_json(d.queue));
        json_object_set_new(o, "death_count",
                            json_integer((json_int_t)d.count));
    }
    return o;
}

/* ---- answering ---- */

static void
browse_answer(struct mgmt_req *r, struct browse *b)
{
    struct queue_peek *p = b->peek;
    json_t *arr = json_array();
    size_t scanned = 0;
    char num[32];

    for (size_t i = 0; i < p->n && json_array_size(arr) < b->count; i++) {
        const struct queue_peek_entry *pe = &p->es[i];
        struct content_header h;
        scanned++;
        /* No message: it left the queue while its read was under way. */
        if (pe->m == NULL ||
            content_header_decode(msg_hdr(pe->m), msg_hdr_len(pe->m), &h) !=
                AMQP_OK)
            continue;
        if (matches(b, &h, pe->m))
            json_array_append_new(arr, entry_json(b, pe, &h));
    }
    if (is_filtered(b)) {
        snprintf(num, sizeof(num), "%zu", scanned);
        mgmt_add_header(r, "X-Roost-Scanned", num);
        snprintf(num, sizeof(num), "%d", SCAN_MAX);
        mgmt_add_header(r, "X-Roost-Scan-Limit", num);
    }
    mgmt_reply(r, 200, arr);
}

static void
browse_free(struct browse *b)
{
    queue_peek_free(b->peek);
    free(b->strings);
    free(b);
}

static void
browse_loaded(struct queue_peek *p, void *arg)
{
    struct browse *b = arg;
    (void)p;

    TAILQ_REMOVE(&waiting, b, link);
    nwaiting--;
    browse_answer(b->req, b);
    mgmt_req_free(b->req);
    browse_free(b);
}

/* The filters outlive the request's query once it is deferred: copy
 * them into one allocation. */
static void
keep_strings(struct browse *b)
{
    const char **f[] = { &b->message_id, &b->correlation_id, &b->header,
                         &b->value };
    size_t len = 0, at = 0;

    for (size_t i = 0; i < NELEMS(f); i++)
        len += *f[i] ? strlen(*f[i]) + 1 : 0;
    b->strings = xmalloc(len + 1);
    for (size_t i = 0; i < NELEMS(f); i++) {
        if (*f[i] == NULL)
            continue;
        size_t n = strlen(*f[i]) + 1;
        memcpy(b->strings + at, *f[i], n);
        *f[i] = b->strings + at;
        at += n;
    }
}

static void
browse(struct mgmt_req *r, bool dead_letters)
{
    struct queue *q = mgmt_path_queue(r);
    if (q == NULL || !mgmt_allowed(r, q, PERM_READ, "queue", q->name))
        return;
    struct browse *b = xcalloc(1, sizeof(*b));
    b->dead_letters = dead_letters;
    if (!parse_browse(r, b)) {
        free(b);
        return;
    }
    if (nwaiting >= WAITING_MAX) {
        mgmt_error(r, 503, "unavailable", "too many browses are waiting for "
                   "the disk; try again");
        free(b);
        return;
    }
    if (is_filtered(b))
        b->peek = queue_peek_new(q, b->offset, SCAN_MAX, SCAN_MAX_BYTES);
    else
        b->peek = queue_peek_new(q, b->offset, b->count, BROWSE_MAX_BYTES);
    if (!queue_peek_load(b->peek, browse_loaded, b)) {
        browse_answer(r, b);
        browse_free(b);
        return;
    }
    keep_strings(b);
    b->req = mgmt_defer(r);
    TAILQ_INSERT_TAIL(&waiting, b, link);
    nwaiting++;
}

void
mgmt_queue_browse(struct mgmt_req *r)
{
    browse(r, false);
}

void
mgmt_queue_dead_letters(struct mgmt_req *r)
{
    browse(r, true);
}

void
mgmt_deadletters_stop(void)
{
    struct browse *b;
    while ((b = TAILQ_FIRST(&waiting)) != NULL) {
        TAILQ_REMOVE(&waiting, b, link);
        nwaiting--;
        mgmt_error(b->req, 503, "unavailable", "the broker is stopping");
        mgmt_req_free(b->req);
        browse_free(b);
    }
}

/* ---- replays ---- */

static json_t *
replay_json(const struct dlreplay *d)
{
    json_t *o = json_pack("{s:s, s:o, s:o, s:s, s:I, s:I, s:I, s:I}",
                          "id", d->id, "vhost", mgmt_str(d->vhost),
                          "queue", mgmt_str(d->queue),
                          "state", dlreplay_state_name(d->state),
                          "moved", (json_int_t)d->moved,
                          "skipped", (json_int_t)d->skipped,
                          "total", (json_int_t)d->total,
                          "rate", (json_int_t)d->rate);
    json_object_set_new(o, "exchange",
                        d->exchange ? mgmt_str(d->exchange) : json_null());
    json_object_set_new(o, "routing_key",
                        d->rkey ? mgmt_str(d->rkey) : json_null());
    if (d->error)
        json_object_set_new(o, "error", mgmt_str(d->error));
    return o;
}

/* A JSON integer in [0, max] at 'key' of 'o' into '*out' (kept if the
 * key is absent or null); 400 and false otherwise. */
static bool
body_uint(struct mgmt_req *r, json_t *o, const char *key, uint64_t max,
          uint64_t *out)
{
    json_t *v = json_object_get(o, key);
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (uint64_t)json_integer_value(v) > max) {
        mgmt_bad_request(r, "%s must be a whole number from 0 to %" PRIu64,
                         key, max);
        return false;
    }
    *out = (uint64_t)json_integer_value(v);
    return true;
}

/* A string at 'key' (NULL if absent or null); 400 and false if it is
 * something else. */
static bool
body_str(struct mgmt_req *r, json_t *o, const char *key, const char **out)
{
    json_t *v = json_object_get(o, key);
    *out = NULL;
    if (v == NULL || json_is_null(v))
        return true;
    if (!json_is_string(v) || strlen(json_string_value(v)) > 255) {
        mgmt_bad_request(r, "%s must be a string of at most 255 bytes", key);
        return false;
    }
    *out = json_string_value(v);
    return true;
}

void
mgmt_queue_replay(struct mgmt_req *r)
{
    struct queue *q = mgmt_path_queue(r);
    json_t *o;
    uint64_t rate = DLREPLAY_DEFAULT_RATE, count = 0;
    const char *xname, *rkey;

    if (q == NULL || mgmt_body_object(r, &o) != 0)
        return;
    if (!body_uint(r, o, "rate", DLREPLAY_RATE_MAX, &rate) ||
        !body_uint(r, o, "count", REPLAY_COUNT_MAX, &count) ||
        !body_str(r, o, "exchange", &xname) ||
        !body_str(r, o, "routing_key", &rkey))
        goto out;
    if (json_object_get(o, "count") && !json_is_null(json_object_get(o, "count")) &&
        count == 0) {
        mgmt_bad_request(r, "count must be at least 1 (leave it out for all)");
        goto out;
    }
    /* As in RabbitMQ's paths, amq.default names the default exchange. */
    if (xname && strcmp(xname, "amq.default") == 0)
        xname = "";
    struct exchange *x = xname && xname[0] != '\0'
                             ? vhost_exchange(q->vh, amqp_cstr(xname))
                             : NULL;
    if (xname && xname[0] != '\0' && x == NULL) {
        mgmt_bad_request(r, "no exchange '%s' in vhost '%s'", xname,
                         q->vh->name);
        goto out;
    }
    /* It consumes from the queue and publishes to the exchange. */
    if (!mgmt_allowed(r, q, PERM_READ, "queue", q->name) ||
        (xname && !mgmt_allowed(r, q, PERM_WRITE, "exchange",
                           xname[0] ? xname : "amq.default")))
        goto out;
    /* As basic.publish after the write check (ACCESS_REFUSED): nothing
     * is published to an internal exchange, amq.rabbitmq.trace's
     * firehose events above all. A message whose x-death names one is
     * skipped (dlreplay.c). */
    if (x != NULL && x->internal) {
        char reason[600];
        snprintf(reason, sizeof(reason), "cannot publish to internal "
                 "exchange '%.255s' in vhost '%.255s'", xname, q->vh->name);
        mgmt_error(r, 403, "access_refused", reason);
        goto out;
    }
    enum dlreplay_refusal why;
    struct dlreplay *d = dlreplay_start(q, (uint32_t)rate, count, xname,
                                        rkey, r->user->name, &why);
    if (d == NULL) {
        mgmt_error(r, 409, "conflict", why == DLREPLAY_TOO_MANY
                   ? "too many replays are running (at most 16 at once)"
                   : "a replay of this queue is running");
        goto out;
    }
    mgmt_reply(r, 201, replay_json(d));
out:
    json_decref(o);
}

/* Whether 'u' sees replays of 'vhost': an administrator sees all. */
static bool
sees(const struct user *u, const char *vhost)
{
    return mgmt_is_admin(u) || mgmt_is_login_vhost(u, vhost);
}

struct list_ctx {
    const struct user *u;
    json_t *arr;
};

static void
add_replay(struct dlreplay *d, void *arg)
{
    struct list_ctx *c = arg;
    if (sees(c->u, d->vhost))
        json_array_append_new(c->arr, replay_json(d));
}

void
mgmt_replays(struct mgmt_req *r)
{
    struct list_ctx c = { r->user, json_array() };
    dlreplay_foreach(add_replay, &c);
    mgmt_reply(r, 200, c.arr);
}

void
mgmt_replay(struct mgmt_req *r)
{
    struct dlreplay *d = dlreplay_find(r->arg[0]);

    if (d == NULL || !sees(r->user, d->vhost)) {
        mgmt_not_found(r);
        return;
    }
    if (r->method == EVHTTP_REQ_DELETE) {
        char why[200];
        snprintf(why, sizeof(why), "cancelled by '%.100s'", r->user->name);
        dlreplay_cancel(d, why);
        mgmt_reply(r, 204, NULL);
        return;
    }
    mgmt_reply(r, 200, replay_json(d));
}
