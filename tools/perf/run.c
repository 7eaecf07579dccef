/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * What the threads of a run share to start and to stop together: the
 * first failure (which wins, is reported, and stops everything), the start
 * line at which the consumers and producers wait until all are set up,
 * and the flags that stop the producers and then the consumers.
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "perf.h"
#include "tools/perf_clock.h"

/* ---- failure: the first one wins and stops everything ---- */

static pthread_mutex_t err_mu = PTHREAD_MUTEX_INITIALIZER;
int g_exit;
char g_err[1024];
atomic_bool g_abort;

void
fail(int code, const char *fmt, ...)
{
    va_list ap;
    pthread_mutex_lock(&err_mu);
    if (g_exit == 0) {
        g_exit = code;
        va_start(ap, fmt);
        vsnprintf(g_err, sizeof(g_err), fmt, ap);
        va_end(ap);
    }
    pthread_mutex_unlock(&err_mu);
    atomic_store(&g_abort, true);
}

void *
xcalloc(size_t n, size_t size)
{
    void *p = calloc(n, size);
    if (p == NULL) {
        fprintf(stderr, "roost-perf: out of memory\n");
        exit(EXIT_USAGE);
    }
    return p;
}

/* ---- start line ---- */

static pthread_mutex_t go_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t go_cv = PTHREAD_COND_INITIALIZER;
static int g_ready;             /* threads at the start line */
bool g_go;
uint64_t g_start_ns;

/*
 * Waits up to 50 ms for a change at the start line, with go_mu held: the
 * timeout makes an abort, which does not signal, seen soon enough.
 */
static void
go_wait(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += 50000000;
    if (ts.tv_nsec >= 1000000000) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000;
    }
    pthread_cond_timedwait(&go_cv, &go_mu, &ts);
}

/* Reports the caller ready and waits for the start; false on abort. */
bool
ready_and_wait(void)
{
    bool go;
    pthread_mutex_lock(&go_mu);
    g_ready++;
    pthread_cond_broadcast(&go_cv);
    while (!g_go && !atomic_load(&g_abort))
        go_wait();
    go = g_go && !atomic_load(&g_abort);
    pthread_mutex_unlock(&go_mu);
    return go;
}

/* Waits until 'n' threads are ready; false on abort. */
bool
wait_ready(int n)
{
    bool ok;
    pthread_mutex_lock(&go_mu);
    while (g_ready < n && !atomic_load(&g_abort))
        go_wait();
    ok = g_ready >= n && !atomic_load(&g_abort);
    pthread_mutex_unlock(&go_mu);
    return ok;
}

void
go(void)
{
    pthread_mutex_lock(&go_mu);
    g_start_ns = now_ns();
    g_go = true;
    pthread_cond_broadcast(&go_cv);
    pthread_mutex_unlock(&go_mu);
}

/* A start that will not happen: wakes the threads waiting for it. */
void
go_cancel(void)
{
    atomic_store(&g_abort, true);
    pthread_mutex_lock(&go_mu);
    pthread_cond_broadcast(&go_cv);
    pthread_mutex_unlock(&go_mu);
}

atomic_bool g_stop_producers, g_stop_consumers;
