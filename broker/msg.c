/*
 * Messages live in one allocation: the struct, the exchange name, the
 * routing key, the content header and, unless it is lent by an input
 * block or too large for one frame, the body.
 */
#include "broker/msg.h"

#include <stdlib.h>
#include <string.h>
#if defined(__SANITIZE_ADDRESS__)        /* gcc */
#define MSG_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)    /* clang */
#define MSG_ASAN 1
#endif
#endif
#ifdef MSG_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#include <event2/buffer.h>

#include "amqp/props.h"
#include "broker/conn.h"
#include "broker/qargs.h"
#include "broker/store/store.h"
#include "broker/util.h"

/* Bodies up to this size are copied into the output; larger ones are
 * referenced, which costs a chain entry but no copy. */
#define BODY_COPY_MAX 4096

_Static_assert(sizeof(struct msg) == 64, "struct msg grew");

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

static struct msg *
pool_get(size_t size, uint16_t *cls_out, size_t *alloc)
{
    if (size > POOL_MAX) {
        *cls_out = 0;
        *alloc = size;
        return xmalloc(size);
    }
    size_t cls = (size + 8 + POOL_CLASS - 1) / POOL_CLASS;
    void *p = pool[cls];
    *cls_out = (uint16_t)cls;
    *alloc = class_bytes(cls);
    if (p == NULL)
        return xmalloc(*alloc);
    ASAN_UNPOISON_MEMORY_REGION(p, *alloc);
    pool[cls] = *(void **)p;
    pool_bytes -= *alloc;
    return p;
}

static void
pool_put(struct msg *m, size_t alloc)
{
    size_t cls = m->pool_class;

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

/* The names and the header, and where what follows them starts. */
static size_t
head_size(size_t exchange_len, size_t rkey_len, size_t hdr_len)
{
    return sizeof(struct msg) + exchange_len + 1 + rkey_len + 1 + hdr_len;
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
    size_t head = head_size(m->exchange_len, m->rkey_len, m->hdr_len);
    if (m->body_at == MSG_BODY_INLINE)
        return head + (size_t)m->body_len;
    return ext_offset(head) + sizeof(struct msg_ext);
}

static size_t
alloc_of(const struct msg *m)
{
    return m->pool_class ? class_bytes(m->pool_class) : msg_size(m);
}

static struct msg_ext *
ext_of(const struct msg *m)
{
    return (struct msg_ext *)((char *)m + ext_offset(head_size(
        m->exchange_len, m->rkey_len, m->hdr_len)));
}

/* The body's bytes, wherever they are. */
static uint8_t *
body_of(const struct msg *m)
{
    if (m->body_at == MSG_BODY_INLINE)
        return msg_hdr(m) + m->hdr_len;
    return ext_of(m)->body;
}

struct msg *
msg_new(struct amqp_bytes exchange, struct amqp_bytes rkey,
        const uint8_t *hdr, size_t hdr_len, const struct content_header *ch,
        bool body_later)
{
    uint64_t body_len = ch->body_size;
    size_t head = head_size(exchange.len, rkey.len, hdr_len);
    size_t size = body_later ? ext_offset(head) + sizeof(struct msg_ext)
                             : head + (size_t)body_len;
    uint16_t cls;
    size_t alloc;
    struct msg *m = pool_get(size, &cls, &alloc);
    char *p = (char *)(m + 1);

    memset(m, 0, sizeof(*m));
    m->refs = 1;
    m->pool_class = cls;
    memcpy(p, exchange.ptr, exchange.len);
    p[exchange.len] = '\0';
    m->exchange_len = (uint8_t)exchange.len;
    p += exchange.len + 1;
    memcpy(p, rkey.ptr, rkey.len);
    p[rkey.len] = '\0';
    m->rkey_len = (uint8_t)rkey.len;
    p += rkey.len + 1;
    memcpy(p, hdr, hdr_len);
    m->hdr_len = (uint32_t)hdr_len;
    m->body_len = body_len;
    m->body_at = body_later ? MSG_BODY_NONE : MSG_BODY_INLINE;
    if (body_later)
        memset(ext_of(m), 0, sizeof(struct msg_ext));
    m->ttl = -1;
    const struct amqp_basic_props *pr = &ch->props;
    if (pr->flags & AMQP_BASIC_EXPIRATION_FLAG) {
        int64_t ttl = qargs_parse_expiration(pr->expiration);
        m->ttl = ttl >= 0 ? ttl : -1;
    }
    /* The decoded headers point into 'hdr': keep where. */
    if (pr->flags & AMQP_BASIC_HEADERS_FLAG) {
        m->headers_off = (uint32_t)(pr->headers.ptr - hdr);
        m->headers_len = (uint32_t)pr->headers.len;
    }
    if (pr->flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        m->persistent = pr->delivery_mode == 2;
    if (pr->flags & AMQP_BASIC_PRIORITY_FLAG)
        m->priority = pr->priority;
    bytes_in_use += alloc;
    return m;
}

void
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

void
msg_body_alloc(struct msg *m)
{
    ext_of(m)->body = xmalloc(m->body_len ? m->body_len : 1);
    m->body_at = MSG_BODY_HEAP;
    bytes_in_use += m->body_len;
}

void
msg_body_frame(struct msg *m, struct inblock *b, const uint8_t *data,
               size_t n, uint64_t filled)
{
    if (m->body_at == MSG_BODY_NONE) {
        if (n == m->body_len) {
            msg_borrow_body(m, b, data);
            return;
        }
        msg_body_alloc(m);
    }
    memcpy(body_of(m) + filled, data, n);
}

static void
body_ref_done(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    msg_unref(arg);
}

void
msg_body_out(struct msg *m, struct conn *c, uint64_t off, size_t n)
{
    uint8_t *body = body_of(m);

    if (n <= BODY_COPY_MAX) {
        evbuffer_add(conn_output(c), body + off, n);
    } else if (m->body_at == MSG_BODY_LENT) {
        conn_output_lend(c, body + off, n, ext_of(m)->blk);
    } else {
        msg_ref(m);
        evbuffer_add_reference(conn_output(c), body + off, n,
                               body_ref_done, m);
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
        msg_body_alloc(m);
        memcpy(x->body, lent, m->body_len);
    }
    inblock_unref(b);
}

void
msg_unref(struct msg *m)
{
    if (m == NULL || --m->refs > 0)
        return;
    size_t alloc = alloc_of(m);
    bytes_in_use -= alloc;
    if (m->body_at == MSG_BODY_LENT) {
        unborrow(m);
    } else if (m->body_at == MSG_BODY_HEAP) {
        bytes_in_use -= m->body_len;
        free(ext_of(m)->body);
    }
    if (m->store_state != 0)
        store_msg_freed(m);
    pool_put(m, alloc);
}

uint64_t
msg_bytes_in_use(void)
{
    return bytes_in_use;
}
