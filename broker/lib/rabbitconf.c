/*
 * SPDX-License-Identifier: Apache-2.0
 * The table of RabbitMQ keys Roost does not implement (docs/
 * configuration.md lists it for operators). A rule is a key pattern,
 * optionally the values for which it applies, a verdict and a reason;
 * the first rule that matches decides. A RabbitMQ key no rule covers is
 * refused (a test checks that none is left uncovered).
 */
#include "broker/lib/rabbitconf.h"

#include <stdio.h>
#include <string.h>

#include "broker/lib/util.h"

const char *const rabbitconf_keys[] = {
#include "broker/lib/rabbitconf_keys.inc"
};
const size_t rabbitconf_nkeys = NELEMS(rabbitconf_keys);

struct rule {
    const char *pattern;
    const char *values;         /* "a|b": only for these; NULL: any */
    enum rabbit_verdict verdict;
    const char *reason;
};

#define IGN RABBIT_IGNORED
#define REF RABBIT_REFUSED

/* Reasons shared by several rules. */
#define ONE_NODE "Roost is a single node; it does not form clusters"
#define ERLANG "a setting of the Erlang runtime, which Roost does not use"
#define TLS_FILES "give the certificates and key as files " \
    "(ssl_options.cacertfile, .certfile, .keyfile)"
#define HTTP_TUNING "tuning of RabbitMQ's HTTP server; Roost's has its own " \
    "(management.tcp.idle_timeout)"
#define LOG_FORMAT "Roost writes its own line format (plaintext or json)"
#define LOG_CATEGORY "Roost has no log categories: these messages go to " \
    "its one log at log.level"
#define SOCKET_TUNING "socket tuning; Roost uses its own socket options"
#define ONLY_INTERNAL "Roost has only its internal user database"

static const struct rule rules[] = {
    /* Clustering and peer discovery. */
    { "cluster_formation.peer_discovery_backend",
      "classic_config|rabbit_peer_discovery_classic_config", IGN,
      "classic peer discovery with no other node is a single node" },
    { "cluster_formation.peer_discovery_backend", NULL, REF,
      "peer discovery: " ONE_NODE },
    { "cluster_formation.classic_config.nodes.*", NULL, REF,
      "a cluster of the nodes listed: " ONE_NODE },
    { "cluster_formation.k8s.", NULL, REF,
      "peer discovery through Kubernetes: " ONE_NODE },
    { "cluster_formation.aws.", NULL, REF,
      "peer discovery through AWS: " ONE_NODE },
    { "cluster_formation.consul.", NULL, REF,
      "peer discovery through Consul: " ONE_NODE },
    { "cluster_formation.etcd.", NULL, REF,
      "peer discovery through etcd: " ONE_NODE },
    { "cluster_formation.dns.hostname", NULL, REF,
      "peer discovery through DNS: " ONE_NODE },
    { "cluster_formation.", NULL, IGN,
      "cluster formation has nothing to do on a single node" },
    { "aws.prefer_imdsv2", NULL, IGN,
      "used by AWS peer discovery only" },
    { "cluster_name", NULL, IGN,
      "a name for a cluster; Roost's node is its own cluster" },
    { "cluster_partition_handling", NULL, IGN,
      "a single node has no network partitions" },
    { "cluster_partition_handling.", NULL, IGN,
      "a single node has no network partitions" },
    { "cluster_keepalive_interval", NULL, IGN,
      "keepalives between cluster nodes; a single node has none" },
    { "net_ticktime", NULL, IGN, ERLANG " (distribution)" },
    { "distribution.", NULL, IGN, ERLANG " (distribution)" },
    { "queue_master_locator", NULL, IGN,
      "where queue leaders go: every queue is on the one node" },
    { "queue_leader_locator", NULL, IGN,
      "where queue leaders go: every queue is on the one node" },
    { "mirroring_sync_batch_size", NULL, IGN,
      "queue mirroring: a single node has no mirrors" },
    { "mirroring_sync_max_throughput", NULL, IGN,
      "queue mirroring: a single node has no mirrors" },
    { "mnesia_table_loading_retry_limit", NULL, IGN,
      "Mnesia, which Roost does not use" },
    { "mnesia_table_loading_retry_timeout", NULL, IGN,
      "Mnesia, which Roost does not use" },
    { "raft.", NULL, IGN,
      "the Raft log of quorum queues; Roost keeps every queue in its own "
      "store" },
    { "quorum_queue.compute_checksums", NULL, IGN,
      "the Raft log of quorum queues; Roost's store checks its records "
      "with CRCs" },

    /* The Erlang runtime and RabbitMQ's processes. */
    { "erlang.K", NULL, IGN, ERLANG },
    { "hipe_compile", NULL, IGN, ERLANG },
    { "background_gc_enabled", NULL, IGN, ERLANG " (garbage collection)" },
    { "background_gc_target_interval", NULL, IGN,
      ERLANG " (garbage collection)" },
    { "sysmon_handler.", NULL, IGN, ERLANG " (system monitor)" },
    { "default_worker_pool_size", NULL, IGN, ERLANG " (worker pool)" },
    { "delegate_count", NULL, IGN, ERLANG " (delegate processes)" },
    { "socket_writer.gc_threshold", NULL, IGN,
      ERLANG " (garbage collection)" },
    { "num_acceptors.tcp", NULL, IGN,
      "acceptor processes: Roost accepts in its event loop" },
    { "num_acceptors.ssl", NULL, IGN,
      "acceptor processes: Roost accepts in its event loop" },
    { "vhost_restart_strategy", NULL, IGN,
      "Roost's virtual hosts do not crash and restart apart" },

    /* Storage and memory. */
    { "classic_queue.default_version", NULL, IGN,
      "the on-disk format of classic queues; Roost has one store" },
    { "queue_index_embed_msgs_below", NULL, IGN,
      "tuning of RabbitMQ's message store; Roost has its own store" },
    { "message_store_shutdown_timeout", NULL, IGN,
      "Roost's store syncs what is pending when it stops" },
    { "memory_monitor_interval", NULL, IGN,
      "Roost checks memory every 100 ms" },
    { "vm_memory_calculation_strategy", NULL, IGN,
      "Roost counts the memory it uses for messages and buffers itself" },
    { "total_memory_available_override_value", NULL, REF,
      "Roost takes the machine's memory from the system; use "
      "vm_memory_high_watermark.absolute" },

    /* Listeners and sockets. */
    { "tcp_listen_options", NULL, IGN, SOCKET_TUNING },
    { "tcp_listen_options.", NULL, IGN, SOCKET_TUNING },
    { "proxy_protocol", "false", IGN, "the PROXY protocol is off" },
    { "proxy_protocol", NULL, REF,
      "the PROXY protocol: Roost would see the proxy's address as the "
      "client's" },
    { "reverse_dns_lookups", NULL, IGN,
      "Roost shows client addresses, not their names" },
    { "initial_frame_max", NULL, IGN,
      "Roost takes frames up to frame_max once tuned and bounds the "
      "first ones itself" },

    /* TLS. */
    { "ssl_allow_poodle_attack", "false", IGN,
      "SSL 3.0 is off; Roost offers TLS 1.2 and 1.3 only" },
    { "ssl_allow_poodle_attack", NULL, REF,
      "SSL 3.0: Roost offers TLS 1.2 and 1.3 only" },
    { "ssl_options", "none", IGN, "no TLS options" },
    { "ssl_options", NULL, REF, "TLS options in Erlang terms" },
    { "ssl_options.cacerts.*", NULL, REF, TLS_FILES },
    { "ssl_options.cert", NULL, REF, TLS_FILES },
    { "ssl_options.key.*", NULL, REF, TLS_FILES },
    { "ssl_options.crl_check", "false", IGN,
      "revocation lists are not checked" },
    { "ssl_options.crl_check", NULL, REF,
      "certificate revocation lists: Roost does not check them" },
    { "ssl_options.dh", NULL, REF,
      "Diffie-Hellman parameters: Roost uses OpenSSL's built-in groups" },
    { "ssl_options.dhfile", NULL, REF,
      "Diffie-Hellman parameters: Roost uses OpenSSL's built-in groups" },
    { "ssl_options.psk_identity", NULL, REF,
      "pre-shared keys: Roost authenticates with certificates only" },
    { "ssl_options.honor_ecc_order", NULL, IGN,
      "OpenSSL picks the elliptic curve" },
    { "ssl_options.log_alert", NULL, IGN,
      "Roost logs failed handshakes itself" },
    { "ssl_options.log_level", NULL, IGN,
      "Roost logs failed handshakes itself" },
    { "ssl_options.bypass_pem_cache", NULL, IGN,
      "Roost reads the PEM files at start and on SIGHUP" },

    /* Users and authentication. */
    { "auth_backends.*", "internal|rabbit_auth_backend_internal", IGN,
      "the internal user database is Roost's" },
    { "auth_backends.*.authn", "internal|rabbit_auth_backend_internal",
      IGN, "the internal user database is Roost's" },
    { "auth_backends.*.authz", "internal|rabbit_auth_backend_internal",
      IGN, "the internal user database is Roost's" },
    { "auth_backends.", NULL, REF,
      "an authentication backend other than the internal one: "
      ONLY_INTERNAL },
    { "auth_ldap.", NULL, REF, "LDAP: " ONLY_INTERNAL },
    { "auth_http.", NULL, REF, "HTTP authentication: " ONLY_INTERNAL },
    { "auth_oauth2.", NULL, REF, "OAuth 2: " ONLY_INTERNAL },
    { "auth_cache.", NULL, REF,
      "a cache in front of another backend: " ONLY_INTERNAL },
    { "credential_validator.validation_backend",
      "accept_everything|rabbit_credential_validator_accept_everything",
      IGN, "Roost accepts every password" },
    { "credential_validator.", NULL, REF,
      "password rules: Roost accepts every password" },
    { "password_hashing_module", NULL, IGN,
      "Roost hashes new passwords its own way and checks RabbitMQ's "
      "hashes from definitions" },

    /* Definitions. */
    { "definitions.import_backend",
      "local_filesystem|rabbit_definitions_import_local_filesystem", IGN,
      "Roost imports definitions from the local file definitions.local.path" },
    { "definitions.import_backend", NULL, REF,
      "definitions over HTTPS: Roost imports a local file only" },
    { "definitions.https.url", NULL, REF,
      "definitions over HTTPS: Roost imports a local file only" },
    { "definitions.tls.", NULL, REF,
      "definitions over HTTPS: Roost imports a local file only" },
    { "definitions.skip_if_unchanged", NULL, IGN,
      "Roost imports the file at every start and keeps what exists" },
    { "definitions.hashing.algorithm", NULL, IGN,
      "Roost imports the file at every start and keeps what exists" },

    /* Statistics and branding. */
    { "collect_statistics", NULL, IGN,
      "Roost always collects its (coarse) statistics" },
    { "product.name", NULL, IGN,
      "Roost names itself by server_properties.rabbitmq" },
    { "product.version", NULL, IGN,
      "Roost names itself by server_properties.rabbitmq" },
    { "motd_file", NULL, IGN,
      "a message of the day for RabbitMQ's tools" },

    /* Logging: one output, no categories. */
    { "log.syslog", "false", IGN, "syslog output is off" },
    { "log.syslog", NULL, REF,
      "syslog: Roost logs to one file or to standard error" },
    { "log.syslog.", NULL, REF,
      "syslog: Roost logs to one file or to standard error" },
    { "log.journald", NULL, IGN,
      "Roost logs to standard error, which systemd sends to the journal" },
    { "log.journald.", NULL, IGN,
      "Roost logs to standard error, which systemd sends to the journal" },
    { "log.exchange", "false", IGN, "the log exchange is off" },
    { "log.exchange", NULL, REF,
      "the amq.rabbitmq.log exchange: Roost does not publish its log" },
    { "log.exchange.", NULL, REF,
      "the amq.rabbitmq.log exchange: Roost does not publish its log" },
    { "log.console.stdio", NULL, IGN,
      "Roost's console is standard error" },
    { "log.console.use_colors", NULL, IGN, LOG_FORMAT },
    { "log.console.color_esc_seqs.", NULL, IGN, LOG_FORMAT },
    { "log.console.formatter.", NULL, IGN, LOG_FORMAT },
    { "log.file.formatter.", NULL, IGN, LOG_FORMAT },
    { "log.file.rotation.", NULL, IGN,
      "Roost does not rotate its log: use logrotate, then SIGHUP" },
    { "log.default.rotation.", NULL, IGN,
      "Roost does not rotate its log: use logrotate, then SIGHUP" },
    { "log.channel.", NULL, IGN, LOG_CATEGORY },
    { "log.connection.", NULL, IGN, LOG_CATEGORY },
    { "log.federation.", NULL, IGN, LOG_CATEGORY },
    { "log.mirroring.", NULL, IGN, LOG_CATEGORY },
    { "log.queue.", NULL, IGN, LOG_CATEGORY },
    { "log.ra.", NULL, IGN, LOG_CATEGORY },
    { "log.upgrade.", NULL, IGN, LOG_CATEGORY },

    /* The management plugin. */
    { "management.listener.ssl", "false", IGN,
      "the older management.listener keys without TLS" },
    { "management.listener.ssl", NULL, REF,
      "the older management.listener TLS keys: use management.ssl.*" },
    { "management.listener.ssl_opts", NULL, REF,
      "the older management.listener TLS keys: use management.ssl.*" },
    { "management.listener.ssl_opts.", NULL, REF,
      "the older management.listener TLS keys: use management.ssl.*" },
    { "management.listener.server.", NULL, IGN, HTTP_TUNING },
    { "management.tcp.compress", NULL, IGN, HTTP_TUNING },
    { "management.tcp.inactivity_timeout", NULL, IGN, HTTP_TUNING },
    { "management.tcp.max_keepalive", NULL, IGN, HTTP_TUNING },
    { "management.tcp.shutdown_timeout", NULL, IGN, HTTP_TUNING },
    { "management.ssl.backlog", NULL, IGN, HTTP_TUNING },
    { "management.ssl.compress", NULL, IGN, HTTP_TUNING },
    { "management.ssl.idle_timeout", NULL, IGN, HTTP_TUNING },
    { "management.ssl.inactivity_timeout", NULL, IGN, HTTP_TUNING },
    { "management.ssl.max_keepalive", NULL, IGN, HTTP_TUNING },
    { "management.ssl.request_timeout", NULL, IGN, HTTP_TUNING },
    { "management.ssl.shutdown_timeout", NULL, IGN, HTTP_TUNING },
    { "management.ssl.verify", "verify_none", IGN,
      "Roost's HTTPS listener asks for no client certificate" },
    { "management.ssl.fail_if_no_peer_cert", "false", IGN,
      "Roost's HTTPS listener asks for no client certificate" },
    { "management.ssl.", NULL, REF,
      "a TLS option of the HTTPS listener that Roost does not have (it "
      "offers TLS 1.2 and 1.3 with OpenSSL's ciphers and asks for no "
      "client certificate)" },
    { "management.cors.", NULL, REF,
      "CORS: Roost's management API answers same-origin requests only" },
    { "management.csp.policy", NULL, REF,
      "Roost's management API sends its own security headers" },
    { "management.hsts.policy", NULL, REF,
      "Roost's management API sends its own security headers" },
    { "management.headers.", NULL, REF,
      "Roost's management API sends its own security headers" },
    { "management.http_log_dir", NULL, REF,
      "an HTTP access log: Roost's management API does not write one" },
    { "management.path_prefix", NULL, REF,
      "Roost serves the management API at /api only" },
    { "management.disable_basic_auth", "false", IGN,
      "basic authentication is on" },
    { "management.disable_basic_auth", NULL, REF,
      "Roost's management API signs in with basic authentication only" },
    { "management.enable_uaa", "false", IGN, "OAuth 2 sign-in is off" },
    { "management.enable_uaa", NULL, REF,
      "OAuth 2 sign-in: " ONLY_INTERNAL },
    { "management.uaa_client_id", NULL, REF,
      "OAuth 2 sign-in: " ONLY_INTERNAL },
    { "management.uaa_location", NULL, REF,
      "OAuth 2 sign-in: " ONLY_INTERNAL },
    { "management.login_session_timeout", NULL, IGN,
      "Roost's web page signs in with basic authentication, no session" },
    { "management.db_cache_multiplier", NULL, IGN,
      "Roost answers from live state, with no cache" },
    { "management.enable_queue_totals", NULL, IGN,
      "Roost answers from live state, with no cache" },
    { "management.disable_stats", NULL, IGN,
      "Roost's statistics cost little and stay on" },
    { "management.sample_retention_policies.", NULL, IGN,
      "Roost keeps the rates of the last interval only" },
    { "management_agent.", NULL, IGN,
      "Roost's statistics cost little and stay on" },

    /* The Prometheus plugin. */
    { "prometheus.filter_aggregated_queue_metrics_pattern", NULL, IGN,
      "Roost's aggregated metrics are over every queue" },
    { "prometheus.tcp.", NULL, IGN, HTTP_TUNING },
    { "prometheus.ssl.", NULL, REF,
      "the Prometheus endpoint over TLS: Roost serves it over HTTP only" },

    /* Plugins Roost does not have. */
    { "mqtt.", NULL, REF, "MQTT: Roost speaks AMQP 0-9-1 only" },
    { "web_mqtt.", NULL, REF, "MQTT: Roost speaks AMQP 0-9-1 only" },
    { "stomp.", NULL, REF, "STOMP: Roost speaks AMQP 0-9-1 only" },
    { "web_stomp.", NULL, REF, "STOMP: Roost speaks AMQP 0-9-1 only" },
    { "stream.", NULL, REF,
      "the stream protocol: Roost speaks AMQP 0-9-1 only" },
    { "amqp1_0.", NULL, REF, "AMQP 1.0: Roost speaks AMQP 0-9-1 only" },
    { "trust_store.", NULL, REF,
      "the trust store plugin: Roost verifies clients against "
      "ssl_options.cacertfile" },
    { "event_exchange.", NULL, REF,
      "the amq.rabbitmq.event exchange: Roost does not publish events" },
};

bool
rabbitconf_match(const char *pat, const char *key)
{
    while (*pat != '\0') {
        if (*pat == '*') {
            if (*key == '\0' || *key == '.')
                return false;
            while (*key != '\0' && *key != '.')
                key++;
            pat++;
            continue;
        }
        if (*pat != *key)
            return false;
        if (*pat == '.' && pat[1] == '\0')
            return key[1] != '\0';
        pat++;
        key++;
    }
    return *key == '\0';
}

/* 'value' is one of the '|'-separated 'values'. */
static bool
value_in(const char *values, const char *value)
{
    size_t n = strlen(value);
    for (const char *p = values;;) {
        const char *bar = strchr(p, '|');
        size_t len = bar ? (size_t)(bar - p) : strlen(p);
        if (len == n && strncmp(p, value, n) == 0)
            return true;
        if (bar == NULL)
            return false;
        p = bar + 1;
    }
}

static bool
is_rabbit_key(const char *key)
{
    for (size_t i = 0; i < rabbitconf_nkeys; i++)
        if (rabbitconf_match(rabbitconf_keys[i], key))
            return true;
    return false;
}

bool
rabbitconf_has_rule(const char *key)
{
    for (size_t i = 0; i < NELEMS(rules); i++)
        if (rabbitconf_match(rules[i].pattern, key))
            return true;
    return false;
}

size_t
rabbitconf_nrules(void)
{
    return NELEMS(rules);
}

void
rabbitconf_rule_pattern(size_t i, char *out, size_t len)
{
    size_t n = 0;
    for (const char *p = rules[i].pattern; *p != '\0' && n + 5 < len; p++)
        if (*p == '*')
            n += (size_t)snprintf(out + n, len - n, "NAME");
        else
            out[n++] = *p;
    out[n] = '\0';
}

enum rabbit_verdict
rabbitconf_classify(const char *key, const char *value, const char **reason)
{
    if (!is_rabbit_key(key))
        return RABBIT_UNKNOWN;
    for (size_t i = 0; i < NELEMS(rules); i++) {
        const struct rule *r = &rules[i];
        if (!rabbitconf_match(r->pattern, key) ||
            (r->values != NULL && !value_in(r->values, value)))
            continue;
        *reason = r->reason;
        return r->verdict;
    }
    *reason = "Roost does not implement it";
    return RABBIT_REFUSED;
}
