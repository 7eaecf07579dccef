/*
 * SPDX-License-Identifier: Apache-2.0
 * Queue arguments: types and bounds as RabbitMQ checks them, with its
 * texts ("invalid arg 'x-message-ttl' for queue 'q' in vhost '/':
 * {value_negative,-1}").
 */
#include "broker/core/qargs.h"

#include "broker/core/queue.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/lib/util.h"

const char *const qargs_equivalence_keys[] = {
    "x-message-ttl", "x-expires", "x-max-length", "x-max-length-bytes",
    "x-overflow", "x-dead-letter-exchange", "x-dead-letter-routing-key",
    "x-single-active-consumer", "x-queue-mode", "x-queue-version",
    "x-queue-master-locator", "x-delivery-limit", "x-max-priority",
    "x-requeue-delay", "x-requeue-delay-max", "x-queue-leader-locator",
    "x-max-age", "x-stream-max-segment-size-bytes", "x-initial-cluster-size",
    NULL,
};

/* The name RabbitMQ gives a field's type in "expected integer, got T". */
static const char *
qargs_kind_name(enum amqp_field_kind k)
{
    switch (k) {
    case AMQP_FIELD_LONGSTR: return "longstr";
    case AMQP_FIELD_BOOL: return "bool";
    case AMQP_FIELD_TABLE: return "table";
    case AMQP_FIELD_ARRAY: return "array";
    case AMQP_FIELD_FLOAT: return "float";
    case AMQP_FIELD_DOUBLE: return "double";
    case AMQP_FIELD_BYTES: return "binary";
    case AMQP_FIELD_VOID: return "void";
    case AMQP_FIELD_DECIMAL: return "decimal";
    case AMQP_FIELD_TIMESTAMP: return "timestamp";
    default: return "integer";
    }
}

const char *
qargs_type_atom(enum amqp_field_kind k)
{
    switch (k) {
    case AMQP_FIELD_I8: return "byte";
    case AMQP_FIELD_I16: return "short";
    case AMQP_FIELD_I32: return "signedint";
    case AMQP_FIELD_I64: case AMQP_FIELD_L64: return "long";
    default: return qargs_kind_name(k);
    }
}

static enum qargs_result
invalid(char *err, size_t errlen, struct amqp_bytes key, const char *what,
        const char *why)
{
    snprintf(err, errlen, "invalid arg '%.*s' for %s: %s", (int)key.len,
             (const char *)key.ptr, what, why);
    return QARGS_INVALID;
}

/* RabbitMQ's "{unacceptable_type,T}" for a value of the wrong kind. */
static enum qargs_result
unacceptable(char *err, size_t errlen, struct amqp_bytes key, const char *what,
             enum amqp_field_kind kind)
{
    char why[64];
    snprintf(why, sizeof(why), "{unacceptable_type,%s}",
             qargs_type_atom(kind));
    return invalid(err, errlen, key, what, why);
}

enum qargs_result
qargs_int(const struct amqp_field *v, struct amqp_bytes k, const char *what,
          int64_t *out, char *err, size_t errlen)
{
    char why[96];
    if (field_as_int(v, out))
        return QARGS_OK;
    snprintf(why, sizeof(why), "\"expected integer, got %s\"",
             qargs_kind_name(v->kind));
    return invalid(err, errlen, k, what, why);
}

/* A non-negative integer (or positive, with 'positive'). */
static enum qargs_result
int_arg(const struct amqp_field *v, struct amqp_bytes k, const char *what,
        bool positive, int64_t *out, char *err, size_t errlen)
{
    char why[96];
    if (qargs_int(v, k, what, out, err, errlen) != QARGS_OK)
        return QARGS_INVALID;
    if (*out < 0) {
        snprintf(why, sizeof(why), "{value_negative,%lld}", (long long)*out);
        return invalid(err, errlen, k, what, why);
    }
    if (positive && *out == 0)
        return invalid(err, errlen, k, what, "{value_zero,0}");
    return QARGS_OK;
}

static enum qargs_result
str_arg(const struct amqp_field *v, struct amqp_bytes k, const char *what,
        char **out, char *err, size_t errlen)
{
    char why[96];
    if (v->kind != AMQP_FIELD_LONGSTR) {
        snprintf(why, sizeof(why), "\"expected longstr, got %s\"",
                 qargs_kind_name(v->kind));
        return invalid(err, errlen, k, what, why);
    }
    if (v->v.str.len > 255)
        return invalid(err, errlen, k, what, "{too_long}");
    free(*out);
    *out = xstrndup(v->v.str.ptr, v->v.str.len);
    return QARGS_OK;
}

/* A bool, as RabbitMQ's check_bool_arg wants it. */
static enum qargs_result
bool_arg(const struct amqp_field *v, struct amqp_bytes k, const char *what,
         bool *out, char *err, size_t errlen)
{
    if (v->kind != AMQP_FIELD_BOOL)
        return unacceptable(err, errlen, k, what, v->kind);
    *out = v->v.b;
    return QARGS_OK;
}

/* x-queue-version: 1 or 2, as RabbitMQ 3.10 accepts them; the two
 * index formats are RabbitMQ's own and behave alike in Roost. */
static enum qargs_result
queue_version_arg(const struct amqp_field *v, struct amqp_bytes k,
                  const char *what, char *err, size_t errlen)
{
    char why[300];
    int64_t n;
    if (qargs_int(v, k, what, &n, err, errlen) != QARGS_OK)
        return QARGS_INVALID;
    if (n != 1 && n != 2) {
        snprintf(why, sizeof(why), "\"unsupported queue version '%lld'\"",
                 (long long)n);
        return invalid(err, errlen, k, what, why);
    }
    return QARGS_OK;
}

/* x-queue-master-locator: where a mirrored queue's master goes; one
 * node leaves no choice, so any of RabbitMQ's values is accepted. */
static const char *const master_locators[] = {
    "min-masters", "client-local", "random", NULL,
};

/* A string that must be one of 'values'; otherwise the "unsupported"
 * text with the value, or (NULL) the atom 'bad'. */
static enum qargs_result
one_of_arg(const struct amqp_field *v, struct amqp_bytes k, const char *what,
           const char *const *values, const char *unsupported,
           const char *bad, char *err, size_t errlen)
{
    char why[400];
    if (v->kind != AMQP_FIELD_LONGSTR)
        return unacceptable(err, errlen, k, what, v->kind);
    for (const char *const *p = values; *p != NULL; p++)
        if (amqp_bytes_eq(v->v.str, *p))
            return QARGS_OK;
    if (unsupported == NULL)
        return invalid(err, errlen, k, what, bad);
    snprintf(why, sizeof(why), "\"%s '%.*s'\"", unsupported,
             (int)(v->v.str.len > 200 ? 200 : v->v.str.len),
             (const char *)v->v.str.ptr);
    return invalid(err, errlen, k, what, why);
}

/* x-dead-letter-strategy, a quorum queue's: either is the same on one
 * node, where dead-lettering never loses a message to a failover. */
static const char *const dlx_strategies[] = {
    "at-most-once", "at-least-once", NULL,
};

/* Where a leader goes; one node leaves no choice. */
const char *const qargs_leader_locators[] = {
    "client-local", "balanced", "random", "least-leaders", NULL,
};

/* What a stream refuses, whatever the value (RabbitMQ 3.10.8's
 * rabbit_stream_queue:capabilities/0 and check_arguments_key/4). */
static const char *const stream_refused[] = {
    "x-max-length", "x-message-ttl", "x-expires", "x-dead-letter-exchange",
    "x-dead-letter-routing-key", "x-overflow", "x-max-priority",
    "x-single-active-consumer", "x-queue-mode", "x-queue-master-locator",
    "x-delivery-limit", "x-quorum-initial-group-size",
    "x-max-in-memory-length", "x-max-in-memory-bytes",
    "x-dead-letter-strategy", "x-queue-version", NULL,
};

/*
 * x-max-age: a longstr of a positive integer and one unit (Y M D h m s;
 * Y 365 days, M 30), RabbitMQ's grammar; into ms, saturating. What
 * RabbitMQ 3.10.8 crashes on (no leading digit: '', 'h', '-1h') is
 * invalid_max_age here too.
 */
static enum qargs_result
max_age_arg(const struct amqp_field *v, struct amqp_bytes k, const char *what,
            int64_t *out, char *err, size_t errlen)
{
    if (v->kind != AMQP_FIELD_LONGSTR)
        return unacceptable(err, errlen, k, what, v->kind);
    if (qargs_parse_age(v->v.str, out) != 0)
        return invalid(err, errlen, k, what, "invalid_max_age");
    return QARGS_OK;
}

int
qargs_parse_age(struct amqp_bytes s, int64_t *ms)
{
    static const struct { char unit; int64_t ms; } units[] = {
        { 'Y', 365LL * 86400000 }, { 'M', 30LL * 86400000 },
        { 'D', 86400000 }, { 'h', 3600000 }, { 'm', 60000 }, { 's', 1000 },
    };
    if (s.len < 2)
        return -1;
    int64_t n = 0;
    for (size_t i = 0; i + 1 < s.len; i++) {
        if (s.ptr[i] < '0' || s.ptr[i] > '9')
            return -1;
        int d = s.ptr[i] - '0';
        n = n > (INT64_MAX - d) / 10 ? INT64_MAX : n * 10 + d;
    }
    if (n <= 0)
        return -1;
    for (size_t u = 0; u < NELEMS(units); u++)
        if (s.ptr[s.len - 1] == units[u].unit) {
            *ms = n > INT64_MAX / units[u].ms ? INT64_MAX : n * units[u].ms;
            return 0;
        }
    return -1;
}

const struct queue_ops *
qargs_type_of(struct amqp_table args)
{
    struct amqp_field v;
    if (!table_get(args, "x-queue-type", &v))
        return &queue_classic_ops;
    return v.kind == AMQP_FIELD_LONGSTR ? queue_ops_find(v.v.str) : NULL;
}

bool
qargs_is_stream(struct amqp_table args)
{
    const struct queue_ops *t = qargs_type_of(args);
    return t != NULL && t->log;
}

const char *
qargs_stream_refused_property(bool durable, bool exclusive, bool auto_delete)
{
    return auto_delete ? "auto-delete"
           : exclusive ? "exclusive-owner"
           : !durable ? "non-durable" : NULL;
}

/* A quorum queue's integer arguments that change nothing on one node. */
static const char *const quorum_int_args[] = {
    "x-quorum-initial-group-size", "x-max-in-memory-length",
    "x-max-in-memory-bytes", NULL,
};

/* The entry of 'keys' that 'k' is, or NULL. */
static const char *
key_in(struct amqp_bytes k, const char *const *keys)
{
    for (; *keys != NULL; keys++)
        if (amqp_bytes_eq(k, *keys))
            return *keys;
    return NULL;
}

/* x-queue-type: a type Roost has (classic, quorum, stream), anything
 * else RabbitMQ's 406. */
static enum qargs_result
queue_type_arg(const struct amqp_field *v, struct amqp_bytes k,
               const char *what, const struct queue_ops **out, char *err,
               size_t errlen)
{
    char why[300];
    if (v->kind == AMQP_FIELD_LONGSTR &&
        (*out = queue_ops_find(v->v.str)) != NULL)
        return QARGS_OK;
    if (v->kind != AMQP_FIELD_LONGSTR)
        return unacceptable(err, errlen, k, what, v->kind);
    snprintf(why, sizeof(why), "\"unsupported queue type '%.*s'\"",
             (int)(v->v.str.len > 200 ? 200 : v->v.str.len),
             (const char *)v->v.str.ptr);
    return invalid(err, errlen, k, what, why);
}

/* x-queue-mode: "default" or "lazy", as RabbitMQ 3.10 accepts them.
 * Both behave alike in Roost (docs/compatibility.md, "Durability"). */
static const char *const queue_modes[] = { "default", "lazy", NULL };

enum qargs_result
qargs_parse(struct amqp_table args, const char *what, struct qargs *out,
            char *err, size_t errlen)
{
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field v;
    enum qargs_result r = QARGS_OK;
    const char *name;

    memset(out, 0, sizeof(*out));
    out->message_ttl = -1;
    out->max_length = -1;
    out->max_length_bytes = -1;
    out->consumer_timeout = -1;
    out->max_priority = -1;
    out->max_age_ms = -1;
    out->segment_size = -1;
    out->stream = qargs_is_stream(args);
    table_iter_init(&it, args);
    while (r == QARGS_OK && table_next(&it, &k, &v)) {
        if (out->stream && (name = key_in(k, stream_refused)) != NULL) {
            /* refused whatever its value, once the others check out */
            if (out->not_stream == NULL)
                out->not_stream = name;
        } else if (amqp_bytes_eq(k, "x-max-age")) {
            out->stream_only = "x-max-age";
            r = max_age_arg(&v, k, what, &out->max_age_ms, err, errlen);
        } else if (amqp_bytes_eq(k, "x-stream-max-segment-size-bytes")) {
            out->stream_only = "x-stream-max-segment-size-bytes";
            r = int_arg(&v, k, what, false, &out->segment_size, err, errlen);
            if (r == QARGS_OK && out->segment_size > QARGS_STREAM_SEGMENT_MAX) {
                snprintf(err, errlen, "Exceeded max value for "
                         "x-stream-max-segment-size-bytes");
                r = QARGS_INVALID;
            }
        } else if (amqp_bytes_eq(k, "x-initial-cluster-size")) {
            int64_t unused;
            out->stream_only = "x-initial-cluster-size";
            r = int_arg(&v, k, what, true, &unused, err, errlen);
        } else if (amqp_bytes_eq(k, "x-queue-leader-locator")) {
            out->not_classic = "x-queue-leader-locator";
            r = one_of_arg(&v, k, what, qargs_leader_locators, NULL,
                           "invalid_queue_locator_arg", err, errlen);
        } else if (amqp_bytes_eq(k, "x-message-ttl"))
            r = int_arg(&v, k, what, false, &out->message_ttl, err, errlen);
        else if (amqp_bytes_eq(k, "x-expires"))
            r = int_arg(&v, k, what, true, &out->expires, err, errlen);
        else if (amqp_bytes_eq(k, "x-max-length"))
            r = int_arg(&v, k, what, false, &out->max_length, err, errlen);
        else if (amqp_bytes_eq(k, "x-max-length-bytes"))
            r = int_arg(&v, k, what, false, &out->max_length_bytes, err,
                        errlen);
        else if (amqp_bytes_eq(k, "x-consumer-timeout"))
            /* RabbitMQ 3.12 takes any value here unchecked; its later
             * releases check a non-negative integer, as Roost does. */
            r = int_arg(&v, k, what, false, &out->consumer_timeout, err,
                        errlen);
        else if (amqp_bytes_eq(k, "x-queue-mode")) {
            out->classic_only = "x-queue-mode";
            r = one_of_arg(&v, k, what, queue_modes, "unsupported queue mode",
                           NULL, err, errlen);
        } else if (amqp_bytes_eq(k, "x-queue-version")) {
            out->classic_only = "x-queue-version";
            r = queue_version_arg(&v, k, what, err, errlen);
        } else if (amqp_bytes_eq(k, "x-queue-master-locator")) {
            out->classic_only = "x-queue-master-locator";
            r = one_of_arg(&v, k, what, master_locators,
                           "unsupported queue master locator", NULL, err,
                           errlen);
        }
        else if (amqp_bytes_eq(k, "x-delivery-limit")) {
            /* Any integer, as RabbitMQ 3.10's quorum queues take it (a
             * negative one lets no return through). */
            out->delivery_limited = true;
            r = qargs_int(&v, k, what, &out->delivery_limit, err, errlen);
        }
        else if (amqp_bytes_eq(k, "x-requeue-delay"))
            r = int_arg(&v, k, what, false, &out->requeue_delay, err, errlen);
        else if (amqp_bytes_eq(k, "x-requeue-delay-max"))
            r = int_arg(&v, k, what, false, &out->requeue_delay_max, err,
                        errlen);
        else if (amqp_bytes_eq(k, "x-single-active-consumer"))
            r = bool_arg(&v, k, what, &out->single_active, err, errlen);
        else if (amqp_bytes_eq(k, "x-dead-letter-exchange"))
            r = str_arg(&v, k, what, &out->dlx, err, errlen);
        else if (amqp_bytes_eq(k, "x-dead-letter-routing-key"))
            r = str_arg(&v, k, what, &out->dlrk, err, errlen);
        else if (amqp_bytes_eq(k, "x-overflow")) {
            if (v.kind == AMQP_FIELD_LONGSTR && amqp_bytes_eq(v.v.str, "drop-head"))
                out->overflow = OVERFLOW_DROP_HEAD;
            else if (v.kind == AMQP_FIELD_LONGSTR &&
                     amqp_bytes_eq(v.v.str, "reject-publish"))
                out->overflow = OVERFLOW_REJECT_PUBLISH;
            else if (v.kind == AMQP_FIELD_LONGSTR &&
                     amqp_bytes_eq(v.v.str, "reject-publish-dlx"))
                out->overflow = OVERFLOW_REJECT_PUBLISH_DLX;
            else
                r = invalid(err, errlen, k, what,
                            "invalid_overflow");
        } else if (amqp_bytes_eq(k, "x-queue-type")) {
            r = queue_type_arg(&v, k, what, &out->type, err, errlen);
        } else if (amqp_bytes_eq(k, "x-dead-letter-strategy")) {
            out->quorum_only = "x-dead-letter-strategy";
            r = one_of_arg(&v, k, what, dlx_strategies, NULL,
                           "invalid_dlx_strategy", err, errlen);
        } else if ((name = key_in(k, quorum_int_args)) != NULL) {
            /* One node: nothing to size, all in memory as it fits. */
            int64_t unused;
            out->quorum_only = name;
            r = int_arg(&v, k, what, false, &unused, err, errlen);
        } else if (amqp_bytes_eq(k, "x-max-priority")) {
            out->classic_only = "x-max-priority";
            r = int_arg(&v, k, what, false, &out->max_priority, err, errlen);
            if (r == QARGS_OK && out->max_priority > 255) {
                char why[64];
                snprintf(why, sizeof(why), "{max_value_exceeded,%lld}",
                         (long long)out->max_priority);
                r = invalid(err, errlen, k, what, why);
            }
        } else if (k.len >= 2 && memcmp(k.ptr, "x-", 2) == 0 &&
                   !out->stream) {
            /* A stream ignores what it does not know, as RabbitMQ's. */
            snprintf(err, errlen, "queue argument '%.*s' is not implemented",
                     (int)k.len, (const char *)k.ptr);
            r = QARGS_NOT_IMPLEMENTED;
        }
    }
    /* What one type of queue does not take, as RabbitMQ 3.10 refuses
     * it: "invalid arg 'K' for queue 'Q' in vhost 'V' of queue type T". */
    const struct queue_ops *type = out->type ? out->type : &queue_classic_ops;
    const char *wrong = out->stream ? out->not_stream : type->refused_arg(out);
    if (r == QARGS_OK && wrong != NULL) {
        snprintf(err, errlen, "invalid arg '%s' for %s of queue type %s",
                 wrong, what,
                 out->stream ? "rabbit_stream_queue" : type->rabbit_name);
        r = QARGS_INVALID;
    }
    if (r == QARGS_OK && out->dlrk && !out->dlx) {
        /* As RabbitMQ: a routing key without an exchange is meaningless. */
        snprintf(err, errlen, "invalid arg 'x-dead-letter-routing-key' for "
                 "%s: routing_key_but_no_dlx_defined", what);
        r = QARGS_INVALID;
    }
    if (r != QARGS_OK)
        qargs_free(out);
    return r;
}

void
qargs_free(struct qargs *a)
{
    free(a->dlx);
    free(a->dlrk);
    a->dlx = a->dlrk = NULL;
}

int64_t
qargs_parse_expiration(struct amqp_bytes s)
{
    int64_t v = 0;
    if (s.len == 0 || s.len > 18)
        return -2;
    for (size_t i = 0; i < s.len; i++) {
        if (s.ptr[i] < '0' || s.ptr[i] > '9')
            return -2;
        v = v * 10 + (s.ptr[i] - '0');
    }
    return v;
}
