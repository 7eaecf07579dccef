/*
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
 */
#define _GNU_SOURCE
#include <amqp.h>
#include <amqp_ssl_socket.h>
#include <amqp_tcp_socket.h>
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <netdb.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#include "perf.h"
#include "tools/perf_clock.h"

struct pq *pqs;
struct producer *prods;
struct consumer *cons;

/* ---- clock: tools/perf_clock.h ---- */

static double
cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + ru.ru_stime.tv_usec / 1e6;
}

/* ---- report ---- */

struct result {
    double elapsed, pub_s, cons_s, cpu;
    uint64_t published, consumed, confirmed, nacked, unconfirmed, blocked;
    uint64_t enqueued;          /* publish-only: messages in the queues */
    uint64_t lost, dups, reordered, malformed, redelivered;
    double pub_rate, cons_rate, confirm_rate;
    struct hist lat, clat;
};

static void
json_hist(FILE *f, const char *name, const struct hist *h)
{
    fprintf(f, "  \"%s\": {\"count\": %" PRIu64 ", \"min\": %.1f, "
            "\"mean\": %.1f, \"p50\": %.1f, \"p95\": %.1f, \"p99\": %.1f, "
            "\"p99_9\": %.1f, \"max\": %.1f},\n", name, h->n,
            h->min / 1e3, h->n ? (double)h->sum / (double)h->n / 1e3 : 0.0,
            hist_pct(h, 0.50) / 1e3, hist_pct(h, 0.95) / 1e3,
            hist_pct(h, 0.99) / 1e3, hist_pct(h, 0.999) / 1e3,
            h->max / 1e3);
}

static void
json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

static const char *
mode_name(void)
{
    return o.publish_only ? "publish-only" : o.consume_only ? "consume-only"
                                                             : "both";
}

static void
report_json(const struct result *r)
{
    FILE *f = stdout;
    fprintf(f, "{\n  \"tool\": \"roost-perf\",\n  \"broker\": ");
    json_str(f, o.host);
    fprintf(f, ",\n  \"port\": %d,\n  \"mode\": \"%s\",\n", o.port,
            mode_name());
    fprintf(f, "  \"config\": {\"producers\": %d, \"consumers\": %d, "
            "\"queues\": %d, \"broadcast\": %s, \"exchange\": \"%s\", "
            "\"size\": %zu, \"rate\": %g, \"duration\": %g, \"count\": %"
            PRIu64 ", \"confirm\": %d, \"persistent\": %s, \"prefetch\": %d, "
            "\"autoack\": %s, \"multi_ack\": %d, \"tls\": %s, \"batch\": %zu},\n",
            o.producers, o.consumers, nqueues, broadcast ? "true" : "false",
            xtype_names[o.exchange], o.size, o.rate, o.duration, o.count,
            o.confirm, o.persistent ? "true" : "false", o.prefetch,
            o.autoack ? "true" : "false", o.multi_ack,
            o.tls ? "true" : "false", o.batch);
    fprintf(f, "  \"elapsed_s\": %.3f,\n", r->elapsed);
    fprintf(f, "  \"published\": %" PRIu64 ",\n", r->published);
    fprintf(f, "  \"publish_s\": %.3f,\n", r->pub_s);
    fprintf(f, "  \"publish_rate\": %.1f,\n", r->pub_rate);
    if (o.publish_only)
        fprintf(f, "  \"enqueued\": %" PRIu64 ",\n", r->enqueued);
    fprintf(f, "  \"confirmed\": %" PRIu64 ",\n", r->confirmed);
    fprintf(f, "  \"nacked\": %" PRIu64 ",\n", r->nacked);
    fprintf(f, "  \"unconfirmed\": %" PRIu64 ",\n", r->unconfirmed);
    fprintf(f, "  \"confirm_rate\": %.1f,\n", r->confirm_rate);
    fprintf(f, "  \"consumed\": %" PRIu64 ",\n", r->consumed);
    fprintf(f, "  \"consume_s\": %.3f,\n", r->cons_s);
    fprintf(f, "  \"consume_rate\": %.1f,\n", r->cons_rate);
    json_hist(f, "latency_us", &r->lat);
    if (o.confirm > 0)
        json_hist(f, "confirm_latency_us", &r->clat);
    fprintf(f, "  \"lost\": %" PRIu64 ",\n", r->lost);
    fprintf(f, "  \"duplicated\": %" PRIu64 ",\n", r->dups);
    fprintf(f, "  \"reordered\": %" PRIu64 ",\n", r->reordered);
    fprintf(f, "  \"redelivered\": %" PRIu64 ",\n", r->redelivered);
    fprintf(f, "  \"malformed\": %" PRIu64 ",\n", r->malformed);
    fprintf(f, "  \"blocked\": %" PRIu64 ",\n", r->blocked);
    fprintf(f, "  \"client_cpu_s\": %.3f,\n", r->cpu);
    fprintf(f, "  \"per_queue\": [");
    for (int q = 0; q < nqueues; q++) {
        struct seq_tally t;
        uint64_t exp = 0;
        seq_tally(&pqs[q], &t);
        if (o.consume_only)
            exp = t.high;
        else
            for (int p = 0; p < o.producers; p++)
                if (broadcast || p % nqueues == q)
                    exp += atomic_load(&prods[p].published);
        if (o.consume_only && pqs[q].initial > exp)
            exp = pqs[q].initial;
        fprintf(f, "%s\n    {\"queue\": ", q ? "," : "");
        json_str(f, pqs[q].name);
        fprintf(f, ", \"expected\": %" PRIu64 ", \"received\": %" PRIu64
                ", \"lost\": %" PRIu64 ", \"duplicated\": %" PRIu64
                ", \"reordered\": %" PRIu64 "}", exp, t.received,
                exp > t.received ? exp - t.received : 0, t.dups,
                t.reordered);
    }
    fprintf(f, "%s],\n  \"ok\": %s\n}\n", nqueues ? "\n  " : "",
            r->lost || r->dups || r->reordered ? "false" : "true");
}

static void
fmt_us(char *out, size_t len, uint64_t ns)
{
    if (ns >= 10000000000u)
        snprintf(out, len, "%.1f s", ns / 1e9);
    else if (ns >= 10000000u)
        snprintf(out, len, "%.1f ms", ns / 1e6);
    else
        snprintf(out, len, "%.0f us", ns / 1e3);
}

static void
report_hist(FILE *f, const char *name, const struct hist *h)
{
    static const double qs[] = { 0.5, 0.95, 0.99, 0.999 };
    static const char *const qn[] = { "p50", "p95", "p99", "p99.9" };
    char b[32];

    fprintf(f, "  %-12s", name);
    for (int i = 0; i < 4; i++) {
        fmt_us(b, sizeof(b), hist_pct(h, qs[i]));
        fprintf(f, " %s %s ", qn[i], b);
    }
    fmt_us(b, sizeof(b), h->max);
    fprintf(f, " max %s\n", b);
}

static void
report_human(const struct result *r)
{
    FILE *f = o.json ? stderr : stdout;
    char rate[32];

    if (o.rate > 0)
        snprintf(rate, sizeof(rate), "%g msg/s per producer", o.rate);
    else
        snprintf(rate, sizeof(rate), "unlimited rate");
    fprintf(f, "roost-perf %s:%d  %s, %d producer(s), %d consumer(s), "
            "%d queue(s)%s, %zu B, %s, %s%s%s\n", o.host, o.port, mode_name(),
            o.producers, o.consumers, nqueues, broadcast ? " (fan-out)" : "",
            o.size, rate, o.autoack ? "autoack" : "manual acks",
            o.persistent ? ", persistent" : "",
            o.confirm > 0 ? ", confirms" : "");
    fprintf(f, "  %-12s %12s %12s\n", "", "published", "consumed");
    fprintf(f, "  %-12s %12" PRIu64 " %12" PRIu64 "\n", "messages",
            r->published, r->consumed);
    fprintf(f, "  %-12s %12.0f %12.0f\n", "msg/s", r->pub_rate, r->cons_rate);
    fprintf(f, "  %-12s %12.2f %12.2f\n", "seconds", r->pub_s, r->cons_s);
    if (r->lat.n > 0)
        report_hist(f, "latency", &r->lat);
    if (o.confirm > 0) {
        fprintf(f, "  confirms     %" PRIu64 " acked, %" PRIu64 " nacked, %"
                PRIu64 " unconfirmed, %.0f/s\n", r->confirmed, r->nacked,
                r->unconfirmed, r->confirm_rate);
        if (r->clat.n > 0)
            report_hist(f, "confirm lat.", &r->clat);
    }
    if (!o.publish_only)
        fprintf(f, "  integrity    lost %" PRIu64 ", duplicated %" PRIu64
                ", reordered %" PRIu64 "%s\n", r->lost, r->dups, r->reordered,
                r->lost || r->dups || r->reordered ? "  <-- NOT OK" : "");
    if (r->malformed || r->redelivered || r->blocked)
        fprintf(f, "  also         malformed %" PRIu64 ", redelivered %" PRIu64
                ", connection.blocked %" PRIu64 "\n", r->malformed,
                r->redelivered, r->blocked);
    fprintf(f, "  client CPU   %.2f s\n", r->cpu);
}

/* ---- main ---- */

static volatile sig_atomic_t g_signals;

static void
on_signal(int sig)
{
    (void)sig;
    g_signals++;
}

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

static uint64_t
last_receive_ns(void)
{
    uint64_t t = 0;
    for (int i = 0; i < o.consumers; i++) {
        uint64_t x = atomic_load(&cons[i].last_recv_ns);
        if (x > t)
            t = x;
    }
    return t;
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
        uint64_t want = 0;
        for (int p = 0; p < o.producers; p++)
            if (broadcast || p % nqueues == q)
                want += atomic_load(&prods[p].published);
        if (sum_received(q) < want)
            return false;
    }
    return true;
}

static void
monitor(void)
{
    uint64_t next_report = g_start_ns + (uint64_t)(o.interval * 1e9);
    uint64_t prev_pub = 0, prev_recv = 0, prev_t = g_start_ns;
    uint64_t progress_t = 0, progress_n = 0;
    bool producers_done = o.producers == 0;

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
        if (g_signals > 0 && producers_done)
            break;              /* interrupted while draining */
        if (!producers_done && o.duration > 0 &&
            t - g_start_ns >= (uint64_t)(o.duration * 1e9))
            atomic_store(&g_stop_producers, true);
        if (!producers_done && all_finished(true)) {
            producers_done = true;
            progress_t = t;
            progress_n = sum_received(-1);
        }
        if (o.interval > 0 && !o.quiet && t >= next_report) {
            uint64_t pub = sum_published(), recv = sum_received(-1);
            double dt = (double)(t - prev_t) / 1e9;
            fprintf(stderr, "%7.1f s  sent %9.0f msg/s  received %9.0f msg/s"
                    "  (total %" PRIu64 " / %" PRIu64 ")\n",
                    (double)(t - g_start_ns) / 1e9,
                    (double)(pub - prev_pub) / dt,
                    (double)(recv - prev_recv) / dt, pub, recv);
            prev_pub = pub;
            prev_recv = recv;
            prev_t = t;
            next_report += (uint64_t)(o.interval * 1e9);
        }
        if (o.publish_only) {
            if (producers_done)
                return;
            continue;
        }
        if (o.consume_only) {
            uint64_t n = sum_received(-1);
            if (n != progress_n) {
                progress_n = n;
                progress_t = t;
            }
            if (progress_t == 0)
                progress_t = t;
            if (consumers_satisfied() ||
                (o.duration > 0 &&
                 t - g_start_ns >= (uint64_t)(o.duration * 1e9)) ||
                t - progress_t > (uint64_t)(o.drain_timeout * 1e9))
                break;
            continue;
        }
        if (producers_done) {
            uint64_t n = sum_received(-1);
            if (n != progress_n) {
                progress_n = n;
                progress_t = t;
            }
            if (consumers_satisfied() ||
                t - progress_t > (uint64_t)(o.drain_timeout * 1e9))
                break;
        }
    }
    atomic_store(&g_stop_consumers, true);
}

int
main(int argc, char **argv)
{
    struct link setup;
    struct result *r;
    struct sigaction sa;
    double cpu0 = 0;
    int started_c = 0, started_p = 0;
    uint64_t end_ns;
    bool topology = false;
    uint64_t enq_ns = 0, enqueued = 0;

    parse_args(argc, argv);
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = on_signal;
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    signal(SIGPIPE, SIG_IGN);
    /* The default 50 us timer slack would blur the rate limiter. */
    (void)prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);

    pqs = xcalloc((size_t)nqueues, sizeof(*pqs));
    prods = xcalloc((size_t)(o.producers ? o.producers : 1), sizeof(*prods));
    cons = xcalloc((size_t)(o.consumers ? o.consumers : 1), sizeof(*cons));

    if (link_open(&setup, "setup") != 0)
        goto done;
    topology = true;
    if (setup_topology(&setup) != 0)
        goto done;

    for (int i = 0; i < o.consumers; i++) {
        cons[i].id = (unsigned)i;
        cons[i].queue = i % nqueues;
        if (pthread_create(&cons[i].thr, NULL, consumer_main, &cons[i]) != 0) {
            fail(EXIT_USAGE, "cannot start a thread");
            goto join;
        }
        started_c++;
    }
    if (!wait_ready(o.consumers))
        goto join;
    for (int i = 0; i < o.producers; i++) {
        prods[i].id = (unsigned)i;
        prods[i].queue = i % nqueues;
        routing_key(i, prods[i].rkey, sizeof(prods[i].rkey));
        if (pthread_create(&prods[i].thr, NULL, producer_main, &prods[i]) != 0) {
            fail(EXIT_USAGE, "cannot start a thread");
            goto join;
        }
        started_p++;
    }
    if (!wait_ready(o.consumers + o.producers))
        goto join;
    cpu0 = cpu_seconds();
    go();
    monitor();
join:
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
    if (g_exit == 0 && g_go && o.publish_only) {
        enq_ns = wait_enqueued(&setup, &enqueued);
        if (enq_ns == 0 && g_exit == 0)
            fprintf(stderr, "roost-perf: warning: the queues hold only %"
                    PRIu64 " of the messages published\n", enqueued);
    }
    if (g_exit != 0 || !g_go)
        goto done;

    r = xcalloc(1, sizeof(*r));
    r->enqueued = enqueued;
    r->cpu = cpu_seconds() - cpu0;
    r->elapsed = (double)(end_ns - g_start_ns) / 1e9;
    for (int i = 0; i < o.producers; i++) {
        struct producer *p = &prods[i];
        double s = p->last_send_ns > g_start_ns
                       ? (double)(p->last_send_ns - g_start_ns) / 1e9 : 0;
        r->published += atomic_load(&p->published);
        r->confirmed += p->confirmed;
        r->nacked += p->nacked;
        r->blocked += p->blocked;
        if (o.confirm > 0) {
            r->unconfirmed += p->next_tag - p->low_tag;
            hist_merge(&r->clat, p->clat);
            if (p->last_confirm_ns > g_start_ns &&
                (double)(p->last_confirm_ns - g_start_ns) / 1e9 > r->confirm_rate)
                r->confirm_rate = (double)(p->last_confirm_ns - g_start_ns) / 1e9;
        }
        if (s > r->pub_s)
            r->pub_s = s;
    }
    /* Publish-only: count until the broker has queued them all. */
    if (enq_ns > g_start_ns)
        r->pub_s = (double)(enq_ns - g_start_ns) / 1e9;
    r->confirm_rate = r->confirm_rate > 0
                          ? (double)(r->confirmed + r->nacked) / r->confirm_rate
                          : 0;
    r->pub_rate = r->pub_s > 0 ? (double)r->published / r->pub_s : 0;
    for (int i = 0; i < o.consumers; i++) {
        struct consumer *c = &cons[i];
        r->consumed += atomic_load(&c->received);
        r->dups += c->dups;
        r->reordered += c->reordered;
        r->malformed += c->malformed;
        r->redelivered += c->redelivered;
        hist_merge(&r->lat, c->lat);
    }
    {
        uint64_t last = last_receive_ns();
        r->cons_s = last > g_start_ns ? (double)(last - g_start_ns) / 1e9 : 0;
        r->cons_rate = r->cons_s > 0 ? (double)r->consumed / r->cons_s : 0;
    }
    if (!o.publish_only) {
        for (int q = 0; q < nqueues; q++) {
            struct seq_tally t;
            uint64_t exp = 0;
            seq_tally(&pqs[q], &t);
            if (o.consume_only)
                exp = t.high;
            else
                for (int p = 0; p < o.producers; p++)
                    if (broadcast || p % nqueues == q)
                        exp += atomic_load(&prods[p].published);
            if (o.consume_only && o.count == 0 && pqs[q].initial > exp)
                exp = pqs[q].initial;
            r->lost += exp > t.received ? exp - t.received : 0;
        }
        if (o.consume_only && o.count > 0 && r->consumed < o.count &&
            o.count - r->consumed > r->lost)
            r->lost = o.count - r->consumed;
    }
    report_human(r);
    if (o.json)
        report_json(r);
    if (o.fail_on_loss && (r->lost || r->dups || r->reordered))
        g_exit = EXIT_INTEGRITY;
    free(r);

done:
    if (g_exit != 0 && g_exit != EXIT_INTEGRITY) {
        fprintf(stderr, "roost-perf: %s\n", g_err);
        if (o.json) {
            printf("{\n  \"tool\": \"roost-perf\",\n  \"error\": ");
            json_str(stdout, g_err);
            printf(",\n  \"exit_code\": %d\n}\n", g_exit);
        }
    }
    if (topology && !o.keep && !o.publish_only && !setup.closed)
        teardown_topology(&setup, g_exit != 0 && g_exit != EXIT_INTEGRITY);
    link_close(&setup);
    for (int q = 0; q < nqueues; q++)
        seq_free(&pqs[q]);
    for (int i = 0; i < o.producers; i++)
        producer_free(&prods[i]);
    for (int i = 0; i < o.consumers; i++)
        consumer_free(&cons[i]);
    free(pqs);
    free(prods);
    free(cons);
    options_free();
    return g_exit;
}
