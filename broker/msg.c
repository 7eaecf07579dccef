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

static uint64_t bytes_in_use;

/*
 * Freed messages of up to POOL_MAX bytes wait on a free list per 16-byte
 * size class for the next message of their class, so a steady stream of
 * messages allocates nothing. The lists hold at most POOL_BYTES in all;
 * beyond that, freed messages go back to malloc. Under AddressSanitizer a
 * pooled message is poisoned, so a use after free is still caught.
 */
#define POOL_CLASS 16
#define POOL_MAX 4096
#define POOL_BYTES (8u * 1024 * 1024)

static void *pool[POOL_MAX / POOL_CLASS + 1];
static size_t pool_bytes;

static struct msg *
pool_get(size_t size, uint32_t *alloc_size)
{
    if (size > POOL_MAX) {
        *alloc_size = (uint32_t)size;
        return xmalloc(size);
    }
    size_t cls = (size + POOL_CLASS - 1) / POOL_CLASS;
    void *p = pool[cls];
    *alloc_size = (uint32_t)(cls * POOL_CLASS);
    if (p == NULL)
        return xmalloc(*alloc_size);
    ASAN_UNPOISON_MEMORY_REGION(p, *alloc_size);
    pool[cls] = *(void **)p;
    pool_bytes -= *alloc_size;
    return p;
}

static void
pool_put(struct msg *m)
{
    size_t size = m->alloc_size;

    if (size > POOL_MAX || pool_bytes + size > POOL_BYTES) {
        free(m);
        return;
    }
    size_t cls = size / POOL_CLASS;
    *(void **)m = pool[cls];
    pool[cls] = m;
    pool_bytes += size;
    ASAN_POISON_MEMORY_REGION(m, size);
}

void
msg_pool_free(void)
{
    for (size_t cls = 0; cls < sizeof(pool) / sizeof(pool[0]); cls++)
        while (pool[cls] != NULL) {
            void *p = pool[cls];
            ASAN_UNPOISON_MEMORY_REGION(p, cls * POOL_CLASS);
            pool[cls] = *(void **)p;
            free(p);
        }
    pool_bytes = 0;
}

struct msg *
msg_new(struct amqp_bytes exchange, struct amqp_bytes rkey,
        const uint8_t *hdr, size_t hdr_len, const struct content_header *ch,
        bool body_later)
{
    uint64_t body_len = ch->body_size;
    size_t size = sizeof(struct msg) + exchange.len + 1 + rkey.len + 1 +
                  hdr_len + (body_later ? 0 : (size_t)body_len);
    uint32_t alloc_size;
    struct msg *m = pool_get(size, &alloc_size);
    char *p = (char *)(m + 1);

    memset(m, 0, sizeof(*m));
    m->refs = 1;
    m->alloc_size = alloc_size;
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
    m->body = body_later ? NULL : (uint8_t *)p + hdr_len;
    m->body_len = body_len;
    m->ttl = -1;
    const struct amqp_basic_props *pr = &ch->props;
    if (pr->flags & AMQP_BASIC_EXPIRATION_FLAG) {
        int64_t ttl = qargs_parse_expiration(pr->expiration);
        m->ttl = ttl >= 0 ? ttl : -1;
    }
    /* The decoded headers point into 'hdr': point them into the copy. */
    if (pr->flags & AMQP_BASIC_HEADERS_FLAG) {
        m->headers.ptr = (uint8_t *)p + (pr->headers.ptr - hdr);
        m->headers.len = pr->headers.len;
    }
    if (pr->flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        m->persistent = pr->delivery_mode == 2;
    if (pr->flags & AMQP_BASIC_PRIORITY_FLAG)
        m->priority = pr->priority;
    bytes_in_use += alloc_size;
    return m;
}

void
msg_borrow_body(struct msg *m, struct inblock *b, const uint8_t *body)
{
    m->blk = inblock_ref(b);
    m->body = (uint8_t *)body;
    TAILQ_INSERT_TAIL(&b->msgs, m, blk_link);
    b->pinned += m->body_len;
}

void
msg_body_alloc(struct msg *m)
{
    m->body = xmalloc(m->body_len);
    m->body_heap = true;
    bytes_in_use += m->body_len;
}

void
msg_body_frame(struct msg *m, struct inblock *b, const uint8_t *data,
               size_t n)
{
    if (m->body == NULL) {
        if (n == m->body_len) {
            msg_borrow_body(m, b, data);
            m->body_filled = n;
            return;
        }
        msg_body_alloc(m);
    }
    memcpy(m->body + m->body_filled, data, n);
    m->body_filled += n;
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
    if (n <= BODY_COPY_MAX) {
        evbuffer_add(conn_output(c), m->body + off, n);
    } else if (m->blk != NULL) {
        conn_output_lend(c, m->body + off, n, m->blk);
    } else {
        msg_ref(m);
        evbuffer_add_reference(conn_output(c), m->body + off, n,
                               body_ref_done, m);
    }
}

void
msg_body_copy(const struct msg *m, uint8_t *dst)
{
    if (m->body_len)
        memcpy(dst, m->body, m->body_len);
}

void
msg_body_copy_in(struct msg *m, const uint8_t *src)
{
    if (m->body_len)
        memcpy(m->body, src, m->body_len);
    m->body_filled = m->body_len;
}

/* Stop borrowing: drop the hold on the block (which may free it). */
static void
unborrow(struct msg *m)
{
    struct inblock *b = m->blk;

    TAILQ_REMOVE(&b->msgs, m, blk_link);
    b->pinned -= m->body_len;
    m->blk = NULL;
    inblock_unref(b);
}

void
msg_unborrow_all(struct inblock *b)
{
    struct msg *m;

    inblock_ref(b);
    while ((m = TAILQ_FIRST(&b->msgs)) != NULL) {
        const uint8_t *lent = m->body;
        msg_body_alloc(m);
        memcpy(m->body, lent, m->body_len);
        unborrow(m);
    }
    inblock_unref(b);
}

void
msg_unref(struct msg *m)
{
    if (m == NULL || --m->refs > 0)
        return;
    bytes_in_use -= m->alloc_size;
    if (m->blk != NULL) {
        unborrow(m);
    } else if (m->body_heap) {
        bytes_in_use -= m->body_len;
        free(m->body);
    }
    if (m->store_state != 0)
        store_msg_freed(m);
    pool_put(m);
}

uint64_t
msg_bytes_in_use(void)
{
    return bytes_in_use;
}
