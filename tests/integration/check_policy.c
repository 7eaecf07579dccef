/*
 * SPDX-License-Identifier: Apache-2.0
 * Policies seen from AMQP, with rabbitmq-c against a real roostd whose
 * management API (on a free port) sets them with curl:
 * - a policy's max-length applies to a queue it matches, declared
 *   before or after it, and not to one it does not match; the queue's
 *   own smaller x-max-length wins (the lower value applies);
 * - lowering it drops from the head of an existing queue at once;
 * - deleting it lifts the limit;
 * - an alternate-exchange policy takes an exchange's unroutable
 *   messages;
 * - a policy survives a restart and applies to the queue recovered.
 * The same rules are compared with RabbitMQ's own by policy.py
 * --reference (policy.sh); this test runs on roostd only.
 */
#include <check.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/integration/harness.h"

static int mgmt_port;

/* Start roostd with its management API on a free port. */
static void
start_with_api(bool restart)
{
    const char *const *args = ARGS("--set", "management.tcp.port=0");
    if (restart)
        harness_restart(H, args);
    else
        harness_start(H, args);
    char cmd[512], line[256];
    snprintf(cmd, sizeof(cmd), "sed -n 's|.*management API listening on "
             "http://127.0.0.1:\\([0-9]*\\)/.*|\\1|p' '%s' | tail -n1",
             H->log_path);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    mgmt_port = fgets(line, sizeof(line), p) ? atoi(line) : 0;
    pclose(p);
    ck_assert_msg(mgmt_port > 0, "no management port in the log");
}

/* curl METHOD /api/PATH with 'body' (NULL: none); the HTTP status. */
static int
api(const char *method, const char *path, const char *body)
{
    char cmd[2048], line[64];
    snprintf(cmd, sizeof(cmd), "curl -s -o /dev/null -w '%%{http_code}' "
             "-u guest:guest -X %s -H 'content-type: application/json' "
             "%s%s%s 'http://127.0.0.1:%d/api/%s'", method,
             body ? "--data '" : "", body ? body : "", body ? "'" : "",
             mgmt_port, path);
    FILE *p = popen(cmd, "r");
    ck_assert(p != NULL);
    int code = fgets(line, sizeof(line), p) ? atoi(line) : 0;
    pclose(p);
    return code;
}

/* PUT a policy on vhost "/" that applies to queues or exchanges. */
static void
put_policy_at(const char *file, int line, const char *name,
              const char *pattern, const char *definition,
              const char *apply_to)
{
    char path[256], body[1024];
    snprintf(path, sizeof(path), "policies/%%2F/%s", name);
    snprintf(body, sizeof(body), "{\"pattern\":\"%s\",\"definition\":%s,"
             "\"apply-to\":\"%s\",\"priority\":1}", pattern, definition,
             apply_to);
    int code = api("PUT", path, body);
    H_ASSERT_AT(file, line, code == 201 || code == 204,
                "PUT /api/%s: HTTP %d", path, code);
}
#define PUT_POLICY(name, pattern, definition, apply_to)                        \
    put_policy_at(__FILE__, __LINE__, (name), (pattern), (definition),         \
                  (apply_to))

static void
delete_policy(const char *name)
{
    char path[256];
    snprintf(path, sizeof(path), "policies/%%2F/%s", name);
    ck_assert_int_eq(api("DELETE", path, NULL), 204);
}

static void
declare(amqp_connection_state_t c, const char *name, bool durable,
        amqp_table_t args)
{
    char out[256];
    h_declare_queue_at(__FILE__, __LINE__, c, 1, name, durable, false, false,
                       args, out, NULL, NULL);
}

START_TEST(max_length_policy)
{
    amqp_connection_state_t c;

    SKIP_IF_REMOTE("sets up roostd's management port");
    start_with_api(false);
    c = h_connect(H);
    declare(c, "cp-len.before", false, amqp_empty_table);
    PUT_POLICY("cp-len", "^cp-len\\\\.", "{\"max-length\":3}", "queues");
    amqp_table_entry_t own = h_entry_int("x-max-length", 1);
    declare(c, "cp-len.after", false, amqp_empty_table);
    declare(c, "cp-len.own", false, h_table(&own, 1));
    declare(c, "cp-other", false, amqp_empty_table);
    static const char *const qs[] = { "cp-len.before", "cp-len.after",
                                      "cp-len.own", "cp-other" };
    static const uint32_t want[] = { 3, 3, 1, 5 };
    for (int i = 0; i < 4; i++) {
        PUBLISH_N(c, 1, qs[i], "m", 0, 5);
        ck_assert_msg(QUEUE_COUNT(c, 1, qs[i]) == want[i], "%s holds %u, "
                      "expected %u", qs[i], QUEUE_COUNT(c, 1, qs[i]), want[i]);
    }
    /* drop-head: the newest stay. */
    struct h_event e;
    ck_assert_int_eq(GET(c, 1, "cp-len.before", true, &e), 1);
    ck_assert_str_eq(e.body, "m2");
    h_event_free(&e);
    PUBLISH_N(c, 1, "cp-len.before", "n", 0, 1);

    /* Lowered: the existing queues drop from the head at once. */
    PUT_POLICY("cp-len", "^cp-len\\\\.", "{\"max-length\":1}", "queues");
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, "cp-len.after"), 1);
    ck_assert_int_eq(GET(c, 1, "cp-len.before", true, &e), 1);
    ck_assert_str_eq(e.body, "n0");
    h_event_free(&e);

    /* Deleted: no limit but the queue's own. */
    delete_policy("cp-len");
    PUBLISH_N(c, 1, "cp-len.after", "k", 0, 4);
    PUBLISH_N(c, 1, "cp-len.own", "k", 0, 4);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, "cp-len.after"), 5);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, "cp-len.own"), 1);
    h_close(c);
    harness_stop(H);
}
END_TEST

START_TEST(alternate_exchange_policy_and_restart)
{
    amqp_connection_state_t c;
    struct h_event e;

    SKIP_IF_REMOTE("sets up roostd's management port");
    start_with_api(false);
    c = h_connect(H);
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, "cp-x", "direct", true,
                          false, false, amqp_empty_table);
    h_declare_exchange_at(__FILE__, __LINE__, c, 1, "cp-ae", "fanout", true,
                          false, false, amqp_empty_table);
    declare(c, "cp-unrouted", true, amqp_empty_table);
    BIND(c, 1, "cp-unrouted", "cp-ae", "");
    PUT_POLICY("cp-ae", "^cp-x$", "{\"alternate-exchange\":\"cp-ae\"}",
               "exchanges");
    PUBLISH(c, 1, "cp-x", "nowhere", "lost?");
    ck_assert_int_eq(GET(c, 1, "cp-unrouted", true, &e), 1);
    ck_assert_str_eq(e.body, "lost?");
    h_event_free(&e);

    /* A durable queue and a max-length policy, across a restart. */
    declare(c, "cp-kept", true, amqp_empty_table);
    PUT_POLICY("cp-kept", "^cp-kept$", "{\"max-length\":2}", "queues");
    h_close(c);
    harness_stop_keep(H);
    start_with_api(true);
    c = h_connect(H);
    PUBLISH_N(c, 1, "cp-kept", "r", 0, 4);
    ck_assert_uint_eq(QUEUE_COUNT(c, 1, "cp-kept"), 2);
    PUBLISH(c, 1, "cp-x", "nowhere", "still");
    ck_assert_int_eq(GET(c, 1, "cp-unrouted", true, &e), 1);
    ck_assert_str_eq(e.body, "still");
    h_event_free(&e);
    h_close(c);
    harness_stop(H);
}
END_TEST

int
main(void)
{
    Suite *s = suite_create("policy");
    TCase *tc = h_tcase(s, "policies over AMQP", 60, false);
    tcase_add_test(tc, max_length_policy);
    tcase_add_test(tc, alternate_exchange_policy_and_restart);
    return h_run(s);
}
