/*
 * SPDX-License-Identifier: Apache-2.0
 *
 * The topology, on the main thread's own connection: the exchange of
 * --exchange (named after --queue-prefix and the type), the queues (with
 * --queue-type and --queue-mode) and their bindings, declared and purged
 * before the run and deleted after it unless --keep; the routing key each
 * producer publishes with; and, for --publish-only, the wait until the
 * queues hold what was published.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "perf.h"
#include "tools/perf_clock.h"

char xname[300];

int
setup_topology(struct link *l)
{
    static const char *const types[] = { "", "direct", "fanout", "topic" };

    if (o.exchange != X_DEFAULT) {
        snprintf(xname, sizeof(xname), "%s%s", o.prefix, types[o.exchange]);
        if (!o.consume_only) {
            amqp_exchange_declare(l->st, CH, amqp_cstring_bytes(xname),
                                  amqp_cstring_bytes(types[o.exchange]), 0,
                                  0, 0, 0, amqp_empty_table);
            if (rpc_check(l, "exchange.declare", EXIT_BROKER) != 0)
                return -1;
        }
    }
    for (int i = 0; i < nqueues; i++) {
        struct pq *q = &pqs[i];
        amqp_queue_declare_ok_t *ok;

        snprintf(q->name, sizeof(q->name), "%s%d", o.prefix, i);
        /* Consume-only looks the queue up (passive) to learn its backlog. */
        amqp_table_entry_t qt[2];
        amqp_table_t qargs = amqp_empty_table;
        const char *names[2] = { "x-queue-type", "x-queue-mode" };
        const char *vals[2] = { o.queue_type, o.queue_mode };
        qargs.entries = qt;
        for (int k = 0; k < 2 && !o.consume_only; k++) {
            if (vals[k] == NULL)
                continue;
            amqp_table_entry_t *en = &qt[qargs.num_entries++];
            en->key = amqp_cstring_bytes(names[k]);
            en->value.kind = AMQP_FIELD_KIND_UTF8;
            en->value.value.bytes = amqp_cstring_bytes(vals[k]);
        }
        ok = amqp_queue_declare(l->st, CH, amqp_cstring_bytes(q->name),
                                o.consume_only, o.persistent || o.queue_type,
                                0, 0, qargs);
        if (rpc_check(l, "queue.declare", EXIT_BROKER) != 0)
            return -1;
        if (o.consume_only) {
            q->initial = ok->message_count;
            continue;
        }
        if (o.exchange != X_DEFAULT) {
            if (o.exchange == X_FANOUT)
                q->bind_key[0] = '\0';
            else if (o.exchange == X_TOPIC)
                snprintf(q->bind_key, sizeof(q->bind_key),
                         broadcast ? "perf.#" : "perf.%d.#", i);
            else
                snprintf(q->bind_key, sizeof(q->bind_key), "%s",
                         broadcast ? "perf" : q->name);
            amqp_queue_bind(l->st, CH, amqp_cstring_bytes(q->name),
                            amqp_cstring_bytes(xname),
                            amqp_cstring_bytes(q->bind_key), amqp_empty_table);
            if (rpc_check(l, "queue.bind", EXIT_BROKER) != 0)
                return -1;
        }
        /* A fresh run: leftovers would show up as duplicates. A stream
         * cannot be purged (540): it must be new. */
        if (o.queue_type && strcmp(o.queue_type, "stream") == 0)
            continue;
        amqp_queue_purge(l->st, CH, amqp_cstring_bytes(q->name));
        if (rpc_check(l, "queue.purge", EXIT_BROKER) != 0)
            return -1;
    }
    return 0;
}

void
routing_key(int pid, char *out, size_t len)
{
    int qi = pid % nqueues;
    switch (o.exchange) {
    case X_DEFAULT:
        snprintf(out, len, "%s", pqs[qi].name);
        break;
    case X_DIRECT:
        snprintf(out, len, "%s", broadcast ? "perf" : pqs[qi].name);
        break;
    case X_FANOUT:
        out[0] = '\0';
        break;
    case X_TOPIC:
        snprintf(out, len, "perf.%d.%d", broadcast ? 0 : qi, pid);
        break;
    }
}

uint64_t
queue_sent(int q)
{
    uint64_t n = 0;

    for (int p = 0; p < o.producers; p++)
        if (broadcast || p % nqueues == q)
            n += atomic_load(&prods[p].published);
    return n;
}

void
teardown_topology(struct link *l, bool quiet)
{
    for (int i = 0; i < nqueues && !l->closed; i++) {
        amqp_rpc_reply_t r;
        amqp_queue_delete(l->st, CH, amqp_cstring_bytes(pqs[i].name), 0, 0);
        r = amqp_get_rpc_reply(l->st);
        if (r.reply_type != AMQP_RESPONSE_NORMAL) {
            if (!quiet)
                fprintf(stderr, "roost-perf: warning: could not delete queue "
                        "%s\n", pqs[i].name);
            l->closed = r.reply_type != AMQP_RESPONSE_SERVER_EXCEPTION ||
                        r.reply.id == AMQP_CONNECTION_CLOSE_METHOD;
            return;
        }
    }
    if (xname[0] != '\0' && !o.consume_only && !l->closed) {
        amqp_exchange_delete(l->st, CH, amqp_cstring_bytes(xname), 0);
        if (amqp_get_rpc_reply(l->st).reply_type != AMQP_RESPONSE_NORMAL &&
            !quiet)
            fprintf(stderr, "roost-perf: warning: could not delete exchange "
                    "%s\n", xname);
    }
}

uint64_t
wait_enqueued(struct link *l, uint64_t *enqueued)
{
    uint64_t last_total = UINT64_MAX, progress_t = now_ns();

    for (;;) {
        uint64_t total = 0, t;
        bool all = true;
        for (int q = 0; q < nqueues; q++) {
            uint64_t want = queue_sent(q);
            amqp_queue_declare_ok_t *ok;
            ok = amqp_queue_declare(l->st, CH, amqp_cstring_bytes(pqs[q].name),
                                    1, 0, 0, 0, amqp_empty_table);
            if (rpc_check(l, "queue.declare (passive)", EXIT_BROKER) != 0)
                return 0;
            total += ok->message_count;
            if (ok->message_count < want)
                all = false;
        }
        amqp_maybe_release_buffers(l->st);
        *enqueued = total;
        t = now_ns();
        if (all)
            return t;
        if (total != last_total) {
            last_total = total;
            progress_t = t;
        } else if (t - progress_t > (uint64_t)(o.drain_timeout * 1e9)) {
            return 0;
        }
        sleep_until(t + 5000000);
    }
}
