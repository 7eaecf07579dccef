/*
 * roostd's configuration: defaults, every kind of bad value with its
 * file:line message, and conf/roost.conf kept in step with the option
 * table (every key documented with its default, nothing else).
 */
#include "tests/unit/testutil.h"

#include <unistd.h>

#include "broker/config.h"
#include "broker/hmap.h"

static char *
write_temp(const char *text)
{
    static char path[64];
    strcpy(path, "/tmp/roost-conf-XXXXXX");
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    ck_assert_int_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    return path;
}

START_TEST(defaults)
{
    struct config c;
    config_defaults(&c);
    ck_assert_int_eq(c.port, 5672);
    ck_assert_int_eq(c.channel_max, 2047);
    ck_assert_int_eq(c.frame_max, 131072);
    ck_assert_int_eq(c.heartbeat, 60);
    ck_assert_int_eq(c.handshake_timeout_ms, 10000);
    ck_assert_int_eq(c.max_message_size, 134217728);
    ck_assert_str_eq(c.default_user, "guest");
    ck_assert_str_eq(c.default_pass, "guest");
    ck_assert_str_eq(c.default_vhost, "/");
    ck_assert_str_eq(c.loopback_users, "");
    ck_assert_str_eq(c.bind, "");
    config_free(&c);
}
END_TEST

static const struct bad {
    const char *text;
    const char *want; /* substring of the error */
} bads[] = {
    { "nosuchkey = 1\n", ":1: unknown key 'nosuchkey'" },
    { "\n\nport = abc\n", ":3: port: 'abc' is not an integer" },
    { "port = 70000\n", ":1: port: 70000 is outside 0..65535" },
    { "frame_max = 100\n", "frame_max: 100 is outside 4096..16777216" },
    { "log.level = loud\n", "is not debug, info, warning or error" },
    { "just words\n", ":1: expected 'key = value'" },
    { "port = 1x\n", "is not an integer" },
    { "heartbeat =\n", "heartbeat: '' is not an integer" },
    { "listeners.ssl = 5671\n", "give entries as listeners.ssl.NAME" },
    { "listeners.tcp = none\nlisteners.tcp.a = 1\n", "set to none" },
    { "ssl_options.verify = verify_maybe\nlisteners.nope.x = 1\n",
      "unknown key 'listeners.nope.x'" },
};

START_TEST(bad_values)
{
    struct config c;
    char errs[1024];
    const char *path = write_temp(bads[_i].text);

    config_defaults(&c);
    ck_assert_int_eq(config_load_file(&c, path, 0, errs, sizeof(errs), NULL, 0), 1);
    ck_assert_msg(strstr(errs, bads[_i].want) != NULL, "got '%s' want '%s'",
                  errs, bads[_i].want);
    ck_assert_msg(strncmp(errs, path, strlen(path)) == 0, "no file name: %s",
                  errs);
    unlink(path);
    config_free(&c);
}
END_TEST


/* RabbitMQ's numbered and named keys (OPT_LIST). */
START_TEST(list_keys)
{
    struct config c;
    char err[256], v[64];
    size_t pos = 0;

    config_defaults(&c);
    ck_assert_str_eq(c.listeners_ssl, "");
    ck_assert(!config_list_next(c.listeners_ssl, &pos, v, sizeof(v)));
    ck_assert_int_eq(config_set(&c, "listeners.ssl.default", "5671", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_set(&c, "listeners.ssl.local", "127.0.0.1:5673",
                                err, sizeof(err)), 0);
    /* Setting a name again replaces its value (and moves it last). */
    ck_assert_int_eq(config_set(&c, "listeners.ssl.default", "5674", err,
                                sizeof(err)), 0);
    ck_assert(config_list_next(c.listeners_ssl, &pos, v, sizeof(v)));
    ck_assert_str_eq(v, "127.0.0.1:5673");
    ck_assert(config_list_next(c.listeners_ssl, &pos, v, sizeof(v)));
    ck_assert_str_eq(v, "5674");
    ck_assert(!config_list_next(c.listeners_ssl, &pos, v, sizeof(v)));
    ck_assert_int_eq(config_set(&c, "listeners.tcp", "none", err,
                                sizeof(err)), 0);
    ck_assert(config_list_none(c.listeners_tcp));
    pos = 0;
    ck_assert(!config_list_next(c.listeners_tcp, &pos, v, sizeof(v)));
    ck_assert_int_eq(config_set(&c, "ssl_options.versions.1", "tlsv1.2\tx",
                                err, sizeof(err)), -1);
    /* Entry values are checked with the rest (config_validate). */
    ck_assert_int_eq(config_set(&c, "loopback_users.guest", "yes", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "loopback_users.guest: 'yes' is not true or false");
    config_free(&c);
}
END_TEST

START_TEST(all_errors_collected)
{
    struct config c;
    char errs[1024];
    const char *path = write_temp("a = 1\nport = 5\nb = 2\n# c = 3\nd\n");

    config_defaults(&c);
    ck_assert_int_eq(config_load_file(&c, path, 0, errs, sizeof(errs), NULL, 0), 3);
    ck_assert_ptr_nonnull(strstr(errs, ":1: unknown key 'a'"));
    ck_assert_ptr_nonnull(strstr(errs, ":3: unknown key 'b'"));
    ck_assert_ptr_nonnull(strstr(errs, ":5: expected"));
    ck_assert_int_eq(c.port, 5);
    unlink(path);
    config_free(&c);
}
END_TEST

START_TEST(good_file)
{
    struct config c;
    char errs[1024];
    const char *path = write_temp("# comment\n  port = 1234  \n\n"
                                  "bind=127.0.0.1\nloopback_users.guest = false\n"
                                  "log.level = debug\nmax_message_size = 1000\n");
    config_defaults(&c);
    ck_assert_int_eq(config_load_file(&c, path, 0, errs, sizeof(errs), NULL, 0), 0);
    ck_assert_int_eq(c.port, 1234);
    ck_assert_str_eq(c.bind, "127.0.0.1");
    char v[8];
    ck_assert(config_list_get(c.loopback_users, "guest", v, sizeof(v)));
    ck_assert_str_eq(v, "false");
    ck_assert_int_eq(c.log_level, 0);
    ck_assert_int_eq(c.max_message_size, 1000);
    unlink(path);
    config_free(&c);
}
END_TEST

START_TEST(missing_file)
{
    struct config c;
    char errs[1024];
    config_defaults(&c);
    ck_assert_int_eq(config_load_file(&c, "/nonexistent/roost.conf", 0, errs,
                                      sizeof(errs), NULL, 0), 1);
    ck_assert_ptr_nonnull(strstr(errs, "cannot open"));
    config_free(&c);
}
END_TEST

START_TEST(validate_watermarks)
{
    struct config c;
    char err[256];
    config_defaults(&c);
    ck_assert_int_eq(config_validate(&c, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&c, "consumer_output_low_watermark", "9999999",
                                err, sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -1);
    ck_assert_ptr_nonnull(strstr(err, "low_watermark"));
    config_free(&c);
}
END_TEST

/* conf/roost.conf documents each key once as "# key = default". */
START_TEST(roost_conf_in_step)
{
    const char *srcdir = getenv("srcdir");
    char path[4096], line[1024];
    struct hmap seen;
    FILE *fp;

    snprintf(path, sizeof(path), "%s/conf/roost.conf", srcdir ? srcdir : ".");
    fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    hmap_init(&seen);
    while (fgets(line, sizeof(line), fp)) {
        char key[256], val[512];
        line[strcspn(line, "\n")] = '\0';
        /* "# key = value": a key is one token, then exactly " = ". */
        if (strncmp(line, "# ", 2) != 0)
            continue;
        size_t klen = strcspn(line + 2, " ");
        if (klen == 0 || klen >= sizeof(key) ||
            strncmp(line + 2 + klen, " =", 2) != 0)
            continue;
        memcpy(key, line + 2, klen);
        key[klen] = '\0';
        const char *v = line + 2 + klen + 2;
        while (*v == ' ')
            v++;
        snprintf(val, sizeof(val), "%s", v);
        const struct opt_def *found = NULL;
        for (size_t i = 0; i < config_nopts; i++)
            if (strcmp(config_opts[i].name, key) == 0)
                found = &config_opts[i];
        ck_assert_msg(found != NULL, "roost.conf documents unknown key %s", key);
        ck_assert_msg(strcmp(found->def, val) == 0,
                      "roost.conf: %s = '%s' but the default is '%s'", key, val,
                      found->def);
        ck_assert_msg(hmap_put(&seen, key, strlen(key), (void *)found) == NULL,
                      "roost.conf documents %s twice", key);
    }
    fclose(fp);
    for (size_t i = 0; i < config_nopts; i++)
        ck_assert_msg(hmap_get_str(&seen, config_opts[i].name) != NULL,
                      "roost.conf does not document %s", config_opts[i].name);
    hmap_destroy(&seen);
}
END_TEST

/* hmap: random inserts and deletes against a plain array. */
START_TEST(hmap_random)
{
    struct hmap m;
    static char keys[2000][12];
    static bool present[2000];
    uint64_t x = 0x9E3779B97F4A7C15ull;

    hmap_init(&m);
    memset(present, 0, sizeof(present));
    for (int i = 0; i < 2000; i++)
        snprintf(keys[i], sizeof(keys[i]), "k%d", i);
    for (int step = 0; step < 200000; step++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        int k = (int)(x % 2000);
        if (x & (1ull << 40)) {
            void *old = hmap_put(&m, keys[k], strlen(keys[k]), keys[k]);
            ck_assert(present[k] ? old == keys[k] : old == NULL);
            present[k] = true;
        } else {
            void *old = hmap_del(&m, keys[k], strlen(keys[k]));
            ck_assert(present[k] ? old == keys[k] : old == NULL);
            present[k] = false;
        }
        if (step % 997 == 0) {
            size_t n = 0;
            for (int i = 0; i < 2000; i++) {
                void *v = hmap_get_str(&m, keys[i]);
                ck_assert(present[i] ? v == keys[i] : v == NULL);
                n += present[i];
            }
            ck_assert_uint_eq(n, m.count);
        }
    }
    size_t pos = 0, n = 0;
    while (hmap_next(&m, &pos))
        n++;
    ck_assert_uint_eq(n, m.count);
    hmap_destroy(&m);
}
END_TEST

static Suite *
config_suite(void)
{
    Suite *s = suite_create("config");
    TCase *tc = tcase_create("defaults");
    tcase_add_test(tc, defaults);
    tcase_add_test(tc, validate_watermarks);
    tcase_add_test(tc, list_keys);
    suite_add_tcase(s, tc);
    tc = tcase_create("file");
    tcase_add_loop_test(tc, bad_values, 0, NELEMS(bads));
    tcase_add_test(tc, all_errors_collected);
    tcase_add_test(tc, good_file);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, roost_conf_in_step);
    suite_add_tcase(s, tc);
    tc = tcase_create("hmap");
    tcase_set_timeout(tc, 60);
    tcase_add_test(tc, hmap_random);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(config_suite());
}
