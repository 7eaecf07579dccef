/*
 * SPDX-License-Identifier: Apache-2.0
 * The log's two formats: a plain line with the connection and channel
 * prefix, and one JSON object a line with time, level, msg and the ids a
 * line is about, each a key of its own, absent when not given; bytes
 * that are not UTF-8 and control bytes cannot break either.
 */
#include "tests/unit/testutil.h"

#include <jansson.h>
#include <unistd.h>

#include "broker/lib/log.h"

static char path[64];

/* Log to a new file; read_line() gives back what was written. */
static void
log_to_temp(bool json)
{
    strcpy(path, "/tmp/roost-log-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    close(fd);
    ck_assert_int_eq(log_open(path, LOG_LVL_INFO), 0);
    log_set_json(json);
}

/* The whole file (one line expected), its newline dropped. */
static char *
read_back(void)
{
    static char buf[8192];
    log_close();
    FILE *fp = fopen(path, "r");
    ck_assert_ptr_nonnull(fp);
    size_t n = fread(buf, 1, sizeof(buf) - 1, fp);
    fclose(fp);
    unlink(path);
    buf[n] = '\0';
    ck_assert_msg(n > 0 && buf[n - 1] == '\n', "no line: '%s'", buf);
    buf[n - 1] = '\0';
    ck_assert_msg(strchr(buf, '\n') == NULL, "more than one line: %s", buf);
    return buf;
}

static const struct log_ids ids = {
    .conn = 0x2a, .peer = "[::ffff:127.0.0.1]:5000",
    .connection = "127.0.0.1:5000 -> 127.0.0.1:5672", .channel = 3,
    .vhost = "/", .user = "guest", .queue = "q1", .message_id = "m-1",
};

START_TEST(text_prefix)
{
    log_to_temp(false);
    log_event(LOG_LVL_WARN, &ids, "closing channel: %s", "why");
    const char *line = read_back();
    ck_assert_msg(strstr(line, " warning conn=000000000000002a "
                         "[::ffff:127.0.0.1]:5000 channel 3: closing "
                         "channel: why") != NULL, "%s", line);
}
END_TEST

START_TEST(text_control_bytes)
{
    log_to_temp(false);
    log_info("a\nb\x7f");
    const char *line = read_back();
    ck_assert_msg(strstr(line, "a\\x0ab\\x7f") != NULL, "%s", line);
}
END_TEST

START_TEST(json_keys)
{
    log_to_temp(true);
    log_event(LOG_LVL_INFO, &ids, "dead-lettered");
    const char *line = read_back();
    json_error_t e;
    json_t *o = json_loads(line, 0, &e);
    ck_assert_msg(o != NULL, "not JSON: %s (%s)", line, e.text);
    static const char *const keys[] = { "time", "level", "msg", "connection",
                                        "channel", "vhost", "user", "queue",
                                        "message_id" };
    const char *k;
    json_t *v;
    size_t i = 0;
    json_object_foreach(o, k, v) {
        ck_assert_msg(i < NELEMS(keys) && strcmp(k, keys[i]) == 0,
                      "key %zu is %s: %s", i, k, line);
        i++;
    }
    ck_assert_uint_eq(i, NELEMS(keys));
    ck_assert_str_eq(json_string_value(json_object_get(o, "level")), "info");
    ck_assert_str_eq(json_string_value(json_object_get(o, "msg")),
                     "dead-lettered");
    ck_assert_int_eq(json_integer_value(json_object_get(o, "channel")), 3);
    ck_assert_str_eq(json_string_value(json_object_get(o, "connection")),
                     ids.connection);
    /* RabbitMQ's rfc3339_space: 2026-12-01 21:24:21.286098+00:00 */
    const char *t = json_string_value(json_object_get(o, "time"));
    ck_assert_msg(t && strlen(t) == 32 && t[10] == ' ' && t[19] == '.' &&
                  strcmp(t + 26, "+00:00") == 0, "time %s", t);
    json_decref(o);
}
END_TEST

START_TEST(json_no_ids)
{
    log_to_temp(true);
    log_event(LOG_LVL_INFO, &(struct log_ids){ .queue = "q" }, "x");
    json_t *o = json_loads(read_back(), 0, NULL);
    ck_assert_ptr_nonnull(o);
    ck_assert_uint_eq(json_object_size(o), 4);
    ck_assert_ptr_null(json_object_get(o, "channel"));
    ck_assert_ptr_null(json_object_get(o, "connection"));
    json_decref(o);
}
END_TEST

START_TEST(json_not_utf8)
{
    log_to_temp(true);
    log_warnx("bad \xff\xfe name, \"quoted\"\n");
    const char *line = read_back();
    json_t *o = json_loads(line, 0, NULL);
    ck_assert_msg(o != NULL, "not JSON: %s", line);
    ck_assert_str_eq(json_string_value(json_object_get(o, "msg")),
                     "bad \\xff\\xfe name, \"quoted\"\n");
    ck_assert_str_eq(json_string_value(json_object_get(o, "level")),
                     "warning");
    json_decref(o);
}
END_TEST

START_TEST(below_level)
{
    log_to_temp(true);
    log_event(LOG_LVL_DEBUG, &ids, "not shown");
    log_close();
    FILE *fp = fopen(path, "r");
    ck_assert_int_eq(fgetc(fp), EOF);
    fclose(fp);
    unlink(path);
}
END_TEST

static Suite *
log_suite(void)
{
    Suite *s = suite_create("log");
    TCase *tc = tcase_create("text");
    tcase_add_test(tc, text_prefix);
    tcase_add_test(tc, text_control_bytes);
    suite_add_tcase(s, tc);
    tc = tcase_create("json");
    tcase_add_test(tc, json_keys);
    tcase_add_test(tc, json_no_ids);
    tcase_add_test(tc, json_not_utf8);
    tcase_add_test(tc, below_level);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(log_suite());
}
