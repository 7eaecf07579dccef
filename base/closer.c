/*
 * SPDX-License-Identifier: Apache-2.0
 * Sockets closed on a thread of their own (closer.h).
 *
 * Closing a TCP socket whose peer has hung up costs the kernel the FIN
 * exchange: on loopback about half of a connection's teardown, all of it
 * inside close(2). 10,000 peers that hang up together kept the loop for
 * 10,000 such calls before it reached the next client; with the calls
 * on this thread the loop only reads the end of each stream and drops
 * the socket from epoll, and serves the next client in the meantime.
 *
 * The queue is a ring of CLOSER_RING descriptors under one mutex; the
 * thread is woken only when the ring turns non-empty, and takes all it
 * holds at once. A full ring (or no thread) closes in the caller. A
 * queued descriptor is still open, so its number cannot be handed out
 * again before the kernel has let go of it: there is no reuse race.
 */
#include "base/closer.h"

#include <pthread.h>
#include <stdbool.h>
#include <unistd.h>

#define CLOSER_RING 16384

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    pthread_t thread;
    bool running, stopping;
    int ring[CLOSER_RING];
    unsigned head, len;         /* the oldest, and how many */
} cl = { .mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

static void *
thread_main(void *arg)
{
    int batch[256];
    (void)arg;

    pthread_mutex_lock(&cl.mu);
    for (;;) {
        while (cl.len == 0 && !cl.stopping)
            pthread_cond_wait(&cl.cv, &cl.mu);
        if (cl.len == 0)
            break;
        unsigned n = 0;
        while (cl.len > 0 && n < sizeof(batch) / sizeof(batch[0])) {
            batch[n++] = cl.ring[cl.head];
            cl.head = (cl.head + 1) % CLOSER_RING;
            cl.len--;
        }
        pthread_mutex_unlock(&cl.mu);
        for (unsigned i = 0; i < n; i++)
            close(batch[i]);
        pthread_mutex_lock(&cl.mu);
    }
    pthread_mutex_unlock(&cl.mu);
    return NULL;
}

int
closer_start(void)
{
    if (cl.running)
        return 0;
    cl.stopping = false;
    if (pthread_create(&cl.thread, NULL, thread_main, NULL) != 0)
        return -1;
    cl.running = true;
    return 0;
}

void
closer_stop(void)
{
    if (!cl.running)
        return;
    pthread_mutex_lock(&cl.mu);
    cl.stopping = true;
    pthread_cond_signal(&cl.cv);
    pthread_mutex_unlock(&cl.mu);
    /* The thread closes what is queued before it ends. */
    pthread_join(cl.thread, NULL);
    cl.running = false;
}

void
closer_close(int fd)
{
    if (fd < 0)
        return;
    if (cl.running) {
        pthread_mutex_lock(&cl.mu);
        if (cl.len < CLOSER_RING && !cl.stopping) {
            cl.ring[(cl.head + cl.len) % CLOSER_RING] = fd;
            if (cl.len++ == 0)
                pthread_cond_signal(&cl.cv);
            pthread_mutex_unlock(&cl.mu);
            return;
        }
        pthread_mutex_unlock(&cl.mu);
    }
    close(fd);
}
