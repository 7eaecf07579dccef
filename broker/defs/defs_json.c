/*
 * SPDX-License-Identifier: Apache-2.0
 * Definitions files (defs_json.h), through jansson.
 *
 * Import is two passes. The first checks every item of the file and
 * builds what applying it needs (argument tables encoded, queue
 * arguments parsed, binding arguments tried on a scratch index of the
 * source's type) into a plan; the second applies the plan and cannot
 * fail. So a file with one bad item changes nothing, and the message
 * names the item ("queues[3]: ...").
 *
 * JSON values become AMQP field values as RabbitMQ converts them:
 * strings 'S', integers 'l', booleans 't', other numbers 'd', null 'V',
 * arrays 'A', objects 'F'. Export converts back; every integer type
 * becomes a JSON integer, and byte arrays are written as strings.
 */
#include "broker/defs/defs_json.h"

#include <errno.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "amqp/table.h"
#include "broker/core/auth.h"
#include "broker/core/broker.h"
#include "broker/core/defs.h"
#include "broker/core/delayed.h"
#include "broker/core/exchange.h"
#include "broker/core/perm.h"
#include "broker/core/policy.h"
#include "broker/core/qargs.h"
#include "broker/core/queue.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"
#include "broker/lib/version.h"
#include "broker/store/store_defs.h"
#include "tls/hash.h"

/* Names are shortstrs on the wire. */
#define NAME_MAX_LEN 255

/* The sections Roost reads but does not import yet. */
static const struct {
    const char *key, *one, *many;
} unsupported[] = {
    { "topic_permissions", "topic permission", "topic permissions" },
    /* other than vhost-limits and operator_policy */
    { "parameters", "parameter", "parameters" },
    { "global_parameters", "global parameter", "global parameters" },
};

/* ---- the plan ---- */

struct p_user {
    const char *name;           /* borrowed from the JSON */
    uint8_t alg;
    uint8_t hash[4 + 64];
    size_t hash_len;
    char tags[512];
};

struct p_exchange {
    const char *vhost, *name;   /* borrowed from the JSON */
    const struct exchange_ops *ops;
    bool durable, auto_delete, internal;
    bool skip;                  /* amq.* or the default, or a repeat */
    uint8_t *args_buf;
    struct amqp_table args;
};

struct p_queue {
    const char *vhost, *name;
    bool durable, auto_delete;
    bool skip;                  /* a repeat in the file */
    uint8_t *args_buf;
    struct amqp_table args;
    struct qargs qa;            /* queue_new takes it over */
};

struct p_binding {
    const char *vhost, *source, *dest, *key;
    bool to_queue;
    uint8_t *args_buf;
    struct amqp_table args;
};

struct p_perm {
    const char *user, *vhost;   /* borrowed from the JSON */
    const char *pattern[PERM_KINDS];
};

/* A policy ("policies") or operator policy (a parameter of component
 * "operator_policy"); the values are borrowed from the JSON. */
struct p_policy {
    const char *vhost, *name;
    enum policy_kind kind;
    json_t *pattern, *apply_to, *priority, *definition;
};

/* A vhost's limits from a "vhost-limits" parameter: -2 if not given. */
struct p_limits {
    const char *vhost;
    int64_t max_connections, max_queues;
};

struct plan {
    const char *path;
    char *err;
    size_t errlen;
    const char **vhosts;
    int8_t *vtracing;           /* each one's "tracing": 1, 0, -1: none */
    size_t nvhosts;
    struct p_exchange *xs;
    size_t nxs;
    struct p_queue *qs;
    size_t nqs;
    struct p_binding *bs;
    size_t nbs;
    struct p_user *us;
    size_t nus;
    struct p_perm *ps;
    size_t nps;
    struct p_limits *ls;
    size_t nls;
    struct p_policy *pols;
    size_t npols;
    /* what the file defines, by "vhost\0name" */
    struct hmap vnames, xnames, qnames;
    /* a vhost as vhost_new makes it: the predeclared exchanges that a
     * vhost the file creates will have */
    struct vhost *proto;
    size_t repeats, reserved;
    size_t n_unsupported[NELEMS(unsupported)];
};

struct counts {
    size_t vhosts, exchanges, queues, bindings, users, perms, limits, kept;
    size_t policies;
};

static int fail(struct plan *p, const char *section, size_t i,
                const char *fmt, ...) LOG_PRINTF(4, 5);

/* Write "path: section[i]: message" to p->err; always -1. */
static int
fail(struct plan *p, const char *section, size_t i, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (section)
        snprintf(p->err, p->errlen, "%s: %s[%zu]: %s", p->path, section, i,
                 msg);
    else
        snprintf(p->err, p->errlen, "%s: %s", p->path, msg);
    return -1;
}

/* A name for a message; names come from a file an operator wrote, but
 * may still hold anything. */
static const char *
esc(char *buf, size_t cap, const char *s)
{
    return log_escape(buf, cap, s, strlen(s));
}

/* "queue 'q' in vhost '/'", as RabbitMQ names an object, escaped. */
static const char *
obj_what(char *buf, size_t cap, const char *kind, const char *vhost,
         const char *name)
{
    char n[300], v[300];
    snprintf(buf, cap, "%s '%s' in vhost '%s'", kind, esc(n, sizeof(n), name),
             esc(v, sizeof(v), vhost));
    return buf;
}

/* The key of an object in p's maps: "vhost\0name". 'out' holds 512. */
static size_t
obj_key(char *out, const char *vhost, const char *name)
{
    size_t a = strlen(vhost), b = strlen(name);
    memcpy(out, vhost, a);
    out[a] = '\0';
    memcpy(out + a + 1, name, b);
    return a + 1 + b;
}

/* The string 'key' of 'o' (at most NAME_MAX_LEN bytes), or 'def' when it
 * is absent; a NULL 'def' makes it required. */
static int
get_str(struct plan *p, const char *section, size_t i, json_t *o,
        const char *key, const char *def, const char **out)
{
    json_t *v = json_object_get(o, key);

    if (v == NULL) {
        if (def == NULL)
            return fail(p, section, i, "\"%s\" is missing", key);
        *out = def;
        return 0;
    }
    if (!json_is_string(v))
        return fail(p, section, i, "\"%s\" must be a string", key);
    if (json_string_length(v) > NAME_MAX_LEN)
        return fail(p, section, i, "\"%s\" is longer than %d bytes", key,
                    NAME_MAX_LEN);
    *out = json_string_value(v);
    return 0;
}

static int
get_bool(struct plan *p, const char *section, size_t i, json_t *o,
         const char *key, bool def, bool *out)
{
    json_t *v = json_object_get(o, key);

    if (v == NULL) {
        *out = def;
        return 0;
    }
    if (!json_is_boolean(v))
        return fail(p, section, i, "\"%s\" must be true or false", key);
    *out = json_is_true(v);
    return 0;
}

/* The vhost an item names ("vhost", or the default vhost): it must exist
 * or be in "vhosts". */
static int
get_vhost(struct plan *p, const char *section, size_t i, json_t *o,
          const char **out)
{
    char e[300];

    if (get_str(p, section, i, o, "vhost", broker.cfg.default_vhost, out) != 0)
        return -1;
    if (broker_vhost(*out, strlen(*out)) == NULL &&
        hmap_get_str(&p->vnames, *out) == NULL)
        return fail(p, section, i, "vhost '%s' does not exist and is not in "
                    "\"vhosts\"", esc(e, sizeof(e), *out));
    return 0;
}

/* ---- JSON to field tables ---- */

static int put_value(struct wire_wr *w, json_t *v, unsigned depth);

/* Entries of 'obj' as a table with its length prefix, at 'depth'. -1:
 * nested too deep, or a key longer than a shortstr. */
static int
put_table(struct wire_wr *w, json_t *obj, unsigned depth)
{
    const char *key;
    json_t *v;

    if (depth > TABLE_MAX_DEPTH)
        return -1;
    size_t mark = table_begin(w);
    json_object_foreach(obj, key, v) {
        if (table_put_key(w, amqp_cstr(key)) != AMQP_OK ||
            put_value(w, v, depth) != 0)
            return -1;
    }
    table_end(w, mark);
    return 0;
}

static int
put_value(struct wire_wr *w, json_t *v, unsigned depth)
{
    struct amqp_field f;
    size_t i, mark;
    json_t *e;

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        wire_put_u8(w, AMQP_FIELD_TABLE);
        return put_table(w, v, depth + 1);
    case JSON_ARRAY:
        if (depth + 1 > TABLE_MAX_DEPTH)
            return -1;
        wire_put_u8(w, AMQP_FIELD_ARRAY);
        mark = table_begin(w);
        json_array_foreach(v, i, e)
            if (put_value(w, e, depth + 1) != 0)
                return -1;
        table_end(w, mark);
        return 0;
    case JSON_STRING:
        f = (struct amqp_field){
            .kind = AMQP_FIELD_LONGSTR,
            .v.str = { (const uint8_t *)json_string_value(v),
                       json_string_length(v) } };
        break;
    case JSON_INTEGER:
        f = (struct amqp_field){ .kind = AMQP_FIELD_I64,
                                 .v.i = (int64_t)json_integer_value(v) };
        break;
    case JSON_REAL:
        f = (struct amqp_field){ .kind = AMQP_FIELD_DOUBLE,
                                 .v.d = json_real_value(v) };
        break;
    case JSON_TRUE:
    case JSON_FALSE:
        f = (struct amqp_field){ .kind = AMQP_FIELD_BOOL,
                                 .v.b = json_is_true(v) };
        break;
    default:
        f = (struct amqp_field){ .kind = AMQP_FIELD_VOID };
        break;
    }
    field_put(w, &f);
    return 0;
}

int
defs_json_put_table(struct wire_wr *w, json_t *obj)
{
    return put_table(w, obj, 1);
}

/* "arguments" of an item as an encoded table in a new buffer ('*buf',
 * which 't' borrows). Absent or null: an empty table. */
static int
get_args(struct plan *p, const char *section, size_t i, json_t *o,
         uint8_t **buf, struct amqp_table *t)
{
    json_t *args = json_object_get(o, "arguments");
    struct wire_wr w;

    *buf = NULL;
    *t = (struct amqp_table){ NULL, 0 };
    if (args == NULL || json_is_null(args))
        return 0;
    if (!json_is_object(args))
        return fail(p, section, i, "\"arguments\" must be an object");
    /* Once to size it, once to write it. */
    wire_wr_init(&w, NULL, 0);
    if (put_table(&w, args, 1) != 0)
        return fail(p, section, i, "\"arguments\" nest deeper than %d levels "
                    "or have a key longer than 255 bytes", TABLE_MAX_DEPTH);
    if (w.len - 4 > TABLE_MAX_SIZE)
        return fail(p, section, i, "\"arguments\" take more than %u bytes",
                    TABLE_MAX_SIZE);
    size_t len = w.len;
    *buf = xmalloc(len);
    wire_wr_init(&w, *buf, len);
    (void)put_table(&w, args, 1);
    *t = (struct amqp_table){ *buf + 4, len - 4 };
    if (table_validate(t->ptr, t->len, 1) != AMQP_OK)
        fatalx("definitions: an argument table we encoded does not validate");
    return 0;
}

/* ---- checking the file into a plan ---- */

/* The array 'key' of the root, or NULL (with *n = 0) when absent. */
static int
get_section(struct plan *p, json_t *root, const char *key, json_t **out,
            size_t *n)
{
    json_t *v = json_object_get(root, key);

    *out = NULL;
    *n = 0;
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v))
        return fail(p, NULL, 0, "\"%s\" must be an array", key);
    *out = v;
    *n = json_array_size(v);
    return 0;
}

static int
item_object(struct plan *p, const char *section, size_t i, json_t *o)
{
    return json_is_object(o) ? 0 : fail(p, section, i, "must be an object");
}

static int
check_vhosts(struct plan *p, json_t *arr, size_t n)
{
    p->vhosts = xcalloc(n + 1, sizeof(*p->vhosts));
    p->vtracing = xcalloc(n + 1, sizeof(*p->vtracing));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *name;
        if (item_object(p, "vhosts", i, o) != 0 ||
            get_str(p, "vhosts", i, o, "name", NULL, &name) != 0)
            return -1;
        if (name[0] == '\0')
            return fail(p, "vhosts", i, "\"name\" must not be empty");
        /* As rabbit_definitions:add_vhost: "tracing" switches the
         * firehose of the vhost, new or not (trace.h). */
        json_t *t = json_object_get(o, "tracing");
        if (t != NULL && !json_is_boolean(t))
            return fail(p, "vhosts", i, "\"tracing\" must be true or false");
        if (hmap_get_str(&p->vnames, name)) {
            p->repeats++;
            continue;
        }
        hmap_put(&p->vnames, name, strlen(name), (void *)name);
        p->vtracing[p->nvhosts] = t == NULL ? -1 : json_is_true(t);
        p->vhosts[p->nvhosts++] = name;
    }
    return 0;
}

static int
check_exchanges(struct plan *p, json_t *arr, size_t n)
{
    char key[512], e[300], what[700];
    const char *type;

    p->xs = xcalloc(n + 1, sizeof(*p->xs));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        struct p_exchange *x = &p->xs[p->nxs++];
        if (item_object(p, "exchanges", i, o) != 0 ||
            get_str(p, "exchanges", i, o, "name", NULL, &x->name) != 0 ||
            get_vhost(p, "exchanges", i, o, &x->vhost) != 0)
            return -1;
        /* The default exchange and the amq.* ones are the broker's own
         * (RabbitMQ's exports leave them out; its plugins' amq.rabbitmq.*
         * ones mean nothing here). */
        if (x->name[0] == '\0' || strncmp(x->name, "amq.", 4) == 0) {
            x->skip = true;
            p->reserved++;
            continue;
        }
        if (get_str(p, "exchanges", i, o, "type", NULL, &type) != 0 ||
            get_bool(p, "exchanges", i, o, "durable", true, &x->durable) != 0 ||
            get_bool(p, "exchanges", i, o, "auto_delete", false,
                     &x->auto_delete) != 0 ||
            get_bool(p, "exchanges", i, o, "internal", false,
                     &x->internal) != 0)
            return -1;
        if ((x->ops = exchange_ops_find(amqp_cstr(type))) == NULL)
            return fail(p, "exchanges", i, "%s: unknown exchange type '%s'",
                        obj_what(what, sizeof(what), "exchange", x->vhost,
                                 x->name), esc(e, sizeof(e), type));
        if (get_args(p, "exchanges", i, o, &x->args_buf, &x->args) != 0)
            return -1;
        char xerr[400];
        if (x->ops->check_args &&
            x->ops->check_args(x->args, xerr, sizeof(xerr)) != 0)
            return fail(p, "exchanges", i, "%s: %s",
                        obj_what(what, sizeof(what), "exchange", x->vhost,
                                 x->name), xerr);
        size_t klen = obj_key(key, x->vhost, x->name);
        if (hmap_get(&p->xnames, key, klen)) {
            x->skip = true;
            p->repeats++;
            continue;
        }
        hmap_put(&p->xnames, key, klen, x);
    }
    return 0;
}

static int
check_queues(struct plan *p, json_t *arr, size_t n)
{
    char key[512], e[300], what[700], msg[1024];
    const char *type;

    p->qs = xcalloc(n + 1, sizeof(*p->qs));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        struct p_queue *q = &p->qs[p->nqs++];
        if (item_object(p, "queues", i, o) != 0 ||
            get_str(p, "queues", i, o, "name", NULL, &q->name) != 0 ||
            get_vhost(p, "queues", i, o, &q->vhost) != 0 ||
            get_bool(p, "queues", i, o, "durable", true, &q->durable) != 0 ||
            get_bool(p, "queues", i, o, "auto_delete", false,
                     &q->auto_delete) != 0 ||
            get_str(p, "queues", i, o, "type", "classic", &type) != 0)
            return -1;
        if (q->name[0] == '\0')
            return fail(p, "queues", i, "\"name\" must not be empty");
        obj_what(what, sizeof(what), "queue", q->vhost, q->name);
        if (strcmp(type, "classic") != 0)
            return fail(p, "queues", i, "%s: queue type '%s' is not "
                        "implemented; only 'classic'", what,
                        esc(e, sizeof(e), type));
        if (get_args(p, "queues", i, o, &q->args_buf, &q->args) != 0)
            return -1;
        if (qargs_parse(q->args, what, &q->qa, msg, sizeof(msg)) != QARGS_OK)
            return strstr(msg, what) ? fail(p, "queues", i, "%s", msg)
                                     : fail(p, "queues", i, "%s: %s", what,
                                            msg);
        size_t klen = obj_key(key, q->vhost, q->name);
        if (hmap_get(&p->qnames, key, klen)) {
            q->skip = true;
            p->repeats++;
            continue;
        }
        hmap_put(&p->qnames, key, klen, q);
    }
    return 0;
}

/* The type of exchange 'name' once the plan is applied, or NULL if there
 * will be none. What exists already wins: import keeps it. */
static const struct exchange_ops *
exchange_type(struct plan *p, const char *vhost, const char *name)
{
    struct vhost *vh = broker_vhost(vhost, strlen(vhost));
    struct exchange *x;
    char key[512];

    if (vh == NULL)
        vh = p->proto;
    if ((x = vhost_exchange(vh, amqp_cstr(name))) != NULL)
        return x->ops;
    struct p_exchange *px = hmap_get(&p->xnames, key, obj_key(key, vhost,
                                                               name));
    return px ? px->ops : NULL;
}

static bool
has_queue(struct plan *p, const char *vhost, const char *name)
{
    struct vhost *vh = broker_vhost(vhost, strlen(vhost));
    char key[512];

    if (vh && vhost_queue(vh, amqp_cstr(name)))
        return true;
    return hmap_get(&p->qnames, key, obj_key(key, vhost, name)) != NULL;
}

/* Whether an exchange of type 'ops' takes a binding with these
 * arguments (only headers has rules): tried on a scratch index. */
static int
try_binding(const struct exchange_ops *ops, const char *key,
            struct amqp_table args, char *msg, size_t msglen)
{
    struct binding b = { .key = (char *)key, .key_len = strlen(key),
                         .args = args };
    void *index = ops->create();
    int rc = ops->add(index, &b, msg, msglen);

    if (rc == 0)
        ops->remove(index, &b);
    ops->destroy(index);
    return rc;
}

static int
check_bindings(struct plan *p, json_t *arr, size_t n)
{
    char e1[300], e2[300], what[700], msg[512];
    const char *dtype;

    p->bs = xcalloc(n + 1, sizeof(*p->bs));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        struct p_binding *b = &p->bs[p->nbs++];
        if (item_object(p, "bindings", i, o) != 0 ||
            get_vhost(p, "bindings", i, o, &b->vhost) != 0 ||
            get_str(p, "bindings", i, o, "source", NULL, &b->source) != 0 ||
            get_str(p, "bindings", i, o, "destination", NULL, &b->dest) != 0 ||
            get_str(p, "bindings", i, o, "destination_type", NULL,
                    &dtype) != 0 ||
            get_str(p, "bindings", i, o, "routing_key", "", &b->key) != 0)
            return -1;
        if (strcmp(dtype, "queue") == 0)
            b->to_queue = true;
        else if (strcmp(dtype, "exchange") != 0)
            return fail(p, "bindings", i, "\"destination_type\" must be "
                        "\"queue\" or \"exchange\", not '%s'",
                        esc(e1, sizeof(e1), dtype));
        if (b->source[0] == '\0' || (!b->to_queue && b->dest[0] == '\0'))
            return fail(p, "bindings", i, "operation not permitted on the "
                        "default exchange");
        esc(e1, sizeof(e1), b->source);
        esc(e2, sizeof(e2), b->dest);
        const struct exchange_ops *ops = exchange_type(p, b->vhost, b->source);
        if (ops == NULL)
            return fail(p, "bindings", i, "source %s does not exist and is "
                        "not in \"exchanges\"",
                        obj_what(what, sizeof(what), "exchange", b->vhost,
                                 b->source));
        if (b->to_queue ? !has_queue(p, b->vhost, b->dest)
                        : exchange_type(p, b->vhost, b->dest) == NULL)
            return fail(p, "bindings", i, "destination %s does not exist and "
                        "is not in \"%s\"",
                        obj_what(what, sizeof(what), dtype, b->vhost, b->dest),
                        b->to_queue ? "queues" : "exchanges");
        if (get_args(p, "bindings", i, o, &b->args_buf, &b->args) != 0)
            return -1;
        if (try_binding(ops, b->key, b->args, msg, sizeof(msg)) != 0)
            return fail(p, "bindings", i, "binding from '%s' to '%s': %s", e1,
                        e2, msg);
    }
    return 0;
}

/* RabbitMQ reads a file without "hashing_algorithm" as MD5 if it came
 * from RabbitMQ 3.0 to 3.5 (which hashed so), else as SHA-256. */
static uint8_t
default_alg(json_t *root)
{
    json_t *v = json_object_get(root, "rabbit_version");
    const char *ver = json_is_string(v) ? json_string_value(v) : "";
    if (strncmp(ver, "3.", 2) == 0 && ver[2] >= '0' && ver[2] <= '5' &&
        ver[3] == '.')
        return TLS_MD5;
    return TLS_SHA256;
}

/* "tags": "a,b" (older exports) or ["a", "b"] (3.10's), into 'out'. */
static int
get_tags(struct plan *p, size_t i, json_t *o, char *out, size_t cap)
{
    char err[200];
    if (defs_json_parse_tags(json_object_get(o, "tags"), out, cap, err,
                             sizeof(err)) != 0)
        return fail(p, "users", i, "%s", err);
    return 0;
}

static int
check_users(struct plan *p, json_t *root, json_t *arr, size_t n)
{
    uint8_t def = default_alg(root);

    p->us = xcalloc(n + 1, sizeof(*p->us));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        struct p_user *u = &p->us[p->nus];
        const char *hash, *alg = NULL;
        if (item_object(p, "users", i, o) != 0 ||
            get_str(p, "users", i, o, "name", NULL, &u->name) != 0 ||
            get_str(p, "users", i, o, "password_hash", "", &hash) != 0 ||
            get_str(p, "users", i, o, "hashing_algorithm", "", &alg) != 0 ||
            get_tags(p, i, o, u->tags, sizeof(u->tags)) != 0)
            return -1;
        if (u->name[0] == '\0')
            return fail(p, "users", i, "\"name\" must not be empty");
        u->alg = def;
        if (alg[0] != '\0' && auth_alg_parse(alg, &u->alg) != 0)
            return fail(p, "users", i, "\"hashing_algorithm\" '%s' is not "
                        "rabbit_password_hashing_sha256, _sha512 or _md5",
                        alg);
        if (hash[0] != '\0') {
            int len = tls_unbase64(hash, u->hash, sizeof(u->hash));
            size_t want = 4 + tls_digest_len((enum tls_digest)u->alg);
            if (len < 0 || (size_t)len != want)
                return fail(p, "users", i, "\"password_hash\" is not the "
                            "base64 of a %s hash (%zu bytes)",
                            auth_alg_name(u->alg), want);
            u->hash_len = (size_t)len;
        }
        p->nus++;
    }
    return 0;
}

/* Whether the user is in the file or in the broker. */
static bool
user_known(const struct plan *p, const char *name)
{
    for (size_t i = 0; i < p->nus; i++)
        if (strcmp(p->us[i].name, name) == 0)
            return true;
    return auth_user(name) != NULL;
}

static int
check_permissions(struct plan *p, json_t *arr, size_t n)
{
    char e[512];

    p->ps = xcalloc(n + 1, sizeof(*p->ps));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        struct p_perm *pp = &p->ps[p->nps];
        if (item_object(p, "permissions", i, o) != 0 ||
            get_str(p, "permissions", i, o, "user", NULL, &pp->user) != 0 ||
            get_vhost(p, "permissions", i, o, &pp->vhost) != 0)
            return -1;
        for (int k = 0; k < PERM_KINDS; k++) {
            if (get_str(p, "permissions", i, o, perm_kind_name[k], NULL,
                        &pp->pattern[k]) != 0)
                return -1;
            if (perm_pattern_ok(pp->pattern[k], e, sizeof(e)) != 0)
                return fail(p, "permissions", i, "\"%s\": %s",
                            perm_kind_name[k], e);
        }
        if (!user_known(p, pp->user))
            return fail(p, "permissions", i, "no user '%s'", pp->user);
        p->nps++;
    }
    return 0;
}

/* A limit in a "vhost-limits" value: a number, -2 when absent. */
static int
get_limit(struct plan *p, size_t i, json_t *value, const char *key,
          int64_t *out)
{
    json_t *v = json_object_get(value, key);
    *out = -2;
    if (v == NULL)
        return 0;
    if (!json_is_integer(v))
        return fail(p, "parameters", i, "\"%s\" must be an integer", key);
    *out = json_integer_value(v) < 0 ? -1 : json_integer_value(v);
    return 0;
}

/* A policy of 'kind' from 'o' (a "policies" item, or an operator
 * policy's "value"), named 'name' in 'vhost', checked as policy_set
 * will check it. */
static int
check_policy(struct plan *p, const char *section, size_t i, json_t *o,
             enum policy_kind kind, const char *vhost, const char *name)
{
    static const char *const required[] = { "pattern", "definition" };
    char err[2048];

    for (size_t k = 0; k < NELEMS(required); k++)
        if (json_object_get(o, required[k]) == NULL)
            return fail(p, section, i, "\"%s\" is missing", required[k]);
    struct p_policy *pp = &p->pols[p->npols];
    pp->vhost = vhost;
    pp->name = name;
    pp->kind = kind;
    pp->pattern = json_object_get(o, "pattern");
    pp->apply_to = json_object_get(o, "apply-to");
    pp->priority = json_object_get(o, "priority");
    pp->definition = json_object_get(o, "definition");
    if (policy_check(kind, pp->pattern, pp->apply_to, pp->priority,
                     pp->definition, err, sizeof(err)) != 0) {
        /* One line for the reasons, without the last newline. */
        for (char *c = err; *c; c++)
            if (*c == '\n')
                *c = c[1] ? ';' : '\0';
        return fail(p, section, i, "policy '%s': %s", name, err);
    }
    p->npols++;
    return 0;
}

static int
check_policies(struct plan *p, json_t *arr, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i);
        const char *vhost, *name;
        if (item_object(p, "policies", i, o) != 0 ||
            get_str(p, "policies", i, o, "name", NULL, &name) != 0 ||
            get_vhost(p, "policies", i, o, &vhost) != 0 ||
            check_policy(p, "policies", i, o, POLICY_USER, vhost, name) != 0)
            return -1;
    }
    return 0;
}

/* Parameters: the vhost-limits and operator_policy ones are imported,
 * the others counted. */
static int
check_parameters(struct plan *p, json_t *arr, size_t n)
{
    const char *comp;
    size_t k = 0;

    for (; k < NELEMS(unsupported); k++)
        if (strcmp(unsupported[k].key, "parameters") == 0)
            break;
    p->n_unsupported[k] = 0;
    p->ls = xcalloc(n + 1, sizeof(*p->ls));
    for (size_t i = 0; i < n; i++) {
        json_t *o = json_array_get(arr, i), *value;
        struct p_limits *l = &p->ls[p->nls];
        if (item_object(p, "parameters", i, o) != 0 ||
            get_str(p, "parameters", i, o, "component", "", &comp) != 0)
            return -1;
        if (strcmp(comp, "operator_policy") == 0) {
            const char *vhost, *name;
            value = json_object_get(o, "value");
            if (get_str(p, "parameters", i, o, "name", NULL, &name) != 0 ||
                get_vhost(p, "parameters", i, o, &vhost) != 0)
                return -1;
            if (!json_is_object(value))
                return fail(p, "parameters", i, "\"value\" must be an "
                            "object");
            if (check_policy(p, "parameters", i, value, POLICY_OPERATOR,
                             vhost, name) != 0)
                return -1;
            continue;
        }
        if (strcmp(comp, "vhost-limits") != 0) {
            p->n_unsupported[k]++;
            continue;
        }
        if (get_vhost(p, "parameters", i, o, &l->vhost) != 0)
            return -1;
        value = json_object_get(o, "value");
        if (!json_is_object(value))
            return fail(p, "parameters", i, "\"value\" must be an object");
        if (get_limit(p, i, value, "max-connections",
                      &l->max_connections) != 0 ||
            get_limit(p, i, value, "max-queues", &l->max_queues) != 0)
            return -1;
        p->nls++;
    }
    return 0;
}

static int
check_file(struct plan *p, json_t *root)
{
    json_t *arr;
    size_t n;

    if (!json_is_object(root))
        return fail(p, NULL, 0, "the top level must be a JSON object");
    for (size_t k = 0; k < NELEMS(unsupported); k++)
        if (get_section(p, root, unsupported[k].key, &arr,
                        &p->n_unsupported[k]) != 0)
            return -1;
    /* Room for every policy: the "policies" and operator policies among
     * the "parameters". */
    json_t *pa = json_object_get(root, "policies"),
           *pr = json_object_get(root, "parameters");
    p->pols = xcalloc((json_is_array(pa) ? json_array_size(pa) : 0) +
                      (json_is_array(pr) ? json_array_size(pr) : 0) + 1,
                      sizeof(*p->pols));
    /* In this order: each refers only to what comes before it. */
    if (get_section(p, root, "users", &arr, &n) != 0 ||
        check_users(p, root, arr, n) != 0 ||
        get_section(p, root, "vhosts", &arr, &n) != 0 ||
        check_vhosts(p, arr, n) != 0 ||
        get_section(p, root, "permissions", &arr, &n) != 0 ||
        check_permissions(p, arr, n) != 0 ||
        get_section(p, root, "policies", &arr, &n) != 0 ||
        check_policies(p, arr, n) != 0 ||
        get_section(p, root, "parameters", &arr, &n) != 0 ||
        check_parameters(p, arr, n) != 0 ||
        get_section(p, root, "exchanges", &arr, &n) != 0 ||
        check_exchanges(p, arr, n) != 0 ||
        get_section(p, root, "queues", &arr, &n) != 0 ||
        check_queues(p, arr, n) != 0 ||
        get_section(p, root, "bindings", &arr, &n) != 0 ||
        check_bindings(p, arr, n) != 0)
        return -1;
    return 0;
}

/* ---- applying the plan ---- */

static void
apply_plan(struct plan *p, struct counts *c)
{
    char msg[512];

    /* Users as RabbitMQ imports them: a user the file names is replaced. */
    for (size_t i = 0; i < p->nus; i++) {
        struct p_user *u = &p->us[i];
        if (auth_put_user(u->name, u->alg, u->hash, u->hash_len, u->tags,
                          false, msg, sizeof(msg)) != 0)
            fatalx("definitions: users[%zu]: checked, but refused: %s", i,
                   msg);
        c->users++;
    }
    for (size_t i = 0; i < p->nvhosts; i++) {
        struct vhost *vh = broker_vhost(p->vhosts[i], strlen(p->vhosts[i]));
        if (vh != NULL) {
            c->kept++;
        } else {
            vh = vhost_create(p->vhosts[i], false);
            c->vhosts++;
        }
        if (p->vtracing[i] >= 0)
            trace_set(vh, p->vtracing[i]);
    }
    /* Permissions and limits as RabbitMQ imports them: replaced. */
    for (size_t i = 0; i < p->nps; i++) {
        struct p_perm *pp = &p->ps[i];
        if (perm_set(pp->vhost, pp->user, pp->pattern, false, msg,
                     sizeof(msg)) != 0)
            fatalx("definitions: permissions[%zu]: checked, but refused: %s",
                   i, msg);
        c->perms++;
    }
    for (size_t i = 0; i < p->nls; i++) {
        struct p_limits *l = &p->ls[i];
        struct vhost *vh = broker_vhost(l->vhost, strlen(l->vhost));
        if (l->max_connections != -2)
            vhost_set_limit(vh, VHOST_MAX_CONNECTIONS, l->max_connections,
                            true);
        if (l->max_queues != -2)
            vhost_set_limit(vh, VHOST_MAX_QUEUES, l->max_queues, true);
        defs_changed(DEFS_VHOST_ADDED, vh);
        c->limits++;
    }
    /* Policies as RabbitMQ imports them: replaced. */
    for (size_t i = 0; i < p->npols; i++) {
        struct p_policy *pp = &p->pols[i];
        struct vhost *vh = broker_vhost(pp->vhost, strlen(pp->vhost));
        /* Checked; only a full table (POLICY_MAX) refuses it now. */
        if (policy_set(vh, pp->kind, pp->name, pp->pattern, pp->apply_to,
                       pp->priority, pp->definition, false, msg,
                       sizeof(msg)) < 0)
            log_warnx("definitions: policy '%s' in vhost '%s' not imported: "
                      "%s", pp->name, pp->vhost, msg);
        else
            c->policies++;
    }
    for (size_t i = 0; i < p->nxs; i++) {
        struct p_exchange *px = &p->xs[i];
        if (px->skip)
            continue;
        struct vhost *vh = broker_vhost(px->vhost, strlen(px->vhost));
        if (vhost_exchange(vh, amqp_cstr(px->name))) {
            c->kept++;
            continue;
        }
        vhost_add_exchange(vh, exchange_new(vh, amqp_cstr(px->name), px->ops,
                                            px->durable, px->auto_delete,
                                            px->internal, px->args));
        c->exchanges++;
    }
    for (size_t i = 0; i < p->nqs; i++) {
        struct p_queue *pq = &p->qs[i];
        if (pq->skip)
            continue;
        struct vhost *vh = broker_vhost(pq->vhost, strlen(pq->vhost));
        if (vhost_queue(vh, amqp_cstr(pq->name))) {
            c->kept++;
            continue;
        }
        vhost_add_queue(vh, queue_new(vh, amqp_cstr(pq->name), pq->durable,
                                      false, pq->auto_delete, NULL, pq->args,
                                      &pq->qa));
        c->queues++;
    }
    for (size_t i = 0; i < p->nbs; i++) {
        struct p_binding *pb = &p->bs[i];
        struct vhost *vh = broker_vhost(pb->vhost, strlen(pb->vhost));
        struct exchange *src = vhost_exchange(vh, amqp_cstr(pb->source));
        struct queue *q = pb->to_queue ? vhost_queue(vh, amqp_cstr(pb->dest))
                                       : NULL;
        struct exchange *dx = pb->to_queue
                                  ? NULL
                                  : vhost_exchange(vh, amqp_cstr(pb->dest));
        if (src == NULL || (q == NULL && dx == NULL))
            fatalx("definitions: bindings[%zu]: checked, but its ends are "
                   "gone", i);
        size_t before = src->nbindings;
        if (exchange_bind(src, q, dx, amqp_cstr(pb->key), pb->args, msg,
                          sizeof(msg)) != 0)
            fatalx("definitions: bindings[%zu]: checked, but refused: %s", i,
                   msg);
        if (src->nbindings > before)
            c->bindings++;
        else
            c->kept++;
    }
}

static void
plan_free(struct plan *p)
{
    for (size_t i = 0; i < p->nxs; i++)
        free(p->xs[i].args_buf);
    for (size_t i = 0; i < p->nqs; i++) {
        free(p->qs[i].args_buf);
        qargs_free(&p->qs[i].qa);
    }
    for (size_t i = 0; i < p->nbs; i++)
        free(p->bs[i].args_buf);
    free(p->us);
    free(p->ps);
    free(p->ls);
    free(p->pols);
    free(p->vhosts);
    free(p->vtracing);
    free(p->xs);
    free(p->qs);
    free(p->bs);
    hmap_destroy(&p->vnames);
    hmap_destroy(&p->xnames);
    hmap_destroy(&p->qnames);
    if (p->proto)
        vhost_free(p->proto);
}

static const char *
plural(size_t n, const char *one, const char *many)
{
    return n == 1 ? one : many;
}

static void
log_result(const struct plan *p, const struct counts *c)
{
    char skipped[1024];
    size_t off = 0;

    log_info("definitions: imported %s: %zu %s, %zu %s, %zu vhost "
             "%s and %zu %s set; %zu %s, %zu %s, %zu "
             "%s and %zu %s added; %zu already present and kept; %zu amq.* "
             "or default %s skipped", p->path, c->users,
             plural(c->users, "user", "users"), c->perms,
             plural(c->perms, "permission", "permissions"), c->limits,
             plural(c->limits, "limit", "limits"), c->policies,
             plural(c->policies, "policy", "policies"), c->vhosts,
             plural(c->vhosts, "vhost", "vhosts"), c->exchanges,
             plural(c->exchanges, "exchange", "exchanges"), c->queues,
             plural(c->queues, "queue", "queues"), c->bindings,
             plural(c->bindings, "binding", "bindings"),
             c->kept + p->repeats, p->reserved,
             plural(p->reserved, "exchange", "exchanges"));
    skipped[0] = '\0';
    for (size_t k = 0; k < NELEMS(unsupported); k++) {
        size_t n = p->n_unsupported[k];
        if (n == 0 || off >= sizeof(skipped))
            continue;
        off += (size_t)snprintf(skipped + off, sizeof(skipped) - off,
                                "%s%zu %s", off ? ", " : "", n,
                                plural(n, unsupported[k].one,
                                       unsupported[k].many));
    }
    if (skipped[0])
        log_warnx("definitions: %s: %s not imported (not implemented yet)",
                  p->path, skipped);
}

/* Check all of 'root' (from 'path'), then apply it. */
static int
import_root(const char *path, json_t *root, char *err, size_t errlen)
{
    struct plan p = { .path = path, .err = err, .errlen = errlen };
    struct counts c = { 0 };

    hmap_init(&p.vnames);
    hmap_init(&p.xnames);
    hmap_init(&p.qnames);
    p.proto = vhost_new("");
    int rc = check_file(&p, root);
    if (rc == 0) {
        apply_plan(&p, &c);
        log_result(&p, &c);
    }
    plan_free(&p);
    json_decref(root);
    return rc;
}

int
defs_json_import(const char *path, char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_load_file(path, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        if (jerr.line > 0)
            snprintf(err, errlen, "%s:%d:%d: %s", path, jerr.line,
                     jerr.column, jerr.text);
        else if (strstr(jerr.text, path))
            snprintf(err, errlen, "%s", jerr.text);   /* "unable to open" */
        else
            snprintf(err, errlen, "%s: %s", path, jerr.text);
        return -1;
    }
    return import_root(path, root, err, errlen);
}

int
defs_json_import_text(const char *text, size_t len, const char *name,
                      char *err, size_t errlen)
{
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        snprintf(err, errlen, "%s:%d:%d: %s", name, jerr.line, jerr.column,
                 jerr.text);
        return -1;
    }
    return import_root(name, root, err, errlen);
}

/* ---- export ---- */

/* A JSON string of 'n' bytes. JSON strings are UTF-8 and AMQP names and
 * values need not be: bytes that are not become '?' (rare: clients send
 * UTF-8). */
json_t *
defs_json_str(const void *s, size_t n)
{
    json_t *v = json_stringn(s, n);

    if (v == NULL) {
        char *copy = xmalloc(n + 1);
        for (size_t i = 0; i < n; i++) {
            uint8_t ch = ((const uint8_t *)s)[i];
            copy[i] = ch < 0x80 ? (char)ch : '?';
        }
        v = json_stringn(copy, n);
        free(copy);
    }
    return v;
}

static json_t *
jreal(double d)
{
    json_t *v = json_real(d);
    /* NaN and infinities have no JSON form. */
    return v ? v : json_null();
}

static json_t *
field_to_json(const struct amqp_field *f)
{
    struct table_iter it;
    struct amqp_field e;
    json_t *a;
    double d;
    int64_t i;

    if (field_as_int(f, &i))
        return json_integer((json_int_t)i);
    if (field_as_real(f, &d))
        return jreal(d);
    switch (f->kind) {
    case AMQP_FIELD_BOOL:
        return json_boolean(f->v.b);
    case AMQP_FIELD_TIMESTAMP:
        if (f->v.u > (uint64_t)INT64_MAX)
            return jreal((double)f->v.u);
        return json_integer((json_int_t)f->v.u);
    case AMQP_FIELD_LONGSTR:
    case AMQP_FIELD_BYTES:
        return defs_json_str(f->v.str.ptr, f->v.str.len);
    case AMQP_FIELD_ARRAY:
        a = json_array();
        array_iter_init(&it, f->v.array);
        while (array_next(&it, &e))
            json_array_append_new(a, field_to_json(&e));
        return a;
    case AMQP_FIELD_TABLE:
        return defs_json_table(f->v.table);
    default:
        break;
    }
    return json_null();
}

json_t *
defs_json_table(struct amqp_table t)
{
    json_t *o = json_object();
    struct table_iter it;
    struct amqp_bytes k;
    struct amqp_field v;

    table_iter_init(&it, t);
    while (table_next(&it, &k, &v)) {
        json_t *key = defs_json_str(k.ptr, k.len);
        json_object_set_new(o, json_string_value(key), field_to_json(&v));
        json_decref(key);
    }
    return o;
}

static int
cmp_name(const char *a, size_t al, const char *b, size_t bl)
{
    int c = memcmp(a, b, al < bl ? al : bl);
    return c ? c : (al > bl) - (al < bl);
}

static int
cmp_vhost(const void *a, const void *b)
{
    return strcmp((*(struct vhost *const *)a)->name,
                  (*(struct vhost *const *)b)->name);
}

static int
cmp_exchange(const void *a, const void *b)
{
    const struct exchange *x = *(struct exchange *const *)a;
    const struct exchange *y = *(struct exchange *const *)b;
    return cmp_name(x->name, x->name_len, y->name, y->name_len);
}

static int
cmp_queue(const void *a, const void *b)
{
    const struct queue *x = *(struct queue *const *)a;
    const struct queue *y = *(struct queue *const *)b;
    return cmp_name(x->name, x->name_len, y->name, y->name_len);
}

/* By source, destination type (exchange first), destination, key and
 * arguments. */
static int
cmp_binding(const void *a, const void *b)
{
    const struct binding *x = *(struct binding *const *)a;
    const struct binding *y = *(struct binding *const *)b;
    int c = cmp_name(x->src->name, x->src->name_len, y->src->name,
                     y->src->name_len);
    if (c)
        return c;
    if ((x->q != NULL) != (y->q != NULL))
        return x->q ? 1 : -1;
    c = x->q ? cmp_name(x->q->name, x->q->name_len, y->q->name, y->q->name_len)
             : cmp_name(x->dest_x->name, x->dest_x->name_len, y->dest_x->name,
                        y->dest_x->name_len);
    if (c)
        return c;
    c = cmp_name(x->key, x->key_len, y->key, y->key_len);
    if (c)
        return c;
    return cmp_name((const char *)x->args.ptr, x->args.len,
                    (const char *)y->args.ptr, y->args.len);
}

static int
cmp_user(const void *a, const void *b)
{
    return strcmp((*(const struct user *const *)a)->name,
                  (*(const struct user *const *)b)->name);
}

/* The hmap's values, sorted. */
static void **
sorted_values(const struct hmap *m, int (*cmp)(const void *, const void *),
              size_t *n)
{
    void **v = xmalloc((m->count + 1) * sizeof(*v));
    size_t pos = 0;
    struct hmap_slot *s;

    *n = 0;
    while ((s = hmap_next(m, &pos)) != NULL)
        v[(*n)++] = s->val;
    qsort(v, *n, sizeof(*v), cmp);
    return v;
}

static bool
is_predeclared(const struct exchange *x)
{
    return x->is_default ||
           (x->name_len >= 4 && memcmp(x->name, "amq.", 4) == 0);
}

static void
export_vhost(struct vhost *vh, json_t *queues, json_t *exchanges,
             json_t *bindings)
{
    size_t nx, nq, nb = 0, cap = 16;
    struct exchange **xs = (struct exchange **)sorted_values(&vh->exchanges,
                                                              cmp_exchange,
                                                              &nx);
    struct queue **qs = (struct queue **)sorted_values(&vh->queues, cmp_queue,
                                                       &nq);
    struct binding **bs = xmalloc(cap * sizeof(*bs));
    json_t *o;

    for (size_t i = 0; i < nq; i++) {
        struct queue *q = qs[i];
        if (!store_keeps_queue(q))
            continue;
        o = json_object();
        json_object_set_new(o, "name", defs_json_str(q->name, q->name_len));
        json_object_set_new(o, "vhost", defs_json_str(vh->name, strlen(vh->name)));
        json_object_set_new(o, "durable", json_boolean(q->durable));
        json_object_set_new(o, "auto_delete", json_boolean(q->auto_delete));
        json_object_set_new(o, "arguments", defs_json_table(q->args));
        json_array_append_new(queues, o);
    }
    for (size_t i = 0; i < nx; i++) {
        struct exchange *x = xs[i];
        struct binding *b;
        TAILQ_FOREACH(b, &x->bindings, src_link) {
            if (!store_keeps_binding(b) || x->is_default)
                continue;
            if (nb == cap) {
                cap *= 2;
                bs = xrealloc(bs, cap * sizeof(*bs));
            }
            bs[nb++] = b;
        }
        if (!store_keeps_exchange(x) || is_predeclared(x))
            continue;
        o = json_object();
        json_object_set_new(o, "name", defs_json_str(x->name, x->name_len));
        json_object_set_new(o, "vhost", defs_json_str(vh->name, strlen(vh->name)));
        json_object_set_new(o, "type", json_string(x->ops->type));
        json_object_set_new(o, "durable", json_boolean(x->durable));
        json_object_set_new(o, "auto_delete", json_boolean(x->auto_delete));
        json_object_set_new(o, "internal", json_boolean(x->internal));
        json_object_set_new(o, "arguments", defs_json_table(x->args));
        json_array_append_new(exchanges, o);
    }
    qsort(bs, nb, sizeof(*bs), cmp_binding);
    for (size_t i = 0; i < nb; i++) {
        struct binding *b = bs[i];
        o = json_object();
        json_object_set_new(o, "source", defs_json_str(b->src->name, b->src->name_len));
        json_object_set_new(o, "vhost", defs_json_str(vh->name, strlen(vh->name)));
        json_object_set_new(o, "destination",
                            b->q ? defs_json_str(b->q->name, b->q->name_len)
                                 : defs_json_str(b->dest_x->name, b->dest_x->name_len));
        json_object_set_new(o, "destination_type",
                            json_string(b->q ? "queue" : "exchange"));
        json_object_set_new(o, "routing_key", defs_json_str(b->key, b->key_len));
        json_object_set_new(o, "arguments", defs_json_table(b->args));
        json_array_append_new(bindings, o);
    }
    free(xs);
    free(qs);
    free(bs);
}

/* As RabbitMQ 3.10 exports users: tags as a list, no limits. */
static json_t *
export_users(void)
{
    json_t *users = json_array();
    size_t n;
    struct user **us = (struct user **)sorted_values(&broker.users, cmp_user,
                                                      &n);

    for (size_t i = 0; i < n; i++) {
        char b64[2 * sizeof(us[i]->hash) + 4];
        json_t *o = json_object(), *tags = defs_json_tags(us[i]->tags);
        tls_base64(us[i]->hash, us[i]->hash_len, b64);
        json_object_set_new(o, "name", defs_json_str(us[i]->name, strlen(us[i]->name)));
        json_object_set_new(o, "password_hash", json_string(b64));
        json_object_set_new(o, "hashing_algorithm",
                            json_string(auth_alg_name(us[i]->alg)));
        json_object_set_new(o, "tags", tags);
        json_object_set_new(o, "limits", json_object());
        json_array_append_new(users, o);
    }
    free(us);
    return users;
}

static int
cmp_perm(const void *a, const void *b)
{
    const struct perm *x = *(const struct perm *const *)a;
    const struct perm *y = *(const struct perm *const *)b;
    int c = strcmp(x->vhost, y->vhost);
    return c ? c : strcmp(x->user, y->user);
}

struct perm_list {
    const struct perm **v;
    size_t n;
};

static void
collect_perm(const struct perm *p, void *arg)
{
    struct perm_list *l = arg;
    l->v[l->n++] = p;
}

/* As RabbitMQ exports them, sorted by vhost and user. */
static json_t *
export_perms(void)
{
    json_t *arr = json_array();
    struct perm_list l = { xmalloc((perm_count() + 1) * sizeof(*l.v)), 0 };
    perm_foreach(collect_perm, &l);
    qsort(l.v, l.n, sizeof(*l.v), cmp_perm);
    for (size_t i = 0; i < l.n; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "user", defs_json_str(l.v[i]->user,
                                            strlen(l.v[i]->user)));
        json_object_set_new(o, "vhost", defs_json_str(l.v[i]->vhost,
                                             strlen(l.v[i]->vhost)));
        for (int k = 0; k < PERM_KINDS; k++)
            json_object_set_new(o, perm_kind_name[k],
                                defs_json_str(l.v[i]->pattern[k],
                                     strlen(l.v[i]->pattern[k])));
        json_array_append_new(arr, o);
    }
    free(l.v);
    return arr;
}

/* A vhost's limits as RabbitMQ exports them: a "vhost-limits" parameter
 * named "limits", with the limits that are set. */
static void
export_limits(const struct vhost *vh, json_t *params)
{
    if (vh->max_connections < 0 && vh->max_queues < 0)
        return;
    json_t *o = json_object(), *value = json_object();
    if (vh->max_connections >= 0)
        json_object_set_new(value, "max-connections",
                            json_integer(vh->max_connections));
    if (vh->max_queues >= 0)
        json_object_set_new(value, "max-queues",
                            json_integer(vh->max_queues));
    json_object_set_new(o, "value", value);
    json_object_set_new(o, "vhost", defs_json_str(vh->name, strlen(vh->name)));
    json_object_set_new(o, "component", json_string("vhost-limits"));
    json_object_set_new(o, "name", json_string("limits"));
    json_array_append_new(params, o);
}

/* A vhost's policies as RabbitMQ exports them: the policies in
 * "policies", the operator policies as parameters of component
 * "operator_policy", sorted by name. */
struct policy_sink {
    json_t *arr;
    enum policy_kind kind;
};

static void
collect_policy(const struct policy *p, void *arg)
{
    struct policy_sink *s = arg;
    json_t *o = defs_json_policy(p);
    if (s->kind == POLICY_OPERATOR) {
        json_t *value = json_object();
        static const char *const keys[] = {
            "pattern", "definition", "priority", "apply-to",
        };
        for (size_t i = 0; i < NELEMS(keys); i++)
            json_object_set(value, keys[i], json_object_get(o, keys[i]));
        json_t *param = json_object();
        json_object_set_new(param, "value", value);
        json_object_set(param, "vhost", json_object_get(o, "vhost"));
        json_object_set_new(param, "component",
                            json_string("operator_policy"));
        json_object_set(param, "name", json_object_get(o, "name"));
        json_decref(o);
        o = param;
    }
    json_array_append_new(s->arr, o);
}

static int
cmp_policy_json(const void *a, const void *b)
{
    return strcmp(json_string_value(json_object_get(*(json_t *const *)a,
                                                    "name")),
                  json_string_value(json_object_get(*(json_t *const *)b,
                                                    "name")));
}

static void
export_policies(const struct vhost *vh, enum policy_kind kind, json_t *out)
{
    struct policy_sink s = { json_array(), kind };
    size_t n, i;
    json_t *v;

    policy_foreach(vh, kind, collect_policy, &s);
    n = json_array_size(s.arr);
    json_t **items = xmalloc((n + 1) * sizeof(*items));
    json_array_foreach(s.arr, i, v)
        items[i] = v;
    qsort(items, n, sizeof(*items), cmp_policy_json);
    for (i = 0; i < n; i++)
        json_array_append(out, items[i]);
    free(items);
    json_decref(s.arr);
}

/* The whole export, as RabbitMQ orders its keys. */
static json_t *
export_root(void)
{
    json_t *root = json_object();
    json_t *vhosts = json_array(), *queues = json_array(),
           *exchanges = json_array(), *bindings = json_array(),
           *params = json_array(), *policies = json_array();
    size_t nv;
    struct vhost **vs = (struct vhost **)sorted_values(&broker.vhosts,
                                                        cmp_vhost, &nv);

    for (size_t i = 0; i < nv; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", defs_json_str(vs[i]->name, strlen(vs[i]->name)));
        json_array_append_new(vhosts, o);
        export_vhost(vs[i], queues, exchanges, bindings);
        export_limits(vs[i], params);
        export_policies(vs[i], POLICY_OPERATOR, params);
        export_policies(vs[i], POLICY_USER, policies);
    }
    free(vs);
    json_object_set_new(root, "rabbit_version",
                        json_string(ROOST_RABBITMQ_VERSION));
    json_object_set_new(root, "rabbitmq_version",
                        json_string(ROOST_RABBITMQ_VERSION));
    json_object_set_new(root, "product_name", json_string(ROOST_PRODUCT));
    json_object_set_new(root, "product_version", json_string(ROOST_VERSION));
    json_object_set_new(root, "users", export_users());
    json_object_set_new(root, "vhosts", vhosts);
    json_object_set_new(root, "permissions", export_perms());
    json_object_set_new(root, "topic_permissions", json_array());
    json_object_set_new(root, "parameters", params);
    json_object_set_new(root, "global_parameters", json_array());
    json_object_set_new(root, "policies", policies);
    json_object_set_new(root, "queues", queues);
    json_object_set_new(root, "exchanges", exchanges);
    json_object_set_new(root, "bindings", bindings);
    return root;
}

int
defs_json_export(FILE *out, char *err, size_t errlen)
{
    json_t *root = export_root();
    errno = 0;
    int rc = json_dumpf(root, out, JSON_INDENT(2));
    json_decref(root);
    if (rc != 0 || fputc('\n', out) == EOF || fflush(out) != 0 ||
        ferror(out)) {
        snprintf(err, errlen, "cannot write the definitions: %s",
                 errno ? strerror(errno) : "write error");
        return -1;
    }
    return 0;
}

char *
defs_json_export_text(void)
{
    json_t *root = export_root();
    char *text = json_dumps(root, JSON_INDENT(2));
    json_decref(root);
    if (text == NULL)
        fatalx("out of memory");
    return text;
}

/* ---- what the management API shares ---- */

json_t *
defs_json_policy(const struct policy *p)
{
    json_t *o = json_object();
    json_object_set_new(o, "vhost",
                        defs_json_str(p->vh->name, strlen(p->vh->name)));
    json_object_set_new(o, "name", defs_json_str(p->name, strlen(p->name)));
    json_object_set_new(o, "pattern",
                        defs_json_str(p->pattern, strlen(p->pattern)));
    json_object_set_new(o, "apply-to",
                        json_string(policy_apply_name[p->apply_to]));
    json_object_set_new(o, "definition", json_deep_copy(p->definition));
    json_object_set_new(o, "priority", policy_priority_json(p));
    return o;
}

json_t *
defs_json_tags(const char *tags)
{
    json_t *arr = json_array();
    const char *p = tags;
    while (*p != '\0') {
        size_t n = strcspn(p, ",");
        if (n > 0) {
            char *t = xstrndup(p, n);
            json_array_append_new(arr, defs_json_str(t, strlen(t)));
            free(t);
        }
        p += n;
        if (*p == ',')
            p++;
    }
    return arr;
}

/* Append tag 'p' ('n' bytes, trimmed here) to 'out'. */
static int
add_tag(char *out, size_t cap, size_t *len, const char *p, size_t n)
{
    while (n > 0 && (*p == ' ' || *p == '\t')) {
        p++;
        n--;
    }
    while (n > 0 && (p[n - 1] == ' ' || p[n - 1] == '\t'))
        n--;
    if (n == 0)
        return 0;
    if (*len + n + 2 > cap)
        return -1;
    if (*len > 0)
        out[(*len)++] = ',';
    memcpy(out + *len, p, n);
    *len += n;
    out[*len] = '\0';
    return 0;
}

int
defs_json_parse_tags(const json_t *v, char *out, size_t cap, char *err,
                size_t errlen)
{
    size_t len = 0, i;
    const json_t *t;

    out[0] = '\0';
    if (v == NULL || json_is_null(v))
        return 0;
    if (json_is_string(v)) {
        const char *p = json_string_value(v);
        while (*p != '\0') {
            size_t n = strcspn(p, ",");
            if (add_tag(out, cap, &len, p, n) != 0)
                goto too_long;
            p += n;
            if (*p == ',')
                p++;
        }
        return 0;
    }
    if (!json_is_array(v)) {
        snprintf(err, errlen, "tags must be a string or a list of strings");
        return -1;
    }
    json_array_foreach(v, i, t) {
        if (!json_is_string(t) || strchr(json_string_value(t), ',')) {
            snprintf(err, errlen, "tags[%zu] must be a string without "
                     "commas", i);
            return -1;
        }
        if (add_tag(out, cap, &len, json_string_value(t),
                    json_string_length(t)) != 0)
            goto too_long;
    }
    return 0;
too_long:
    snprintf(err, errlen, "tags are longer than %zu bytes", cap - 1);
    return -1;
}
