/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * Gathered output, over plain TCP only: the frames a producer encodes
 * itself (basic.publish, its header, its body) and a consumer's acks are
 * queued as an iovec, small parts copied into a staging buffer and large
 * body tails referenced from the producer's template, and written with
 * one sendmsg() per batch instead of one write per frame.
 */
#include <errno.h>
#include <poll.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>

#include "perf.h"

void
outq_init(struct outq *q, size_t cap)
{
    memset(q, 0, sizeof(*q));
    q->cap = cap;
    q->stage = xcalloc(1, cap);
}

void
outq_copy(struct outq *q, const void *p, size_t n)
{
    uint8_t *dst = q->stage + q->used;
    struct iovec *last = q->niov > 0 ? &q->iov[q->niov - 1] : NULL;

    memcpy(dst, p, n);
    q->used += n;
    q->bytes += n;
    if (last != NULL && (uint8_t *)last->iov_base + last->iov_len == dst) {
        last->iov_len += n;
    } else {
        q->iov[q->niov].iov_base = dst;
        q->iov[q->niov].iov_len = n;
        q->niov++;
    }
}

void
outq_ref(struct outq *q, const void *p, size_t n)
{
    q->iov[q->niov].iov_base = (void *)p;
    q->iov[q->niov].iov_len = n;
    q->niov++;
    q->bytes += n;
}

int
outq_flush(struct link *l, struct outq *q, int (*on_input)(void *), void *arg)
{
    struct iovec *iov = q->iov;
    int n = q->niov;

    while (n > 0) {
        struct msghdr mh;
        ssize_t w;

        memset(&mh, 0, sizeof(mh));
        mh.msg_iov = iov;
        mh.msg_iovlen = (size_t)n;
        w = sendmsg(l->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (w < 0) {
            struct pollfd pfd;
            int e = errno;
            if (e == EINTR)
                continue;
            if (e != EAGAIN && e != EWOULDBLOCK) {
                /* The broker may have said why before closing. */
                if (on_input != NULL)
                    (void)on_input(arg);
                fail(EXIT_BROKER, "write to the broker failed: %s (%s)",
                     strerror(e), l->who);
                l->closed = true;
                return -1;
            }
            pfd.fd = l->fd;
            pfd.events = POLLOUT | (on_input != NULL ? POLLIN : 0);
            pfd.revents = 0;
            (void)poll(&pfd, 1, 100);
            if (atomic_load_explicit(&g_abort, memory_order_relaxed))
                return -1;
            if ((pfd.revents & POLLIN) && on_input != NULL && on_input(arg) != 0)
                return -1;
            continue;
        }
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (uint8_t *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    q->niov = 0;
    q->bytes = 0;
    q->used = 0;
    q->first_ns = 0;
    return 0;
}
