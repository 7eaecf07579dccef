/*
 * SPDX-License-Identifier: Apache-2.0
 * Roost's dead-letter commands (docs/dead-letters.md), on Roost's own
 * API (RabbitMQ has none of it):
 *
 *   list_dead_letters [-p vhost] <queue> [--offset N] [--count N]
 *       GET /api/queues/V/Q/dead-letters, as a rabbitmqctl table
 *   replay_dead_letters [-p vhost] <queue> [--rate N] [--count N]
 *                       [--exchange X] [--routing-key K]
 *       POST /api/queues/V/Q/replay, then GET /api/replays/ID until the
 *       replay ends: a progress bar on stderr when it is a terminal,
 *       else a progress line every PROGRESS_LINE_MS. The replay runs in
 *       the broker: stopping roostctl does not stop it.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ctl.h"

#define POLL_MS 200
#define PROGRESS_LINE_MS 2000
#define BAR_WIDTH 40

/* A whole number from 'lo' to 'hi', or -1. */
static long long
number(const char *s, long long lo, long long hi)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (*s == '\0' || *end != '\0' || errno != 0 || v < lo || v > hi)
        return -1;
    return v;
}

static int
bad_number(const char *opt, const char *v)
{
    fprintf(stderr, "Error: --%s must be a whole number (got '%s')\n", opt, v);
    return EX_USAGE;
}

/* An answer about a queue: 404 is a missing vhost or queue. */
static int
queue_answer(const struct ctl_answer *a, const struct ctl *c,
             const char *queue, const char *what)
{
    char buf[1024];
    if (a->status == 404)
        return ctl_fail(EX_DATAERR, "queue '%s' in vhost '%s' not found",
                        queue, c->vhost);
    if (a->status == 400 || a->status == 401 || a->status == 409)
        return ctl_fail(EX_UNAVAILABLE, "%s", ctl_reason(a, buf, sizeof(buf)));
    return ctl_unexpected(a, what);
}

int
cmd_list_dead_letters(struct ctl *c)
{
    static const char *const cols[] = {
        "position", "reason", "original_exchange", "original_routing_key",
        "message_id", "payload_bytes",
    };
    const char *queue = c->argv[0];
    long long offset = 0, count = 50;
    struct ctl_answer a;
    char qs[96];

    if (c->offset && (offset = number(c->offset, 0, 1LL << 62)) < 0)
        return bad_number("offset", c->offset);
    if (c->count && (count = number(c->count, 1, 1000)) < 0)
        return bad_number("count", c->count);
    ctl_banner(c, "Listing dead letters in queue \"%s\" of vhost \"%s\" ...",
               queue, c->vhost);
    char *base = ctl_path("/api/queues/%s/%s/dead-letters", c->vhost, queue);
    snprintf(qs, sizeof(qs), "?offset=%lld&count=%lld&truncate=0", offset,
             count);
    char *path = malloc(strlen(base) + strlen(qs) + 1);
    if (path == NULL)
        abort();
    strcpy(path, base);
    strcat(path, qs);
    free(base);
    int rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
    free(path);
    if (rc != 0)
        return rc;
    if (a.status != 200 || !json_is_array(a.json)) {
        rc = queue_answer(&a, c, queue, "listing dead letters");
    } else {
        /* message_id is a property: bring it up to the row. */
        size_t i;
        json_t *row;
        json_array_foreach(a.json, i, row) {
            json_t *id = json_object_get(json_object_get(row, "properties"),
                                         "message_id");
            json_object_set(row, "message_id", id ? id : json_string(""));
        }
        ctl_table(c, cols, sizeof(cols) / sizeof(cols[0]), a.json);
    }
    ctl_answer_clear(&a);
    return rc;
}

static long long
json_num(const json_t *o, const char *key)
{
    return (long long)json_integer_value(json_object_get(o, key));
}

static uint64_t
mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Where replay 'r' is: a bar redrawn on a terminal, else a line. */
static void
progress(const json_t *r, bool tty, bool last)
{
    long long moved = json_num(r, "moved"), skipped = json_num(r, "skipped");
    long long total = json_num(r, "total"), done = moved + skipped;
    int pct = total > 0 ? (int)(done * 100 / total) : 100;

    if (tty) {
        char bar[BAR_WIDTH + 1];
        int fill = total > 0 ? (int)(done * BAR_WIDTH / total) : BAR_WIDTH;
        for (int i = 0; i < BAR_WIDTH; i++)
            bar[i] = i < fill ? '#' : '.';
        bar[BAR_WIDTH] = '\0';
        fprintf(stderr, "\r[%s] %3d%% %lld moved, %lld skipped of %lld",
                bar, pct, moved, skipped, total);
        if (last)
            fputc('\n', stderr);
    } else {
        fprintf(stderr, "replay %s: %s, %lld moved, %lld skipped of %lld "
                "(%d%%)\n", json_string_value(json_object_get(r, "id")),
                json_string_value(json_object_get(r, "state")), moved,
                skipped, total, pct);
    }
    fflush(stderr);
}

/* Poll replay 'id' until it is no longer running; prints its end. */
static int
follow(struct ctl *c, const char *id)
{
    bool tty = isatty(STDERR_FILENO) && !c->quiet;
    uint64_t last_line = 0;
    char *path = ctl_path("/api/replays/%s", id);
    int rc;

    for (;;) {
        struct ctl_answer a;
        rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &a);
        if (rc != 0)
            break;
        if (a.status != 200 || !json_is_object(a.json)) {
            rc = ctl_unexpected(&a, "following the replay");
            ctl_answer_clear(&a);
            break;
        }
        const char *state = json_string_value(json_object_get(a.json, "state"));
        bool running = state && strcmp(state, "running") == 0;
        uint64_t now = mono_ms();
        if (tty || !running || now >= last_line + PROGRESS_LINE_MS) {
            if (!c->quiet)
                progress(a.json, tty, !running);
            last_line = now;
        }
        if (!running) {
            const char *err = json_string_value(json_object_get(a.json,
                                                                "error"));
            if (c->json) {
                char *s = json_dumps(a.json, JSON_COMPACT);
                printf("%s\n", s);
                free(s);
            } else {
                ctl_info(c, "Replay %s %s: %lld moved, %lld skipped", id,
                         state ? state : "?", json_num(a.json, "moved"),
                         json_num(a.json, "skipped"));
            }
            if (state == NULL || strcmp(state, "done") != 0)
                rc = ctl_fail(EX_SOFTWARE, "replay %s %s%s%s", id,
                              state ? state : "ended", err ? ": " : "",
                              err ? err : "");
            ctl_answer_clear(&a);
            break;
        }
        ctl_answer_clear(&a);
        struct timespec ts = { 0, POLL_MS * 1000000L };
        nanosleep(&ts, NULL);
    }
    free(path);
    return rc;
}

int
cmd_replay_dead_letters(struct ctl *c)
{
    const char *queue = c->argv[0];
    long long rate = 100, count = 0;
    struct ctl_answer a;

    if (c->rate && (rate = number(c->rate, 0, 1000000)) < 0)
        return bad_number("rate", c->rate);
    if (c->count && (count = number(c->count, 1, 1000000000000LL)) < 0)
        return bad_number("count", c->count);
    ctl_banner(c, "Replaying dead letters of queue \"%s\" in vhost \"%s\" at "
               "%lld/s ...", queue, c->vhost, rate);
    json_t *body = json_pack("{s:I}", "rate", (json_int_t)rate);
    if (count)
        json_object_set_new(body, "count", json_integer(count));
    if (c->exchange)
        json_object_set_new(body, "exchange", json_string(c->exchange));
    if (c->routing_key)
        json_object_set_new(body, "routing_key", json_string(c->routing_key));
    char *path = ctl_path("/api/queues/%s/%s/replay", c->vhost, queue);
    int rc = ctl_call(c, EVHTTP_REQ_POST, path, body, &a);
    free(path);
    json_decref(body);
    if (rc != 0)
        return rc;
    const char *id = json_string_value(json_object_get(a.json, "id"));
    if (a.status != 201 || id == NULL) {
        rc = queue_answer(&a, c, queue, "starting the replay");
        ctl_answer_clear(&a);
        return rc;
    }
    ctl_info(c, "Replay %s started: %lld messages", id,
             json_num(a.json, "total"));
    char *keep = strdup(id);
    ctl_answer_clear(&a);
    if (keep == NULL)
        abort();
    rc = follow(c, keep);
    free(keep);
    return rc;
}
