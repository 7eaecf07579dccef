/*
 * SPDX-License-Identifier: Apache-2.0
 * The list commands with rabbitmqctl's info keys as columns: list_vhosts,
 * list_queues, list_exchanges, list_bindings, list_connections,
 * list_channels, list_consumers. Each is a table, 'struct listing': its
 * banner, the management API path it reads, its columns and which of them
 * it shows by default; one function, cmd_list(), does the work for all.
 *
 * A column names the API's field that holds its value and how rabbitmqctl
 * shows it. Where the API's shape differs from rabbitmqctl's, rabbitmqctl's
 * is printed: AMQP tables as [{"key",value}] (typed triples with
 * --formatter json), the protocol as {0,9,1}, null as "" (rabbitmqctl's
 * "nothing"). Roost has no Erlang processes, so the pid columns show the
 * name the API gives the object (the connection's or the channel's), the
 * one close_connection takes; columns with nothing behind them in the API
 * (a queue's pid, slave_pids, disk_reads, ...) are accepted and print ""
 * (roostctl(8), docs/compatibility.md).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl.h"
#include "xalloc.h"

enum col_kind {
    COL_VALUE,      /* the field as it is */
    COL_TABLE,      /* an AMQP field table */
    COL_PROTOCOL,   /* "AMQP 0-9-1" shown as {0,9,1} */
    COL_CONST,      /* always 'field' itself (a binding's source_kind) */
    COL_NONE        /* nothing in the API: "" */
};

struct column {
    const char *key;            /* rabbitmqctl's info key */
    const char *field;          /* the API's top-level field */
    const char *sub;            /* a field inside it, or NULL */
    enum col_kind kind;
};

struct listing {
    const char *command;        /* "list_queues" */
    const char *banner;         /* with %s for the vhost if 'scoped' */
    const char *api;            /* "/api/queues" ('/VHOST' if scoped) */
    bool scoped;                /* -p picks the vhost */
    bool timeout_line;          /* rabbitmqctl prints "Timeout: ..." */
    bool streamed;              /* no rows: nothing at all, "[\n]" in JSON */
    bool fixed_order;           /* columns in table order, as asked or not */
    const char *const *dflt;    /* NULL-terminated */
    const struct column *cols;  /* ends with a NULL key */
};

#define V(k) { k, k, NULL, COL_VALUE }
#define T(k) { k, k, NULL, COL_TABLE }
#define NONE(k) { k, NULL, NULL, COL_NONE }

static const struct column vhost_cols[] = {
    V("name"), V("description"), V("tags"), V("tracing"),
    V("cluster_state"), V("default_queue_type"), { NULL, NULL, NULL, 0 }
};

static const struct column queue_cols[] = {
    V("name"), T("arguments"), V("auto_delete"), V("consumer_capacity"),
    V("consumer_utilisation"), V("consumers"), NONE("disk_reads"),
    NONE("disk_writes"), V("durable"), V("exclusive"),
    NONE("exclusive_consumer_pid"), V("exclusive_consumer_tag"),
    V("head_message_age"), V("head_message_timestamp"), V("leader"), V("members"), V("memory"),
    V("message_bytes"), V("message_bytes_persistent"),
    V("message_bytes_ram"), V("message_bytes_ready"),
    V("message_bytes_unacknowledged"), V("messages"),
    V("messages_persistent"), V("messages_ram"), V("messages_ready"),
    V("messages_ready_ram"), V("messages_unacknowledged"),
    V("messages_unacknowledged_ram"), V("online"),
    { "owner_pid", "owner_pid_details", "name", COL_VALUE },
    NONE("pid"), V("policy"), NONE("slave_pids"), V("state"),
    NONE("synchronised_slave_pids"), V("type"), { NULL, NULL, NULL, 0 }
};

static const struct column exchange_cols[] = {
    V("name"), V("type"), T("arguments"), V("auto_delete"), V("durable"),
    V("internal"), V("policy"), { NULL, NULL, NULL, 0 }
};

static const struct column binding_cols[] = {
    { "source_name", "source", NULL, COL_VALUE },
    { "source_kind", "exchange", NULL, COL_CONST },
    { "destination_name", "destination", NULL, COL_VALUE },
    { "destination_kind", "destination_type", NULL, COL_VALUE },
    V("routing_key"), T("arguments"), { NULL, NULL, NULL, 0 }
};

static const struct column connection_cols[] = {
    V("auth_mechanism"), V("channel_max"), V("channels"),
    T("client_properties"), V("connected_at"), V("frame_max"), V("host"),
    V("name"), V("peer_cert_issuer"), V("peer_cert_subject"),
    V("peer_cert_validity"), V("peer_host"), V("peer_port"),
    { "pid", "name", NULL, COL_VALUE }, V("port"),
    { "protocol", "protocol", NULL, COL_PROTOCOL }, V("recv_cnt"),
    V("recv_oct"), V("send_cnt"), V("send_oct"), V("send_pend"), V("ssl"),
    V("ssl_cipher"), V("ssl_hash"), V("ssl_key_exchange"),
    V("ssl_protocol"), V("state"), V("timeout"), V("user"),
    V("user_provided_name"), V("vhost"), { NULL, NULL, NULL, 0 }
};

static const struct column channel_cols[] = {
    V("acks_uncommitted"), V("confirm"),
    { "connection", "connection_details", "name", COL_VALUE },
    V("consumer_count"), V("global_prefetch_count"),
    V("messages_unacknowledged"), V("messages_uncommitted"),
    V("messages_unconfirmed"), V("name"), V("number"),
    { "pid", "name", NULL, COL_VALUE }, V("prefetch_count"),
    V("transactional"), V("user"), V("vhost"), { NULL, NULL, NULL, 0 }
};

/* In rabbitmqctl's order, which list_consumers keeps whatever is asked. */
static const struct column consumer_cols[] = {
    { "queue_name", "queue", "name", COL_VALUE },
    { "channel_pid", "channel_details", "name", COL_VALUE },
    V("consumer_tag"), V("ack_required"), V("prefetch_count"), V("active"),
    V("activity_status"), T("arguments"), { NULL, NULL, NULL, 0 }
};

#undef V
#undef T
#undef NONE

static const char *const vhost_dflt[] = { "name", NULL };
static const char *const queue_dflt[] = { "name", "messages", NULL };
static const char *const exchange_dflt[] = { "name", "type", NULL };
static const char *const binding_dflt[] = {
    "source_name", "source_kind", "destination_name", "destination_kind",
    "routing_key", "arguments", NULL
};
/* rabbitmqctl's default without the name, which close_connection needs
 * (docs/compatibility.md). */
static const char *const connection_dflt[] = {
    "name", "user", "peer_host", "peer_port", "state", NULL
};
static const char *const channel_dflt[] = {
    "pid", "user", "consumer_count", "messages_unacknowledged", NULL
};
static const char *const consumer_dflt[] = {
    "queue_name", "channel_pid", "consumer_tag", "ack_required",
    "prefetch_count", "active", "arguments", NULL
};

static const struct listing listings[] = {
    { "list_vhosts", "Listing vhosts ...", "/api/vhosts",
      false, false, false, false, vhost_dflt, vhost_cols },
    { "list_queues", "Listing queues for vhost %s ...", "/api/queues",
      true, true, true, false, queue_dflt, queue_cols },
    { "list_exchanges", "Listing exchanges for vhost %s ...",
      "/api/exchanges", true, false, true, false, exchange_dflt,
      exchange_cols },
    /* sic: rabbitmqctl has no space before the dots here */
    { "list_bindings", "Listing bindings for vhost %s...",
      "/api/bindings", true, false, true, false, binding_dflt,
      binding_cols },
    { "list_connections", "Listing connections ...", "/api/connections",
      false, false, true, false, connection_dflt, connection_cols },
    { "list_channels", "Listing channels ...", "/api/channels",
      false, false, true, false, channel_dflt, channel_cols },
    { "list_consumers", "Listing consumers in vhost %s ...",
      "/api/consumers", true, false, true, true, consumer_dflt,
      consumer_cols },
};
#define NLISTINGS (sizeof(listings) / sizeof(listings[0]))

static const struct listing *
find_listing(const char *command)
{
    for (size_t i = 0; i < NLISTINGS; i++)
        if (strcmp(listings[i].command, command) == 0)
            return &listings[i];
    return NULL;
}

static const struct column *
find_column(const struct listing *l, const char *key, size_t len)
{
    for (const struct column *col = l->cols; col->key != NULL; col++)
        if (strlen(col->key) == len && strncmp(col->key, key, len) == 0)
            return col;
    return NULL;
}

/*
 * Call 'each' for every key the arguments name: rabbitmqctl takes
 * "name messages", "name,messages" and "name, messages" alike.
 */
static void
foreach_key(int argc, char *const *argv,
            void (*each)(const char *key, size_t len, void *arg), void *arg)
{
    for (int i = 0; i < argc; i++) {
        const char *s = argv[i];
        while (*s) {
            size_t n = strcspn(s, ",");
            if (n > 0)
                each(s, n, arg);
            s += n + (s[n] == ',');
        }
    }
}

struct unknown {
    const struct listing *l;
    char **keys;
    size_t n;
};

static void
note_unknown(const char *key, size_t len, void *arg)
{
    struct unknown *u = arg;

    if (find_column(u->l, key, len) != NULL)
        return;
    for (size_t i = 0; i < u->n; i++)
        if (strlen(u->keys[i]) == len && strncmp(u->keys[i], key, len) == 0)
            return;
    u->keys = xrealloc(u->keys, sizeof(char *) * (u->n + 1));
    u->keys[u->n] = xmalloc(len + 1);
    memcpy(u->keys[u->n], key, len);
    u->keys[u->n++][len] = '\0';
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

char *
ctl_unknown_columns(const char *command, int argc, char *const *argv)
{
    struct unknown u = { .l = find_listing(command) };
    char *out = NULL;
    size_t len = 0, cap = 0;

    if (u.l == NULL)
        return NULL;
    foreach_key(argc, argv, note_unknown, &u);
    if (u.n == 0)
        return NULL;
    qsort(u.keys, u.n, sizeof(char *), cmp_str);
    for (size_t i = 0; i < u.n; i++) {
        if (i > 0)
            ctl_append(&out, &len, &cap, ",", 1);
        ctl_append(&out, &len, &cap, u.keys[i], strlen(u.keys[i]));
        free(u.keys[i]);
    }
    free(u.keys);
    return out;
}

bool
ctl_has_columns(const char *command)
{
    return find_listing(command) != NULL;
}

/* "<column>\n\tmust be one of a, b, ... (default: ...)", wrapped. */
void
ctl_print_columns(const char *command, FILE *f)
{
    const struct listing *l = find_listing(command);
    const char **keys;
    size_t n = 0, width = 8;

    if (l == NULL)
        return;
    for (const struct column *col = l->cols; col->key; col++)
        n++;
    keys = xmalloc(sizeof(char *) * n);
    for (size_t i = 0; i < n; i++)
        keys[i] = l->cols[i].key;
    qsort(keys, n, sizeof(char *), cmp_str);
    fputs("<column>\n\tmust be one of", f);
    width += 15;
    for (size_t i = 0; i < n; i++) {
        size_t w = strlen(keys[i]) + 2;
        if (width + w > 78) {
            fputs("\n\t", f);
            width = 8;
        } else {
            fputc(' ', f);
        }
        fprintf(f, "%s%s", keys[i], i + 1 < n ? "," : "");
        width += w;
    }
    fputs("\n\t(default:", f);
    for (const char *const *k = l->dflt; *k; k++)
        fprintf(f, " %s", *k);
    fputs(")\n\n", f);
    free(keys);
}

/* The columns to show, each once, in the order asked (in the table's
 * order for a 'fixed_order' listing). */
struct chosen {
    const struct listing *l;
    const struct column **cols;
    size_t n;
};

static void
choose(const char *key, size_t len, void *arg)
{
    struct chosen *ch = arg;
    const struct column *col = find_column(ch->l, key, len);

    for (size_t i = 0; i < ch->n; i++)
        if (ch->cols[i] == col)
            return;
    ch->cols = xrealloc(ch->cols, sizeof(*ch->cols) * (ch->n + 1));
    ch->cols[ch->n++] = col;
}

static int
cmp_col(const void *a, const void *b)
{
    const struct column *x = *(const struct column *const *)a;
    const struct column *y = *(const struct column *const *)b;

    return (x > y) - (x < y);
}

/* The value of 'col' in 'row', borrowed, or NULL. */
static const json_t *
field(const struct column *col, const json_t *row)
{
    if (col->kind == COL_NONE || col->kind == COL_CONST)
        return NULL;
    const json_t *v = json_object_get(row, col->field);
    if (col->sub != NULL)
        v = json_object_get(v, col->sub);
    return json_is_null(v) ? NULL : v;
}

static const char *
amqp_type(const json_t *v)
{
    json_int_t n;

    switch (json_typeof(v)) {
    case JSON_STRING: return "longstr";
    case JSON_INTEGER:
        n = json_integer_value(v);
        return n >= -2147483648LL && n <= 2147483647LL ? "signedint"
                                                       : "long";
    case JSON_REAL: return "double";
    case JSON_TRUE: case JSON_FALSE: return "bool";
    case JSON_OBJECT: return "table";
    case JSON_ARRAY: return "array";
    default: return "void";
    }
}

/*
 * rabbitmqctl's JSON for an AMQP table: [["key","type",value],...]; an
 * array becomes {"type":value,...} (sic: one value a type, as 3.10 does).
 * Returns a new reference.
 */
static json_t *
typed(const json_t *v)
{
    const char *key;
    json_t *val, *out;
    size_t i;

    switch (json_typeof(v)) {
    case JSON_OBJECT:
        out = json_array();
        json_object_foreach((json_t *)v, key, val)
            json_array_append_new(out, json_pack("[s,s,o]", key,
                                                 amqp_type(val), typed(val)));
        return out;
    case JSON_ARRAY:
        out = json_object();
        json_array_foreach(v, i, val)
            json_object_set_new(out, amqp_type(val), typed(val));
        return out;
    case JSON_NULL:
        return json_string("undefined");
    default:
        return json_incref((json_t *)v);
    }
}

/* "AMQP 0-9-1" as its version numbers, or NULL. Returns a new
 * reference. */
static json_t *
protocol_version(const json_t *v)
{
    unsigned a, b, c;

    if (!json_is_string(v) ||
        sscanf(json_string_value(v), "AMQP %u-%u-%u", &a, &b, &c) != 3)
        return NULL;
    return json_pack("[i,i,i]", (int)a, (int)b, (int)c);
}

/* One cell: a string for the table formatter, a JSON value for the JSON
 * one. Returns a new reference. */
static json_t *
cell(const struct ctl *c, const struct column *col, const json_t *row)
{
    const json_t *v = field(col, row);
    char *buf = NULL;
    size_t len = 0, cap = 0;

    if (col->kind == COL_CONST)
        return json_string(col->field);
    if (v == NULL)
        return json_string("");
    json_t *pv = col->kind == COL_PROTOCOL ? protocol_version(v) : NULL;
    if (pv != NULL) {
        if (c->json)
            return pv;
        v = pv;
    }
    if (c->json) {
        return col->kind == COL_TABLE ? typed(v)
                                      : json_incref((json_t *)v);
    }
    ctl_append(&buf, &len, &cap, "", 0);
    if (pv != NULL) {
        /* {0,9,1} */
        ctl_render_term(pv, &buf, &len, &cap);
        buf[0] = '{';
        buf[len - 1] = '}';
    } else if (col->kind == COL_TABLE) {
        ctl_render_term(v, &buf, &len, &cap);
    } else {
        ctl_render(v, &buf, &len, &cap);
    }
    json_decref(pv);
    json_t *s = json_stringn(buf, len);
    free(buf);
    return s;
}

/* "/api/queues/VHOST?columns=a,b": only the fields the columns need. */
static char *
api_path(const struct ctl *c, const struct listing *l,
         const struct chosen *ch)
{
    char *path = l->scoped ? ctl_path("/%s", c->vhost) : ctl_path("");
    char *out = NULL;
    size_t len = 0, cap = 0;
    bool any = false;

    ctl_append(&out, &len, &cap, l->api, strlen(l->api));
    ctl_append(&out, &len, &cap, path, strlen(path));
    free(path);
    for (size_t i = 0; i < ch->n; i++) {
        const struct column *col = ch->cols[i];
        if (col->kind == COL_NONE || col->kind == COL_CONST)
            continue;
        /* a field two columns read (name, pid) is asked for once */
        bool dup = false;
        for (size_t k = 0; k < i; k++)
            dup = dup || (ch->cols[k]->field != NULL &&
                          ch->cols[k]->kind != COL_CONST &&
                          strcmp(ch->cols[k]->field, col->field) == 0);
        if (dup)
            continue;
        ctl_append(&out, &len, &cap, any ? "," : "?columns=", any ? 1 : 9);
        ctl_append(&out, &len, &cap, col->field, strlen(col->field));
        any = true;
    }
    return out;
}

/* Whether -p's vhost exists (a 404 for a listing in one that does is the
 * API's own failing); 'rc' set if the API cannot say. */
static bool
has_vhost(struct ctl *c, int *rc)
{
    struct ctl_answer a;
    char *path = ctl_path("/api/vhosts/%s", c->vhost);

    *rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    free(path);
    bool found = *rc != 0 || a.status != 404;
    ctl_answer_clear(&a);
    return found;
}

static int
list(struct ctl *c, const struct listing *l)
{
    struct chosen ch = { .l = l };
    struct ctl_answer a;
    int rc;

    if (c->argc > 0)
        foreach_key(c->argc, c->argv, choose, &ch);
    for (const char *const *k = l->dflt; c->argc == 0 && *k; k++)
        choose(*k, strlen(*k), &ch);
    if (l->fixed_order)
        qsort(ch.cols, ch.n, sizeof(*ch.cols), cmp_col);

    char *banner = l->scoped ? xasprintf(l->banner, c->vhost)
                             : xstrdup(l->banner);
    if (l->timeout_line)
        ctl_banner(c, "Timeout: %d.0 seconds ...\n%s", c->timeout, banner);
    else
        ctl_banner(c, "%s", banner);
    free(banner);

    char *path = api_path(c, l, &ch);
    rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    free(path);
    if (rc != 0)
        goto out;
    json_t *rows = json_array();
    if (a.status == 200 && json_is_array(a.json)) {
        size_t i;
        json_t *row;
        /* one node: no queue is on an offline one */
        json_array_foreach(a.json, i, row) {
            if (c->offline)
                break;
            json_t *r = json_object();
            for (size_t k = 0; k < ch.n; k++)
                json_object_set_new(r, ch.cols[k]->key, cell(c, ch.cols[k],
                                                             row));
            json_array_append_new(rows, r);
        }
    } else if (a.status == 404 && l->scoped) {
        /* rabbitmqctl lists nothing for a vhost that does not exist; a
         * 404 in one that does is the API failing */
        if (has_vhost(c, &rc) && rc == 0)
            rc = ctl_unexpected(&a, "listing");
    } else {
        rc = ctl_unexpected(&a, "listing");
    }
    if (rc == 0 && json_array_size(rows) == 0 && l->streamed) {
        if (c->json)
            puts("[\n]");
    } else if (rc == 0) {
        const char **keys = xmalloc(sizeof(char *) * (ch.n + 1));
        for (size_t k = 0; k < ch.n; k++)
            keys[k] = ch.cols[k]->key;
        ctl_table(c, keys, ch.n, rows);
        free(keys);
    }
    json_decref(rows);
out:
    ctl_answer_clear(&a);
    free(ch.cols);
    return rc;
}

int
cmd_list(struct ctl *c)
{
    const struct listing *l = find_listing(c->command);

    if (l == NULL) {
        fputs("roostctl: no listing for this command\n", stderr);
        abort();
    }
    return list(c, l);
}
