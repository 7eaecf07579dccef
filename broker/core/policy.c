/*
 * SPDX-License-Identifier: Apache-2.0
 * Policies: each vhost's table of policies and operator policies (in the
 * order they were set), their validation with RabbitMQ's texts, and what
 * applies to a queue or exchange (policy.h says the rules).
 */
#include "broker/core/policy.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "broker/core/defs.h"
#include "broker/core/exchange.h"
#include "broker/core/perm.h"
#include "broker/core/qargs.h"
#include "broker/core/queue.h"
#include "broker/core/vhost.h"
#include "broker/lib/hmap.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

const char *const policy_apply_name[] = {
    [POLICY_ALL] = "all",
    [POLICY_QUEUES] = "queues",
    [POLICY_EXCHANGES] = "exchanges",
};

/* A vhost's policies of each kind, in the order they were set. */
struct policy_table {
    struct policy **v[POLICY_KINDS];
    size_t n[POLICY_KINDS];
};

/* ---- the keys ---- */

enum key_type {
    K_NONNEG,       /* an integer >= 0 */
    K_POS,          /* an integer > 0 */
    K_STR,          /* a string */
    K_ONE_OF,       /* one of 'values' */
    K_VERSION,      /* the integer 1 or 2 */
    K_AGE,          /* a string in x-max-age's grammar */
    K_SEGMENT,      /* an integer 0 .. 3,000,000,000 */
};

static const char *const overflows[] = {
    "drop-head", "reject-publish", "reject-publish-dlx", NULL,
};
static const char *const queue_modes[] = { "default", "lazy", NULL };
static const char *const locators[] = {
    "min-masters", "client-local", "random", NULL,
};
static const char *const dlx_strategies[] = {
    "at-most-once", "at-least-once", NULL,
};

#define V(f) offsetof(struct policy_values, f)
#define NONE ((size_t)-1)

/* RabbitMQ 3.10's policy keys that mean something on one node (the
 * mirroring and federation ones are not Roost's), RabbitMQ 3.12's
 * consumer-timeout, and Roost's own. 'what' is RabbitMQ's name
 * in "V is not a valid WHAT"; 'op': an operator policy may set it; 'off':
 * where its value goes, NONE if it changes nothing here. */
static const struct key {
    const char *name;
    enum key_type type;
    const char *what;
    bool op;
    size_t off;
    const char *const *values;
} keys[] = {
    { "alternate-exchange", K_STR, "alternate exchange name", false,
      V(alternate), NULL },
    { "consumer-timeout", K_NONNEG, "consumer timeout", false,
      V(consumer_timeout), NULL },
    { "dead-letter-exchange", K_STR, "dead letter exchange name", false,
      V(dlx), NULL },
    { "dead-letter-routing-key", K_STR, "dead letter routing key", false,
      V(dlrk), NULL },
    { "dead-letter-strategy", K_ONE_OF, "dead letter strategy", false, NONE,
      dlx_strategies },
    { "delivery-limit", K_NONNEG, "delivery limit", true, V(delivery_limit),
      NULL },
    { "expires", K_POS, "queue expiry", true, V(expires), NULL },
    { "initial-cluster-size", K_NONNEG, "cluster size", false, NONE, NULL },
    { "max-age", K_AGE, "max age", false, V(max_age), NULL },
    { "max-in-memory-bytes", K_NONNEG, "maximum memory in bytes", true, NONE,
      NULL },
    { "max-in-memory-length", K_NONNEG, "maximum memory in bytes", true,
      NONE, NULL },
    { "max-length", K_NONNEG, "maximum length", true, V(max_length), NULL },
    { "max-length-bytes", K_NONNEG, "maximum length in bytes", true,
      V(max_length_bytes), NULL },
    { "message-ttl", K_NONNEG, "message TTL", true, V(message_ttl), NULL },
    { "overflow", K_ONE_OF, "overflow value", false, V(overflow), overflows },
    { "queue-leader-locator", K_ONE_OF, "queue leader locator value", false,
      NONE, qargs_leader_locators },
    { "queue-master-locator", K_ONE_OF, NULL, false, NONE, locators },
    { "queue-mode", K_ONE_OF, "queue-mode value", false, NONE, queue_modes },
    { "queue-version", K_VERSION, "queue-version value", false, NONE, NULL },
    { "requeue-delay", K_NONNEG, "requeue delay", false, V(requeue_delay),
      NULL },
    { "requeue-delay-max", K_NONNEG, "maximum requeue delay", false,
      V(requeue_delay_max), NULL },
    { "roost-delivery-limit", K_NONNEG, "delivery limit", false,
      V(roost_delivery_limit), NULL },
    { "stream-max-segment-size-bytes", K_SEGMENT, "segment size", false,
      V(segment_size), NULL },
};

static const struct key *
key_find(const char *name)
{
    for (size_t i = 0; i < NELEMS(keys); i++)
        if (strcmp(keys[i].name, name) == 0)
            return &keys[i];
    return NULL;
}

/* ---- RabbitMQ's texts ---- */

/* Append to 'out' (of 'cap' bytes, NUL-terminated, cut when full). */
static void
add(char *out, size_t cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void
add(char *out, size_t cap, const char *fmt, ...)
{
    size_t len = strlen(out);
    va_list ap;
    if (len + 1 >= cap)
        return;
    va_start(ap, fmt);
    vsnprintf(out + len, cap - len, fmt, ap);
    va_end(ap);
}

/* A JSON value as Erlang prints the term RabbitMQ decoded it to:
 * <<"text">>, 5, 1.5, true, null, [1,2], #{<<"k">> => v}. */
static void
add_term(char *out, size_t cap, const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_STRING:
        add(out, cap, "<<\"%.200s\">>", json_string_value(v));
        break;
    case JSON_INTEGER:
        add(out, cap, "%lld", (long long)json_integer_value(v));
        break;
    case JSON_REAL: {
        char *s = json_dumps(v, JSON_ENCODE_ANY);
        add(out, cap, "%s", s ? s : "?");
        free(s);
        break;
    }
    case JSON_TRUE: add(out, cap, "true"); break;
    case JSON_FALSE: add(out, cap, "false"); break;
    case JSON_NULL: add(out, cap, "null"); break;
    case JSON_ARRAY: {
        size_t i;
        json_t *e;
        add(out, cap, "[");
        json_array_foreach(v, i, e) {
            add(out, cap, "%s", i ? "," : "");
            add_term(out, cap, e);
        }
        add(out, cap, "]");
        break;
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *e;
        bool first = true;
        add(out, cap, "#{");
        json_object_foreach((json_t *)v, k, e) {
            add(out, cap, "%s<<\"%.200s\">> => ", first ? "" : ",", k);
            add_term(out, cap, e);
            first = false;
        }
        add(out, cap, "}");
        break;
    }
    }
}

static int
cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The definition's keys, sorted as RabbitMQ lists them; free the array
 * (not the keys: 'def' owns them). */
static const char **
sorted_keys(const json_t *def, size_t *n)
{
    const char **ks = xmalloc((json_object_size(def) + 1) * sizeof(*ks));
    const char *k;
    json_t *v;
    *n = 0;
    json_object_foreach((json_t *)def, k, v)
        ks[(*n)++] = k;
    qsort(ks, *n, sizeof(*ks), cmp_str);
    return ks;
}

/* Whether 'v' is a valid value for 'k'; parses it into 'out' if not NULL. */
static bool
value_ok(const struct key *k, const json_t *v, struct policy_values *out)
{
    void *field = out && k->off != NONE ? (char *)out + k->off : NULL;
    json_int_t n;

    switch (k->type) {
    case K_NONNEG:
    case K_POS:
        if (!json_is_integer(v))
            return false;
        n = json_integer_value(v);
        if (n < 0 || (n == 0 && k->type == K_POS))
            return false;
        if (field)
            *(int64_t *)field = (int64_t)n;
        return true;
    case K_VERSION:
        return json_is_integer(v) && (json_integer_value(v) == 1 ||
                                      json_integer_value(v) == 2);
    case K_AGE: {
        int64_t ms;
        if (!json_is_string(v))
            return false;
        struct amqp_bytes s = { (const uint8_t *)json_string_value(v),
                                json_string_length(v) };
        if (qargs_parse_age(s, &ms) != 0)
            return false;
        if (field)
            *(int64_t *)field = ms;
        return true;
    }
    case K_SEGMENT:
        if (!json_is_integer(v) || json_integer_value(v) < 0 ||
            json_integer_value(v) > QARGS_STREAM_SEGMENT_MAX)
            return false;
        if (field)
            *(int64_t *)field = (int64_t)json_integer_value(v);
        return true;
    case K_STR:
        if (!json_is_string(v) || json_string_length(v) > 255 ||
            strlen(json_string_value(v)) != json_string_length(v))
            return false;
        if (field) {
            free(*(char **)field);
            *(char **)field = xstrdup(json_string_value(v));
        }
        return true;
    case K_ONE_OF:
        if (!json_is_string(v))
            return false;
        for (int i = 0; k->values[i] != NULL; i++)
            if (strcmp(k->values[i], json_string_value(v)) == 0) {
                if (field)
                    *(int *)field = i;  /* enum qargs_overflow's order */
                return true;
            }
        return false;
    }
    return false;
}

static void
values_init(struct policy_values *v)
{
    memset(v, 0, sizeof(*v));
    v->message_ttl = v->expires = v->max_length = v->max_length_bytes = -1;
    v->delivery_limit = v->roost_delivery_limit = v->consumer_timeout = -1;
    v->requeue_delay = v->requeue_delay_max = -1;
    v->max_age = v->segment_size = -1;
    v->overflow = -1;
}

static void
values_free(struct policy_values *v)
{
    free(v->dlx);
    free(v->dlrk);
    free(v->alternate);
}

/* The definition's reason line, if it has one; parses it into 'out'. */
static void
check_definition(enum policy_kind kind, const json_t *def,
                 struct policy_values *out, char *err, size_t errlen)
{
    size_t n, unknown = 0;
    const char **ks;

    if (!json_is_object(def) || json_object_size(def) == 0) {
        /* RabbitMQ answers 500 to a definition that is not an object. */
        add(err, errlen, json_is_object(def) ? "no policy provided\n"
                                             : "definition must be an "
                                               "object\n");
        return;
    }
    ks = sorted_keys(def, &n);
    for (size_t i = 0; i < n; i++) {
        const struct key *k = key_find(ks[i]);
        if (k != NULL && (kind == POLICY_USER || k->op))
            continue;
        add(err, errlen, "%s{<<\"%.200s\">>,", unknown++ ? "," : "[", ks[i]);
        add_term(err, errlen, json_object_get(def, ks[i]));
        add(err, errlen, "}");
    }
    if (unknown) {
        add(err, errlen, "] are not recognised policy settings\n");
        free(ks);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const struct key *k = key_find(ks[i]);
        const json_t *v = json_object_get(def, ks[i]);
        if (value_ok(k, v, out))
            continue;
        add_term(err, errlen, v);
        if (k->what)
            add(err, errlen, " is not a valid %s\n", k->what);
        else
            add(err, errlen, " invalid %s value\n", k->name);
        break;
    }
    free(ks);
}

/* Everything about a policy but its name, as RabbitMQ validates it: one
 * reason a line, in its order. The compiled pattern goes to '*re' (if
 * not NULL) and the values to 'out'. */
static int
check(enum policy_kind kind, const json_t *pattern, const json_t *apply_to,
      const json_t *priority, const json_t *definition, void **re,
      enum policy_apply *apply, struct policy_values *out, char *err,
      size_t errlen)
{
    struct policy_values scratch;
    err[0] = '\0';
    values_init(&scratch);
    check_definition(kind, definition, out ? out : &scratch, err, errlen);
    values_free(&scratch);

    enum policy_apply a = POLICY_ALL;
    if (apply_to != NULL) {
        size_t i;
        for (i = 0; i < NELEMS(policy_apply_name); i++)
            if (json_is_string(apply_to) &&
                strcmp(json_string_value(apply_to), policy_apply_name[i]) == 0)
                break;
        if (i < NELEMS(policy_apply_name)) {
            a = (enum policy_apply)i;
        } else if (json_is_string(apply_to)) {
            add(err, errlen, "apply-to '%.200s' unrecognised; should be "
                "'queues', 'exchanges' or 'all'\n",
                json_string_value(apply_to));
        } else {
            /* RabbitMQ answers 500 here. */
            add(err, errlen, "apply-to should be a string but was ");
            add_term(err, errlen, apply_to);
            add(err, errlen, "\n");
        }
    }
    if (apply)
        *apply = a;

    void *code = NULL;
    if (!json_is_string(pattern) ||
        strlen(json_string_value(pattern)) != json_string_length(pattern)) {
        add(err, errlen, "pattern should be a binary but was ");
        add_term(err, errlen, pattern);
        add(err, errlen, "\n");
    } else {
        char msg[120];
        size_t at;
        code = perm_re_compile(json_string_value(pattern), msg, sizeof(msg),
                               &at);
        if (code == NULL)
            add(err, errlen, "pattern should be regular expression but is "
                "invalid: {\"%s\",%zu}\n", msg, at);
    }

    if (priority != NULL && !json_is_number(priority)) {
        add(err, errlen, "priority should be a number, actually was ");
        add_term(err, errlen, priority);
        add(err, errlen, "\n");
    }
    if (err[0] != '\0' || re == NULL) {
        perm_re_free(code);
        return err[0] != '\0' ? -1 : 0;
    }
    *re = code;
    return 0;
}

int
policy_check(enum policy_kind kind, const json_t *pattern,
             const json_t *apply_to, const json_t *priority,
             const json_t *definition, char *err, size_t errlen)
{
    return check(kind, pattern, apply_to, priority, definition, NULL, NULL,
                 NULL, err, errlen);
}

/* ---- the table ---- */

static struct policy_table *
table_of(struct vhost *vh)
{
    if (vh->policies == NULL)
        vh->policies = xcalloc(1, sizeof(*vh->policies));
    return vh->policies;
}

/* The index of 'name' in the table of 'kind', or -1. */
static long
index_of(const struct vhost *vh, enum policy_kind kind, const char *name)
{
    const struct policy_table *t = vh->policies;
    for (size_t i = 0; t && i < t->n[kind]; i++)
        if (strcmp(t->v[kind][i]->name, name) == 0)
            return (long)i;
    return -1;
}

static void
policy_free(struct policy *p)
{
    if (p == NULL)
        return;
    perm_re_free(p->re);
    values_free(&p->v);
    json_decref(p->definition);
    free(p->name);
    free(p->pattern);
    free(p);
}

/* Take 'p' out of its table (it is not freed). */
static void
unlink_at(struct vhost *vh, enum policy_kind kind, size_t i)
{
    struct policy_table *t = vh->policies;
    memmove(&t->v[kind][i], &t->v[kind][i + 1],
            (t->n[kind] - i - 1) * sizeof(*t->v[kind]));
    t->n[kind]--;
}

/* The first name of 'vh''s queues and exchanges on which 're' gives up
 * (its match limit), or NULL. */
static const char *
limit_name(const struct vhost *vh, const void *re)
{
    const struct hmap *maps[] = { &vh->queues, &vh->exchanges };
    for (size_t m = 0; m < NELEMS(maps); m++) {
        size_t pos = 0;
        struct hmap_slot *s;
        while ((s = hmap_next(maps[m], &pos)) != NULL) {
            const char *name = m == 0 ? ((struct queue *)s->val)->name
                                      : ((struct exchange *)s->val)->name;
            if (perm_re_run(re, name, strlen(name)) == PERM_RE_LIMIT)
                return name;
        }
    }
    return NULL;
}

static void apply_vhost(struct vhost *vh);

int
policy_set(struct vhost *vh, enum policy_kind kind, const char *name,
           const json_t *pattern, const json_t *apply_to,
           const json_t *priority, const json_t *definition, bool quiet,
           char *err, size_t errlen)
{
    struct policy *p = xcalloc(1, sizeof(*p));
    values_init(&p->v);
    if (check(kind, pattern, apply_to, priority, definition, &p->re,
              &p->apply_to, &p->v, err, errlen) != 0) {
        policy_free(p);
        return -1;
    }
    /* Refused where it would give up today; a name made later that it
     * gives up on is logged (limit_reached), the policy not applied. */
    const char *hard = quiet ? NULL : limit_name(vh, p->re);
    if (hard != NULL) {
        snprintf(err, errlen, "pattern exceeds the match limit on '%.200s'"
                 "\n", hard);
        policy_free(p);
        return -1;
    }
    long old = index_of(vh, kind, name);
    struct policy_table *t = table_of(vh);
    if (old < 0 && t->n[kind] >= POLICY_MAX) {
        snprintf(err, errlen, "a vhost holds at most %d %s\n", POLICY_MAX,
                 kind == POLICY_USER ? "policies" : "operator policies");
        policy_free(p);
        return -1;
    }
    p->vh = vh;
    p->kind = kind;
    p->name = xstrdup(name);
    p->pattern = xstrdup(json_string_value(pattern));
    p->priority = priority ? json_number_value(priority) : 0;
    p->definition = json_deep_copy(definition);
    if (old >= 0) {
        policy_free(t->v[kind][old]);
        unlink_at(vh, kind, (size_t)old);
    }
    t->v[kind] = xrealloc(t->v[kind], (t->n[kind] + 1) * sizeof(*t->v[kind]));
    t->v[kind][t->n[kind]++] = p;
    if (!quiet)
        defs_changed(DEFS_POLICY_ADDED, p);
    apply_vhost(vh);
    return old < 0;
}

bool
policy_clear(struct vhost *vh, enum policy_kind kind, const char *name,
             bool quiet)
{
    long i = index_of(vh, kind, name);
    if (i < 0)
        return false;
    struct policy *p = vh->policies->v[kind][i];
    if (!quiet)
        defs_changed(DEFS_POLICY_REMOVED, p);
    unlink_at(vh, kind, (size_t)i);
    policy_free(p);
    apply_vhost(vh);
    return true;
}

const struct policy *
policy_get(const struct vhost *vh, enum policy_kind kind, const char *name)
{
    long i = index_of(vh, kind, name);
    return i < 0 ? NULL : vh->policies->v[kind][i];
}

void
policy_foreach(const struct vhost *vh, enum policy_kind kind,
               void (*fn)(const struct policy *p, void *arg), void *arg)
{
    const struct policy_table *t = vh->policies;
    for (size_t i = 0; t && i < t->n[kind]; i++)
        fn(t->v[kind][i], arg);
}

void
policy_free_vhost(struct vhost *vh)
{
    struct policy_table *t = vh->policies;
    if (t == NULL)
        return;
    for (int k = 0; k < POLICY_KINDS; k++) {
        for (size_t i = 0; i < t->n[k]; i++)
            policy_free(t->v[k][i]);
        free(t->v[k]);
    }
    free(t);
    vh->policies = NULL;
}

/* ---- matching ---- */

/* A policy whose pattern gave up on 'name' (its match limit): it does
 * not apply there; said once for the policy. */
static void
limit_reached(struct policy *p, const char *name, size_t len)
{
    if (p->limit_logged)
        return;
    p->limit_logged = true;
    char n[256];
    log_escape(n, sizeof(n), name, len);
    log_warn("policy '%s' in vhost '%s': its pattern exceeds the match "
             "limit on '%s' and is not applied where it does", p->name,
             p->vh->name, n);
}

/* Whether 'p' holds none of 'refused' (a queue type's
 * refused_policy_keys; NULL: none). */
static bool
is_applicable(const struct policy *p, const char *const *refused)
{
    for (; refused && *refused != NULL; refused++)
        if (json_object_get(p->definition, *refused) != NULL)
            return false;
    return true;
}

/* The highest-priority policy of 'kind' for 'name' (a queue's if
 * 'queue', of a type that refuses the policy keys 'refused'); of
 * equals, the first by name (RabbitMQ 3.10.8 sorts them by priority,
 * stably, after its table's order by name). One holding a refused key
 * is passed over, as RabbitMQ's is_policy_applicable/2 does. */
static const struct policy *
match(const struct vhost *vh, enum policy_kind kind, bool queue,
      const char *const *refused, const char *name, size_t len)
{
    const struct policy_table *t = vh->policies;
    const struct policy *best = NULL;
    enum policy_apply other = queue ? POLICY_EXCHANGES : POLICY_QUEUES;

    for (size_t i = 0; t && i < t->n[kind]; i++) {
        struct policy *p = t->v[kind][i];
        if (p->apply_to == other ||
            (best && (p->priority < best->priority ||
                      (p->priority == best->priority &&
                       strcmp(p->name, best->name) > 0))) ||
            !is_applicable(p, refused))
            continue;
        enum perm_re_result m = perm_re_run(p->re, name, len);
        if (m == PERM_RE_YES)
            best = p;
        else if (m == PERM_RE_LIMIT)
            limit_reached(p, name, len);
    }
    return best;
}

const struct policy *
policy_for_queue(const struct queue *q, enum policy_kind kind)
{
    return match(q->vh, kind, true, q->ops->refused_policy_keys, q->name,
                 q->name_len);
}

const struct policy *
policy_for_exchange(const struct exchange *x, enum policy_kind kind)
{
    return match(x->vh, kind, false, NULL, x->name, x->name_len);
}

/* The smaller of two limits where -1 is none. */
static int64_t
min_set(int64_t a, int64_t b)
{
    if (a < 0)
        return b;
    return b < 0 || a < b ? a : b;
}

/* A string a policy gives, where the argument gives none. */
static void
str_unless_arg(char **field, const char *pol)
{
    if (*field == NULL && pol != NULL)
        *field = xstrdup(pol);
}

/* A stream's own keys: the policies' value wins over the argument
 * (rabbit_stream_queue:policy_precedence/2), the two policies' merged
 * first (the smaller max-length-bytes, rabbit_policies'). The other
 * keys a policy on a stream may hold (consumer-timeout, ...) merge as
 * for any queue. */
static void
merge_stream(struct qargs *qa, const struct policy_values *p,
             const struct policy_values *op)
{
    int64_t bytes = min_set(p->max_length_bytes, op->max_length_bytes);
    if (bytes >= 0)
        qa->max_length_bytes = bytes;
    if (p->max_age >= 0)
        qa->max_age_ms = p->max_age;
    if (p->segment_size >= 0)
        qa->segment_size = p->segment_size;
}

/* What applies to 'q': 'qa', parsed from its arguments, with the policy
 * 'p' and the operator policy 'op' (either may be NULL). */
static void
merge(const struct queue *q, struct qargs *qa, const struct policy_values *p,
      const struct policy_values *op)
{
    struct policy_values none;
    struct amqp_field unused;

    values_init(&none);
    if (p == NULL)
        p = &none;
    if (op == NULL)
        op = &none;
    qa->message_ttl = min_set(min_set(qa->message_ttl, p->message_ttl),
                              op->message_ttl);
    /* x-expires 0 is none */
    qa->expires = min_set(min_set(qa->expires ? qa->expires : -1,
                                  p->expires), op->expires);
    if (qa->expires < 0)
        qa->expires = 0;
    qa->max_length = min_set(min_set(qa->max_length, p->max_length),
                             op->max_length);
    if (qa->stream)
        merge_stream(qa, p, op);
    else
        qa->max_length_bytes = min_set(min_set(qa->max_length_bytes,
                                               p->max_length_bytes),
                                       op->max_length_bytes);
    qa->consumer_timeout = min_set(qa->consumer_timeout, p->consumer_timeout);
    if (!table_get(q->args, "x-overflow", &unused) && p->overflow >= 0)
        qa->overflow = (enum qargs_overflow)p->overflow;
    str_unless_arg(&qa->dlx, p->dlx);
    str_unless_arg(&qa->dlrk, p->dlrk);
    /* The back-off is a setting, not a limit: the argument's wins. */
    if (!table_get(q->args, "x-requeue-delay", &unused) &&
        p->requeue_delay >= 0)
        qa->requeue_delay = p->requeue_delay;
    if (!table_get(q->args, "x-requeue-delay-max", &unused) &&
        p->requeue_delay_max >= 0)
        qa->requeue_delay_max = p->requeue_delay_max;
    /* An argument's limit may be negative (none gets through): it is the
     * smallest then. */
    int64_t limit = p->roost_delivery_limit;
    if (q->ops->takes_delivery_limit_policy)
        limit = min_set(min_set(limit, p->delivery_limit),
                        op->delivery_limit);
    if (limit >= 0) {
        if (!qa->delivery_limited || limit < qa->delivery_limit)
            qa->delivery_limit = limit;
        qa->delivery_limited = true;
    }
}

void
policy_apply_queue(struct queue *q)
{
    const struct policy *p, *op;
    struct qargs qa;
    char err[512];

    if (q->deleted)
        return;
    p = policy_for_queue(q, POLICY_USER);
    op = policy_for_queue(q, POLICY_OPERATOR);
    /* Its arguments were checked when it was declared: they parse. */
    if (qargs_parse(q->args, "queue", &qa, err, sizeof(err)) != QARGS_OK)
        return;
    merge(q, &qa, p ? &p->v : NULL, op ? &op->v : NULL);
    queue_set_qargs(q, &qa);
}

void
policy_apply_exchange(struct exchange *x)
{
    const struct policy *p = policy_for_exchange(x, POLICY_USER);
    free(x->policy_alternate);
    x->policy_alternate = p && p->v.alternate ? xstrdup(p->v.alternate)
                                              : NULL;
}

/* Every queue and exchange of 'vh', after a change of its policies. */
static void
apply_vhost(struct vhost *vh)
{
    size_t pos = 0, n = 0;
    struct hmap_slot *s;
    /* Applying may dead-letter, and a queue that receives may go (its
     * x-expires): walk a copy, holding each. */
    struct queue **qs = xmalloc((vh->queues.count + 1) * sizeof(*qs));

    while ((s = hmap_next(&vh->queues, &pos)) != NULL)
        qs[n++] = queue_ref(s->val);
    for (size_t i = 0; i < n; i++) {
        policy_apply_queue(qs[i]);
        queue_unref(qs[i]);
    }
    free(qs);
    pos = 0;
    while ((s = hmap_next(&vh->exchanges, &pos)) != NULL)
        policy_apply_exchange(s->val);
}

/* ---- JSON ---- */

json_t *
policy_priority_json(const struct policy *p)
{
    double d = p->priority;
    if (d == floor(d) && fabs(d) < 9e15)
        return json_integer((json_int_t)d);
    return json_real(d);
}
