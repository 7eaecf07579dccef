/*
 * SPDX-License-Identifier: Apache-2.0
 * The option table and the configuration file parser. conf/roost.conf
 * documents every option; a test keeps the two in step.
 */
#include "broker/lib/config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/lib/log.h"
#include "broker/lib/rabbitconf.h"
#include "broker/lib/util.h"
#include "broker/lib/version.h"

#define OPT(name, type, def, min, max, reload, field, help) \
    { name, type, def, min, max, reload, offsetof(struct config, field), help }

const struct opt_def config_opts[] = {
    OPT("port", OPT_INT, "5672", 0, 65535, false, port,
        "AMQP listener port; 0 picks a free port and logs it"),
    OPT("bind", OPT_STRING, "", 0, 0, false, bind,
        "address to listen on; empty means all IPv4 and IPv6 addresses"),
    OPT("listen_backlog", OPT_INT, "128", 1, 65535, false, listen_backlog,
        "TCP listen backlog"),
    OPT("listeners.tcp", OPT_LIST, "", 0, 0, false, listeners_tcp,
        "RabbitMQ's AMQP listeners: listeners.tcp.NAME = PORT or "
        "HOST:PORT, any number (listeners.tcp.default = 5672); none set: "
        "bind and port; listeners.tcp = none: no plain AMQP listener"),
    OPT("listeners.ssl", OPT_LIST, "", 0, 0, false, listeners_ssl,
        "AMQP over TLS listeners: listeners.ssl.NAME = PORT or HOST:PORT "
        "(listeners.ssl.default = 5671; 0 picks a free port and logs it); "
        "they need ssl_options.certfile and .keyfile"),
    OPT("ssl_options.cacertfile", OPT_STRING, "", 0, 0, true,
        ssl_cacertfile,
        "PEM file of the CAs that client certificates are verified against"),
    OPT("ssl_options.certfile", OPT_STRING, "", 0, 0, true, ssl_certfile,
        "PEM file of the server's certificate (and its chain); ECDSA "
        "certificates make handshakes much cheaper than RSA ones"),
    OPT("ssl_options.keyfile", OPT_STRING, "", 0, 0, true, ssl_keyfile,
        "PEM file of the server's private key"),
    OPT("ssl_options.password", OPT_STRING, "", 0, 0, true, ssl_password,
        "password of an encrypted keyfile"),
    OPT("ssl_options.verify", OPT_STRING, "verify_none", 0, 0, true,
        ssl_verify,
        "verify_peer: ask for a client certificate and verify it against "
        "cacertfile; verify_none: do not ask"),
    OPT("ssl_options.fail_if_no_peer_cert", OPT_BOOL, "false", 0, 0, true,
        ssl_fail_if_no_peer_cert,
        "with verify_peer: refuse a client that sends no certificate"),
    OPT("ssl_options.versions", OPT_LIST, "", 0, 0, true, ssl_versions,
        "TLS versions offered: ssl_options.versions.N = tlsv1.2 or "
        "tlsv1.3; none set: both (1.0 and 1.1 are refused)"),
    OPT("ssl_options.ciphers", OPT_LIST, "", 0, 0, true, ssl_ciphers,
        "cipher suites offered, ssl_options.ciphers.N = OpenSSL name "
        "(TLS_... names are TLS 1.3 suites); no TLS 1.2 name set: "
        "RabbitMQ's recommended AEAD suites with forward secrecy (ECDHE "
        "with AES-GCM or CHACHA20-POLY1305); no TLS 1.3 name set: "
        "OpenSSL's defaults"),
    OPT("ssl_options.honor_cipher_order", OPT_BOOL, "false", 0, 0, true,
        ssl_honor_cipher_order,
        "true: the server's cipher order wins over the client's"),
    OPT("ssl_options.depth", OPT_INT, "10", 0, 100, true, ssl_depth,
        "longest chain of intermediate CAs accepted for a client "
        "certificate"),
    OPT("ssl_options.reuse_sessions", OPT_BOOL, "true", 0, 0, true,
        ssl_reuse_sessions,
        "true: clients may resume TLS sessions (abbreviated handshakes)"),
    OPT("ssl_options.client_renegotiation", OPT_BOOL, "false", 0, 0, true,
        ssl_client_renegotiation,
        "true: a TLS 1.2 client may renegotiate (off: each costs a full "
        "handshake of server CPU)"),
    OPT("ssl_options.secure_renegotiate", OPT_BOOL, "true", 0, 0, true,
        ssl_secure_renegotiate,
        "false: also allow legacy (insecure) renegotiation"),
    OPT("ssl_handshake_timeout", OPT_INT, "5000", 100, 3600000, true,
        ssl_handshake_timeout_ms,
        "milliseconds a client has to complete the TLS handshake"),
    OPT("auth_mechanisms", OPT_LIST, "", 0, 0, false, auth_mechanisms,
        "SASL mechanisms offered, auth_mechanisms.N = PLAIN, AMQPLAIN or "
        "EXTERNAL (offered only on TLS connections with a verified client "
        "certificate); none set: AMQPLAIN and PLAIN"),
    OPT("ssl_cert_login_from", OPT_STRING, "distinguished_name", 0, 0, true,
        ssl_cert_login_from,
        "EXTERNAL's user name: the certificate's distinguished_name (RFC "
        "4514, CN first), common_name, or subject_alternative_name"),
    OPT("ssl_cert_login_san_type", OPT_STRING, "dns", 0, 0, true,
        ssl_cert_login_san_type,
        "with subject_alternative_name: dns, ip, email, uri or other_name"),
    OPT("ssl_cert_login_san_index", OPT_INT, "0", 0, 1000, true,
        ssl_cert_login_san_index,
        "with subject_alternative_name: which of that type, from 0"),
    OPT("data_dir", OPT_STRING, "./data", 0, 0, false, data_dir,
        "directory for definitions and persistent messages"),
    OPT("load_definitions", OPT_STRING, "", 0, 0, false, load_definitions,
        "RabbitMQ definitions file (JSON) whose vhosts, exchanges, queues "
        "and bindings are added at start, after the data directory is "
        "recovered; existing ones are kept; empty: none"),
    OPT("log.file", OPT_STRING, "-", 0, 0, false, log_file_opt,
        "log file (a relative name is under log.dir); - is standard "
        "error; false (RabbitMQ's): no file, so standard error; SIGHUP "
        "reopens it. Roost has one log output: a file named here wins "
        "over log.console = true"),
    OPT("log.dir", OPT_STRING, "", 0, 0, false, log_dir,
        "directory of a relative log.file (RabbitMQ's); empty: the "
        "working directory"),
    OPT("log.console", OPT_BOOL, "false", 0, 0, false, log_console,
        "true (RabbitMQ's): log to standard error, unless log.file names "
        "a file"),
    OPT("log.level", OPT_LOG_LEVEL, "info", 0, 0, true, log_default_level,
        "debug, info, warning or error (also RabbitMQ's notice, taken as "
        "warning, and critical, alert and emergency, taken as error); "
        "log.default.level is the same key; log.file.level or "
        "log.console.level wins for its output"),
    OPT("log.file.level", OPT_LOG_LEVEL, "", 0, 0, true, log_file_level,
        "level of a log file (and of standard error when no file or "
        "console is named, as RabbitMQ's default output is its file); "
        "empty: log.level; none: errors only"),
    OPT("log.console.level", OPT_LOG_LEVEL, "", 0, 0, true,
        log_console_level,
        "level of standard error when it is the log (given, it turns "
        "log.console on, as in RabbitMQ); empty: log.level; none: errors "
        "only"),
    OPT("log.console.formatter", OPT_STRING, "plaintext", 0, 0, false,
        log_console_formatter,
        "plaintext or json (RabbitMQ's): each line logged on standard "
        "error (log.file = -) one JSON object with time, level, msg and "
        "the connection, channel, vhost, user, queue and message_id it "
        "is about"),
    OPT("log.file.formatter", OPT_STRING, "plaintext", 0, 0, false,
        log_file_formatter,
        "plaintext or json: the same for a log file"),
    OPT("channel_max", OPT_INT, "2047", 1, 65535, true, channel_max,
        "highest channel number a client may open (offered in connection.tune)"),
    OPT("frame_max", OPT_BYTESIZE, "131072", 4096, 16777216, true, frame_max,
        "largest frame in bytes (offered in connection.tune)"),
    OPT("heartbeat", OPT_INT, "60", 0, 65535, true, heartbeat,
        "heartbeat interval in seconds offered in connection.tune; 0 disables"),
    OPT("handshake_timeout", OPT_INT, "10000", 100, 3600000, true,
        handshake_timeout_ms,
        "milliseconds a client has from connecting to connection.open"),
    OPT("close_timeout", OPT_INT, "3000", 10, 600000, true, close_timeout_ms,
        "milliseconds to wait for close-ok before dropping the socket"),
    OPT("max_message_size", OPT_INT64, "134217728", 1, 536870912, true,
        max_message_size,
        "largest message body in bytes; larger publishes get 406 (channel)"),
    OPT("default_user", OPT_STRING, "guest", 0, 0, false, default_user,
        "user created at first start"),
    OPT("default_pass", OPT_STRING, "guest", 0, 0, false, default_pass,
        "password of the default user"),
    OPT("default_vhost", OPT_STRING, "/", 0, 0, false, default_vhost,
        "virtual host created at first start"),
    OPT("default_permissions.configure", OPT_STRING, ".*", 0, 0, false,
        default_perm_configure,
        "configure permission of the default user in the default vhost"),
    OPT("default_permissions.write", OPT_STRING, ".*", 0, 0, false,
        default_perm_write,
        "write permission of the default user in the default vhost"),
    OPT("default_permissions.read", OPT_STRING, ".*", 0, 0, false,
        default_perm_read,
        "read permission of the default user in the default vhost"),
    OPT("default_user_tags", OPT_LIST, "", 0, 0, false, default_user_tags,
        "RabbitMQ's default_user_tags.TAG = true: the default user's tags "
        "(administrator, monitoring, policymaker, management, or any "
        "name), those set to true; none set: administrator"),
    OPT("server_properties.rabbitmq", OPT_BOOL, "true", 0, 0, false,
        announce_rabbitmq,
        "true: connection.start says product RabbitMQ, version "
        ROOST_RABBITMQ_VERSION " (the behaviour Roost follows), so kombu "
        "and Celery pick the basic.qos semantics Roost implements; false: "
        "product Roost"),
    OPT("loopback_users", OPT_LIST, "", 0, 0, true, loopback_users,
        "RabbitMQ's loopback_users.NAME = true: user NAME may log in only "
        "from a loopback address (false: from anywhere); none set: guest "
        "only; loopback_users = none: nobody is held to loopback"),
    OPT("consumer_output_high_watermark", OPT_INT64, "4194304", 4096,
        1073741824, true, consumer_output_high_watermark,
        "bytes of unsent output above which a connection gets no deliveries"),
    OPT("consumer_output_low_watermark", OPT_INT64, "1048576", 0, 1073741824, true, consumer_output_low_watermark,
        "bytes of unsent output below which deliveries resume"),
    OPT("flow_control.queue_length", OPT_INT64, "10000", 0, 1000000000, true,
        flow_queue_length,
        "ready messages above which a queue whose consumers' connections "
        "are congested pauses its publishers; 0: no limit by count"),
    OPT("flow_control.queue_bytes", OPT_INT64, "16777216", 0,
        INT64_C(1) << 50, true, flow_queue_bytes,
        "ready body bytes above which the same happens; 0: no limit by "
        "bytes (both 0: no flow control)"),
    OPT("connection_max", OPT_INT64, "65536", 1, 10000000, true,
        connection_max,
        "open connections allowed; connection.open beyond it gets 530; "
        "infinity (RabbitMQ's): the largest"),
    OPT("consumer_max_per_channel", OPT_INT64, "65536", 1, 10000000, true,
        consumer_max_per_channel,
        "consumers one channel may have; basic.consume beyond it gets 530"),
    OPT("max_queues", OPT_INT64, "1000000", 1, 100000000, true, max_queues,
        "queues a vhost may hold; queue.declare beyond it gets 406"),
    OPT("delayed_message.max_messages", OPT_INT64, "100000", 0, 100000000, true, delayed_max_messages,
        "messages x-delayed-message exchanges may hold at once, over all "
        "vhosts (each whole, in memory, until due); a delayed publish "
        "beyond it is refused as by x-overflow=reject-publish: basic.nack "
        "in confirm mode, dropped otherwise, logged once; 0: none held"),
    OPT("stream.offset_retention", OPT_INT64, "604800000", 1, INT64_C(1) << 50, true, stream_offset_retention,
        "milliseconds a stream keeps a consumer name "
        "(x-stream-consumer-name) and its offset after the name was "
        "last attached or moved; then it is forgotten (Kafka's "
        "offsets.retention.minutes, 7 days)"),
    OPT("stream.consumer_names_max", OPT_INT64, "4096", 1, 1000000, true, stream_names_max,
        "consumer names one stream keeps; basic.consume with a new name "
        "beyond it gets 406 until one is forgotten or deleted"),
    OPT("consumer_timeout", OPT_INT64, "1800000", 0, INT64_C(1) << 50, true, consumer_timeout,
        "milliseconds a delivery may stay unacknowledged before its "
        "channel is closed with 406 and its messages requeued (as "
        "RabbitMQ; checked to the millisecond, not once a minute); a "
        "queue's x-consumer-timeout wins; 0: no timeout"),
    OPT("vm_memory_high_watermark.relative", OPT_DOUBLE, "0.4", 0, 1, true,
        mem_high_watermark_relative,
        "fraction of RAM above which publishers are blocked (as RabbitMQ)"),
    OPT("vm_memory_high_watermark.absolute", OPT_BYTES, "0", 0,
        INT64_C(1) << 50, true, mem_absolute_opt,
        "bytes above which publishers are blocked (2GB, 512MiB, ...); 0 "
        "uses the relative limit, and so does setting .relative too (as "
        "RabbitMQ)"),
    OPT("vm_memory_high_watermark_paging_ratio", OPT_DOUBLE, "0.5", 0, 10, true, mem_paging_ratio,
        "fraction of the memory high watermark above which queues keep "
        "a sixteenth of their window in memory and page transient "
        "messages to the scratch area too (as RabbitMQ)"),
    OPT("paging.window", OPT_INT64, "2048", 16, 100000000, false,
        paging_window,
        "messages each queue keeps in memory at its head; beyond it a "
        "message's body leaves memory once it is on disk (Roost's own)"),
    OPT("store.segment_size", OPT_INT64, "67108864", 65536,
        INT64_C(1) << 31, false, store_segment_size,
        "Bytes of journal per segment file (preallocated); a segment is "
        "deleted once none of its messages is left."),
    OPT("disk_free_limit.absolute", OPT_BYTES, "50000000", 0,
        INT64_C(1) << 50, true, disk_absolute_opt,
        "free bytes on the data directory's filesystem below which "
        "publishers are blocked (1GB, 500MiB, ...); 0: no disk alarm"),
    OPT("disk_free_limit.relative", OPT_DOUBLE, "0", 0, 1000, true,
        disk_free_relative,
        "the same as a multiple of the machine's RAM (RabbitMQ's: 1.5 is "
        "one and a half times the RAM), computed at start; set, it wins "
        "over .absolute (as RabbitMQ)"),
    OPT("management.tcp.port", OPT_INT, "15672", 0, 65535, false,
        mgmt_tcp_port,
        "port of the management HTTP API (RabbitMQ's); 0 picks a free "
        "port and logs it; left at the default and taken by another "
        "process: a warning, and roostd runs without the API"),
    OPT("management.tcp.ip", OPT_STRING, "127.0.0.1", 0, 0, false,
        mgmt_tcp_ip,
        "address the management HTTP API listens on; empty means all "
        "IPv4 and IPv6 addresses"),
    OPT("management.ssl.port", OPT_INT, "-1", -1, 65535, false,
        mgmt_ssl_port,
        "port of the management HTTP API over TLS (HTTPS); -1: none; 0 "
        "picks a free port and logs it; needs management.ssl.certfile "
        "and .keyfile"),
    OPT("management.ssl.ip", OPT_STRING, "127.0.0.1", 0, 0, false,
        mgmt_ssl_ip,
        "address the HTTPS management API listens on; empty means all "
        "IPv4 and IPv6 addresses"),
    OPT("management.ssl.cacertfile", OPT_STRING, "", 0, 0, true,
        mgmt_ssl_cacertfile,
        "PEM file of CA certificates for the HTTPS listener (loaded; "
        "client certificates are not asked for)"),
    OPT("management.ssl.certfile", OPT_STRING, "", 0, 0, true,
        mgmt_ssl_certfile,
        "PEM file of the HTTPS listener's certificate (and its chain); "
        "SIGHUP reloads it"),
    OPT("management.ssl.keyfile", OPT_STRING, "", 0, 0, true,
        mgmt_ssl_keyfile,
        "PEM file of the HTTPS listener's private key"),
    OPT("management.ssl.password", OPT_STRING, "", 0, 0, true,
        mgmt_ssl_password,
        "password of an encrypted management.ssl.keyfile"),
    OPT("management.http.max_body_size", OPT_INT64, "20000000", 1024,
        INT64_C(1) << 31, false, mgmt_max_body_size,
        "largest request body in bytes the management API reads for the "
        "definitions routes (a definitions file); every other route reads "
        "at most 1 MiB (or this, if smaller); a larger one gets 413"),
    OPT("management.tcp.idle_timeout", OPT_INT, "60000", 100, 3600000,
        false, mgmt_idle_timeout_ms,
        "milliseconds a management API or Prometheus connection may be "
        "idle (no byte received or sent) before it is closed"),
    OPT("management.tcp.request_timeout", OPT_INT, "60000", 100, 3600000,
        false, mgmt_request_timeout_ms,
        "milliseconds from the first byte of an HTTP request (management "
        "API or Prometheus) to its last, however it trickles; then the "
        "connection is closed"),
    OPT("management.http.max_connections", OPT_INT, "256", 1, 65536,
        false, mgmt_max_connections,
        "HTTP connections each management API or Prometheus listener "
        "holds at once; at the cap it stops accepting until one closes "
        "(Roost's own; the next wait in the listen backlog)"),
    OPT("collect_statistics_interval", OPT_INT, "5000", 100, 3600000,
        false, collect_statistics_interval,
        "milliseconds between the samples that message rates are made "
        "of (RabbitMQ's key): a rate is that of the last interval"),
    OPT("management.rates_mode", OPT_STRING, "basic", 0, 0, false,
        rates_mode,
        "basic or detailed: message rates of the last interval in the "
        "management API (detailed is basic: no per-pair samples); none: "
        "counts only, no rates"),
    OPT("management.allowed_hosts", OPT_LIST, "", 0, 0, false,
        mgmt_allowed_hosts,
        "more names the management and Prometheus listeners answer to "
        "(against DNS "
        "rebinding, a request's Host must be one of them): "
        "management.allowed_hosts.NAME = HOST, a name or address without "
        "its port; * takes any Host (behind a proxy that checks it); "
        "always allowed: localhost, 127.0.0.1, [::1], the listener's "
        "addresses and the machine's host name; others get 421 (Roost's "
        "own)"),
    OPT("prometheus.tcp.port", OPT_INT, "15692", -1, 65535, false,
        prom_tcp_port,
        "port of the Prometheus metrics endpoint (RabbitMQ's, "
        "unauthenticated); -1: none; 0 picks a free port and logs it; "
        "left at the default and taken by another process: a warning, "
        "and roostd runs without it"),
    OPT("prometheus.tcp.ip", OPT_STRING, "127.0.0.1", 0, 0, false,
        prom_tcp_ip,
        "address the Prometheus endpoint listens on; empty means all "
        "IPv4 and IPv6 addresses"),
    OPT("prometheus.path", OPT_STRING, "/metrics", 0, 0, false, prom_path,
        "path of the aggregated metrics; PATH/per-object and "
        "PATH/detailed beside it (RabbitMQ's key)"),
    OPT("prometheus.return_per_object_metrics", OPT_BOOL, "false", 0, 0,
        false, prom_per_object,
        "whether the aggregated path answers per object (per queue and "
        "vhost) as PATH/per-object does (RabbitMQ's key)"),
    OPT("prometheus.max_series", OPT_INT64, "100000", 0,
        INT64_C(1) << 40, true, prom_max_series,
        "most per-object series one scrape writes; queues beyond it are "
        "left out, counted in roost_prometheus_objects_omitted and logged "
        "once; 0: no bound (Roost's own)"),
};
const size_t config_nopts = NELEMS(config_opts);

/* RabbitMQ's other names for Roost's keys. */
static const struct alias {
    const char *name, *is;
} aliases[] = {
    { "log.default.level", "log.level" },
    { "management.listener.port", "management.tcp.port" },
    { "management.listener.ip", "management.tcp.ip" },
    { "management.load_definitions", "load_definitions" },
    { "definitions.local.path", "load_definitions" },
    { "tcp_listen_options.backlog", "listen_backlog" },
};

static const struct opt_def *
opt_find(const char *name)
{
    for (size_t i = 0; i < NELEMS(aliases); i++)
        if (strcmp(aliases[i].name, name) == 0)
            name = aliases[i].is;
    for (size_t i = 0; i < config_nopts; i++)
        if (strcmp(config_opts[i].name, name) == 0)
            return &config_opts[i];
    return NULL;
}

/* Edits from 'a' to 'b' (Levenshtein), counted up to 'cap' + 1. */
static size_t
edits(const char *a, const char *b, size_t cap)
{
    size_t n = strlen(b), row[128];
    if (n >= NELEMS(row))
        return cap + 1;
    for (size_t j = 0; j <= n; j++)
        row[j] = j;
    for (size_t i = 1; a[i - 1] != '\0'; i++) {
        size_t diag = row[0], best = row[0] = i;
        for (size_t j = 1; j <= n; j++) {
            size_t up = row[j];
            size_t v = diag + (a[i - 1] != b[j - 1]);
            if (row[j - 1] + 1 < v)
                v = row[j - 1] + 1;
            if (up + 1 < v)
                v = up + 1;
            row[j] = v;
            diag = up;
            if (v < best)
                best = v;
        }
        if (best > cap)
            return cap + 1;
    }
    return row[n];
}

/* "unknown key 'K'", with the nearest of Roost's keys where one is
 * near enough to be a slip (a quarter of its length, at least 2). */
static void
unknown_key(char *err, size_t errlen, const char *key)
{
    size_t cap = strlen(key) / 4 < 2 ? 2 : strlen(key) / 4;
    const char *near = NULL;
    size_t best = cap + 1;

    for (size_t i = 0; i < config_nopts; i++) {
        size_t d = edits(key, config_opts[i].name, cap);
        if (d < best) {
            best = d;
            near = config_opts[i].name;
        }
    }
    if (near != NULL)
        snprintf(err, errlen, "unknown key '%s' (did you mean '%s'?)", key,
                 near);
    else
        snprintf(err, errlen, "unknown key '%s'", key);
}

static size_t
opt_index(const char *name)
{
    const struct opt_def *o = opt_find(name);
    if (o == NULL)
        fatalx("no option %s", name);
    return (size_t)(o - config_opts);
}

static bool
is_given(const struct config *c, const char *name)
{
    return c->given[opt_index(name)] != 0;
}

/* The list option "P" of a key "P.NAME" ('*entry': NAME), or NULL. */
static const struct opt_def *
list_find(const char *key, const char **entry)
{
    const char *dot = strrchr(key, '.');
    if (dot == NULL || dot[1] == '\0')
        return NULL;
    for (size_t i = 0; i < config_nopts; i++) {
        const struct opt_def *o = &config_opts[i];
        size_t n = strlen(o->name);
        if (o->type == OPT_LIST && (size_t)(dot - key) == n &&
            strncmp(key, o->name, n) == 0) {
            *entry = dot + 1;
            return o;
        }
    }
    return NULL;
}

/* The option a key sets: its own, or the list option of "P.NAME"
 * ('*entry': NAME; NULL for a key of its own). NULL: none. */
static const struct opt_def *
key_find(const char *key, const char **entry)
{
    const struct opt_def *o = opt_find(key);
    *entry = NULL;
    return o != NULL ? o : list_find(key, entry);
}

#define LIST_NONE "\tnone\n"

bool
config_list_none(const char *list)
{
    return strcmp(list, LIST_NONE) == 0;
}

/* Copy 'n' bytes at 'p' into 'out' (at most 'len' - 1 of them), with a
 * NUL. */
static void
copy_out(char *out, size_t len, const char *p, size_t n)
{
    if (out == NULL || len == 0)
        return;
    if (n >= len)
        n = len - 1;
    memcpy(out, p, n);
    out[n] = '\0';
}

/* config_list_next with the entry's NAME too (into 'name', at most
 * 'nlen' bytes; NULL: not wanted). */
static bool
config_list_entry(const char *list, size_t *pos, char *name, size_t nlen,
                  char *value, size_t vlen)
{
    const char *p = list + *pos;
    if (*p == '\0' || config_list_none(list))
        return false;
    const char *tab = strchr(p, '\t'), *nl = strchr(p, '\n');
    copy_out(name, nlen, p, (size_t)(tab - p));
    copy_out(value, vlen, tab + 1, (size_t)(nl - tab - 1));
    *pos = (size_t)(nl + 1 - list);
    return true;
}

bool
config_list_next(const char *list, size_t *pos, char *value, size_t len)
{
    return config_list_entry(list, pos, NULL, 0, value, len);
}

void
config_default_user_tags(const struct config *c, char *out, size_t len)
{
    char tag[256], v[16];
    size_t pos = 0, n = 0;

    if (c->default_user_tags[0] == '\0') {
        snprintf(out, len, "administrator");
        return;
    }
    out[0] = '\0';
    while (config_list_entry(c->default_user_tags, &pos, tag, sizeof(tag), v,
                             sizeof(v)))
        if (strcmp(v, "true") == 0 && n < len)
            n += (size_t)snprintf(out + n, len - n, "%s%s", n ? "," : "",
                                  tag);
}

bool
config_list_get(const char *list, const char *name, char *value, size_t len)
{
    char n[256];
    size_t pos = 0;
    while (config_list_entry(list, &pos, n, sizeof(n), value, len))
        if (strcmp(n, name) == 0)
            return true;
    return false;
}

/* Set entry 'name' of list '*field' to 'value'. */
static int
list_set(char **field, const char *key, const char *name, const char *value,
         char *err, size_t errlen)
{
    char *list = *field;
    size_t nlen = strlen(name);

    if (strchr(value, '\n') || strchr(value, '\t') || strchr(name, '\t')) {
        snprintf(err, errlen, "%s: bad character in '%s'", key, value);
        return -1;
    }
    if (config_list_none(list)) {
        snprintf(err, errlen, "%s: the list was set to none", key);
        return -1;
    }
    /* Replace an entry of the same name. */
    for (char *p = list; *p != '\0';) {
        char *nl = strchr(p, '\n');
        if (strncmp(p, name, nlen) == 0 && p[nlen] == '\t') {
            memmove(p, nl + 1, strlen(nl + 1) + 1);
            break;
        }
        p = nl + 1;
    }
    size_t have = strlen(list), add = nlen + strlen(value) + 2;
    list = xrealloc(list, have + add + 1);
    snprintf(list + have, add + 1, "%s\t%s\n", name, value);
    *field = list;
    return 0;
}

static int
parse_int64(const char *s, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

struct unit {
    const char *name;
    int64_t mult;
};

/* RabbitMQ 3.10's information units (rabbit_resource_monitor_misc),
 * exactly the spellings it takes. */
static const struct unit info_units[] = {
    { "kB", 1000 }, { "KB", 1000 }, { "kb", 1000 }, { "Kb", 1000 },
    { "MB", 1000000 }, { "mb", 1000000 }, { "Mb", 1000000 },
    { "GB", 1000000000 }, { "gb", 1000000000 }, { "Gb", 1000000000 },
    { "k", 1024 }, { "K", 1024 }, { "kiB", 1024 }, { "KiB", 1024 },
    { "kib", 1024 }, { "KIB", 1024 },
    { "m", 1 << 20 }, { "M", 1 << 20 }, { "MiB", 1 << 20 },
    { "mib", 1 << 20 }, { "MIB", 1 << 20 },
    { "g", 1 << 30 }, { "G", 1 << 30 }, { "GiB", 1 << 30 },
    { "gib", 1 << 30 }, { "GIB", 1 << 30 },
    { NULL, 0 },
};

/* cuttlefish's bytesize (frame_max). */
static const struct unit bytesize_units[] = {
    { "KB", 1024 }, { "MB", 1 << 20 }, { "GB", 1 << 30 }, { NULL, 0 },
};

/* Digits, then nothing or one of 'units'. */
static int
parse_bytes(const char *s, const struct unit *units, int64_t *out)
{
    const char *p = s;
    int64_t v = 0, mult = 1;

    while (*p >= '0' && *p <= '9') {
        if (v > (INT64_MAX - 9) / 10)
            return -1;
        v = v * 10 + (*p++ - '0');
    }
    if (p == s)
        return -1;
    if (*p != '\0') {
        const struct unit *u = units;
        while (u->name != NULL && strcmp(u->name, p) != 0)
            u++;
        if (u->name == NULL)
            return -1;
        mult = u->mult;
    }
    if (v > INT64_MAX / mult)
        return -1;
    *out = v * mult;
    return 0;
}

/* RabbitMQ's log levels onto Roost's four. */
static int
parse_log_level(const char *s)
{
    static const struct {
        const char *name;
        int level;
    } more[] = {
        { "", -1 }, { "notice", LOG_LVL_WARN }, { "critical", LOG_LVL_ERROR },
        { "alert", LOG_LVL_ERROR }, { "emergency", LOG_LVL_ERROR },
        { "none", CONFIG_LOG_NONE },
    };
    for (size_t i = 0; i < NELEMS(more); i++)
        if (strcmp(s, more[i].name) == 0)
            return more[i].level;
    int l = log_level_parse(s);
    return l < 0 ? -2 : l;
}

static double
total_ram(void)
{
    long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGESIZE);
    return pages > 0 && size > 0 ? (double)pages * (double)size
                                 : 1024.0 * 1024 * 1024;
}

/* The pairs of which RabbitMQ takes .relative when both are set. */
static const char *const pairs[][2] = {
    { "vm_memory_high_watermark.relative",
      "vm_memory_high_watermark.absolute" },
    { "disk_free_limit.relative", "disk_free_limit.absolute" },
};

/* Roost's one log output and its level from RabbitMQ's keys. As
 * RabbitMQ: a level given turns its output on, and an output's own
 * level wins over log.default.level. */
static void
resolve_log(struct config *c)
{
    const char *f = c->log_file_opt;
    if (f == NULL || c->log_dir == NULL)
        return;     /* config_defaults has not set them yet */
    bool no_file = strcmp(f, "false") == 0;
    bool to_file = f[0] != '\0' && strcmp(f, "-") != 0 && !no_file;
    bool console = is_given(c, "log.console") ? c->log_console
        : c->log_console_level >= 0 && c->log_console_level != CONFIG_LOG_NONE;
    int level = c->log_default_level >= 0 ? c->log_default_level
                                          : LOG_LVL_INFO;

    free(c->log_file);
    if (to_file) {
        if (c->log_file_level >= 0)
            level = c->log_file_level;
        if (f[0] != '/' && c->log_dir[0] != '\0') {
            size_t n = strlen(c->log_dir) + strlen(f) + 2;
            c->log_file = xmalloc(n);
            snprintf(c->log_file, n, "%s/%s", c->log_dir, f);
        } else {
            c->log_file = xstrdup(f);
        }
    } else {
        if (console && c->log_console_level >= 0)
            level = c->log_console_level;
        else if (!no_file && c->log_file_level >= 0)
            level = c->log_file_level;
        c->log_file = xstrdup("-");
    }
    c->log_level = level == CONFIG_LOG_NONE ? LOG_LVL_ERROR : level;
}

/* The values that other options' settings come to. */
static void
resolve(struct config *c)
{
    c->mem_high_watermark_absolute =
        is_given(c, pairs[0][0]) ? 0 : c->mem_absolute_opt;
    c->disk_free_limit = is_given(c, pairs[1][0])
        ? (int64_t)(c->disk_free_relative * total_ram() + 0.5)
        : c->disk_absolute_opt;
    resolve_log(c);
}

bool
config_has_key(const char *key)
{
    const char *entry;
    return key_find(key, &entry) != NULL;
}

static int
set_value(struct config *c, const struct opt_def *o, const char *entry,
          const char *key, const char *value, char *err, size_t errlen);

int
config_set(struct config *c, const char *key, const char *value, char *err,
           size_t errlen)
{
    const char *entry;
    const struct opt_def *o = key_find(key, &entry);

    if (o == NULL) {
        unknown_key(err, errlen, key);
        return -1;
    }
    if (set_value(c, o, entry, key, value, err, errlen) != 0)
        return -1;
    /* Set on the command line after a file, one of a pair wins. */
    for (size_t i = 0; i < NELEMS(pairs); i++)
        for (size_t j = 0; j < 2; j++)
            if (strcmp(o->name, pairs[i][j]) == 0)
                c->given[opt_index(pairs[i][1 - j])] = 0;
    c->given[o - config_opts] = 1;
    resolve(c);
    return 0;
}

static int
set_value(struct config *c, const struct opt_def *o, const char *entry,
          const char *key, const char *value, char *err, size_t errlen)
{
    void *field = (char *)c + o->offset;
    int64_t v;

    switch (o->type) {
    case OPT_LIST:
        if (entry != NULL)
            return list_set((char **)field, key, entry, value, err, errlen);
        /* "P = none", or the default (empty) */
        if (strcmp(value, "none") != 0 && value[0] != '\0') {
            snprintf(err, errlen, "%s: give entries as %s.NAME = VALUE "
                     "(or %s = none)", key, key, key);
            return -1;
        }
        free(*(char **)field);
        *(char **)field = xstrdup(value[0] ? LIST_NONE : "");
        return 0;
    case OPT_INT:
    case OPT_INT64:
    case OPT_BYTES:
    case OPT_BYTESIZE:
        if (o->type == OPT_BYTES || o->type == OPT_BYTESIZE) {
            if (parse_bytes(value, o->type == OPT_BYTES ? info_units
                            : bytesize_units, &v) != 0) {
                snprintf(err, errlen, "%s: '%s' is not a number of bytes "
                         "(digits, then %s)", key, value,
                         o->type == OPT_BYTES ? "kB, MB, GB, KiB, MiB, GiB, "
                         "k, m, g or none" : "KB, MB, GB or none");
                return -1;
            }
        } else if (strcmp(value, "infinity") == 0 &&
                   strcmp(o->name, "connection_max") == 0) {
            v = o->max;     /* RabbitMQ's "no limit" */
        } else if (parse_int64(value, &v) != 0) {
            snprintf(err, errlen, "%s: '%s' is not an integer", key, value);
            return -1;
        }
        if (v < o->min || v > o->max) {
            snprintf(err, errlen, "%s: %lld is outside %lld..%lld", key,
                     (long long)v, (long long)o->min, (long long)o->max);
            return -1;
        }
        if (o->type == OPT_INT || o->type == OPT_BYTESIZE)
            *(int *)field = (int)v;
        else
            *(int64_t *)field = v;
        /* Bound at the default port, the API is optional (many brokers
         * on one machine); one the operator names is not. */
        if (o->offset == offsetof(struct config, mgmt_tcp_port))
            c->mgmt_tcp_port_given = true;
        if (o->offset == offsetof(struct config, prom_tcp_port))
            c->prom_tcp_port_given = true;
        return 0;
    case OPT_DOUBLE: {
        char *end;
        errno = 0;
        double d = strtod(value, &end);
        if (errno || end == value || *end != '\0') {
            snprintf(err, errlen, "%s: '%s' is not a number", key, value);
            return -1;
        }
        if (d < (double)o->min || d > (double)o->max) {
            snprintf(err, errlen, "%s: %g is outside %lld..%lld", key, d,
                     (long long)o->min, (long long)o->max);
            return -1;
        }
        *(double *)field = d;
        return 0;
    }
    case OPT_BOOL:
        if (strcmp(value, "true") == 0)
            *(bool *)field = true;
        else if (strcmp(value, "false") == 0)
            *(bool *)field = false;
        else {
            snprintf(err, errlen, "%s: '%s' is not true or false", key, value);
            return -1;
        }
        return 0;
    case OPT_STRING:
        free(*(char **)field);
        *(char **)field = xstrdup(value);
        return 0;
    case OPT_LOG_LEVEL: {
        int l = parse_log_level(value);
        if (l == -2) {
            snprintf(err, errlen,
                     "%s: '%s' is not debug, info, warning or error (or "
                     "notice, critical, alert, emergency, none)", key,
                     value);
            return -1;
        }
        *(int *)field = l;
        return 0;
    }
    }
    return -1;
}

void
config_defaults(struct config *c)
{
    char err[256];

    memset(c, 0, sizeof(*c));
    if (config_nopts > CONFIG_MAX_OPTS)
        fatalx("CONFIG_MAX_OPTS is below %zu", config_nopts);
    for (size_t i = 0; i < config_nopts; i++)
        if (config_set(c, config_opts[i].name, config_opts[i].def, err,
                       sizeof(err)) != 0)
            fatalx("bad built-in default: %s", err);
    c->mgmt_tcp_port_given = false;
    c->prom_tcp_port_given = false;
    memset(c->given, 0, sizeof(c->given));
    resolve(c);
}

void
config_free(struct config *c)
{
    for (size_t i = 0; i < config_nopts; i++)
        if (config_opts[i].type == OPT_STRING ||
            config_opts[i].type == OPT_LIST) {
            char **p = (char **)(void *)((char *)c + config_opts[i].offset);
            free(*p);
            *p = NULL;
        }
    free(c->log_file);
    c->log_file = NULL;
}

static char *
trim(char *s)
{
    while (*s == ' ' || *s == '\t')
        s++;
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '\n' ||
                     s[n - 1] == '\r'))
        s[--n] = '\0';
    return s;
}

static void
append_msg(char *buf, size_t len, const char *path, int line,
           const char *msg)
{
    size_t n = strlen(buf);
    if (n < len)
        snprintf(buf + n, len - n, "%s:%d: %s\n", path, line, msg);
}

/* After the whole file: what RabbitMQ decides over several keys. */
static void
check_file(struct config *c, const char *path, const int *lines,
           char *warns, size_t warnlen)
{
    char msg[512];

    for (size_t i = 0; i < NELEMS(pairs); i++) {
        size_t rel = opt_index(pairs[i][0]), abs = opt_index(pairs[i][1]);
        if (lines[rel] == 0 || lines[abs] == 0)
            continue;
        c->given[rel] = 1;
        c->given[abs] = 0;
        snprintf(msg, sizeof(msg), "%s is ignored: %s (line %d) is set "
                 "too, and RabbitMQ then uses it", pairs[i][1], pairs[i][0],
                 lines[rel]);
        append_msg(warns, warnlen, path, lines[abs], msg);
    }
    resolve(c);
    int console = lines[opt_index("log.console")];
    int console_level = lines[opt_index("log.console.level")];
    int file = lines[opt_index("log.file")];
    int dir = lines[opt_index("log.dir")];
    bool to_console = strcmp(c->log_file, "-") == 0;
    if (!to_console && (console || console_level) &&
        (c->log_console || (!console && c->log_console_level >= 0 &&
                            c->log_console_level != CONFIG_LOG_NONE))) {
        snprintf(msg, sizeof(msg), "Roost has one log output: it logs to "
                 "%s only, not to standard error too", c->log_file);
        append_msg(warns, warnlen, path, console ? console : console_level,
                   msg);
    }
    if (file && strcmp(c->log_file_opt, "false") == 0 && to_console &&
        !(console && c->log_console))
        append_msg(warns, warnlen, path, file, "log.file = false: Roost "
                   "always has one log output, and logs to standard error");
    if (dir && to_console)
        append_msg(warns, warnlen, path, dir, "log.dir: no log.file names a "
                   "file in it, so Roost logs to standard error");
}

int
config_load_file(struct config *c, const char *path, int flags, char *errs,
                 size_t errlen, char *warns, size_t warnlen)
{
    FILE *fp = fopen(path, "r");
    char buf[4096], err[512];
    int line = 0, nerr = 0, lines[CONFIG_MAX_OPTS] = { 0 };

    if (errlen)
        errs[0] = '\0';
    if (warnlen)
        warns[0] = '\0';
    if (fp == NULL) {
        snprintf(err, sizeof(err), "cannot open: %s", strerror(errno));
        append_msg(errs, errlen, path, 0, err);
        return 1;
    }
    while (fgets(buf, sizeof(buf), fp)) {
        line++;
        if (strchr(buf, '\n') == NULL && !feof(fp)) {
            append_msg(errs, errlen, path, line, "line too long");
            nerr++;
            int ch;
            while ((ch = fgetc(fp)) != EOF && ch != '\n')
                ;
            continue;
        }
        char *s = trim(buf);
        if (*s == '\0' || *s == '#')
            continue;
        char *eq = strchr(s, '=');
        if (eq == NULL) {
            append_msg(errs, errlen, path, line, "expected 'key = value'");
            nerr++;
            continue;
        }
        *eq = '\0';
        /* As cuttlefish: a '#' ends the value, the rest is a comment. */
        eq[1 + strcspn(eq + 1, "#")] = '\0';
        char *key = trim(s), *value = trim(eq + 1);
        if (!config_has_key(key)) {
            const char *why = NULL;
            enum rabbit_verdict v = rabbitconf_classify(key, value, &why);
            if (v == RABBIT_UNKNOWN) {
                unknown_key(err, sizeof(err), key);
                append_msg(errs, errlen, path, line, err);
                nerr++;
            } else if (v == RABBIT_IGNORED) {
                snprintf(err, sizeof(err), "%s = %s: RabbitMQ's key, "
                         "skipped: %s", key, value, why);
                append_msg(warns, warnlen, path, line, err);
            } else if (flags & CONFIG_IGNORE_UNSUPPORTED) {
                snprintf(err, sizeof(err), "%s = %s: not supported, "
                         "skipped (--ignore-unsupported): %s", key, value,
                         why);
                append_msg(warns, warnlen, path, line, err);
            } else {
                snprintf(err, sizeof(err), "%s = %s: not supported: %s "
                         "(--ignore-unsupported skips it)", key, value, why);
                append_msg(errs, errlen, path, line, err);
                nerr++;
            }
            continue;
        }
        if (config_set(c, key, value, err, sizeof(err)) != 0) {
            append_msg(errs, errlen, path, line, err);
            nerr++;
            continue;
        }
        const char *entry;
        lines[key_find(key, &entry) - config_opts] = line;
    }
    fclose(fp);
    check_file(c, path, lines, warns, warnlen);
    return nerr;
}

void
config_dump(FILE *fp)
{
    static const char *const type_names[] = {
        [OPT_INT] = "integer", [OPT_INT64] = "integer", [OPT_DOUBLE] = "number",
        [OPT_BOOL] = "true|false", [OPT_STRING] = "string",
        [OPT_LOG_LEVEL] = "debug|info|warning|error",
        [OPT_LIST] = "list: one key per entry, as the line below",
        [OPT_BYTES] = ("bytes: digits, or digits and kB|MB|GB (1000s) or "
                       "KiB|MiB|GiB|k|m|g (1024s)"),
        [OPT_BYTESIZE] = "bytes: digits, or digits and KB|MB|GB (1024s)",
    };

    fprintf(fp,
            "# roost.conf: every configuration key of roostd, with its default.\n"
            "# Generated by `roostd --dump-config`; a test keeps it in step.\n"
            "#\n"
            "# Format: one \"key = value\" per line, as in rabbitmq.conf; '#'\n"
            "# starts a comment line. Unknown keys and bad values stop roostd\n"
            "# at startup with \"file:line: message\"; `roostd -t -c FILE`\n"
            "# checks a file and exits. Any key can also be given on the\n"
            "# command line: --set key=value. SIGHUP reloads the file: keys\n"
            "# marked \"reloadable\" change at once, others need a restart.\n");
    for (size_t i = 0; i < config_nopts; i++) {
        const struct opt_def *o = &config_opts[i];
        fprintf(fp, "\n# %s\n# type: %s", o->help, type_names[o->type]);
        if (o->type == OPT_INT || o->type == OPT_INT64 ||
            o->type == OPT_DOUBLE || o->type == OPT_BYTES ||
            o->type == OPT_BYTESIZE)
            fprintf(fp, " (%lld..%lld)", (long long)o->min, (long long)o->max);
        if (o->reloadable)
            fprintf(fp, "; reloadable");
        fprintf(fp, "\n# %s =%s%s\n", o->name, o->def[0] ? " " : "", o->def);
    }
}

int
config_validate(const struct config *c, char *err, size_t errlen)
{
    if (c->consumer_output_low_watermark >= c->consumer_output_high_watermark) {
        snprintf(err, errlen,
                 "consumer_output_low_watermark must be below "
                 "consumer_output_high_watermark");
        return -1;
    }
    if (strcmp(c->ssl_verify, "verify_none") != 0 &&
        strcmp(c->ssl_verify, "verify_peer") != 0) {
        snprintf(err, errlen, "ssl_options.verify: '%s' is not verify_none "
                 "or verify_peer", c->ssl_verify);
        return -1;
    }
    const char *const formatters[] = { c->log_console_formatter,
                                       c->log_file_formatter };
    for (size_t i = 0; i < NELEMS(formatters); i++)
        if (strcmp(formatters[i], "plaintext") != 0 &&
            strcmp(formatters[i], "json") != 0) {
            snprintf(err, errlen, "log.%s.formatter: '%s' is not plaintext "
                     "or json", i == 0 ? "console" : "file", formatters[i]);
            return -1;
        }
    if (strcmp(c->rates_mode, "basic") != 0 &&
        strcmp(c->rates_mode, "detailed") != 0 &&
        strcmp(c->rates_mode, "none") != 0) {
        snprintf(err, errlen, "management.rates_mode: '%s' is not basic, "
                 "detailed or none", c->rates_mode);
        return -1;
    }
    if (c->prom_path[0] != '/' || strlen(c->prom_path) > 200 ||
        strcmp(c->prom_path, "/") == 0 ||
        c->prom_path[strlen(c->prom_path) - 1] == '/' ||
        strpbrk(c->prom_path, "?# \t") != NULL) {
        snprintf(err, errlen, "prometheus.path: '%s' is not a path like "
                 "/metrics", c->prom_path);
        return -1;
    }
    size_t pos = 0;
    char mech[64];
    while (config_list_next(c->auth_mechanisms, &pos, mech, sizeof(mech)))
        if (strcmp(mech, "PLAIN") != 0 && strcmp(mech, "AMQPLAIN") != 0 &&
            strcmp(mech, "EXTERNAL") != 0) {
            snprintf(err, errlen, "auth_mechanisms: '%s' is not PLAIN, "
                     "AMQPLAIN or EXTERNAL", mech);
            return -1;
        }
    char user[256], v[16];
    const char *const bool_lists[][2] = {
        { "loopback_users", c->loopback_users },
        { "default_user_tags", c->default_user_tags },
    };
    for (size_t i = 0; i < NELEMS(bool_lists); i++) {
        pos = 0;
        while (config_list_entry(bool_lists[i][1], &pos, user, sizeof(user),
                                 v, sizeof(v)))
            if (strcmp(v, "true") != 0 && strcmp(v, "false") != 0) {
                snprintf(err, errlen, "%s.%s: '%s' is not true or false",
                         bool_lists[i][0], user, v);
                return -1;
            }
    }
    if (config_list_none(c->auth_mechanisms)) {
        snprintf(err, errlen, "auth_mechanisms = none leaves no way to log "
                 "in");
        return -1;
    }
    if (c->default_user[0] == '\0') {
        snprintf(err, errlen, "default_user must not be empty");
        return -1;
    }
    return 0;
}
