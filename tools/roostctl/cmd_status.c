/*
 * SPDX-License-Identifier: Apache-2.0
 * status: rabbitmqctl's node report, from /api/overview (node name,
 * versions, totals, listeners), /api/nodes/NODE (process, memory, file
 * descriptors, disk, files) and /api/vhosts (the count). The API does not
 * carry everything rabbitmqctl shows (memory breakdown, OS, crypto
 * library); lines whose data the broker does not give are left out, and
 * so is a section left empty.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ctl.h"
#include "xalloc.h"

/* Lines of one section, printed under its title if there are any. */
struct section {
    char *text;
    size_t len, cap;
};

static void __attribute__((format(printf, 2, 3)))
sec_add(struct section *s, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    if (s->len + (size_t)n + 2 > s->cap) {
        s->cap = (s->len + (size_t)n + 2) * 2;
        char *p = realloc(s->text, s->cap);
        if (p == NULL)
            xalloc_fail();
        s->text = p;
    }
    va_start(ap, fmt);
    vsnprintf(s->text + s->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    s->len += (size_t)n;
    s->text[s->len++] = '\n';
    s->text[s->len] = '\0';
}

/* rabbitmqctl shows titles in bold; only on a terminal here, so that
 * scripts do not get escape codes. */
static void
sec_print(struct section *s, const char *title, bool *first)
{
    bool bold = isatty(STDOUT_FILENO);

    if (s->len > 0) {
        if (!*first)
            putchar('\n');
        *first = false;
        printf(bold ? "\033[1m%s\033[0m\n\n%s" : "%s\n\n%s", title, s->text);
    }
    free(s->text);
    memset(s, 0, sizeof(*s));
}

/* A value rendered as rabbitmqctl shows it; free it. NULL if absent. */
static char *
show(const json_t *v)
{
    char *out = NULL;
    size_t len = 0, cap = 0;

    if (v == NULL || json_is_null(v))
        return NULL;
    ctl_render(v, &out, &len, &cap);
    return out;
}

static void
sec_value(struct section *s, const char *label, const json_t *v)
{
    char *t = show(v);

    if (t != NULL)
        sec_add(s, "%s: %s", label, t);
    free(t);
}

static bool
number(const json_t *o, const char *key, double *out)
{
    const json_t *v = json_object_get(o, key);

    if (json_is_number(v)) {
        *out = json_number_value(v);
        return true;
    }
    if (json_is_string(v)) {    /* RabbitMQ sends os_pid as a string */
        char *end;
        *out = strtod(json_string_value(v), &end);
        return end != json_string_value(v) && *end == '\0';
    }
    return false;
}

/* Bytes as rabbitmqctl shows them: gigabytes to 4 decimals, "0.05". */
static void
gb(double bytes, char *buf, size_t len)
{
    snprintf(buf, len, "%.4f", bytes / 1e9);
    char *end = buf + strlen(buf) - 1;
    while (end > buf && *end == '0' && end[-1] != '.')
        *end-- = '\0';
}

static void
sec_gb(struct section *s, const char *label, const json_t *o, const char *key)
{
    double v;
    char buf[64];

    if (number(o, key, &v)) {
        gb(v, buf, sizeof(buf));
        sec_add(s, "%s: %s gb", label, buf);
    }
}

static void
sec_list(struct section *s, const char *intro, const json_t *list)
{
    size_t i;
    json_t *v;

    if (!json_is_array(list))
        return;
    if (intro != NULL)
        sec_add(s, "%s\n", intro);
    json_array_foreach(list, i, v) {
        char *t = show(v);
        sec_add(s, " * %s", t ? t : "");
        free(t);
    }
}

static const char *
purpose(const char *protocol)
{
    static const struct { const char *protocol, *purpose; } tab[] = {
        { "amqp", "AMQP 0-9-1 and AMQP 1.0" },
        { "amqp/ssl", "AMQP 0-9-1 and AMQP 1.0 over TLS" },
        { "http", "HTTP API" },
        { "https", "HTTP API over TLS (HTTPS)" },
        { "clustering", "inter-node and CLI tool communication" },
    };

    for (size_t i = 0; i < sizeof(tab) / sizeof(tab[0]); i++)
        if (strcmp(protocol, tab[i].protocol) == 0)
            return tab[i].purpose;
    return "";
}

/* "[::]" for an IPv6 address, as rabbitmqctl shows interfaces. */
static char *
interface(const json_t *l)
{
    const char *ip = json_string_value(json_object_get(l, "ip_address"));

    if (ip == NULL)
        return xstrdup("");
    return strchr(ip, ':') ? xasprintf("[%s]", ip) : xstrdup(ip);
}

static void
print_text(const char *node, const json_t *ov, const json_t *nd,
           long nvhosts)
{
    struct section s = { 0 };
    bool first = true;
    double a, b;

    if (number(nd, "os_pid", &a))
        sec_add(&s, "OS PID: %.0f", a);
    if (number(nd, "uptime", &a))
        sec_add(&s, "Uptime (seconds): %.0f", a / 1000);
    sec_value(&s, "RabbitMQ version", json_object_get(ov, "rabbitmq_version"));
    sec_add(&s, "Node name: %s", node);
    sec_value(&s, "Erlang configuration",
              json_object_get(ov, "erlang_full_version"));
    if (number(nd, "proc_used", &a) && number(nd, "proc_total", &b))
        sec_add(&s, "Erlang processes: %.0f used, %.0f limit", a, b);
    sec_value(&s, "Scheduler run queue", json_object_get(nd, "run_queue"));
    sec_value(&s, "Cluster heartbeat timeout (net_ticktime)",
              json_object_get(nd, "net_ticktime"));
    sec_print(&s, "Runtime", &first);

    sec_list(&s, "Enabled plugins:", json_object_get(nd, "enabled_plugins"));
    sec_print(&s, "Plugins", &first);

    sec_value(&s, "Node data directory", json_object_get(nd, "db_dir"));
    sec_print(&s, "Data directory", &first);

    sec_list(&s, NULL, json_object_get(nd, "config_files"));
    sec_print(&s, "Config files", &first);

    sec_list(&s, NULL, json_object_get(nd, "log_files"));
    sec_print(&s, "Log file(s)", &first);

    if (nd != NULL) {
        bool mem = json_is_true(json_object_get(nd, "mem_alarm"));
        bool disk = json_is_true(json_object_get(nd, "disk_free_alarm"));
        if (mem)
            sec_add(&s, "Memory alarm on node %s", node);
        if (disk)
            sec_add(&s, "Free disk space alarm on node %s", node);
        if (!mem && !disk)
            sec_add(&s, "(none)");
    }
    sec_print(&s, "Alarms", &first);

    sec_gb(&s, "Total memory used", nd, "mem_used");
    sec_value(&s, "Calculation strategy",
              json_object_get(nd, "mem_calculation_strategy"));
    sec_gb(&s, "Memory high watermark, computed to", nd, "mem_limit");
    sec_print(&s, "Memory", &first);

    if (number(nd, "fd_used", &a) && number(nd, "fd_total", &b))
        sec_add(&s, "Total: %.0f, limit: %.0f", a, b);
    if (number(nd, "sockets_used", &a) && number(nd, "sockets_total", &b))
        sec_add(&s, "Sockets: %.0f, limit: %.0f", a, b);
    sec_print(&s, "File Descriptors", &first);

    sec_gb(&s, "Low free disk space watermark", nd, "disk_free_limit");
    sec_gb(&s, "Free disk space", nd, "disk_free");
    sec_print(&s, "Free Disk Space", &first);

    const json_t *tot = json_object_get(ov, "object_totals");
    sec_value(&s, "Connection count", json_object_get(tot, "connections"));
    sec_value(&s, "Queue count", json_object_get(tot, "queues"));
    if (nvhosts >= 0)
        sec_add(&s, "Virtual host count: %ld", nvhosts);
    sec_print(&s, "Totals", &first);

    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(ov, "listeners"), i, l) {
        const char *proto = json_string_value(json_object_get(l, "protocol"));
        char *port = show(json_object_get(l, "port"));
        char *ifc = interface(l);
        sec_add(&s, "Interface: %s, port: %s, protocol: %s, purpose: %s",
                ifc, port ? port : "", proto ? proto : "",
                purpose(proto ? proto : ""));
        free(ifc);
        free(port);
    }
    sec_print(&s, "Listeners", &first);
}

static void
set_number(json_t *o, const char *key, const json_t *from, const char *fkey,
           double scale)
{
    double v;

    if (number(from, fkey, &v))
        json_object_set_new(o, key, json_integer((json_int_t)(v / scale)));
}

static void
set_copy(json_t *o, const char *key, const json_t *from, const char *fkey)
{
    json_t *v = json_object_get(from, fkey);

    if (v != NULL)
        json_object_set(o, key, v);
}

/* rabbitmqctl status --formatter json, with its key names, for what the
 * API carries. */
static void
print_json(const char *node, const json_t *ov, const json_t *nd,
           long nvhosts)
{
    json_t *o = json_object();

    set_number(o, "pid", nd, "os_pid", 1);
    set_number(o, "uptime", nd, "uptime", 1000);
    set_copy(o, "rabbitmq_version", ov, "rabbitmq_version");
    set_copy(o, "erlang_version", ov, "erlang_full_version");
    json_object_set_new(o, "node", json_string(node));
    if (nd != NULL) {
        json_t *p = json_object();
        set_number(p, "limit", nd, "proc_total", 1);
        set_number(p, "used", nd, "proc_used", 1);
        json_object_set_new(o, "processes", p);
        json_t *alarms = json_array();
        if (json_is_true(json_object_get(nd, "mem_alarm")))
            json_array_append_new(alarms, json_string("memory"));
        if (json_is_true(json_object_get(nd, "disk_free_alarm")))
            json_array_append_new(alarms, json_string("disk"));
        json_object_set_new(o, "alarms", alarms);
        json_t *fd = json_object();
        set_number(fd, "sockets_limit", nd, "sockets_total", 1);
        set_number(fd, "sockets_used", nd, "sockets_used", 1);
        set_number(fd, "total_limit", nd, "fd_total", 1);
        set_number(fd, "total_used", nd, "fd_used", 1);
        json_object_set_new(o, "file_descriptors", fd);
    }
    set_copy(o, "run_queue", nd, "run_queue");
    set_copy(o, "net_ticktime", nd, "net_ticktime");
    set_copy(o, "enabled_plugins", nd, "enabled_plugins");
    set_copy(o, "data_directory", nd, "db_dir");
    set_copy(o, "config_files", nd, "config_files");
    set_copy(o, "log_files", nd, "log_files");
    set_copy(o, "vm_memory_calculation_strategy", nd,
             "mem_calculation_strategy");
    set_number(o, "vm_memory_high_watermark_limit", nd, "mem_limit", 1);
    set_number(o, "disk_free", nd, "disk_free", 1);
    set_number(o, "disk_free_limit", nd, "disk_free_limit", 1);
    const json_t *tot = json_object_get(ov, "object_totals");
    json_t *t = json_object();
    set_copy(t, "connection_count", tot, "connections");
    set_copy(t, "queue_count", tot, "queues");
    if (nvhosts >= 0)
        json_object_set_new(t, "virtual_host_count", json_integer(nvhosts));
    json_object_set_new(o, "totals", t);
    json_t *ls = json_array();
    size_t i;
    json_t *l;
    json_array_foreach(json_object_get(ov, "listeners"), i, l) {
        const char *proto = json_string_value(json_object_get(l, "protocol"));
        json_t *x = json_object();
        const char *ip = json_string_value(json_object_get(l, "ip_address"));
        json_object_set_new(x, "interface", json_string(ip ? ip : ""));
        json_object_set_new(x, "node", json_string(node));
        set_copy(x, "port", l, "port");
        json_object_set_new(x, "protocol", json_string(proto ? proto : ""));
        json_object_set_new(x, "purpose",
                            json_string(purpose(proto ? proto : "")));
        json_array_append_new(ls, x);
    }
    json_object_set_new(o, "listeners", ls);
    char *s = json_dumps(o, JSON_COMPACT | JSON_SORT_KEYS);
    puts(s ? s : "{}");
    free(s);
    json_decref(o);
}

int
cmd_status(struct ctl *c)
{
    struct ctl_answer ov, nd = { 0 }, vh = { 0 };
    int rc = ctl_call(c, EVHTTP_REQ_GET, "/api/overview", NULL, &ov);

    if (rc != 0)
        return rc;
    const char *node = json_string_value(json_object_get(ov.json, "node"));
    if (ov.status != 200 || node == NULL) {
        rc = ctl_unexpected(&ov, "reading the overview");
        goto out;
    }
    ctl_banner(c, "Status of node %s ...", node);

    char *path = ctl_path("/api/nodes/%s", node);
    rc = ctl_call(c, EVHTTP_REQ_GET, path, NULL, &nd);
    free(path);
    if (rc != 0)
        goto out;
    const json_t *node_info = nd.status == 200 && json_is_object(nd.json)
                              ? nd.json : NULL;
    rc = ctl_call(c, EVHTTP_REQ_GET, "/api/vhosts", NULL, &vh);
    if (rc != 0)
        goto out;
    long nvhosts = vh.status == 200 && json_is_array(vh.json)
                   ? (long)json_array_size(vh.json) : -1;

    if (c->json)
        print_json(node, ov.json, node_info, nvhosts);
    else
        print_text(node, ov.json, node_info, nvhosts);
out:
    ctl_answer_clear(&vh);
    ctl_answer_clear(&nd);
    ctl_answer_clear(&ov);
    return rc;
}
