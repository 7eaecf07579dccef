/*
 * SPDX-License-Identifier: Apache-2.0
 * roostd's configuration: defaults, every kind of bad value with its
 * file:line message, and conf/roost.conf kept in step with the option
 * table (every key documented with its default, nothing else).
 */
#include "tests/unit/testutil.h"

#include <unistd.h>

#include "broker/lib/config.h"
#include "broker/lib/hmap.h"
#include "broker/lib/log.h"
#include "broker/lib/rabbitconf.h"

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

/* The warnings of the last load(). */
static char warns[8192];

static int
load(struct config *c, const char *path, int flags, char *errs, size_t len)
{
    return config_load_file(c, path, flags, errs, len, warns, sizeof(warns));
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
    ck_assert_int_eq(load(&c, path, 0, errs, sizeof(errs)), 1);
    ck_assert_msg(strstr(errs, bads[_i].want) != NULL, "got '%s' want '%s'",
                  errs, bads[_i].want);
    ck_assert_msg(strncmp(errs, path, strlen(path)) == 0, "no file name: %s",
                  errs);
    unlink(path);
    config_free(&c);
}
END_TEST


/* RabbitMQ's numbered and named keys (OPT_LIST). */
/* RabbitMQ's default_user_tags.TAG = true|false. */
START_TEST(default_user_tags)
{
    struct config c;
    char err[256], tags[64];

    config_defaults(&c);
    config_default_user_tags(&c, tags, sizeof(tags));
    ck_assert_str_eq(tags, "administrator");
    ck_assert_int_eq(config_set(&c, "default_user_tags.monitoring", "true",
                                err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&c, "default_user_tags.administrator",
                                "false", err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&c, "default_user_tags.policymaker", "true",
                                err, sizeof(err)), 0);
    config_default_user_tags(&c, tags, sizeof(tags));
    ck_assert_str_eq(tags, "monitoring,policymaker");
    ck_assert_int_eq(config_validate(&c, err, sizeof(err)), 0);
    ck_assert_int_eq(config_set(&c, "default_user_tags.management", "yes",
                                err, sizeof(err)), 0);
    ck_assert_int_eq(config_validate(&c, err, sizeof(err)), -1);
    ck_assert_str_eq(err, "default_user_tags.management: 'yes' is not true "
                     "or false");
    config_free(&c);
}
END_TEST

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
    ck_assert_int_eq(load(&c, path, 0, errs, sizeof(errs)), 3);
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
    ck_assert_int_eq(load(&c, path, 0, errs, sizeof(errs)), 0);
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
    ck_assert_int_eq(load(&c, "/nonexistent/roost.conf", 0, errs,
                                      sizeof(errs)), 1);
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

/* RabbitMQ's information units (rabbit_resource_monitor_misc in 3.10)
 * and cuttlefish's bytesize (frame_max), as the reference broker read
 * them: 512MiB gave mem_limit 536870912, 1GB disk_free_limit 1000000000,
 * frame_max = 64KB a tune of 65536. */
static const struct unitvec {
    const char *key, *value;
    int64_t want;       /* -1: refused */
} unitvecs[] = {
    { "vm_memory_high_watermark.absolute", "1000000000", 1000000000 },
    { "vm_memory_high_watermark.absolute", "2GB", 2000000000 },
    { "vm_memory_high_watermark.absolute", "2gb", 2000000000 },
    { "vm_memory_high_watermark.absolute", "2Gb", 2000000000 },
    { "vm_memory_high_watermark.absolute", "512MiB", 536870912 },
    { "vm_memory_high_watermark.absolute", "512MIB", 536870912 },
    { "vm_memory_high_watermark.absolute", "512m", 536870912 },
    { "vm_memory_high_watermark.absolute", "3G", INT64_C(3221225472) },
    { "vm_memory_high_watermark.absolute", "2GiB", INT64_C(2147483648) },
    { "vm_memory_high_watermark.absolute", "100k", 102400 },
    { "vm_memory_high_watermark.absolute", "100kiB", 102400 },
    { "vm_memory_high_watermark.absolute", "100kB", 100000 },
    { "vm_memory_high_watermark.absolute", "100MB", 100000000 },
    { "disk_free_limit.absolute", "1GB", 1000000000 },
    { "disk_free_limit.absolute", "50000000", 50000000 },
    { "disk_free_limit.absolute", "2XB", -1 },
    { "disk_free_limit.absolute", "1.5GB", -1 },
    { "disk_free_limit.absolute", "GB", -1 },
    { "disk_free_limit.absolute", "-1", -1 },
    { "disk_free_limit.absolute", "2 GB", -1 },
    { "disk_free_limit.absolute", "2mB", -1 },      /* not in the regex */
    { "disk_free_limit.absolute", "99999999999999999999", -1 },
    { "frame_max", "64KB", 65536 },
    { "frame_max", "1MB", 1048576 },
    { "frame_max", "131072", 131072 },
    { "frame_max", "128kB", -1 },
    { "frame_max", "1GB", -1 },                     /* above 16777216 */
    { "connection_max", "infinity", 10000000 },
};

START_TEST(units)
{
    const struct unitvec *u = &unitvecs[_i];
    struct config c;
    char err[256];

    config_defaults(&c);
    int rc = config_set(&c, u->key, u->value, err, sizeof(err));
    if (u->want < 0) {
        ck_assert_msg(rc == -1, "%s = %s taken", u->key, u->value);
        ck_assert_msg(strstr(err, u->key) != NULL, "%s", err);
    } else {
        ck_assert_msg(rc == 0, "%s = %s: %s", u->key, u->value, err);
        int64_t got = strcmp(u->key, "frame_max") == 0 ? c.frame_max
            : strcmp(u->key, "connection_max") == 0 ? c.connection_max
            : strncmp(u->key, "disk", 4) == 0 ? c.disk_free_limit
            : c.mem_high_watermark_absolute;
        ck_assert_msg(got == u->want, "%s = %s: %lld", u->key, u->value,
                      (long long)got);
    }
    config_free(&c);
}
END_TEST

static double
ram(void)
{
    return (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
}

/* As RabbitMQ (the reference broker took .relative from a file with
 * both): .relative wins over .absolute in one file, with a warning
 * naming the ignored line; on the command line the last set wins. */
START_TEST(relative_wins)
{
    struct config c;
    char errs[1024], err[256];
    const char *path = write_temp("vm_memory_high_watermark.relative = 0.3\n"
                                  "vm_memory_high_watermark.absolute = 1GB\n"
                                  "disk_free_limit.absolute = 1GB\n"
                                  "disk_free_limit.relative = 0.5\n");
    config_defaults(&c);
    ck_assert_int_eq(load(&c, path, 0, errs, sizeof(errs)), 0);
    ck_assert_int_eq(c.mem_high_watermark_absolute, 0);
    ck_assert(c.mem_high_watermark_relative == 0.3);
    ck_assert_int_eq(c.disk_free_limit, (int64_t)(0.5 * ram() + 0.5));
    ck_assert_msg(strstr(warns, ":2: vm_memory_high_watermark.absolute is "
                         "ignored: vm_memory_high_watermark.relative (line "
                         "1)") != NULL, "%s", warns);
    ck_assert_msg(strstr(warns, ":3: disk_free_limit.absolute is ignored: "
                         "disk_free_limit.relative (line 4)") != NULL, "%s",
                  warns);
    ck_assert_int_eq(config_set(&c, "vm_memory_high_watermark.absolute",
                                "2GB", err, sizeof(err)), 0);
    ck_assert_int_eq(c.mem_high_watermark_absolute, 2000000000);
    ck_assert_int_eq(config_set(&c, "disk_free_limit.absolute", "5MB", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(c.disk_free_limit, 5000000);
    unlink(path);
    config_free(&c);

    /* Alone, each is itself; and relative disk follows the RAM. */
    config_defaults(&c);
    ck_assert_int_eq(c.mem_high_watermark_absolute, 0);
    ck_assert_int_eq(c.disk_free_limit, 50000000);
    ck_assert_int_eq(config_set(&c, "disk_free_limit.relative", "1.5", err,
                                sizeof(err)), 0);
    ck_assert_int_eq(c.disk_free_limit, (int64_t)(1.5 * ram() + 0.5));
    config_free(&c);
}
END_TEST

/* RabbitMQ's log keys onto Roost's one output. */
static const struct logvec {
    const char *text;
    const char *file;
    int level;
    const char *warn;   /* a substring of the warnings, or NULL: none */
} logvecs[] = {
    { "", "-", LOG_LVL_INFO, NULL },
    { "log.file = /var/log/r.log\nlog.file.level = debug\n",
      "/var/log/r.log", LOG_LVL_DEBUG, NULL },
    { "log.dir = /var/log/rabbitmq\nlog.file = rabbit.log\n",
      "/var/log/rabbitmq/rabbit.log", LOG_LVL_INFO, NULL },
    { "log.file = rabbit.log\n", "rabbit.log", LOG_LVL_INFO, NULL },
    { "log.file.level = debug\nlog.file = /x.log\nlog.default.level = error\n",
      "/x.log", LOG_LVL_DEBUG, NULL },
    { "log.default.level = warning\nlog.file = /x.log\n", "/x.log",
      LOG_LVL_WARN, NULL },
    { "log.console = true\nlog.console.level = debug\nlog.file = false\n",
      "-", LOG_LVL_DEBUG, NULL },
    { "log.console.level = error\n", "-", LOG_LVL_ERROR, NULL },
    { "log.file.level = debug\n", "-", LOG_LVL_DEBUG, NULL },
    { "log.file.level = notice\n", "-", LOG_LVL_WARN, NULL },
    { "log.file.level = critical\n", "-", LOG_LVL_ERROR, NULL },
    { "log.file.level = none\nlog.file = /x.log\n", "/x.log", LOG_LVL_ERROR,
      NULL },
    { "log.console = true\nlog.console.level = debug\nlog.file = /x.log\n"
      "log.file.level = warning\n", "/x.log", LOG_LVL_WARN,
      ":1: Roost has one log output: it logs to /x.log only" },
    { "log.file = false\n", "-", LOG_LVL_INFO,
      ":1: log.file = false: Roost always has one log output" },
    { "log.dir = /var/log/rabbitmq\n", "-", LOG_LVL_INFO,
      ":1: log.dir: no log.file names a file in it" },
    { "log.file = /x.log\nlog.file = -\n", "-", LOG_LVL_INFO, NULL },
};

START_TEST(log_keys)
{
    const struct logvec *v = &logvecs[_i];
    struct config c;
    char errs[1024];
    const char *path = write_temp(v->text);

    config_defaults(&c);
    ck_assert_msg(load(&c, path, 0, errs, sizeof(errs)) == 0, "%s", errs);
    ck_assert_str_eq(c.log_file, v->file);
    ck_assert_int_eq(c.log_level, v->level);
    if (v->warn == NULL)
        ck_assert_msg(warns[0] == '\0', "warned: %s", warns);
    else
        ck_assert_msg(strstr(warns, v->warn) != NULL, "got '%s'", warns);
    unlink(path);
    config_free(&c);
}
END_TEST

/* RabbitMQ's keys that Roost does not implement, one of each class, and
 * what is neither Roost's nor RabbitMQ's. */
static const struct rabbitvec {
    const char *line;
    int verdict;        /* 0 taken, 1 warned, 2 refused, 3 unknown */
    const char *reason; /* a substring of the message */
} rabbitvecs[] = {
    { "cluster_formation.peer_discovery_backend = classic_config", 1,
      "single node" },
    { "cluster_formation.peer_discovery_backend = "
      "rabbit_peer_discovery_classic_config", 1, "single node" },
    { "cluster_formation.peer_discovery_backend = rabbit_peer_discovery_k8s",
      2, "peer discovery" },
    { "cluster_formation.k8s.host = kubernetes.default", 2, "Kubernetes" },
    { "cluster_formation.aws.region = us-east-1", 2, "AWS" },
    { "cluster_formation.consul.host = consul", 2, "Consul" },
    { "cluster_formation.etcd.endpoints.1 = etcd:2379", 2, "etcd" },
    { "cluster_formation.classic_config.nodes.1 = rabbit@other", 2,
      "cluster" },
    { "cluster_formation.node_cleanup.interval = 30", 1, "single node" },
    { "cluster_name = prod", 1, "cluster" },
    { "cluster_partition_handling = autoheal", 1, "partitions" },
    { "num_acceptors.tcp = 10", 1, "acceptor" },
    { "queue_master_locator = min-masters", 1, "leaders" },
    { "mnesia_table_loading_retry_limit = 10", 1, "Mnesia" },
    { "tcp_listen_options.nodelay = true", 1, "socket" },
    { "auth_backends.1 = internal", 1, "internal" },
    { "auth_backends.1 = rabbit_auth_backend_internal", 1, "internal" },
    { "auth_backends.1 = ldap", 2, "internal user database" },
    { "auth_backends.2 = http", 2, "internal user database" },
    { "auth_backends.1.authn = ldap", 2, "internal user database" },
    { "auth_ldap.servers.1 = ldap.example.com", 2, "LDAP" },
    { "auth_http.user_path = http://auth/user", 2, "HTTP" },
    { "ssl_options.crl_check = true", 2, "revocation" },
    { "ssl_options.crl_check = false", 1, "revocation" },
    { "ssl_options.dhfile = /etc/dh.pem", 2, "Diffie-Hellman" },
    { "ssl_options.cacerts.1 = MII", 2, "files" },
    { "proxy_protocol = true", 2, "PROXY" },
    { "proxy_protocol = false", 1, "PROXY" },
    { "mqtt.listeners.tcp.default = 1883", 2, "MQTT" },
    { "web_mqtt.tcp.port = 15675", 2, "MQTT" },
    { "stomp.listeners.tcp.1 = 61613", 2, "STOMP" },
    { "web_stomp.port = 15674", 2, "STOMP" },
    { "stream.listeners.tcp.1 = 5552", 2, "stream" },
    { "log.syslog = true", 2, "syslog" },
    { "log.file.rotation.size = 10485760", 1, "logrotate" },
    { "management.cors.allow_origins.1 = *", 2, "CORS" },
    { "prometheus.ssl.port = 15691", 2, "TLS" },
    { "definitions.import_backend = local_filesystem", 1, "local" },
    { "definitions.import_backend = https", 2, "HTTPS" },
    { "total_memory_available_override_value = 4GB", 2, "absolute" },
    /* Roost's own or an alias: taken. */
    { "management.listener.port = 15673", 0, NULL },
    { "log.default.level = debug", 0, NULL },
    { "tcp_listen_options.backlog = 256", 0, NULL },
    { "definitions.local.path = /etc/rabbitmq/defs.json", 0, NULL },
    { "listeners.tcp.default = 5672", 0, NULL },
    { "default_user_tags.monitoring = true", 0, NULL },
    /* Neither: an error, --ignore-unsupported or not. */
    { "cluster_formation.k9s.host = x", 3, NULL },
    { "no_such_key = 1", 3, NULL },
    { "ssl_options.no_such = 1", 3, NULL },
    { "mqtt_bogus = 1", 3, NULL },
};

START_TEST(rabbit_keys)
{
    const struct rabbitvec *v = &rabbitvecs[_i];
    char text[512], errs[2048], key[256];
    struct config c;

    snprintf(text, sizeof(text), "heartbeat = 20\n%s\n", v->line);
    snprintf(key, sizeof(key), "%.*s", (int)strcspn(v->line, " "), v->line);
    const char *path = write_temp(text);
    for (int flags = 0; flags <= CONFIG_IGNORE_UNSUPPORTED; flags++) {
        config_defaults(&c);
        int n = load(&c, path, flags, errs, sizeof(errs));
        ck_assert_int_eq(c.heartbeat, 20);
        switch (v->verdict) {
        case 0:
            ck_assert_msg(n == 0 && warns[0] == '\0', "%s: %s%s", v->line,
                          errs, warns);
            break;
        case 1:
        case 2: {
            /* Refused without the flag, warned with it. */
            bool refused = v->verdict == 2 && flags == 0;
            const char *msg = refused ? errs : warns;
            ck_assert_msg(n == (refused ? 1 : 0), "%s: %d errors: %s",
                          v->line, n, errs);
            ck_assert_msg(strstr(msg, ":2: ") != NULL &&
                          strstr(msg, key) != NULL &&
                          strstr(msg, v->reason) != NULL, "%s: '%s'",
                          v->line, msg);
            ck_assert_msg(strncmp(msg, path, strlen(path)) == 0, "%s", msg);
            if (refused)
                ck_assert(strstr(msg, "--ignore-unsupported") != NULL);
            break;
        }
        default:
            ck_assert_int_eq(n, 1);
            ck_assert_msg(strstr(errs, ":2: unknown key") != NULL, "%s", errs);
        }
        config_free(&c);
    }
    unlink(path);
}
END_TEST

/* Every key in RabbitMQ 3.10's schemas is Roost's, or has a rule with
 * its own reason (none falls to the catch-all). */
START_TEST(rabbit_table_complete)
{
    ck_assert_uint_gt(rabbitconf_nkeys, 800);
    for (size_t i = 0; i < rabbitconf_nkeys; i++) {
        const char *k = rabbitconf_keys[i];
        ck_assert_msg(config_has_key(k) || rabbitconf_has_rule(k),
                      "RabbitMQ's %s has no rule", k);
    }
    ck_assert(rabbitconf_match("a.*.c", "a.b.c"));
    ck_assert(!rabbitconf_match("a.*.c", "a..c"));
    ck_assert(!rabbitconf_match("a.*.c", "a.b.d.c"));
    ck_assert(rabbitconf_match("mqtt.", "mqtt.a.b"));
    ck_assert(!rabbitconf_match("mqtt.", "mqtt."));
    ck_assert(!rabbitconf_match("mqtt.", "mqtt"));
}
END_TEST

/* docs/configuration.md lists every rule's pattern, as `pattern`. */
START_TEST(rabbit_rules_documented)
{
    const char *srcdir = getenv("srcdir");
    char path[4096], pat[256], want[260];
    static char doc[200000];

    snprintf(path, sizeof(path), "%s/docs/configuration.md",
             srcdir ? srcdir : ".");
    FILE *fp = fopen(path, "r");
    ck_assert_msg(fp != NULL, "cannot open %s", path);
    size_t n = fread(doc, 1, sizeof(doc) - 1, fp);
    doc[n] = '\0';
    fclose(fp);
    for (size_t i = 0; i < rabbitconf_nrules(); i++) {
        rabbitconf_rule_pattern(i, pat, sizeof(pat));
        snprintf(want, sizeof(want), "`%s`", pat);
        ck_assert_msg(strstr(doc, want) != NULL,
                      "docs/configuration.md does not list %s", want);
    }
}
END_TEST

/* A '#' ends a value, as in cuttlefish (the reference broker took
 * "default_pass = ab#cd" as "ab"). */
START_TEST(trailing_comment)
{
    struct config c;
    char errs[1024];
    const char *path = write_temp("heartbeat = 30 # seconds\n"
                                  "default_pass = ab#cd\n");
    config_defaults(&c);
    ck_assert_int_eq(load(&c, path, 0, errs, sizeof(errs)), 0);
    ck_assert_int_eq(c.heartbeat, 30);
    ck_assert_str_eq(c.default_pass, "ab");
    unlink(path);
    config_free(&c);
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
    tcase_add_test(tc, default_user_tags);
    suite_add_tcase(s, tc);
    tc = tcase_create("file");
    tcase_add_loop_test(tc, bad_values, 0, NELEMS(bads));
    tcase_add_test(tc, all_errors_collected);
    tcase_add_test(tc, good_file);
    tcase_add_test(tc, missing_file);
    tcase_add_test(tc, roost_conf_in_step);
    tcase_add_test(tc, trailing_comment);
    suite_add_tcase(s, tc);
    tc = tcase_create("rabbitmq.conf");
    tcase_add_loop_test(tc, units, 0, NELEMS(unitvecs));
    tcase_add_test(tc, relative_wins);
    tcase_add_loop_test(tc, log_keys, 0, NELEMS(logvecs));
    tcase_add_loop_test(tc, rabbit_keys, 0, NELEMS(rabbitvecs));
    tcase_add_test(tc, rabbit_table_complete);
    tcase_add_test(tc, rabbit_rules_documented);
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
