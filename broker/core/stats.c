/*
 * SPDX-License-Identifier: Apache-2.0
 * The stats tick: every collect_statistics_interval, each queue,
 * exchange, connection and channel samples its counters into the rate of
 * the last interval (stats.h).
 */
#include "broker/core/stats.h"
#include "broker/core/hooks.h"

#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <dirent.h>

#include <event2/event.h>

#include "broker/core/alarm.h"
#include "broker/core/broker.h"
#include "broker/core/store.h"
#include "broker/core/vhost.h"
#include "broker/lib/log.h"
#include "broker/lib/util.h"

const char *const msg_stat_names[MS_COUNT] = {
    [MS_PUBLISH] = "publish",
    [MS_PUBLISH_IN] = "publish_in",
    [MS_PUBLISH_OUT] = "publish_out",
    [MS_CONFIRM] = "confirm",
    [MS_RETURN_UNROUTABLE] = "return_unroutable",
    [MS_DROP_UNROUTABLE] = "drop_unroutable",
    [MS_DELIVER] = "deliver",
    [MS_DELIVER_NO_ACK] = "deliver_no_ack",
    [MS_GET] = "get",
    [MS_GET_NO_ACK] = "get_no_ack",
    [MS_GET_EMPTY] = "get_empty",
    [MS_ACK] = "ack",
    [MS_REDELIVER] = "redeliver",
};

const char *const drop_reason_names[DROP_COUNT] = {
    [DROP_EXPIRED] = "expired",
    [DROP_REJECTED] = "rejected",
    [DROP_MAXLEN] = "maxlen",
    [DROP_DELIVERY_LIMIT] = "delivery_limit",
};

enum drop_reason
drop_reason_of(const char *reason)
{
    for (int i = 0; i < DROP_COUNT; i++)
        if (strcmp(reason, drop_reason_names[i]) == 0)
            return (enum drop_reason)i;
    return DROP_REJECTED;
}

const uint32_t hist_bounds_ms[HIST_BUCKETS - 1] = {
    5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000, 60000,
    300000,
};

struct stats_churn stats_churn;

static struct event *tick_ev;
static struct stats_series *overview_series, *node_series;
static struct history *broker_history;
static uint64_t ticks, tick_wall_ms;
static double interval_s = 5.0;

void
stats_sample(struct stats_series **sp, const uint64_t *v, size_t n)
{
    struct stats_series *s = *sp;
    if (s == NULL) {
        size_t i = 0;
        while (i < n && v[i] == 0)
            i++;
        if (i == n)
            return;
        s = *sp = xcalloc(1, sizeof(*s));
        /* the first interval counts from zero: the object is new since
         * the last tick, or counted nothing before it */
    }
    for (size_t i = 0; i < n && i < STATS_SERIES_MAX; i++) {
        s->rate[i] = (float)((double)(int64_t)(v[i] - s->last[i]) /
                             interval_s);
        s->last[i] = v[i];
    }
    s->tick = ticks;
}

void
stats_series_free(struct stats_series **s)
{
    free(*s);
    *s = NULL;
}

static void
add_gone(struct vhost *vh, void *arg)
{
    msg_stats_add(arg, &vh->channels_gone);
}

void
stats_overview(struct msg_stats *out)
{
    memset(out, 0, sizeof(*out));
    vhost_foreach(add_gone, out);
    session_hooks.add_channel_stats(out);
}

const struct stats_series *
stats_overview_series(void)
{
    return overview_series;
}

const struct stats_series *
stats_node_series(void)
{
    return node_series;
}

uint64_t
stats_open_fds(void)
{
    DIR *d = opendir("/proc/self/fd");
    uint64_t n = 0;
    struct dirent *e;
    if (d == NULL)
        return 0;
    while ((e = readdir(d)) != NULL)
        n += e->d_name[0] != '.';
    closedir(d);
    return n > 0 ? n - 1 : 0;   /* not the one readdir holds */
}

uint64_t
stats_tick(void)
{
    return ticks;
}

uint64_t
stats_tick_wall_ms(void)
{
    return tick_wall_ms;
}

const struct history *
stats_history(void)
{
    return broker_history;
}

void
stats_history_values(const struct msg_stats *ms, uint64_t ready,
                     uint64_t unacked, const uint64_t *dead_lettered,
                     const uint64_t *dropped, uint64_t v[HC_COUNT])
{
    v[HC_READY] = ready;
    v[HC_UNACKED] = unacked;
    v[HC_PUBLISH] = ms->n[MS_PUBLISH];
    v[HC_DELIVER_GET] = ms->n[MS_DELIVER] + ms->n[MS_DELIVER_NO_ACK] +
                        ms->n[MS_GET] + ms->n[MS_GET_NO_ACK];
    v[HC_ACK] = ms->n[MS_ACK];
    v[HC_REDELIVER] = ms->n[MS_REDELIVER];
    v[HC_DEAD_LETTER] = 0;
    for (int i = 0; i < DROP_COUNT; i++)
        v[HC_DEAD_LETTER] += dead_lettered[i] + dropped[i];
}

static void
add_depths(struct vhost *vh, void *arg)
{
    uint64_t *d = arg, queues, ready, unacked;
    vhost_totals(vh, &queues, &ready, &unacked);
    d[0] += ready;
    d[1] += unacked;
}

void
stats_broker_values(uint64_t v[HC_COUNT])
{
    struct msg_stats all;
    uint64_t d[2] = { 0, 0 };
    stats_overview(&all);
    vhost_foreach(add_depths, d);
    stats_history_values(&all, d[0], d[1], stats_churn.dead_lettered,
                         stats_churn.dropped, v);
}

static void
sample_node(void)
{
    struct store_stats ss;
    store_get_stats(&ss);
    uint64_t v[NODE_COUNT] = {
        [NODE_MEM_USED] = alarm_memory_used(),
        [NODE_FD_USED] = stats_open_fds(),
        [NODE_SOCKETS_USED] = session_hooks.count(),
        [NODE_DISK_FREE] = alarm_disk_free(),
        [NODE_DISK_READS] = ss.paged_in,
        [NODE_DISK_WRITES] = ss.msgs_written,
    };
    /* every value, even 0: a node's rates are always shown */
    if (node_series == NULL)
        node_series = xcalloc(1, sizeof(*node_series));
    stats_sample(&node_series, v, NODE_COUNT);
}

static void
tick_cb(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    (void)arg;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ticks++;
    tick_wall_ms = (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
    vhost_sample_all();
    session_hooks.sample_all();
    struct msg_stats all;
    stats_overview(&all);
    stats_sample(&overview_series, all.n, MS_COUNT);
    sample_node();
    uint64_t v[HC_COUNT];
    stats_broker_values(v);
    history_record(&broker_history, HISTORY_BROKER, ticks, tick_wall_ms, v);
}

enum rates_mode
stats_rates_mode(void)
{
    const char *m = broker.cfg.rates_mode;
    if (strcmp(m, "none") == 0)
        return RATES_NONE;
    if (strcmp(m, "detailed") == 0)
        return RATES_DETAILED;
    return RATES_BASIC;
}

void
stats_start(void)
{
    if (stats_rates_mode() == RATES_NONE)
        return;
    interval_s = (double)broker.cfg.collect_statistics_interval / 1000.0;
    tick_ev = event_new(broker.base, -1, EV_PERSIST, tick_cb, NULL);
    struct timeval tv = {
        .tv_sec = broker.cfg.collect_statistics_interval / 1000,
        .tv_usec = (broker.cfg.collect_statistics_interval % 1000) * 1000,
    };
    event_add(tick_ev, &tv);
}

void
stats_stop(void)
{
    if (tick_ev)
        event_free(tick_ev);
    tick_ev = NULL;
    stats_series_free(&overview_series);
    stats_series_free(&node_series);
    history_free(&broker_history);
}

double
stats_interval(void)
{
    return interval_s;
}
