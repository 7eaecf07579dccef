/*
 * SPDX-License-Identifier: Apache-2.0
 * Randomized tests of the whole codec, reproducible from one seed: random
 * methods, content headers and field tables (nested up to depth 4, all 17
 * value types, written with the table.h writers) survive encode, decode
 * and re-encode byte for byte; and mutated encodings (bits flipped, bytes
 * inserted, deleted, overwritten) never crash method_decode,
 * content_header_decode, table_validate or frame_decode, and whatever they
 * accept re-encodes to something that decodes to the same value.
 *
 * The seed is printed first ("seed N"); ROOST_SEED=N replays a run. Each
 * test draws from its own stream of the seed, so CK_RUN_CASE replays one
 * case exactly.
 */
#include "tests/unit/codec_fields.h"
#include "tests/unit/testutil.h"

#include <errno.h>
#include <stdbool.h>

#include "amqp/codec.h"
#include "amqp/frame.h"
#include "amqp/method.h"
#include "amqp/props.h"
#include "amqp/status.h"
#include "amqp/table.h"

#define DEFAULT_SEED 0x0D15EA5Eu

#define N_METHODS 20000
#define N_HEADERS 20000
#define N_TABLES 5000
#define N_MUTATIONS 50000 /* per kind of source */

static uint32_t seed = DEFAULT_SEED;

/*
 * check records every passing ck_assert in a file, a system call each; the
 * loops below make millions of checks, so they call into check only when
 * one fails.
 */
#define require(cond, ...) \
    do { \
        if (!(cond)) \
            ck_abort_msg(__VA_ARGS__); \
    } while (0)
#define require_true(cond) require(cond, "%s", #cond)
#define require_eq(a, b) \
    require((a) == (b), "%s == %s: %lld != %lld", #a, #b, (long long)(a), \
            (long long)(b))
#define require_le(a, b) \
    require((a) <= (b), "%s <= %s: %lld > %lld", #a, #b, (long long)(a), \
            (long long)(b))
#define require_ptr_eq(a, b) require((a) == (b), "%s == %s", #a, #b)
#define require_nonnull(p) require((p) != NULL, "%s is NULL", #p)

/* ---- splitmix64 ---- */

struct rng {
    uint64_t s;
};

static void
rng_init(struct rng *r, uint64_t stream)
{
    r->s = (uint64_t)seed << 32 ^ stream * 0xD1B54A32D192ED03ull;
}

static uint64_t
rng_next(struct rng *r)
{
    uint64_t z = (r->s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform enough in [0, n) for test data. */
static uint32_t
rng_below(struct rng *r, uint32_t n)
{
    return n ? (uint32_t)(rng_next(r) % n) : 0;
}

static bool
rng_chance(struct rng *r, unsigned percent)
{
    return rng_below(r, 100) < percent;
}

/* A length in [0, max], biased to the edges: 0, small, any, max. */
static size_t
rng_len(struct rng *r, size_t max)
{
    switch (rng_below(r, 4)) {
    case 0: return 0;
    case 1: return rng_below(r, max < 16 ? (uint32_t)max + 1 : 17);
    case 2: return rng_below(r, (uint32_t)max + 1);
    default: return max;
    }
}

static void
rng_fill(struct rng *r, uint8_t *p, size_t n)
{
    uint64_t v = 0;

    for (size_t k = 0; k < n; k++) {
        if (k % 8 == 0)
            v = rng_next(r);
        p[k] = (uint8_t)(v >> (k % 8 * 8));
    }
}

/* ---- a bump allocator for the bytes a generated value points into ---- */

struct arena {
    uint8_t *buf;
    size_t cap, used;
};

static void
arena_init(struct arena *a, size_t cap)
{
    a->buf = malloc(cap);
    require_nonnull(a->buf);
    a->cap = cap;
    a->used = 0;
}

static uint8_t *
arena_alloc(struct arena *a, size_t n)
{
    uint8_t *p;

    require(a->cap - a->used >= n, "arena full");
    p = a->buf + a->used;
    a->used += n;
    return p;
}

static void
arena_free(struct arena *a)
{
    free(a->buf);
    a->buf = NULL;
}

static uint8_t *
copy_exact(const uint8_t *src, size_t n)
{
    uint8_t *p = malloc(n ? n : 1);
    require_nonnull(p);
    if (n)
        memcpy(p, src, n);
    return p;
}

/* ---- random field tables, with a model to check them against ---- */

#define GEN_MAX_DEPTH 4   /* the outermost table is depth 1 */
#define GEN_MAX_VALUES 40 /* per outermost table */
#define MODEL_MAX 64

static const uint8_t all_kinds[] = "tbBsuIilfdDSxATFV";
#define N_KINDS (sizeof(all_kinds) - 1)

/* One generated entry or array value; tables and arrays list their
 * contents through 'child' and 'next' (-1 ends a list). */
struct mnode {
    struct amqp_bytes key; /* tables only */
    struct amqp_field f;   /* f.v.table/array are not kept */
    int child, next;
};

struct model {
    struct mnode n[MODEL_MAX];
    int count;
    unsigned max_depth; /* deepest table or array, outermost = 1 */
    unsigned long kinds_seen[256];
};

struct gen {
    struct rng *r;
    struct arena *a;   /* what generated values point into */
    struct arena *tmp; /* a stack for tables built apart, then copied */
    struct model *m;
};

static int gen_list(struct gen *g, struct wire_wr *w, unsigned depth,
                    bool is_array);

/* Write one random value (type octet and value) and record it. */
static int
gen_value(struct gen *g, struct wire_wr *w, unsigned depth, bool keyed)
{
    struct model *m = g->m;
    struct mnode *n;
    int idx;
    uint8_t kind;
    bool nest_ok = depth < GEN_MAX_DEPTH && m->count < MODEL_MAX - 8;

    require_true(m->count < MODEL_MAX);
    idx = m->count++;
    n = &m->n[idx];
    n->child = n->next = -1;
    n->key.ptr = NULL;
    n->key.len = 0;
    if (keyed) {
        size_t klen = rng_chance(g->r, 2) ? 255 : rng_len(g->r, 12);
        uint8_t *k = arena_alloc(g->a, klen);
        rng_fill(g->r, k, klen);
        n->key.ptr = k;
        n->key.len = klen;
        require_eq(table_put_key(w, n->key), AMQP_OK);
    }
    do
        kind = all_kinds[rng_below(g->r, N_KINDS)];
    while (!nest_ok && (kind == 'F' || kind == 'A'));
    m->kinds_seen[kind]++;
    memset(&n->f, 0, sizeof(n->f));
    n->f.kind = (enum amqp_field_kind)kind;

    switch (kind) {
    case 'F':
    case 'A':
        if (depth + 1 > m->max_depth)
            m->max_depth = depth + 1;
        if (rng_chance(g->r, 50)) {
            /* Written in place: type octet, then begin/end around it. */
            size_t mark;
            int child;

            wire_put_u8(w, kind);
            mark = table_begin(w);
            child = gen_list(g, w, depth + 1, kind == 'A');
            table_end(w, mark);
            m->n[idx].child = child;
        } else {
            /* Built apart, then copied in by field_put(). */
            size_t cap = 32 * 1024, top = g->tmp->used;
            uint8_t *tmp = arena_alloc(g->tmp, cap);
            struct wire_wr sub;
            struct amqp_field f;
            int child;

            wire_wr_init(&sub, tmp, cap);
            child = gen_list(g, &sub, depth + 1, kind == 'A');
            require_true(!wire_wr_overflowed(&sub));
            f.kind = (enum amqp_field_kind)kind;
            if (kind == 'F') {
                f.v.table.ptr = tmp;
                f.v.table.len = sub.len;
            } else {
                f.v.array.ptr = tmp;
                f.v.array.len = sub.len;
            }
            field_put(w, &f);
            g->tmp->used = top;
            m->n[idx].child = child;
        }
        return idx;
    case 't':
        n->f.v.b = rng_next(g->r) & 1;
        break;
    case 'b':
        n->f.v.i = (int8_t)rng_next(g->r);
        break;
    case 's':
        n->f.v.i = (int16_t)rng_next(g->r);
        break;
    case 'I':
        n->f.v.i = (int32_t)rng_next(g->r);
        break;
    case 'l':
        n->f.v.i = (int64_t)rng_next(g->r);
        break;
    case 'B':
        n->f.v.u = (uint8_t)rng_next(g->r);
        break;
    case 'u':
        n->f.v.u = (uint16_t)rng_next(g->r);
        break;
    case 'i':
        n->f.v.u = (uint32_t)rng_next(g->r);
        break;
    case 'T':
        n->f.v.u = rng_next(g->r);
        break;
    case 'f': {
        uint32_t bits = (uint32_t)rng_next(g->r);
        memcpy(&n->f.v.f, &bits, sizeof(bits));
        break;
    }
    case 'd': {
        uint64_t bits = rng_next(g->r);
        memcpy(&n->f.v.d, &bits, sizeof(bits));
        break;
    }
    case 'D':
        n->f.v.decimal.scale = (uint8_t)rng_next(g->r);
        n->f.v.decimal.value = (uint32_t)rng_next(g->r);
        break;
    case 'S':
    case 'x': {
        size_t len = rng_chance(g->r, 3) ? 300 : rng_len(g->r, 40);
        uint8_t *p = arena_alloc(g->a, len);
        rng_fill(g->r, p, len);
        n->f.v.str.ptr = p;
        n->f.v.str.len = len;
        break;
    }
    case 'V':
        break;
    }
    field_put(w, &n->f);
    return idx;
}

/* Write the entries of a table (or values of an array) at 'depth' and
 * return the index of the first, or -1 for none. */
static int
gen_list(struct gen *g, struct wire_wr *w, unsigned depth, bool is_array)
{
    int first = -1, last = -1;
    unsigned count = rng_below(g->r, 6);

    for (unsigned k = 0; k < count && g->m->count < GEN_MAX_VALUES; k++) {
        int idx = gen_value(g, w, depth, !is_array);
        if (last < 0)
            first = idx;
        else
            g->m->n[last].next = idx;
        last = idx;
    }
    return first;
}

/* A random table in the arena: its entries, without the length prefix. */
static struct amqp_table
gen_table(struct gen *g, int *first)
{
    size_t cap = 64 * 1024, start = g->a->used, mark;
    uint8_t *buf = arena_alloc(g->a, cap);
    struct wire_wr w;
    struct amqp_table t;

    g->m->count = 0;
    g->m->max_depth = 1;
    wire_wr_init(&w, buf, cap);
    mark = table_begin(&w);
    *first = gen_list(g, &w, 1, false);
    table_end(&w, mark);
    require_true(!wire_wr_overflowed(&w));
    require_eq(wire_load32(buf), w.len - 4);
    g->a->used = start + w.len; /* give back what was not used */
    t.ptr = buf + 4;
    t.len = w.len - 4;
    return t;
}

static bool
same_bits(const void *a, const void *b, size_t n)
{
    return memcmp(a, b, n) == 0;
}

/* Two decoded scalar values are the same (tables and arrays compare
 * elsewhere). */
static bool
scalar_eq(const struct amqp_field *a, const struct amqp_field *b)
{
    if (a->kind != b->kind)
        return false;
    switch (a->kind) {
    case AMQP_FIELD_BOOL: return a->v.b == b->v.b;
    case AMQP_FIELD_I8:
    case AMQP_FIELD_I16:
    case AMQP_FIELD_I32:
    case AMQP_FIELD_I64: case AMQP_FIELD_L64: return a->v.i == b->v.i;
    case AMQP_FIELD_U8:
    case AMQP_FIELD_U16:
    case AMQP_FIELD_U32:
    case AMQP_FIELD_TIMESTAMP: return a->v.u == b->v.u;
    case AMQP_FIELD_FLOAT: return same_bits(&a->v.f, &b->v.f, sizeof(float));
    case AMQP_FIELD_DOUBLE:
        return same_bits(&a->v.d, &b->v.d, sizeof(double));
    case AMQP_FIELD_DECIMAL:
        return a->v.decimal.scale == b->v.decimal.scale &&
               a->v.decimal.value == b->v.decimal.value;
    case AMQP_FIELD_LONGSTR:
    case AMQP_FIELD_BYTES:
        return a->v.str.len == b->v.str.len &&
               (a->v.str.len == 0 ||
                memcmp(a->v.str.ptr, b->v.str.ptr, a->v.str.len) == 0);
    case AMQP_FIELD_VOID: return true;
    default: return true;
    }
}

static bool
bytes_eq(struct amqp_bytes a, struct amqp_bytes b)
{
    return a.len == b.len && (a.len == 0 || memcmp(a.ptr, b.ptr, a.len) == 0);
}

static void check_model_list(const struct model *m, int idx,
                             struct amqp_table body, bool is_array,
                             const char *ctx);

static void
check_model_value(const struct model *m, const struct mnode *n,
                  const struct amqp_field *got, const char *ctx)
{
    require(got->kind == n->f.kind, "%s: kind %c, want %c", ctx,
                  got->kind, n->f.kind);
    if (got->kind == AMQP_FIELD_TABLE) {
        check_model_list(m, n->child, got->v.table, false, ctx);
    } else if (got->kind == AMQP_FIELD_ARRAY) {
        struct amqp_table t = { got->v.array.ptr, got->v.array.len };
        check_model_list(m, n->child, t, true, ctx);
    } else {
        require(scalar_eq(&n->f, got), "%s: %c value differs", ctx,
                      got->kind);
    }
}

/* Iterate a decoded table or array alongside its model. */
static void
check_model_list(const struct model *m, int idx, struct amqp_table body,
                 bool is_array, const char *ctx)
{
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val;
    size_t count = 0, want = 0;

    for (int k = idx; k >= 0; k = m->n[k].next)
        want++;
    if (is_array) {
        struct amqp_array a = { body.ptr, body.len };
        array_iter_init(&it, a);
        require_eq(array_count(a), want);
    } else {
        table_iter_init(&it, body);
        require_eq(table_count(body), want);
    }
    for (;;) {
        bool more = is_array ? array_next(&it, &val)
                             : table_next(&it, &key, &val);
        if (!more)
            break;
        require(idx >= 0, "%s: more values than generated", ctx);
        if (!is_array)
            require(bytes_eq(key, m->n[idx].key), "%s: key differs",
                          ctx);
        check_model_value(m, &m->n[idx], &val, ctx);
        idx = m->n[idx].next;
        count++;
    }
    require(idx < 0 && count == want, "%s: %zu values, want %zu", ctx,
                  count, want);
}

/* Two validated tables (or arrays) hold the same values. */
static void
assert_lists_eq(struct amqp_table a, struct amqp_table b, bool is_array,
                const char *ctx)
{
    struct table_iter ia, ib;
    struct amqp_bytes ka, kb;
    struct amqp_field va, vb;

    if (is_array) {
        struct amqp_array aa = { a.ptr, a.len }, ab = { b.ptr, b.len };
        array_iter_init(&ia, aa);
        array_iter_init(&ib, ab);
    } else {
        table_iter_init(&ia, a);
        table_iter_init(&ib, b);
    }
    for (;;) {
        bool ma = is_array ? array_next(&ia, &va) : table_next(&ia, &ka, &va);
        bool mb = is_array ? array_next(&ib, &vb) : table_next(&ib, &kb, &vb);

        require(ma == mb, "%s: value counts differ", ctx);
        if (!ma)
            break;
        if (!is_array)
            require(bytes_eq(ka, kb), "%s: keys differ", ctx);
        require(va.kind == vb.kind, "%s: kinds differ", ctx);
        if (va.kind == AMQP_FIELD_TABLE)
            assert_lists_eq(va.v.table, vb.v.table, false, ctx);
        else if (va.kind == AMQP_FIELD_ARRAY)
            assert_lists_eq((struct amqp_table){ va.v.array.ptr,
                                                 va.v.array.len },
                            (struct amqp_table){ vb.v.array.ptr,
                                                 vb.v.array.len },
                            true, ctx);
        else
            require(scalar_eq(&va, &vb), "%s: %c values differ", ctx,
                          va.kind);
    }
}

/* Re-encode a validated table entry by entry with the writers. */
static size_t
rewrite_table(struct amqp_table t, uint8_t *buf, size_t cap)
{
    struct table_iter it;
    struct amqp_bytes key;
    struct amqp_field val;
    struct wire_wr w;

    wire_wr_init(&w, buf, cap);
    table_iter_init(&it, t);
    while (table_next(&it, &key, &val)) {
        require_eq(table_put_key(&w, key), AMQP_OK);
        field_put(&w, &val);
    }
    require_true(!wire_wr_overflowed(&w));
    return w.len;
}

/* ---- generic access to method and property structs ---- */

static void
set_int(void *base, const struct codec_field *f, uint64_t v)
{
    uint8_t *p = (uint8_t *)base + f->offset;
    uint8_t u8 = (uint8_t)v;
    uint16_t u16 = (uint16_t)v;
    uint32_t u32 = (uint32_t)v;
    bool b = v & 1;

    switch (f->type) {
    case FIELD_OCTET: memcpy(p, &u8, 1); break;
    case FIELD_BIT: memcpy(p, &b, sizeof(b)); break;
    case FIELD_SHORT: memcpy(p, &u16, 2); break;
    case FIELD_LONG: memcpy(p, &u32, 4); break;
    default: memcpy(p, &v, 8); break;
    }
}

static bool
is_present(uint32_t present, size_t i)
{
    return present == CODEC_ALL || (present >> (15 - i) & 1);
}

static void
assert_fields_eq(const struct codec_field *f, size_t n, uint32_t present,
                 const void *want, const void *got, const char *ctx)
{
    for (size_t i = 0; i < n; i++) {
        if (!is_present(present, i))
            continue;
        if (is_range(f[i].type)) {
            require(bytes_eq(get_range(want, &f[i]),
                                   get_range(got, &f[i])),
                          "%s: %s differs", ctx, f[i].name);
        } else {
            uint64_t a = get_int(want, &f[i]), b = get_int(got, &f[i]);
            require(a == b, "%s: %s is %#llx, want %#llx", ctx,
                          f[i].name, (unsigned long long)b,
                          (unsigned long long)a);
        }
    }
}

/* The encoded size of the selected fields, bits packed (§4.2.5.2). */
static size_t
fields_size(const struct codec_field *f, size_t n, uint32_t present,
            const void *base)
{
    size_t size = 0;
    unsigned run = 0;

    for (size_t i = 0; i < n; i++) {
        if (!is_present(present, i))
            continue;
        if (f[i].type != FIELD_BIT)
            run = 0;
        switch (f[i].type) {
        case FIELD_OCTET: size += 1; break;
        case FIELD_SHORT: size += 2; break;
        case FIELD_LONG: size += 4; break;
        case FIELD_LONGLONG:
        case FIELD_TIMESTAMP: size += 8; break;
        case FIELD_BIT: size += run++ % 8 == 0; break;
        case FIELD_SHORTSTR: size += 1 + get_range(base, &f[i]).len; break;
        default: size += 4 + get_range(base, &f[i]).len; break;
        }
    }
    return size;
}

/* Fill the selected fields with random values; tables are random tables
 * whose model is checked after decoding (only one table per struct). */
static void
gen_fields(struct gen *g, const struct codec_field *f, size_t n,
           uint32_t present, void *base, int *table_first)
{
    for (size_t i = 0; i < n; i++) {
        size_t len;
        uint8_t *p;
        struct amqp_table t;

        if (!is_present(present, i))
            continue;
        switch (f[i].type) {
        case FIELD_SHORTSTR:
        case FIELD_LONGSTR:
            len = rng_len(g->r, f[i].type == FIELD_SHORTSTR ? 255 : 1000);
            p = arena_alloc(g->a, len);
            rng_fill(g->r, p, len);
            /* A shortstr must be UTF-8 (method_decode refuses others):
             * printable ASCII. Longstrs stay any bytes. */
            if (f[i].type == FIELD_SHORTSTR)
                for (size_t k = 0; k < len; k++)
                    p[k] = (uint8_t)(0x20 + p[k] % 0x5f);
            set_range(base, &f[i], p, len);
            break;
        case FIELD_TABLE:
            t = gen_table(g, table_first);
            set_range(base, &f[i], t.ptr, t.len);
            break;
        default:
            set_int(base, &f[i], rng_next(g->r));
            break;
        }
    }
}

static const struct codec_field *
table_field(const struct codec_field *f, size_t n, uint32_t present)
{
    for (size_t i = 0; i < n; i++)
        if (f[i].type == FIELD_TABLE && is_present(present, i))
            return &f[i];
    return NULL;
}

/* ---- methods and content headers: encode into exact-size blocks ---- */

static uint8_t *
method_encode_exact(const struct amqp_method *m, size_t *len)
{
    struct wire_wr w;
    uint8_t *buf;

    wire_wr_init(&w, NULL, 0);
    require_eq(method_encode(m, &w), AMQP_E_OVERFLOW);
    *len = w.len;
    buf = malloc(w.len);
    require_nonnull(buf);
    wire_wr_init(&w, buf, *len);
    require_eq(method_encode(m, &w), AMQP_OK);
    require_eq(w.len, *len);
    return buf;
}

static uint8_t *
header_encode_exact(const struct content_header *h, size_t *len)
{
    struct wire_wr w;
    uint8_t *buf;

    wire_wr_init(&w, NULL, 0);
    require_eq(content_header_encode(h, &w), AMQP_E_OVERFLOW);
    *len = w.len;
    buf = malloc(w.len);
    require_nonnull(buf);
    wire_wr_init(&w, buf, *len);
    require_eq(content_header_encode(h, &w), AMQP_OK);
    require_eq(w.len, *len);
    return buf;
}

static const struct method_info *
gen_method(struct gen *g, struct amqp_method *m, int *table_first)
{
    const struct method_info *mi =
        &method_infos[rng_below(g->r, (uint32_t)method_info_count)];

    memset(m, 0, sizeof(*m));
    m->id = mi->id;
    *table_first = -2; /* no table */
    gen_fields(g, mi->fields, mi->nfields, CODEC_ALL, &m->a, table_first);
    return mi;
}

static void
gen_header(struct gen *g, struct content_header *h, int *table_first)
{
    memset(h, 0, sizeof(*h));
    h->class_id = AMQP_CLASS_BASIC;
    h->body_size = rng_chance(g->r, 50) ? rng_below(g->r, 1u << 20)
                                        : rng_next(g->r);
    h->props.flags = (uint16_t)rng_next(g->r) &
                     (uint16_t)~(PROPS_FLAG_CONTINUE | PROPS_FLAG_RESERVED);
    if (rng_chance(g->r, 5))
        h->props.flags = 0;
    if (rng_chance(g->r, 5))
        h->props.flags = 0xFFFC;
    *table_first = -2;
    gen_fields(g, basic_prop_fields, AMQP_BASIC_PROP_COUNT, h->props.flags,
               &h->props, table_first);
}

/* ---- round trips ---- */

START_TEST(random_methods)
{
    struct rng r;
    struct arena a;
    struct model *mdl = calloc(1, sizeof(*mdl));
    struct arena tmp;
    struct gen g = { &r, &a, &tmp, mdl };
    unsigned long seen[128] = { 0 };

    rng_init(&r, 1);
    arena_init(&a, 1 << 20);
    arena_init(&tmp, 4 * 32 * 1024);
    for (int iter = 0; iter < N_METHODS; iter++) {
        struct amqp_method m, d;
        const struct method_info *mi;
        const struct codec_field *tf;
        size_t len, len2;
        uint8_t *buf, *again;
        enum amqp_status st;
        int table_first;
        char ctx[96];

        a.used = 0;
        mi = gen_method(&g, &m, &table_first);
        seen[mi - method_infos]++;
        snprintf(ctx, sizeof(ctx), "seed %u iteration %d %s", seed, iter,
                 mi->name);

        buf = method_encode_exact(&m, &len);
        require(len == 4 + fields_size(mi->fields, mi->nfields,
                                             CODEC_ALL, &m.a),
                      "%s: length %zu", ctx, len);
        require(wire_load16(buf) == method_class(mi->id) &&
                          wire_load16(buf + 2) == method_index(mi->id),
                      "%s: ids", ctx);

        memset(&d, 0x5A, sizeof(d));
        st = method_decode(buf, len, &d);
        require(st == AMQP_OK, "%s: %s", ctx, status_name(st));
        require(d.id == m.id, "%s: id %#x", ctx, d.id);
        assert_fields_eq(mi->fields, mi->nfields, CODEC_ALL, &m.a, &d.a, ctx);
        tf = table_field(mi->fields, mi->nfields, CODEC_ALL);
        if (tf)
            check_model_list(mdl, table_first, (struct amqp_table){
                                 get_range(&d.a, tf).ptr,
                                 get_range(&d.a, tf).len },
                             false, ctx);

        again = method_encode_exact(&d, &len2);
        require(len2 == len && memcmp(again, buf, len) == 0,
                      "%s: re-encoding differs", ctx);
        free(again);
        free(buf);
    }
    /* The generator reached every method. */
    require_le(method_info_count, NELEMS(seen));
    for (size_t k = 0; k < method_info_count; k++)
        require(seen[k] > 0, "%s never drawn", method_infos[k].name);
    arena_free(&a);
    arena_free(&tmp);
    free(mdl);
}
END_TEST

START_TEST(random_content_headers)
{
    struct rng r;
    struct arena a;
    struct model *mdl = calloc(1, sizeof(*mdl));
    struct arena tmp;
    struct gen g = { &r, &a, &tmp, mdl };
    unsigned long flag_seen[16] = { 0 };

    rng_init(&r, 2);
    arena_init(&a, 1 << 20);
    arena_init(&tmp, 4 * 32 * 1024);
    for (int iter = 0; iter < N_HEADERS; iter++) {
        struct content_header h, d;
        size_t len, len2;
        uint8_t *buf, *again;
        enum amqp_status st;
        int table_first;
        char ctx[64];

        a.used = 0;
        gen_header(&g, &h, &table_first);
        for (int b = 0; b < 16; b++)
            flag_seen[b] += h.props.flags >> b & 1;
        snprintf(ctx, sizeof(ctx), "seed %u iteration %d flags %#x", seed,
                 iter, h.props.flags);

        buf = header_encode_exact(&h, &len);
        require(len == 14 + fields_size(basic_prop_fields,
                                              AMQP_BASIC_PROP_COUNT,
                                              h.props.flags, &h.props),
                      "%s: length %zu", ctx, len);
        require(wire_load16(buf + 12) == h.props.flags, "%s: flags",
                      ctx);

        memset(&d, 0x5A, sizeof(d));
        st = content_header_decode(buf, len, &d);
        require(st == AMQP_OK, "%s: %s", ctx, status_name(st));
        require(d.class_id == AMQP_CLASS_BASIC && d.weight == 0 &&
                          d.body_size == h.body_size &&
                          d.props.flags == h.props.flags,
                      "%s: fixed part differs", ctx);
        assert_fields_eq(basic_prop_fields, AMQP_BASIC_PROP_COUNT,
                         h.props.flags, &h.props, &d.props, ctx);
        if (h.props.flags & AMQP_BASIC_HEADERS_FLAG)
            check_model_list(mdl, table_first, d.props.headers, false, ctx);

        again = header_encode_exact(&d, &len2);
        require(len2 == len && memcmp(again, buf, len) == 0,
                      "%s: re-encoding differs", ctx);
        free(again);
        free(buf);
    }
    /* Every property flag was drawn, and never the two reserved bits. */
    for (int b = 2; b < 16; b++)
        require(flag_seen[b] > 0, "flag bit %d never set", b);
    require_eq(flag_seen[0] + flag_seen[1], 0);
    arena_free(&a);
    arena_free(&tmp);
    free(mdl);
}
END_TEST

START_TEST(random_tables)
{
    struct rng r;
    struct arena a;
    struct model *mdl = calloc(1, sizeof(*mdl));
    struct arena tmp;
    struct gen g = { &r, &a, &tmp, mdl };
    uint8_t *out = malloc(64 * 1024);
    unsigned long kinds[256] = { 0 };
    unsigned deepest = 0;

    rng_init(&r, 3);
    arena_init(&a, 1 << 20);
    arena_init(&tmp, 4 * 32 * 1024);
    for (int iter = 0; iter < N_TABLES; iter++) {
        struct amqp_table t, got;
        struct wire_rd rd;
        uint8_t *body, *prefixed;
        size_t len;
        unsigned top;
        enum amqp_status st;
        int first;
        char ctx[64];

        a.used = 0;
        memset(mdl->kinds_seen, 0, sizeof(mdl->kinds_seen));
        t = gen_table(&g, &first);
        for (int k = 0; k < 256; k++)
            kinds[k] += mdl->kinds_seen[k];
        if (mdl->max_depth > deepest)
            deepest = mdl->max_depth;
        snprintf(ctx, sizeof(ctx), "seed %u iteration %d", seed, iter);

        body = copy_exact(t.ptr, t.len);
        st = table_validate(body, t.len, 1);
        require(st == AMQP_OK, "%s: %s", ctx, status_name(st));
        got.ptr = body;
        got.len = t.len;
        check_model_list(mdl, first, got, false, ctx);

        /* Nesting is counted exactly: the deepest level may reach
         * TABLE_MAX_DEPTH and not one more. */
        top = TABLE_MAX_DEPTH + 1 - mdl->max_depth;
        require(table_validate(body, t.len, top) == AMQP_OK,
                      "%s: depth %u from %u", ctx, mdl->max_depth, top);
        require(table_validate(body, t.len, top + 1) ==
                          AMQP_E_TABLE_DEPTH,
                      "%s: depth %u from %u", ctx, mdl->max_depth, top + 1);

        /* With its length prefix, through wire_get_table(). */
        prefixed = malloc(t.len + 4);
        wire_store32(prefixed, (uint32_t)t.len);
        memcpy(prefixed + 4, t.ptr, t.len);
        wire_rd_init(&rd, prefixed, t.len + 4);
        require_eq(wire_get_table(&rd, 1, &got), AMQP_OK);
        require_eq(got.len, t.len);
        require_ptr_eq(got.ptr, prefixed + 4);
        require_eq(wire_rd_left(&rd), 0);
        free(prefixed);

        /* Entry by entry through the writers gives the same bytes. */
        len = rewrite_table(t, out, 64 * 1024);
        require(len == t.len && memcmp(out, t.ptr, len) == 0,
                      "%s: rewritten table differs", ctx);
        free(body);
    }
    for (size_t k = 0; k < N_KINDS; k++)
        require(kinds[all_kinds[k]] > 0, "type %c never generated",
                      all_kinds[k]);
    require_eq(deepest, GEN_MAX_DEPTH);
    arena_free(&a);
    arena_free(&tmp);
    free(out);
    free(mdl);
}
END_TEST

/* ---- mutation robustness ---- */

static const uint8_t interesting[] = { 0x00, 0x01, 0x7F, 0x80, 0xFF, 0xCE,
                                       'F', 'A', 'S', 'V' };

/* Apply 1 to 4 random edits to buf[0..*len) (capacity 'cap'). */
static void
mutate(struct rng *r, uint8_t *buf, size_t *len, size_t cap)
{
    unsigned edits = 1 + rng_below(r, 4);

    for (unsigned e = 0; e < edits; e++) {
        size_t n = *len, at = rng_below(r, (uint32_t)n + 1), k;

        switch (rng_below(r, 8)) {
        case 0: /* flip a bit */
            if (n)
                buf[at % n] ^= (uint8_t)(1u << rng_below(r, 8));
            break;
        case 1: /* overwrite a byte */
            if (n && rng_chance(r, 50))
                buf[at % n] = interesting[rng_below(r, sizeof(interesting))];
            else if (n)
                buf[at % n] = (uint8_t)rng_next(r);
            break;
        case 2: /* insert bytes */
            k = 1 + rng_below(r, 8);
            if (n + k > cap)
                break;
            memmove(buf + at + k, buf + at, n - at);
            rng_fill(r, buf + at, k);
            *len = n + k;
            break;
        case 3: /* delete bytes */
            k = 1 + rng_below(r, 8);
            if (at + k > n)
                k = n - at;
            memmove(buf + at, buf + at + k, n - at - k);
            *len = n - k;
            break;
        case 4: /* truncate */
            *len = at;
            break;
        case 5: /* a 32-bit length somewhere */
            if (n >= 4) {
                static const uint32_t lens[] = { 0, 1, 3, 0x7FFFFFFF,
                                                 0xFFFFFFFF };
                uint32_t v = rng_chance(r, 50)
                                 ? lens[rng_below(r, NELEMS(lens))]
                                 : (uint32_t)(n - at % (n - 3));
                wire_store32(buf + at % (n - 3), v);
            }
            break;
        case 6: /* duplicate a slice */
            k = rng_below(r, 16);
            if (at + k > n)
                k = n - at;
            if (n + k > cap)
                break;
            memmove(buf + at + k, buf + at, n - at);
            *len = n + k;
            break;
        default: /* a random byte at the end */
            if (n < cap) {
                buf[n] = (uint8_t)rng_next(r);
                *len = n + 1;
            }
            break;
        }
    }
}

struct tally {
    unsigned long ok[4], tried[4];
};

enum { T_METHOD, T_HEADER, T_TABLE, T_FRAME };

/* Whatever method_decode accepts re-encodes to bytes that decode to the
 * same method, and encoding that again changes nothing. */
static void
robust_method(const uint8_t *in, size_t len, struct tally *t, const char *ctx)
{
    struct amqp_method d, d2;
    const struct method_info *mi;
    size_t len1, len2;
    uint8_t *enc, *enc2;

    t->tried[T_METHOD]++;
    if (method_decode(in, len, &d) != AMQP_OK)
        return;
    t->ok[T_METHOD]++;
    mi = method_info_find(d.id);
    require(mi != NULL, "%s: accepted unknown id %#x", ctx, d.id);
    enc = method_encode_exact(&d, &len1);
    require(len1 == len, "%s: re-encoding is %zu bytes, not %zu", ctx,
                  len1, len);
    require(method_decode(enc, len1, &d2) == AMQP_OK,
                  "%s: re-encoding does not decode", ctx);
    require(d2.id == d.id, "%s: id changed", ctx);
    assert_fields_eq(mi->fields, mi->nfields, CODEC_ALL, &d.a, &d2.a, ctx);
    enc2 = method_encode_exact(&d2, &len2);
    require(len2 == len1 && memcmp(enc, enc2, len1) == 0,
                  "%s: second re-encoding differs", ctx);
    free(enc2);
    free(enc);
}

static void
robust_header(const uint8_t *in, size_t len, struct tally *t,
              const char *ctx)
{
    struct content_header d, d2;
    size_t len1, len2;
    uint8_t *enc, *enc2;

    t->tried[T_HEADER]++;
    if (content_header_decode(in, len, &d) != AMQP_OK)
        return;
    t->ok[T_HEADER]++;
    enc = header_encode_exact(&d, &len1);
    /* Only empty continuation flag words may be dropped. */
    require(len1 <= len && (len - len1) % 2 == 0,
                  "%s: re-encoding is %zu bytes, from %zu", ctx, len1, len);
    require(content_header_decode(enc, len1, &d2) == AMQP_OK,
                  "%s: re-encoding does not decode", ctx);
    require(d2.class_id == d.class_id && d2.weight == d.weight &&
                      d2.body_size == d.body_size &&
                      d2.props.flags == d.props.flags,
                  "%s: fixed part changed", ctx);
    assert_fields_eq(basic_prop_fields, AMQP_BASIC_PROP_COUNT, d.props.flags,
                     &d.props, &d2.props, ctx);
    enc2 = header_encode_exact(&d2, &len2);
    require(len2 == len1 && memcmp(enc, enc2, len1) == 0,
                  "%s: second re-encoding differs", ctx);
    free(enc2);
    free(enc);
}

static void
robust_table(const uint8_t *in, size_t len, struct tally *t, const char *ctx)
{
    struct amqp_table a = { in, len }, b;
    uint8_t *out;
    size_t n;

    t->tried[T_TABLE]++;
    if (table_validate(in, len, 1) != AMQP_OK)
        return;
    t->ok[T_TABLE]++;
    /* Rewriting keeps every value's size (only bools change, to 0/1). */
    out = malloc(len ? len : 1);
    n = rewrite_table(a, out, len);
    require(n == len, "%s: rewritten table is %zu bytes, not %zu", ctx,
                  n, len);
    require(table_validate(out, n, 1) == AMQP_OK,
                  "%s: rewritten table does not validate", ctx);
    b.ptr = out;
    b.len = n;
    assert_lists_eq(a, b, false, ctx);
    free(out);
}

/* Split frames off the front while frame_decode accepts them, and decode
 * the payloads of method and header frames. */
static void
robust_frames(struct rng *r, const uint8_t *in, size_t len, struct tally *t,
              const char *ctx)
{
    static const uint32_t frame_maxes[] = { 0, 4096, 131072, 8, 64 };
    uint32_t frame_max = frame_maxes[rng_below(r, NELEMS(frame_maxes))];
    size_t off = 0;

    for (;;) {
        struct frame f;
        enum amqp_status st;

        t->tried[T_FRAME]++;
        st = frame_decode(in + off, len - off, frame_max, &f);
        if (st != AMQP_OK)
            break;
        t->ok[T_FRAME]++;
        require(f.wire_len == (size_t)f.size + AMQP_FRAME_OVERHEAD &&
                          f.wire_len <= len - off &&
                          f.payload == in + off + AMQP_FRAME_HEADER_LEN &&
                          in[off + f.wire_len - 1] == AMQP_FRAME_END,
                      "%s: frame at %zu is inconsistent", ctx, off);
        require(frame_max == 0 || f.wire_len <= frame_max,
                      "%s: frame above frame_max", ctx);
        if (f.type == AMQP_FRAME_METHOD)
            robust_method(f.payload, f.size, t, ctx);
        else if (f.type == AMQP_FRAME_HEADER)
            robust_header(f.payload, f.size, t, ctx);
        off += f.wire_len;
    }
}

/* One valid encoding of the given kind, in a new exact-size block. */
static uint8_t *
gen_source(struct gen *g, int kind, size_t *len)
{
    struct amqp_method m;
    struct content_header h;
    struct amqp_table t;
    struct wire_wr w;
    uint8_t *hdr, *buf;
    size_t mlen, hlen, cap;
    int first;

    g->a->used = 0;
    switch (kind) {
    case T_METHOD:
        (void)gen_method(g, &m, &first);
        return method_encode_exact(&m, len);
    case T_HEADER:
        gen_header(g, &h, &first);
        return header_encode_exact(&h, len);
    case T_TABLE:
        t = gen_table(g, &first);
        *len = t.len;
        return copy_exact(t.ptr, t.len);
    default:
        /* a method, a content header, a body and a heartbeat */
        (void)gen_method(g, &m, &first);
        free(method_encode_exact(&m, &mlen));
        gen_header(g, &h, &first);
        hdr = header_encode_exact(&h, &hlen);
        cap = mlen + hlen + 5 + 4 * AMQP_FRAME_OVERHEAD;
        buf = malloc(cap);
        wire_wr_init(&w, buf, cap);
        require_eq(method_frame_put(&w, 1, &m), AMQP_OK);
        frame_put(&w, AMQP_FRAME_HEADER, 1, hdr, (uint32_t)hlen);
        frame_put(&w, AMQP_FRAME_BODY, 1, "hello", 5);
        frame_put_heartbeat(&w);
        require_eq(w.len, cap);
        free(hdr);
        *len = cap;
        return buf;
    }
}

START_TEST(mutations)
{
    struct rng r;
    struct arena a;
    struct model *mdl = calloc(1, sizeof(*mdl));
    struct arena tmp;
    struct gen g = { &r, &a, &tmp, mdl };
    struct tally tally;
    int kind = _i;

    memset(&tally, 0, sizeof(tally));
    rng_init(&r, 10 + (uint64_t)kind);
    arena_init(&a, 1 << 20);
    arena_init(&tmp, 4 * 32 * 1024);
    for (int iter = 0; iter < N_MUTATIONS; iter++) {
        size_t len, cap;
        uint8_t *src, *work, *in;
        char ctx[64];

        src = gen_source(&g, kind, &len);
        cap = len + 64;
        work = malloc(cap);
        memcpy(work, src, len);
        mutate(&r, work, &len, cap);
        in = copy_exact(work, len);
        snprintf(ctx, sizeof(ctx), "seed %u source %d iteration %d", seed,
                 kind, iter);

        /* Every decoder on every input: none may crash or over-read. */
        robust_method(in, len, &tally, ctx);
        robust_header(in, len, &tally, ctx);
        robust_table(in, len, &tally, ctx);
        robust_frames(&r, in, len, &tally, ctx);

        free(in);
        free(work);
        free(src);
    }
    /* The mutations neither broke everything nor nothing: the decoder
     * for the source's own kind saw both outcomes. */
    require(tally.ok[kind] > 0, "source %d: nothing decoded", kind);
    require(tally.ok[kind] < tally.tried[kind],
                  "source %d: every mutation decoded", kind);
    arena_free(&a);
    arena_free(&tmp);
    free(mdl);
}
END_TEST

static Suite *
random_suite(void)
{
    Suite *s = suite_create("random");
    TCase *tc;

    tc = tcase_create("method round trips");
    tcase_add_test(tc, random_methods);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("content header round trips");
    tcase_add_test(tc, random_content_headers);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("table round trips");
    tcase_add_test(tc, random_tables);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);

    tc = tcase_create("mutations");
    tcase_add_loop_test(tc, mutations, T_METHOD, T_FRAME + 1);
    tcase_set_timeout(tc, 120);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    const char *env = getenv("ROOST_SEED");

    if (env && *env) {
        char *end;
        unsigned long v;

        errno = 0;
        v = strtoul(env, &end, 0);
        if (errno || *end || v > UINT32_MAX) {
            fprintf(stderr, "ROOST_SEED: not a 32-bit number: %s\n", env);
            return EXIT_FAILURE;
        }
        seed = (uint32_t)v;
    }
    printf("seed %u\n", seed);
    fflush(stdout);
    return run_suite(random_suite());
}
