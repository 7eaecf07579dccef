/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * roost-perf: a load generator for AMQP 0-9-1 brokers, in the spirit of
 * RabbitMQ's PerfTest, on rabbitmq-c. It drives Roost and RabbitMQ alike
 * (bench/compare runs it against both).
 *
 * Shape. The main thread parses the options, declares the topology
 * (exchange, queues, bindings) on its own connection, starts one thread per
 * consumer and one per producer, each with its own connection and channel
 * 1, releases them together once all are set up, watches the clock and the
 * counters, and prints the report. Threads share nothing but the per-queue
 * sequence trackers and a few counters; everything else a thread touches
 * per message was allocated before the start.
 *
 * Each body starts with a 16-byte stamp: the send time (CLOCK_MONOTONIC,
 * ns, valid because producers and consumers run on one machine) and a
 * 16-bit producer id with a 48-bit sequence number, both big-endian. A
 * consumer turns the stamp into an end-to-end latency sample (log-bucketed
 * histogram) and sets the sequence's bit in the bitmap of its (queue,
 * producer) pair: a bit already set is a duplicate, a sequence lower than
 * the last one this consumer saw from that producer is a reordering, and
 * whatever the producers sent to a queue but nobody received is lost.
 *
 * Writes. Over plain TCP the producer encodes basic.publish, the content
 * header and the body frames itself from a per-producer template and
 * gathers them into one sendmsg() per batch (--batch bytes, flushed early
 * whenever the producer is about to wait); manual acks are gathered the same
 * way and flushed before the consumer blocks for input. rabbitmq-c still
 * does the handshake and decodes everything the broker sends. With --tls,
 * or --batch 0, every publish and ack goes through amqp_basic_publish /
 * amqp_basic_ack, one message at a time, like a typical application.
 *
 * The exit status says how the run ended: perf.h's EXIT_*, and --help.
 *
 * Files (tools/perf/, behind perf.h): main.c the process, the threads'
 * start and join, the monitor (clock, progress lines, when to stop);
 * options.c the command line, --help and --man-page; run.c the first
 * failure, the start line and the stop flags; conn.c a connection and its
 * errors; outq.c gathered output; producer.c and consumer.c the threads;
 * seq.c sequence checking; hist.c the latency histogram; topology.c the
 * exchange, queues and bindings; report.c the text and JSON report.
 */
#include <inttypes.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <time.h>

#include "perf.h"
#include "tools/perf_clock.h"

/* perf.h's queues, producers and consumers: alloc_run() allocates them
 * before the topology is declared, free_run() frees them at exit. */
struct pq *pqs;
struct producer *prods;
struct consumer *cons;

static volatile sig_atomic_t g_signals;

static void
on_signal(int sig)
{
    (void)sig;
    g_signals++;
}

/*
 * SIGINT or SIGTERM stops the producers (the monitor looks), a second one
 * the run; a broken connection is a write error, not SIGPIPE.
 */
static void
catch_signals(void)
{
    struct sigaction sa;

    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* The default 50 us timer slack would blur the rate limiter. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
}

static double
cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

static void
alloc_run(void)
{
    pqs = xcalloc((size_t)nqueues, sizeof(*pqs));
    prods = xcalloc((size_t)(o.producers ? o.producers : 1), sizeof(*prods));
    cons = xcalloc((size_t)(o.consumers ? o.consumers : 1), sizeof(*cons));
}

static void
free_run(void)
{
    for (int q = 0; q < nqueues; q++)
        seq_free(&pqs[q]);
    for (int i = 0; i < o.producers; i++)
        producer_free(&prods[i]);
    for (int i = 0; i < o.consumers; i++)
        consumer_free(&cons[i]);
    free(pqs);
    free(prods);
    free(cons);
}

/* ---- the monitor ---- */

static uint64_t
sum_published(void)
{
    uint64_t n = 0;
    for (int i = 0; i < o.producers; i++)
        n += atomic_load_explicit(&prods[i].published, memory_order_relaxed);
    return n;
}

static uint64_t
sum_received(int queue)
{
    uint64_t n = 0;
    for (int i = 0; i < o.consumers; i++)
        if (queue < 0 || cons[i].queue == queue)
            n += atomic_load_explicit(&cons[i].received, memory_order_relaxed);
    return n;
}

static bool
all_finished(bool producers)
{
    int n = producers ? o.producers : o.consumers;
    for (int i = 0; i < n; i++)
        if (!atomic_load(producers ? &prods[i].finished : &cons[i].finished))
            return false;
    return true;
}

/* Have the consumers received what they are owed? */
static bool
consumers_satisfied(void)
{
    if (o.consume_only) {
        uint64_t want = 0;
        if (o.count > 0)
            return sum_received(-1) >= o.count;
        for (int q = 0; q < nqueues; q++)
            want += pqs[q].initial;
        return sum_received(-1) >= want;
    }
    for (int q = 0; q < nqueues; q++) {
        uint64_t want = queue_sent(q);
        if (sum_received(q) < want)
            return false;
    }
    return true;
}

/* What the monitor remembers from one look to the next. */
struct watch {
    uint64_t next_report;       /* when the next progress line is due */
    uint64_t prev_pub, prev_recv, prev_t;   /* as of the last line */
    uint64_t progress_t, progress_n;        /* when the consumers last got
                                               something, and their total */
    bool producers_done;
};

static bool
duration_over(uint64_t t)
{
    return o.duration > 0 && t - g_start_ns >= (uint64_t)(o.duration * 1e9);
}

/* Have the consumers received nothing for --drain-timeout? */
static bool
stalled(struct watch *w, uint64_t t)
{
    uint64_t n = sum_received(-1);

    if (n != w->progress_n) {
        w->progress_n = n;
        w->progress_t = t;
    }
    if (w->progress_t == 0)     /* consume-only, nothing yet: from now */
        w->progress_t = t;
    return t - w->progress_t > (uint64_t)(o.drain_timeout * 1e9);
}

static void
progress_line(struct watch *w, uint64_t t)
{
    uint64_t pub = sum_published(), recv = sum_received(-1);
    double dt = (double)(t - w->prev_t) / 1e9;

    fprintf(stderr, "%7.1f s  sent %9.0f msg/s  received %9.0f msg/s"
            "  (total %" PRIu64 " / %" PRIu64 ")\n",
            (double)(t - g_start_ns) / 1e9,
            (double)(pub - w->prev_pub) / dt,
            (double)(recv - w->prev_recv) / dt, pub, recv);
    w->prev_pub = pub;
    w->prev_recv = recv;
    w->prev_t = t;
    w->next_report += (uint64_t)(o.interval * 1e9);
}

/*
 * Runs on the main thread from the start: every 20 ms it stops the
 * producers when --duration is over or on a signal, prints a progress
 * line every --interval, and returns once the consumers have what they
 * are owed or stopped getting it (after stopping them), or on a failure.
 */
static void
monitor(void)
{
    struct watch w = {
        .next_report = g_start_ns + (uint64_t)(o.interval * 1e9),
        .prev_t = g_start_ns,
        .producers_done = o.producers == 0,
    };

    for (;;) {
        uint64_t t;
        struct timespec ts = { 0, 20000000 };
        nanosleep(&ts, NULL);
        t = now_ns();
        if (atomic_load(&g_abort))
            return;
        if (g_signals > 0 && !atomic_load(&g_stop_producers)) {
            if (!o.quiet)
                fprintf(stderr, "roost-perf: interrupted, stopping\n");
            atomic_store(&g_stop_producers, true);
        }
        if (g_signals > 1) {
            fail(EXIT_USAGE, "interrupted twice, giving up");
            return;
        }
        if (g_signals > 0 && w.producers_done)
            break;              /* interrupted while draining */
        if (!w.producers_done && duration_over(t))
            atomic_store(&g_stop_producers, true);
        if (!w.producers_done && all_finished(true)) {
            w.producers_done = true;
            w.progress_t = t;
            w.progress_n = sum_received(-1);
        }
        if (o.interval > 0 && !o.quiet && t >= w.next_report)
            progress_line(&w, t);
        if (o.publish_only) {
            if (w.producers_done)
                return;
            continue;
        }
        if (o.consume_only) {
            if (consumers_satisfied() || duration_over(t) || stalled(&w, t))
                break;
            continue;
        }
        if (w.producers_done && (consumers_satisfied() || stalled(&w, t)))
            break;
    }
    atomic_store(&g_stop_consumers, true);
}

/* ---- the threads ---- */

static int started_c, started_p;        /* threads to join */

/*
 * Starts the consumers and, once they all consume, the producers, and
 * waits until all are ready at the start line. Returns false, after
 * fail(), if one could not start or set up.
 */
static bool
start_threads(void)
{
    for (int i = 0; i < o.consumers; i++) {
        cons[i].id = (unsigned)i;
        cons[i].queue = i % nqueues;
        if (pthread_create(&cons[i].thr, NULL, consumer_main, &cons[i]) != 0) {
            fail(EXIT_USAGE, "cannot start a thread");
            return false;
        }
        started_c++;
    }
    if (!wait_ready(o.consumers))
        return false;
    for (int i = 0; i < o.producers; i++) {
        prods[i].id = (unsigned)i;
        prods[i].queue = i % nqueues;
        routing_key(i, prods[i].rkey, sizeof(prods[i].rkey));
        if (pthread_create(&prods[i].thr, NULL, producer_main, &prods[i]) != 0) {
            fail(EXIT_USAGE, "cannot start a thread");
            return false;
        }
        started_p++;
    }
    return wait_ready(o.consumers + o.producers);
}

/* Stops and joins the threads started, closes their connections, and
 * returns when they had all ended. */
static uint64_t
stop_threads(void)
{
    uint64_t end_ns;

    atomic_store(&g_stop_producers, true);
    atomic_store(&g_stop_consumers, true);
    if (!g_go)
        go_cancel();
    for (int i = 0; i < started_p; i++)
        pthread_join(prods[i].thr, NULL);
    for (int i = 0; i < started_c; i++)
        pthread_join(cons[i].thr, NULL);
    end_ns = now_ns();
    for (int i = 0; i < started_p; i++)
        link_close(&prods[i].l);
    for (int i = 0; i < started_c; i++)
        link_close(&cons[i].l);
    return end_ns;
}

int
main(int argc, char **argv)
{
    struct link setup;
    double cpu0 = 0;
    uint64_t end_ns, enq_ns = 0, enqueued = 0;
    bool topology = false;

    parse_args(argc, argv);
    catch_signals();
    alloc_run();
    if (link_open(&setup, "setup") != 0)
        goto done;
    topology = true;
    if (setup_topology(&setup) != 0)
        goto done;
    if (start_threads()) {
        cpu0 = cpu_seconds();
        go();
        monitor();
    }
    end_ns = stop_threads();
    if (g_exit == 0 && g_go && o.publish_only) {
        enq_ns = wait_enqueued(&setup, &enqueued);
        if (enq_ns == 0 && g_exit == 0)
            fprintf(stderr, "roost-perf: warning: the queues hold only %"
                    PRIu64 " of the messages published\n", enqueued);
    }
    if (g_exit != 0 || !g_go)
        goto done;
    if (!report_run(cpu_seconds() - cpu0, end_ns, enq_ns, enqueued) &&
        o.fail_on_loss)
        g_exit = EXIT_INTEGRITY;

done:
    if (g_exit != 0 && g_exit != EXIT_INTEGRITY)
        report_error();
    if (topology && !o.keep && !o.publish_only && !setup.closed)
        teardown_topology(&setup, g_exit != 0 && g_exit != EXIT_INTEGRITY);
    link_close(&setup);
    free_run();
    options_free();
    return g_exit;
}
