/*
 * SPDX-License-Identifier: Apache-2.0
 * Messages live in one allocation: the struct, the envelope (exchange
 * name, routing key, content header) unless it is shared, and, unless it
 * is lent by an input block or too large for one frame, the body.
 */
#include "broker/core/msg.h"
#include "amqp/table.h"

#include <stdlib.h>
#include <string.h>

#include <event2/buffer.h>

#include "amqp/props.h"
#include "broker/core/qargs.h"
#include "broker/core/store.h"
#include "broker/lib/asan.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

/* Bodies up to this size are copied into the output; larger ones are
 * referenced, which costs a chain entry but no copy. */
#define BODY_COPY_MAX 4096

_Static_assert(sizeof(struct msg) == 32, "struct msg grew");
_Static_assert(sizeof(struct msg_env) == 32, "struct msg_env grew");

static uint64_t bytes_in_use;

/*
 * Freed messages of up to POOL_MAX bytes wait on a free list per 16-byte
 * size class for the next message of their class, so a steady stream of
 * messages allocates nothing. A class asks malloc for 8 bytes less than
 * a multiple of 16, which is what fills its chunks exactly. The lists
 * hold at most POOL_BYTES in all; beyond that, freed messages go back to
 * malloc. Under AddressSanitizer a pooled message is poisoned, so a use
 * after free is still caught.
 */
#define POOL_CLASS 16
#define POOL_MAX 4096
#define POOL_BYTES (8u * 1024 * 1024)

static void *pool[POOL_MAX / POOL_CLASS + 2];
static size_t pool_bytes;

/* The bytes a class asks malloc for. */
static size_t
class_bytes(size_t cls)
{
    return cls * POOL_CLASS - 8;
}

/* A size's class (0: beyond the pool, malloc'd as it is). */
static size_t
class_of(size_t size)
{
    return size > POOL_MAX ? 0 : (size + 8 + POOL_CLASS - 1) / POOL_CLASS;
}

/* What an allocation of 'size' bytes really asks malloc for. */
static size_t
alloc_bytes(size_t size)
{
    size_t cls = class_of(size);
    return cls ? class_bytes(cls) : size;
}

static struct msg *
pool_get(size_t size)
{
    size_t cls = class_of(size);
    void *p = cls ? pool[cls] : NULL;

    if (p == NULL)
        return xmalloc(alloc_bytes(size));
    ASAN_UNPOISON_MEMORY_REGION(p, class_bytes(cls));
    pool[cls] = *(void **)p;
    pool_bytes -= class_bytes(cls);
    return p;
}

static void
pool_put(struct msg *m, size_t size)
{
    size_t cls = class_of(size), alloc = alloc_bytes(size);

    if (cls == 0 || pool_bytes + alloc > POOL_BYTES) {
        free(m);
        return;
    }
    *(void **)m = pool[cls];
    pool[cls] = m;
    pool_bytes += alloc;
    ASAN_POISON_MEMORY_REGION(m, alloc);
}

void
msg_pool_free(void)
{
    for (size_t cls = 1; cls < sizeof(pool) / sizeof(pool[0]); cls++)
        while (pool[cls] != NULL) {
            void *p = pool[cls];
            ASAN_UNPOISON_MEMORY_REGION(p, class_bytes(cls));
            pool[cls] = *(void **)p;
            free(p);
        }
    pool_bytes = 0;
}

/* An envelope's bytes: its struct, the names and the header. */
static size_t
env_size(size_t exchange_len, size_t rkey_len, size_t hdr_len)
{
    return sizeof(struct msg_env) + exchange_len + 1 + rkey_len + 1 + hdr_len;
}

static bool
env_inline(const struct msg *m)
{
    return m->env == (const struct msg_env *)(m + 1);
}

/* The struct and the envelope if it is inside: where what follows
 * starts. */
static size_t
head_size(const struct msg *m)
{
    const struct msg_env *e = m->env;
    return sizeof(struct msg) +
           (env_inline(m) ? env_size(e->exchange_len, e->rkey_len, e->hdr_len)
                          : 0);
}

static size_t
ext_offset(size_t head)
{
    return (head + 7) & ~(size_t)7;
}

/* The bytes a message asked its allocation for. */
static size_t
msg_size(const struct msg *m)
{
    size_t head = head_size(m);
    if (m->body_at == MSG_BODY_INLINE)
        return head + (size_t)m->body_len;
    return ext_offset(head) + sizeof(struct msg_ext);
}

static struct msg_ext *
ext_of(const struct msg *m)
{
    return (struct msg_ext *)((char *)m + ext_offset(head_size(m)));
}

/* The body's bytes, wherever they are. */
static uint8_t *
body_of(const struct msg *m)
{
    if (m->body_at == MSG_BODY_INLINE)
        return (uint8_t *)m + head_size(m);
    return ext_of(m)->body;
}

/* Fill envelope 'e' (its bytes follow it). */
static void
env_fill(struct msg_env *e, struct amqp_bytes exchange, struct amqp_bytes rkey,
         const uint8_t *hdr, size_t hdr_len, const struct content_header *ch)
{
    char *p = (char *)(e + 1);

    memset(e, 0, sizeof(*e));
    memcpy(p, exchange.ptr, exchange.len);
    p[exchange.len] = '\0';
    e->exchange_len = (uint8_t)exchange.len;
    p += exchange.len + 1;
    memcpy(p, rkey.ptr, rkey.len);
    p[rkey.len] = '\0';
    e->rkey_len = (uint8_t)rkey.len;
    p += rkey.len + 1;
    memcpy(p, hdr, hdr_len);
    e->hdr_len = (uint32_t)hdr_len;
    e->ttl = -1;
    const struct amqp_basic_props *pr = &ch->props;
    if (pr->flags & AMQP_BASIC_EXPIRATION_FLAG) {
        int64_t ttl = qargs_parse_expiration(pr->expiration);
        e->ttl = ttl >= 0 ? ttl : -1;
    }
    /* The decoded headers point into 'hdr': keep where. */
    if (pr->flags & AMQP_BASIC_HEADERS_FLAG) {
        struct amqp_field v;
        e->headers_off = (uint32_t)(pr->headers.ptr - hdr);
        e->headers_len = (uint32_t)pr->headers.len;
        e->cc_bcc = table_get(pr->headers, "CC", &v) ||
                    table_get(pr->headers, "BCC", &v);
    }
    if (pr->flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        e->persistent = pr->delivery_mode == 2;
    if (pr->flags & AMQP_BASIC_PRIORITY_FLAG)
        e->priority = pr->priority;
}

static void
env_unref(struct msg_env *e)
{
    if (--e->refs > 0)
        return;
    bytes_in_use -= env_size(e->exchange_len, e->rkey_len, e->hdr_len);
    free(e);
}

/* Whether 'a' (lengths and bytes back to back) is this envelope. */
static bool
same_bytes(const uint8_t *a, size_t alen, const void *b, size_t blen)
{
    return alen == blen && (alen == 0 || memcmp(a, b, alen) == 0);
}

static bool
env_is(const struct msg_env *e, struct amqp_bytes exchange,
       struct amqp_bytes rkey, const uint8_t *hdr, size_t hdr_len)
{
    const uint8_t *p = (const uint8_t *)(e + 1);
    return same_bytes(exchange.ptr, exchange.len, p, e->exchange_len) &&
           same_bytes(rkey.ptr, rkey.len, p + e->exchange_len + 1,
                      e->rkey_len) &&
           same_bytes(hdr, hdr_len, p + e->exchange_len + e->rkey_len + 2,
                      e->hdr_len);
}

/*
 * The envelope to share for this publish, with a reference for the
 * message, or NULL (the message carries its own). The second of two
 * publishes in a row with the same envelope makes the shared one.
 */
static struct msg_env *
env_share(struct msg_env_cache *c, struct amqp_bytes exchange,
          struct amqp_bytes rkey, const uint8_t *hdr, size_t hdr_len,
          const struct content_header *ch)
{
    if (c == NULL)
        return NULL;
    if (c->env != NULL && env_is(c->env, exchange, rkey, hdr, hdr_len)) {
        c->env->refs++;
        return c->env;
    }
    size_t n = exchange.len + rkey.len + hdr_len;
    if (c->have_last && same_bytes(exchange.ptr, exchange.len, c->last,
                                   c->last_ex) &&
        same_bytes(rkey.ptr, rkey.len, c->last + c->last_ex, c->last_rk) &&
        same_bytes(hdr, hdr_len, c->last + c->last_ex + c->last_rk,
                   c->last_hdr)) {
        size_t size = env_size(exchange.len, rkey.len, hdr_len);
        struct msg_env *e = xmalloc(size);
        env_fill(e, exchange, rkey, hdr, hdr_len, ch);
        e->refs = 2;                /* the cache's and the message's */
        bytes_in_use += size;
        if (c->env != NULL)
            env_unref(c->env);
        c->env = e;
        c->have_last = false;
        return e;
    }
    c->have_last = n <= MSG_ENV_CACHE_MAX;
    if (c->have_last) {
        if (c->last == NULL)
            c->last = xmalloc(MSG_ENV_CACHE_MAX);
        memcpy(c->last, exchange.ptr, exchange.len);
        memcpy(c->last + exchange.len, rkey.ptr, rkey.len);
        memcpy(c->last + exchange.len + rkey.len, hdr, hdr_len);
        c->last_ex = (uint32_t)exchange.len;
        c->last_rk = (uint32_t)rkey.len;
        c->last_hdr = (uint32_t)hdr_len;
    }
    return NULL;
}

void
msg_env_cache_clear(struct msg_env_cache *c)
{
    if (c->env != NULL)
        env_unref(c->env);
    free(c->last);
    memset(c, 0, sizeof(*c));
}

struct msg *
msg_new(struct amqp_bytes exchange, struct amqp_bytes rkey,
        const uint8_t *hdr, size_t hdr_len, const struct content_header *ch,
        bool body_later, struct msg_env_cache *cache)
{
    uint64_t body_len = ch->body_size;
    struct msg_env *shared = env_share(cache, exchange, rkey, hdr, hdr_len,
                                       ch);
    size_t head = sizeof(struct msg) +
                  (shared ? 0 : env_size(exchange.len, rkey.len, hdr_len));
    size_t size = body_later ? ext_offset(head) + sizeof(struct msg_ext)
                             : head + (size_t)body_len;
    struct msg *m = pool_get(size);

    memset(m, 0, sizeof(*m));
    m->refs = 1;
    if (shared != NULL) {
        m->env = shared;
    } else {
        m->env = (struct msg_env *)(m + 1);
        env_fill(m->env, exchange, rkey, hdr, hdr_len, ch);
    }
    m->body_len = (uint32_t)body_len;
    m->body_at = body_later ? MSG_BODY_NONE : MSG_BODY_INLINE;
    if (body_later)
        memset(ext_of(m), 0, sizeof(struct msg_ext));
    bytes_in_use += alloc_bytes(size);
    return m;
}

/* The whole body is at 'body' inside input block 'b': point at it and
 * hold 'b' (no copy). */
static void
msg_borrow_body(struct msg *m, struct inblock *b, const uint8_t *body)
{
    struct msg_ext *x = ext_of(m);
    x->blk = inblock_ref(b);
    x->body = (uint8_t *)body;
    x->m = m;
    m->body_at = MSG_BODY_LENT;
    TAILQ_INSERT_TAIL(&b->msgs, x, blk_link);
    b->pinned += m->body_len;
}

/* The first step of a body's own allocation; each next one doubles it,
 * up to the announced size. */
#define BODY_STEP_MIN (64 * 1024)

/* Room for 'need' bytes of the body in its own allocation (body_later,
 * not lent), grown in steps as frames arrive: what a publisher
 * announces costs nothing until it is sent, and an allocation is never
 * more than twice what arrived. Charged as it grows. */
static void
msg_body_reserve(struct msg *m, uint64_t need)
{
    struct msg_ext *x = ext_of(m);

    if (m->body_at == MSG_BODY_NONE) {
        m->body_at = MSG_BODY_HEAP;
        x->cap = 0;
    }
    if (need <= x->cap)
        return;
    uint64_t cap = (uint64_t)x->cap * 2;
    if (cap < BODY_STEP_MIN)
        cap = BODY_STEP_MIN;
    if (cap > m->body_len)
        cap = m->body_len;
    if (cap < need)
        cap = need;
    x->body = xrealloc(x->body, (size_t)cap);
    bytes_in_use += cap - x->cap;
    x->cap = (uint32_t)cap;
}

void
msg_body_frame(struct msg *m, struct inblock *b, const uint8_t *data,
               size_t n, uint64_t filled)
{
    if (m->body_at == MSG_BODY_NONE && n == m->body_len) {
        msg_borrow_body(m, b, data);
        return;
    }
    if (m->body_at != MSG_BODY_INLINE)
        msg_body_reserve(m, filled + n);
    memcpy(body_of(m) + filled, data, n);
}

void
msg_body_out(struct msg *m, struct evbuffer *out, uint64_t off, size_t n,
             msg_lend_fn *lend, void *arg)
{
    uint8_t *body = body_of(m);

    if (n <= BODY_COPY_MAX) {
        evbuffer_add(out, body + off, n);
    } else if (m->body_at == MSG_BODY_LENT) {
        lend(arg, body + off, n, ext_of(m)->blk, NULL);
    } else {
        lend(arg, body + off, n, NULL, m);
    }
}

void
msg_body_copy(const struct msg *m, uint8_t *dst)
{
    if (m->body_len)
        memcpy(dst, body_of(m), m->body_len);
}

void
msg_body_copy_in(struct msg *m, const uint8_t *src)
{
    if (m->body_len)
        memcpy(body_of(m), src, m->body_len);
}

void
msg_body_copy_from(struct msg *m, const struct msg *from)
{
    msg_body_copy(from, body_of(m));
}

struct msg *
msg_copy_as(const struct msg *m, struct amqp_bytes exchange,
            struct amqp_bytes rkey)
{
    struct content_header h;

    /* It decoded when it was published (or recovered). */
    if (content_header_decode(msg_hdr(m), msg_hdr_len(m), &h) != AMQP_OK)
        fatalx("msg: a stored content header does not decode");
    struct msg *copy = msg_new(exchange, rkey, msg_hdr(m), msg_hdr_len(m),
                               &h, false, NULL);
    msg_body_copy_from(copy, m);
    return copy;
}

/* Stop borrowing: drop the hold on the block (which may free it). */
static void
unborrow(struct msg *m)
{
    struct msg_ext *x = ext_of(m);
    struct inblock *b = x->blk;

    TAILQ_REMOVE(&b->msgs, x, blk_link);
    b->pinned -= m->body_len;
    x->blk = NULL;
    inblock_unref(b);
}

void
msg_unborrow_all(struct inblock *b)
{
    struct msg_ext *x;

    inblock_ref(b);
    while ((x = TAILQ_FIRST(&b->msgs)) != NULL) {
        struct msg *m = x->m;
        const uint8_t *lent = x->body;
        unborrow(m);
        m->body_at = MSG_BODY_NONE;
        x->body = NULL;
        msg_body_reserve(m, m->body_len);
        memcpy(x->body, lent, m->body_len);
    }
    inblock_unref(b);
}

void
msg_unref(struct msg *m)
{
    if (m == NULL || --m->refs > 0)
        return;
    size_t size = msg_size(m);
    bytes_in_use -= alloc_bytes(size);
    if (m->body_at == MSG_BODY_LENT) {
        unborrow(m);
    } else if (m->body_at == MSG_BODY_HEAP) {
        bytes_in_use -= ext_of(m)->cap;
        free(ext_of(m)->body);
    }
    if (m->srec != NULL)
        store_msg_freed(m);
    if (!env_inline(m))
        env_unref(m->env);
    pool_put(m, size);
}

uint64_t
msg_bytes_in_use(void)
{
    return bytes_in_use;
}

const char *
msg_log_id(const struct msg *m, char *out, size_t cap)
{
    struct content_header h;

    /* The header was checked at publish: it decodes. */
    if (content_header_decode(msg_hdr(m), msg_hdr_len(m), &h) != AMQP_OK ||
        !(h.props.flags & AMQP_BASIC_MESSAGE_ID_FLAG))
        return NULL;
    return log_escape(out, cap, h.props.message_id.ptr,
                      h.props.message_id.len);
}
