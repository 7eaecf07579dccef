/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The report: the producers' and consumers' counts gathered once they are
 * joined, the rates over the time each side was busy, the latencies, and
 * what was lost, duplicated or reordered; printed as text (on stdout, on
 * stderr with --json) and with --json as one JSON object on stdout, whose
 * keys bench/compare and the tests read. A failed run's JSON is the error
 * and the exit status instead.
 */
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "perf.h"

struct result {
    double elapsed, pub_s, cons_s, cpu;
    uint64_t published, consumed, confirmed, nacked, unconfirmed, blocked;
    uint64_t enqueued;          /* publish-only: messages in the queues */
    uint64_t lost, dups, reordered, malformed, redelivered;
    double pub_rate, cons_rate, confirm_rate;
    struct hist lat, clat;
};

/*
 * What queue 'q' was sent: what the producers feeding it published or,
 * consuming only, as far as the highest sequences received say. 't' gets
 * what it received.
 */
static uint64_t
queue_expected(int q, struct seq_tally *t)
{
    seq_tally(&pqs[q], t);
    return o.consume_only ? t->high : queue_sent(q);
}

/*
 * The producers' counts. Each side's rate is over the time it was busy:
 * from the start to the last send (publish-only: until the queues held
 * it all, 'enq_ns'), and to the last confirm.
 */
static void
collect_producers(struct result *r, uint64_t enq_ns)
{
    double confirm_s = 0;

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
                (double)(p->last_confirm_ns - g_start_ns) / 1e9 > confirm_s)
                confirm_s = (double)(p->last_confirm_ns - g_start_ns) / 1e9;
        }
        if (s > r->pub_s)
            r->pub_s = s;
    }
    if (enq_ns > g_start_ns)
        r->pub_s = (double)(enq_ns - g_start_ns) / 1e9;
    r->confirm_rate = confirm_s > 0
                          ? (double)(r->confirmed + r->nacked) / confirm_s
                          : 0;
    r->pub_rate = r->pub_s > 0 ? (double)r->published / r->pub_s : 0;
}

/* The consumers' counts, their rate up to the last message received. */
static void
collect_consumers(struct result *r)
{
    uint64_t last = 0;

    for (int i = 0; i < o.consumers; i++) {
        struct consumer *c = &cons[i];
        uint64_t t = atomic_load(&c->last_recv_ns);
        r->consumed += atomic_load(&c->received);
        r->dups += c->dups;
        r->reordered += c->reordered;
        r->malformed += c->malformed;
        r->redelivered += c->redelivered;
        hist_merge(&r->lat, c->lat);
        if (t > last)
            last = t;
    }
    r->cons_s = last > g_start_ns ? (double)(last - g_start_ns) / 1e9 : 0;
    r->cons_rate = r->cons_s > 0 ? (double)r->consumed / r->cons_s : 0;
}

/*
 * Lost: what each queue was sent but nobody received; consuming only, at
 * least the backlog found at the start, or what --count asked for.
 */
static void
collect_loss(struct result *r)
{
    if (o.publish_only)
        return;
    for (int q = 0; q < nqueues; q++) {
        struct seq_tally t;
        uint64_t exp = queue_expected(q, &t);
        if (o.consume_only && o.count == 0 && pqs[q].initial > exp)
            exp = pqs[q].initial;
        r->lost += exp > t.received ? exp - t.received : 0;
    }
    if (o.consume_only && o.count > 0 && r->consumed < o.count &&
        o.count - r->consumed > r->lost)
        r->lost = o.count - r->consumed;
}

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
        uint64_t exp = queue_expected(q, &t);
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

bool
report_run(double cpu, uint64_t end_ns, uint64_t enq_ns, uint64_t enqueued)
{
    struct result *r = xcalloc(1, sizeof(*r));
    bool clean;

    r->enqueued = enqueued;
    r->cpu = cpu;
    r->elapsed = (double)(end_ns - g_start_ns) / 1e9;
    collect_producers(r, enq_ns);
    collect_consumers(r);
    collect_loss(r);
    report_human(r);
    if (o.json)
        report_json(r);
    clean = !(r->lost || r->dups || r->reordered);
    free(r);
    return clean;
}

void
report_error(void)
{
    fprintf(stderr, "roost-perf: %s\n", g_err);
    if (o.json) {
        printf("{\n  \"tool\": \"roost-perf\",\n  \"error\": ");
        json_str(stdout, g_err);
        printf(",\n  \"exit_code\": %d\n}\n", g_exit);
    }
}
