/*
 * SPDX-License-Identifier: Apache-2.0
 * The integration-test harness (see harness.h): roostd as a child process
 * on a free port, and assertions over rabbitmq-c. Each started roostd is
 * remembered so that an exit handler can kill it when a test fails before
 * its teardown, and roostd asks the kernel to kill it if the test process
 * dies (a check timeout), so no broker outlives its test.
 */
#define _GNU_SOURCE
#include "tests/integration/harness.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <ifaddrs.h>
#include <limits.h>
#include <net/if.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define START_TIMEOUT_MS 10000
#define STOP_TIMEOUT_MS 10000
#define POLL_MS 5
#define WAIT_MS 5000 /* for an expected delivery or method */
#define RPC_TIMEOUT_S 10

static struct harness fixture_broker;
struct harness *H = &fixture_broker;

/* Brokers this process started and has not stopped yet. */
#define MAX_RUNNING 8
static struct {
    pid_t pid;
    pid_t owner;
    struct harness copy; /* paths, for the exit handler */
} running[MAX_RUNNING];

/* ---- small utilities ---- */

uint64_t
h_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

void
h_sleep_ms(unsigned ms)
{
    struct timespec ts = { ms / 1000, (long)(ms % 1000) * 1000000L };
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

const char *
h_name(char *buf, size_t len, const char *tag)
{
    snprintf(buf, len, "t%d-%s", (int)getpid(), tag);
    return buf;
}

bool
h_non_loopback_ipv4(char *out, size_t len)
{
    struct ifaddrs *ifs, *i;
    bool found = false;

    if (getifaddrs(&ifs) != 0)
        return false;
    for (i = ifs; i && !found; i = i->ifa_next) {
        if (!i->ifa_addr || i->ifa_addr->sa_family != AF_INET ||
            (i->ifa_flags & IFF_LOOPBACK) || !(i->ifa_flags & IFF_UP))
            continue;
        const struct sockaddr_in *in =
            (const struct sockaddr_in *)(const void *)i->ifa_addr;
        if ((ntohl(in->sin_addr.s_addr) >> 24) == 127)
            continue;
        found = inet_ntop(AF_INET, &in->sin_addr, out, (socklen_t)len) != NULL;
    }
    freeifaddrs(ifs);
    return found;
}

/* ---- the broker process ---- */

static void harness_dump(const struct harness *h);

bool
harness_is_remote(void)
{
    const char *r = getenv("ROOST_TEST_REMOTE");
    return r != NULL && r[0] != '\0';
}

/*
 * At exit, a broker still running belongs to a test that failed before its
 * teardown (without fork; with fork, check leaves by _exit() and the
 * kernel kills roostd through PR_SET_PDEATHSIG): kill it and show the end
 * of its log.
 */
static void
kill_running(void)
{
    for (int i = 0; i < MAX_RUNNING; i++)
        if (running[i].pid > 0 && running[i].owner == getpid()) {
            kill(running[i].pid, SIGKILL);
            waitpid(running[i].pid, NULL, 0);
            running[i].pid = 0;
            harness_dump(&running[i].copy);
        }
}

static void
remember(const struct harness *h)
{
    pid_t pid = h->pid;
    static bool registered;
    if (!registered) {
        atexit(kill_running);
        registered = true;
    }
    for (int i = 0; i < MAX_RUNNING; i++)
        if (running[i].pid == 0) {
            running[i].pid = pid;
            running[i].owner = getpid();
            running[i].copy = *h;
            return;
        }
    ck_abort_msg("harness: more than %d brokers at once", MAX_RUNNING);
}

static void
forget(pid_t pid)
{
    for (int i = 0; i < MAX_RUNNING; i++)
        if (running[i].pid == pid)
            running[i].pid = 0;
}

static void
roostd_path(char *out, size_t len)
{
    const char *env = getenv("ROOSTD");
    char self[PATH_MAX];
    ssize_t n;

    if (env && env[0]) {
        snprintf(out, len, "%s", env);
        return;
    }
    /* ../../broker/roostd relative to this test binary. */
    n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    ck_assert_msg(n > 0, "harness: readlink /proc/self/exe: %s",
                  strerror(errno));
    self[n] = '\0';
    char *slash = strrchr(self, '/');
    if (slash)
        *slash = '\0';
    if (strlen(self) + 21 > len)
        ck_abort_msg("harness: path too long: %s", self);
    memcpy(out, self, strlen(self));
    memcpy(out + strlen(self), "/../../broker/roostd", 21);
}

/* The whole of a (small) file, NUL-terminated, or NULL. */
static char *
slurp(const char *path, size_t *lenp)
{
    FILE *fp = fopen(path, "r");
    char *buf = NULL;
    size_t len = 0, cap = 0, n;

    if (fp == NULL)
        return NULL;
    do {
        if (cap - len < 4096) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap + 1);
            ck_assert(buf != NULL);
        }
        n = fread(buf + len, 1, cap - len, fp);
        len += n;
    } while (n > 0);
    fclose(fp);
    buf[len] = '\0';
    if (lenp)
        *lenp = len;
    return buf;
}

static void
print_tail(const char *path, int lines)
{
    size_t len;
    char *buf = slurp(path, &len);
    if (buf == NULL) {
        fprintf(stderr, "  (cannot read %s)\n", path);
        return;
    }
    size_t i = len;
    int seen = 0;
    while (i > 0 && seen <= lines) {
        i--;
        if (buf[i] == '\n')
            seen++;
    }
    if (i > 0)
        i++;
    fprintf(stderr, "---- last lines of %s ----\n%s\n---- end ----\n", path,
            buf + i);
    free(buf);
}

/* Print the last lines of roostd's log and stderr to stderr. */
static void
harness_dump(const struct harness *h)
{
    if (h->remote)
        return;
    print_tail(h->log_path, 40);
    print_tail(h->err_path, 60);
}

bool
harness_log_contains(const struct harness *h, const char *needle)
{
    char *buf = slurp(h->log_path, NULL);
    bool found = buf && strstr(buf, needle);
    free(buf);
    return found;
}

static bool
start_remote(struct harness *h, const char *const *args)
{
    const char *r = getenv("ROOST_TEST_REMOTE");
    const char *colon = strrchr(r, ':');

    memset(h, 0, sizeof(*h));
    h->remote = true;
    ck_assert_msg(colon != NULL, "ROOST_TEST_REMOTE wants host:port, got '%s'",
                  r);
    snprintf(h->host, sizeof(h->host), "%.*s", (int)(colon - r), r);
    h->port = atoi(colon + 1);
    return args == NULL || args[0] == NULL;
}

static void
child_exec(const struct harness *h, const char *path, const char *const *args,
           const char *asan_extra)
{
    const char *argv[64];
    char datadir[256];
    int n = 0, fd;

    if (asan_extra) {
        const char *old = getenv("ASAN_OPTIONS");
        char opts[1024];
        snprintf(opts, sizeof(opts), "%s%s%s", old ? old : "",
                 old && old[0] ? ":" : "", asan_extra);
        setenv("ASAN_OPTIONS", opts, 1);
    }

    /* Die with the test process, even when check kills it on timeout. */
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    snprintf(datadir, sizeof(datadir), "%s/data", h->dir);
    argv[n++] = path;
    argv[n++] = "--port";
    argv[n++] = "0";
    argv[n++] = "--data-dir";
    argv[n++] = datadir;
    argv[n++] = "--log-file";
    argv[n++] = h->log_path;
    argv[n++] = "--log-level";
    argv[n++] = "debug";
    for (int i = 0; args && args[i] && n < 62; i++)
        argv[n++] = args[i];
    argv[n] = NULL;

    fd = open("/dev/null", O_RDONLY);
    if (fd >= 0) {
        dup2(fd, 0);
        close(fd);
    }
    fd = open(h->err_path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        dup2(fd, 1);
        dup2(fd, 2);
        close(fd);
    }
    for (fd = 3; fd < 1024; fd++)
        close(fd);
    execv(path, (char *const *)argv);
    fprintf(stderr, "harness: cannot exec %s: %s\n", path, strerror(errno));
    _exit(127);
}

bool
harness_start(struct harness *h, const char *const *args)
{
    return harness_start_asan(h, args, NULL);
}

/*
 * Fork and exec roostd on h's temp dir, then wait (polling) for its ready
 * line at or after byte 'log_from' of its log, which it appends to.
 */
static void
spawn(struct harness *h, const char *path, const char *const *args,
      const char *asan_extra, size_t log_from)
{
    const char *ready = "ready for connections on port ";
    pid_t parent = getpid();

    h->pid = fork();
    ck_assert_msg(h->pid >= 0, "harness: fork: %s", strerror(errno));
    if (h->pid == 0) {
        if (getppid() != parent)
            _exit(1);
        child_exec(h, path, args, asan_extra);
    }
    remember(h);

    uint64_t deadline = h_now_ms() + START_TIMEOUT_MS;
    for (;;) {
        size_t len = 0;
        char *log = slurp(h->log_path, &len);
        char *p = log && len >= log_from ? strstr(log + log_from, ready)
                                         : NULL;
        if (p) {
            h->port = atoi(p + strlen(ready));
            free(log);
            break;
        }
        free(log);
        int status;
        if (waitpid(h->pid, &status, WNOHANG) == h->pid) {
            forget(h->pid);
            h->pid = 0;
            harness_dump(h);
            ck_abort_msg("harness: roostd exited during startup (status 0x%x)",
                         status);
        }
        if (h_now_ms() > deadline) {
            harness_dump(h);
            ck_abort_msg("harness: roostd not ready within %d ms",
                         START_TIMEOUT_MS);
        }
        h_sleep_ms(POLL_MS);
    }
    ck_assert_msg(h->port > 0, "harness: bad port in the ready line");
}

bool
harness_start_asan(struct harness *h, const char *const *args,
                   const char *asan_extra)
{
    char path[PATH_MAX];
    const char *tmp = getenv("TMPDIR");

    if (harness_is_remote())
        return start_remote(h, args);
    memset(h, 0, sizeof(*h));
    roostd_path(path, sizeof(path));
    ck_assert_msg(access(path, X_OK) == 0,
                  "harness: no roostd at %s (set ROOSTD)", path);
    /* Inside the run's directory (h_run removes it), else in TMPDIR. */
    const char *session = getenv("ROOST_TEST_SESSION");
    if (session && session[0])
        snprintf(h->dir, sizeof(h->dir), "%s/roostd-XXXXXX", session);
    else
        snprintf(h->dir, sizeof(h->dir), "%s/roost-it-XXXXXX",
                 tmp && tmp[0] ? tmp : "/tmp");
    ck_assert_msg(mkdtemp(h->dir) != NULL, "harness: mkdtemp: %s",
                  strerror(errno));
    snprintf(h->log_path, sizeof(h->log_path), "%s/roostd.log", h->dir);
    snprintf(h->err_path, sizeof(h->err_path), "%s/stderr.txt", h->dir);
    snprintf(h->host, sizeof(h->host), "127.0.0.1");
    spawn(h, path, args, asan_extra, 0);
    return true;
}

bool
harness_restart(struct harness *h, const char *const *args)
{
    char path[PATH_MAX];
    struct stat sb;

    if (h->remote)
        return false;
    ck_assert_msg(h->pid == 0, "harness_restart: roostd %d is still running",
                  (int)h->pid);
    ck_assert_msg(h->dir[0] != '\0', "harness_restart: no data dir");
    roostd_path(path, sizeof(path));
    h->port = 0;
    spawn(h, path, args, NULL,
          stat(h->log_path, &sb) == 0 ? (size_t)sb.st_size : 0);
    return true;
}

void
harness_kill(const struct harness *h, int sig)
{
    if (!h->remote && h->pid > 0)
        kill(h->pid, sig);
}

static int
rm_entry(const char *path, const struct stat *sb, int flag, struct FTW *ftw)
{
    (void)sb;
    (void)flag;
    (void)ftw;
    return remove(path);
}

/* Wait (at most STOP_TIMEOUT_MS) for roostd to exit and return its wait
 * status; past that, kill it, print its logs and fail, saying 'after'. */
static int
wait_exit(struct harness *h, const char *after)
{
    int status = 0;
    pid_t pid = h->pid;
    uint64_t deadline = h_now_ms() + STOP_TIMEOUT_MS;

    for (;;) {
        pid_t r = waitpid(pid, &status, WNOHANG);
        if (r == pid)
            break;
        if (r < 0 || h_now_ms() > deadline) {
            kill(pid, SIGKILL);
            waitpid(pid, &status, 0);
            forget(pid);
            h->pid = 0;
            harness_dump(h);
            ck_abort_msg("harness: roostd did not exit within %d ms%s",
                         STOP_TIMEOUT_MS, after);
        }
        h_sleep_ms(POLL_MS);
    }
    forget(pid);
    h->pid = 0;
    return status;
}

static void
stop(struct harness *h, bool remove_dir)
{
    if (h->remote || h->pid <= 0)
        return;
    kill(h->pid, SIGTERM);
    int status = wait_exit(h, " of SIGTERM");
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        harness_dump(h);
        if (WIFSIGNALED(status))
            ck_abort_msg("harness: roostd killed by signal %d after SIGTERM "
                         "(an ASan report aborts; see its stderr above)",
                         WTERMSIG(status));
        ck_abort_msg("harness: roostd exited with status %d after SIGTERM "
                     "(leaks make it non-zero under ASan; see above)",
                     WEXITSTATUS(status));
    }
    if (remove_dir)
        nftw(h->dir, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void
harness_stop(struct harness *h)
{
    stop(h, true);
}

void
harness_stop_keep(struct harness *h)
{
    stop(h, false);
}

int
harness_reap(struct harness *h)
{
    if (h->remote || h->pid <= 0)
        return -1;
    return wait_exit(h, "");
}

long
harness_rss_kb(const struct harness *h)
{
    char path[64], line[256];
    long kb = -1;
    FILE *fp;

    if (h->remote || h->pid <= 0)
        return -1;
    snprintf(path, sizeof(path), "/proc/%d/status", (int)h->pid);
    if ((fp = fopen(path, "r")) == NULL)
        return -1;
    while (fgets(line, sizeof(line), fp))
        if (strncmp(line, "VmRSS:", 6) == 0)
            kb = strtol(line + 6, NULL, 10);
    fclose(fp);
    return kb;
}

/* ---- naming the case of a loop test ---- */

static const char *case_name;

void
h_case(const char *name)
{
    case_name = name;
}

static void
case_end(void)
{
    case_name = NULL;
}

void
h_assert_failed(const char *file, int line, const char *expr, const char *fmt,
                ...)
{
    char msg[2048];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (case_name)
        _ck_assert_failed(file, line, expr, "%s: %s", case_name, msg);
    _ck_assert_failed(file, line, expr, "%s", msg);
}

/* Checked fixture: start H without arguments / stop it. */
static void
harness_setup(void)
{
    signal(SIGPIPE, SIG_IGN);
    harness_start(H, NULL);
}

static void
harness_teardown(void)
{
    harness_stop(H);
}

TCase *
h_tcase(Suite *s, const char *name, double timeout, bool fixture)
{
    TCase *tc = tcase_create(name);
    tcase_set_timeout(tc, timeout);
    /* (a test that named its case leaves no name to the next one, also
     * when CK_FORK=no runs them all in one process) */
    tcase_add_checked_fixture(tc, NULL, case_end);
    if (fixture)
        tcase_add_checked_fixture(tc, harness_setup, harness_teardown);
    suite_add_tcase(s, tc);
    return tc;
}

int
h_run(Suite *s)
{
    const char *tmp = getenv("TMPDIR");
    char session[128];
    SRunner *sr = srunner_create(s);

    /* Every roostd of this run keeps its data and logs under one
     * directory, removed at the end unless ROOST_TEST_KEEP is set (a test
     * that fails leaves check by _exit(), past any cleanup of its own). */
    snprintf(session, sizeof(session), "%s/roost-it-XXXXXX",
             tmp && tmp[0] ? tmp : "/tmp");
    if (mkdtemp(session) == NULL) {
        perror("mkdtemp");
        return EXIT_FAILURE;
    }
    setenv("ROOST_TEST_SESSION", session, 1);
    signal(SIGPIPE, SIG_IGN);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    if (getenv("ROOST_TEST_KEEP")) {
        fprintf(stderr, "roostd's data and logs are kept in %s\n", session);
    } else {
        if (failed)
            fprintf(stderr, "(set ROOST_TEST_KEEP=1 to keep roostd's logs)\n");
        nftw(session, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    }
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

/* ---- replies ---- */

const char *
h_method_name(amqp_method_number_t id)
{
    const char *n = amqp_method_name(id);
    return n ? n : "?";
}

static void
bytes_to_str(char *out, size_t len, amqp_bytes_t b)
{
    size_t n = b.len < len - 1 ? b.len : len - 1;
    if (n)
        memcpy(out, b.bytes, n);
    out[n] = '\0';
}

const char *
h_reply_str(amqp_rpc_reply_t r, char *buf, size_t len)
{
    char text[256];

    switch (r.reply_type) {
    case AMQP_RESPONSE_NORMAL:
        snprintf(buf, len, "normal reply %s", h_method_name(r.reply.id));
        break;
    case AMQP_RESPONSE_NONE:
        snprintf(buf, len, "no reply (missing RPC reply type)");
        break;
    case AMQP_RESPONSE_LIBRARY_EXCEPTION:
        snprintf(buf, len, "library error: %s",
                 amqp_error_string2(r.library_error));
        break;
    case AMQP_RESPONSE_SERVER_EXCEPTION:
        if (r.reply.id == AMQP_CHANNEL_CLOSE_METHOD) {
            amqp_channel_close_t *m = r.reply.decoded;
            bytes_to_str(text, sizeof(text), m->reply_text);
            snprintf(buf, len, "channel.close %u \"%s\" (method %u.%u)",
                     m->reply_code, text, m->class_id, m->method_id);
        } else if (r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_t *m = r.reply.decoded;
            bytes_to_str(text, sizeof(text), m->reply_text);
            snprintf(buf, len, "connection.close %u \"%s\" (method %u.%u)",
                     m->reply_code, text, m->class_id, m->method_id);
        } else {
            snprintf(buf, len, "server exception %s",
                     h_method_name(r.reply.id));
        }
        break;
    }
    return buf;
}

void
h_expect_ok_at(const char *file, int line, amqp_rpc_reply_t r, const char *what)
{
    char buf[512];
    H_ASSERT_AT(file, line, r.reply_type == AMQP_RESPONSE_NORMAL, "%s: got %s",
                what, h_reply_str(r, buf, sizeof(buf)));
}

static void
check_text(const char *file, int line, const char *kind, amqp_bytes_t text,
           const char *prefix)
{
    char got[512];
    bytes_to_str(got, sizeof(got), text);
    if (prefix)
        H_ASSERT_AT(file, line, strncmp(got, prefix, strlen(prefix)) == 0,
                    "%s reply text \"%s\" does not start with \"%s\"", kind,
                    got, prefix);
}

void
h_expect_channel_close_at(const char *file, int line, amqp_connection_state_t c,
                          amqp_rpc_reply_t r, amqp_channel_t ch, int code,
                          const char *prefix)
{
    char buf[512];
    H_ASSERT_AT(file, line,
                r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
                    r.reply.id == AMQP_CHANNEL_CLOSE_METHOD,
                "expected channel.close %d, got %s", code,
                h_reply_str(r, buf, sizeof(buf)));
    amqp_channel_close_t *m = r.reply.decoded;
    H_ASSERT_AT(file, line, m->reply_code == code,
                "expected channel.close %d, got %s", code,
                h_reply_str(r, buf, sizeof(buf)));
    check_text(file, line, "channel.close", m->reply_text, prefix);
    amqp_channel_close_ok_t ok = { 0 };
    H_ASSERT_AT(file, line,
                amqp_send_method(c, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) ==
                    AMQP_STATUS_OK,
                "cannot send channel.close-ok");
}

void
h_expect_conn_close_at(const char *file, int line, amqp_connection_state_t c,
                       amqp_rpc_reply_t r, int code, const char *prefix)
{
    char buf[512];
    H_ASSERT_AT(file, line,
                r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
                    r.reply.id == AMQP_CONNECTION_CLOSE_METHOD,
                "expected connection.close %d, got %s", code,
                h_reply_str(r, buf, sizeof(buf)));
    amqp_connection_close_t *m = r.reply.decoded;
    H_ASSERT_AT(file, line, m->reply_code == code,
                "expected connection.close %d, got %s", code,
                h_reply_str(r, buf, sizeof(buf)));
    check_text(file, line, "connection.close", m->reply_text, prefix);
    amqp_connection_close_ok_t ok = { 0 };
    (void)amqp_send_method(c, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    amqp_destroy_connection(c);
}

/* ---- connections ---- */

amqp_connection_state_t
h_connect_opts(const struct harness *h, const struct hconn_opts *o,
               amqp_rpc_reply_t *login)
{
    static const struct hconn_opts defaults;
    amqp_connection_state_t c;
    amqp_socket_t *s;
    amqp_rpc_reply_t r;
    struct timeval tv = { RPC_TIMEOUT_S, 0 };
    amqp_table_entry_t cap, prop;
    amqp_table_t props = { 0, NULL };
    char buf[512];
    int st;

    if (o == NULL)
        o = &defaults;
    c = amqp_new_connection();
    ck_assert(c != NULL);
    if (o->tls) {
        s = amqp_ssl_socket_new(c);
        ck_assert(s != NULL);
        amqp_ssl_socket_set_verify_peer(s, o->tls_ca != NULL);
        amqp_ssl_socket_set_verify_hostname(s, o->tls_ca != NULL);
        if (o->tls_ca)
            ck_assert_int_eq(amqp_ssl_socket_set_cacert(s, o->tls_ca), 0);
        if (o->tls_cert)
            ck_assert_int_eq(amqp_ssl_socket_set_key(s, o->tls_cert,
                                                     o->tls_key), 0);
        ck_assert_int_eq(amqp_ssl_socket_set_ssl_versions(
                             s, o->tls_min ? o->tls_min : AMQP_TLSv1_2,
                             o->tls_max ? o->tls_max : AMQP_TLSvLATEST), 0);
    } else {
        s = amqp_tcp_socket_new(c);
        ck_assert(s != NULL);
    }
    st = amqp_socket_open(s, o->host ? o->host : h->host,
                          o->port ? o->port : h->port);
    if (st != AMQP_STATUS_OK && o->tls && login != NULL) {
        /* A refused handshake: the caller's to judge. */
        login->reply_type = AMQP_RESPONSE_LIBRARY_EXCEPTION;
        login->library_error = st;
        amqp_destroy_connection(c);
        return NULL;
    }
    ck_assert_msg(st == AMQP_STATUS_OK, "cannot connect to %s:%d: %s",
                  o->host ? o->host : h->host, o->port ? o->port : h->port,
                  amqp_error_string2(st));
    amqp_set_rpc_timeout(c, &tv);
    if (o->cancel_notify) {
        /* rabbitmq-c merges this into its own capabilities table. */
        cap.key = amqp_cstring_bytes("consumer_cancel_notify");
        cap.value.kind = AMQP_FIELD_KIND_BOOLEAN;
        cap.value.value.boolean = 1;
        prop.key = amqp_cstring_bytes("capabilities");
        prop.value.kind = AMQP_FIELD_KIND_TABLE;
        prop.value.value.table.num_entries = 1;
        prop.value.value.table.entries = &cap;
        props.num_entries = 1;
        props.entries = &prop;
    }
    r = amqp_login_with_properties(c, o->vhost ? o->vhost : "/", o->channel_max,
                                   o->frame_max ? o->frame_max : 131072,
                                   o->heartbeat, &props, AMQP_SASL_METHOD_PLAIN,
                                   o->user ? o->user : "guest",
                                   o->pass ? o->pass : "guest");
    if (r.reply_type != AMQP_RESPONSE_NORMAL) {
        h_reply_str(r, buf, sizeof(buf));
        if (login) {
            *login = r;
            /* The decoded close lives in the connection's pool: keep what
             * the caller needs by copying it into static storage. */
            if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
                r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
                static amqp_connection_close_t copy;
                static char text[256];
                amqp_connection_close_t *m = r.reply.decoded;
                copy = *m;
                bytes_to_str(text, sizeof(text), m->reply_text);
                copy.reply_text = amqp_cstring_bytes(text);
                login->reply.decoded = &copy;
            }
        }
        if (r.reply_type == AMQP_RESPONSE_SERVER_EXCEPTION &&
            r.reply.id == AMQP_CONNECTION_CLOSE_METHOD) {
            amqp_connection_close_ok_t ok = { 0 };
            (void)amqp_send_method(c, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
        }
        amqp_destroy_connection(c);
        if (login == NULL)
            ck_abort_msg("login failed: %s", buf);
        return NULL;
    }
    if (!o->no_channel) {
        amqp_channel_open(c, 1);
        h_expect_ok_at(__FILE__, __LINE__, amqp_get_rpc_reply(c),
                       "channel.open 1");
    }
    return c;
}

amqp_connection_state_t
h_connect(const struct harness *h)
{
    return h_connect_opts(h, NULL, NULL);
}

void
h_close_at(const char *file, int line, amqp_connection_state_t c)
{
    amqp_rpc_reply_t r = amqp_connection_close(c, AMQP_REPLY_SUCCESS);
    h_expect_ok_at(file, line, r, "connection.close");
    amqp_destroy_connection(c);
}

void
h_drop(amqp_connection_state_t c)
{
    amqp_destroy_connection(c);
}

int
h_fd(amqp_connection_state_t c)
{
    return amqp_get_sockfd(c);
}

/* ---- asynchronous input ---- */

void
h_event_free(struct h_event *e)
{
    if (e == NULL)
        return;
    free(e->body);
    e->body = NULL;
}

static void
read_content(amqp_connection_state_t c, struct h_event *e)
{
    amqp_message_t msg;
    char buf[512];
    amqp_rpc_reply_t r = amqp_read_message(c, e->channel, &msg, 0);

    ck_assert_msg(r.reply_type == AMQP_RESPONSE_NORMAL,
                  "reading the content of %s: %s", h_method_name(e->id),
                  h_reply_str(r, buf, sizeof(buf)));
    e->has_content = true;
    e->len = msg.body.len;
    e->body = malloc(msg.body.len + 1);
    ck_assert(e->body != NULL);
    if (msg.body.len)
        memcpy(e->body, msg.body.bytes, msg.body.len);
    e->body[msg.body.len] = '\0';
    amqp_basic_properties_t *p = &msg.properties;
    e->flags = p->_flags;
    if (p->_flags & AMQP_BASIC_DELIVERY_MODE_FLAG)
        e->delivery_mode = p->delivery_mode;
    if (p->_flags & AMQP_BASIC_PRIORITY_FLAG)
        e->priority = p->priority;
    if (p->_flags & AMQP_BASIC_TIMESTAMP_FLAG)
        e->timestamp = p->timestamp;
    if (p->_flags & AMQP_BASIC_CONTENT_TYPE_FLAG)
        bytes_to_str(e->content_type, sizeof(e->content_type), p->content_type);
    if (p->_flags & AMQP_BASIC_CORRELATION_ID_FLAG)
        bytes_to_str(e->correlation_id, sizeof(e->correlation_id),
                     p->correlation_id);
    if (p->_flags & AMQP_BASIC_MESSAGE_ID_FLAG)
        bytes_to_str(e->message_id, sizeof(e->message_id), p->message_id);
    if (p->_flags & AMQP_BASIC_APP_ID_FLAG)
        bytes_to_str(e->app_id, sizeof(e->app_id), p->app_id);
    if (p->_flags & AMQP_BASIC_HEADERS_FLAG) {
        e->nheaders = p->headers.num_entries;
        if (e->nheaders > 0)
            bytes_to_str(e->header0, sizeof(e->header0),
                         p->headers.entries[0].key);
    }
    amqp_destroy_message(&msg);
}

int
h_next(amqp_connection_state_t c, int timeout_ms, struct h_event *e)
{
    amqp_frame_t f;
    struct timeval tv = { timeout_ms / 1000, (timeout_ms % 1000) * 1000 };
    int st;

    memset(e, 0, sizeof(*e));
    amqp_maybe_release_buffers(c);
    st = amqp_simple_wait_frame_noblock(c, &f, &tv);
    if (st == AMQP_STATUS_TIMEOUT)
        return 0;
    if (st != AMQP_STATUS_OK)
        return -1;
    ck_assert_msg(f.frame_type == AMQP_FRAME_METHOD,
                  "expected a method frame, got frame type %u on channel %u",
                  f.frame_type, f.channel);
    e->channel = f.channel;
    e->id = f.payload.method.id;
    switch (e->id) {
    case AMQP_BASIC_DELIVER_METHOD: {
        amqp_basic_deliver_t *d = f.payload.method.decoded;
        e->tag = d->delivery_tag;
        e->redelivered = d->redelivered;
        bytes_to_str(e->ctag, sizeof(e->ctag), d->consumer_tag);
        bytes_to_str(e->exchange, sizeof(e->exchange), d->exchange);
        bytes_to_str(e->rkey, sizeof(e->rkey), d->routing_key);
        read_content(c, e);
        break;
    }
    case AMQP_BASIC_GET_OK_METHOD: {
        amqp_basic_get_ok_t *g = f.payload.method.decoded;
        e->tag = g->delivery_tag;
        e->redelivered = g->redelivered;
        e->message_count = g->message_count;
        bytes_to_str(e->exchange, sizeof(e->exchange), g->exchange);
        bytes_to_str(e->rkey, sizeof(e->rkey), g->routing_key);
        read_content(c, e);
        break;
    }
    case AMQP_BASIC_RETURN_METHOD: {
        amqp_basic_return_t *m = f.payload.method.decoded;
        e->code = m->reply_code;
        bytes_to_str(e->text, sizeof(e->text), m->reply_text);
        bytes_to_str(e->exchange, sizeof(e->exchange), m->exchange);
        bytes_to_str(e->rkey, sizeof(e->rkey), m->routing_key);
        read_content(c, e);
        break;
    }
    case AMQP_BASIC_CANCEL_METHOD: {
        amqp_basic_cancel_t *m = f.payload.method.decoded;
        bytes_to_str(e->ctag, sizeof(e->ctag), m->consumer_tag);
        break;
    }
    case AMQP_BASIC_ACK_METHOD: {
        amqp_basic_ack_t *m = f.payload.method.decoded;
        e->tag = m->delivery_tag;
        e->multiple = m->multiple;
        break;
    }
    case AMQP_BASIC_NACK_METHOD: {
        amqp_basic_nack_t *m = f.payload.method.decoded;
        e->tag = m->delivery_tag;
        e->multiple = m->multiple;
        e->requeue = m->requeue;
        break;
    }
    case AMQP_CONNECTION_BLOCKED_METHOD: {
        amqp_connection_blocked_t *m = f.payload.method.decoded;
        bytes_to_str(e->text, sizeof(e->text), m->reason);
        break;
    }
    case AMQP_CHANNEL_CLOSE_METHOD: {
        amqp_channel_close_t *m = f.payload.method.decoded;
        e->code = m->reply_code;
        bytes_to_str(e->text, sizeof(e->text), m->reply_text);
        break;
    }
    case AMQP_CONNECTION_CLOSE_METHOD: {
        amqp_connection_close_t *m = f.payload.method.decoded;
        e->code = m->reply_code;
        bytes_to_str(e->text, sizeof(e->text), m->reply_text);
        break;
    }
    default: break;
    }
    return 1;
}

static const char *
event_str(const struct h_event *e, char *buf, size_t len)
{
    if (e->id == AMQP_CHANNEL_CLOSE_METHOD ||
        e->id == AMQP_CONNECTION_CLOSE_METHOD)
        snprintf(buf, len, "%s %d \"%s\" on channel %u", h_method_name(e->id),
                 e->code, e->text, e->channel);
    else if (e->has_content)
        snprintf(buf, len, "%s on channel %u with body \"%.60s\"",
                 h_method_name(e->id), e->channel, e->body);
    else
        snprintf(buf, len, "%s on channel %u", h_method_name(e->id),
                 e->channel);
    return buf;
}

uint64_t
h_expect_delivery_at(const char *file, int line, amqp_connection_state_t c,
                     const char *body, struct h_event *out)
{
    struct h_event e;
    char buf[512];
    int n = h_next(c, WAIT_MS, &e);

    H_ASSERT_AT(file, line, n == 1, "expected a delivery%s%s, got %s",
                body ? " of " : "", body ? body : "",
                n == 0 ? "nothing within 5 s" : "a closed connection");
    H_ASSERT_AT(file, line, e.id == AMQP_BASIC_DELIVER_METHOD,
                "expected a delivery, got %s", event_str(&e, buf, sizeof(buf)));
    if (body)
        H_ASSERT_AT(file, line,
                    e.len == strlen(body) && memcmp(e.body, body, e.len) == 0,
                    "expected a delivery of \"%s\", got \"%.60s\"", body,
                    e.body);
    uint64_t tag = e.tag;
    if (out)
        *out = e;
    else
        h_event_free(&e);
    return tag;
}

void
h_expect_method_at(const char *file, int line, amqp_connection_state_t c,
                   amqp_method_number_t id, struct h_event *out)
{
    struct h_event e;
    char buf[512];
    int n = h_next(c, WAIT_MS, &e);

    H_ASSERT_AT(file, line, n == 1, "expected %s, got %s", h_method_name(id),
                n == 0 ? "nothing within 5 s" : "a closed connection");
    H_ASSERT_AT(file, line, e.id == id, "expected %s, got %s",
                h_method_name(id), event_str(&e, buf, sizeof(buf)));
    if (out)
        *out = e;
    else
        h_event_free(&e);
}

void
h_expect_async_channel_close_at(const char *file, int line,
                                amqp_connection_state_t c, amqp_channel_t ch,
                                int code, const char *prefix)
{
    struct h_event e;
    char buf[512];
    int n = h_next(c, WAIT_MS, &e);

    H_ASSERT_AT(file, line, n == 1, "expected channel.close %d, got %s", code,
                n == 0 ? "nothing within 5 s" : "a closed connection");
    H_ASSERT_AT(file, line,
                e.id == AMQP_CHANNEL_CLOSE_METHOD && e.channel == ch &&
                    e.code == code,
                "expected channel.close %d on channel %u, got %s", code, ch,
                event_str(&e, buf, sizeof(buf)));
    if (prefix)
        H_ASSERT_AT(file, line, strncmp(e.text, prefix, strlen(prefix)) == 0,
                    "channel.close text \"%s\" does not start with \"%s\"",
                    e.text, prefix);
    h_event_free(&e);
    amqp_channel_close_ok_t ok = { 0 };
    H_ASSERT_AT(file, line,
                amqp_send_method(c, ch, AMQP_CHANNEL_CLOSE_OK_METHOD, &ok) ==
                    AMQP_STATUS_OK,
                "cannot send channel.close-ok");
}

void
h_expect_async_conn_close_at(const char *file, int line,
                             amqp_connection_state_t c, int code,
                             const char *prefix)
{
    struct h_event e;
    char buf[512];

    /* Deliveries and other methods may come first; skip them. */
    for (;;) {
        int n = h_next(c, WAIT_MS, &e);
        H_ASSERT_AT(file, line, n == 1, "expected connection.close %d, got %s",
                    code,
                    n == 0 ? "nothing within 5 s" : "a closed connection");
        if (e.id == AMQP_CONNECTION_CLOSE_METHOD)
            break;
        H_ASSERT_AT(file, line, e.id != AMQP_CHANNEL_CLOSE_METHOD,
                    "expected connection.close %d, got %s", code,
                    event_str(&e, buf, sizeof(buf)));
        h_event_free(&e);
    }
    H_ASSERT_AT(file, line, e.code == code,
                "expected connection.close %d, got %s", code,
                event_str(&e, buf, sizeof(buf)));
    if (prefix)
        H_ASSERT_AT(file, line, strncmp(e.text, prefix, strlen(prefix)) == 0,
                    "connection.close text \"%s\" does not start with \"%s\"",
                    e.text, prefix);
    amqp_connection_close_ok_t ok = { 0 };
    (void)amqp_send_method(c, 0, AMQP_CONNECTION_CLOSE_OK_METHOD, &ok);
    amqp_destroy_connection(c);
}

bool
h_skipped_remote(const char *why)
{
    if (why == NULL || !harness_is_remote())
        return false;
    fprintf(stderr, "%s: skipped against a remote broker: %s\n",
            case_name ? case_name : "a case", why);
    return true;
}

void
h_expect_refused_at(const char *file, int line, amqp_connection_state_t c,
                    amqp_rpc_reply_t r, amqp_channel_t ch, int code,
                    const char *prefix)
{
    bool wait = r.reply_type == AMQP_RESPONSE_NONE;

    if (ch == 0 && wait)
        h_expect_async_conn_close_at(file, line, c, code, prefix);
    else if (ch == 0)
        h_expect_conn_close_at(file, line, c, r, code, prefix);
    else if (wait)
        h_expect_async_channel_close_at(file, line, c, ch, code, prefix);
    else
        h_expect_channel_close_at(file, line, c, r, ch, code, prefix);
}

void
h_refused(const struct h_refusal *v)
{
    char obj[64], want[512];
    amqp_connection_state_t c;
    amqp_rpc_reply_t r;

    h_case(v->name);
    if (h_skipped_remote(v->roost_only))
        return;
    h_name(obj, sizeof(obj), "refused");
    snprintf(want, sizeof(want), v->text, obj);
    c = h_connect(H);
    r = v->send(c, obj);
    EXPECT_REFUSED(c, r, v->ch, v->code, want);
    if (v->ch == 0)
        return;
    amqp_channel_open(c, v->ch);
    EXPECT_OK(c, "channel.open after the refusal");
    H_ASSERT(SYNC(c, v->ch, NULL, 0) == 0, "deliveries after the refusal");
    if (v->after)
        v->after(c, obj);
    h_close(c);
}

int
h_sync_at(const char *file, int line, amqp_connection_state_t c,
          amqp_channel_t ch, struct h_event *evs, int max)
{
    amqp_exchange_declare_t d;
    struct h_event e;
    char buf[512];
    int count = 0;

    memset(&d, 0, sizeof(d));
    d.exchange = amqp_cstring_bytes("amq.direct");
    d.type = amqp_cstring_bytes("direct");
    d.passive = 1;
    d.arguments = amqp_empty_table;
    H_ASSERT_AT(file, line,
                amqp_send_method(c, ch, AMQP_EXCHANGE_DECLARE_METHOD, &d) ==
                    AMQP_STATUS_OK,
                "cannot send the sync request");
    for (;;) {
        int n = h_next(c, WAIT_MS, &e);
        H_ASSERT_AT(file, line, n == 1, "sync on channel %u: %s", ch,
                    n == 0 ? "no reply within 5 s" : "connection closed");
        if (e.id == AMQP_EXCHANGE_DECLARE_OK_METHOD && e.channel == ch)
            break;
        H_ASSERT_AT(file, line,
                    e.id != AMQP_CONNECTION_CLOSE_METHOD &&
                        !(e.id == AMQP_CHANNEL_CLOSE_METHOD && e.channel == ch),
                    "sync on channel %u: got %s", ch,
                    event_str(&e, buf, sizeof(buf)));
        if (evs && count < max)
            evs[count] = e;
        else
            h_event_free(&e);
        count++;
    }
    return count;
}

void
h_expect_silence_at(const char *file, int line, amqp_connection_state_t c,
                    int ms)
{
    struct h_event e;
    char buf[512];
    int n = h_next(c, ms, &e);

    H_ASSERT_AT(file, line, n == 0, "expected nothing for %d ms, got %s", ms,
                n < 0 ? "a closed connection"
                      : event_str(&e, buf, sizeof(buf)));
}

/* ---- shorthands ---- */

void
h_declare_queue_at(const char *file, int line, amqp_connection_state_t c,
                   amqp_channel_t ch, const char *name, bool durable,
                   bool exclusive, bool auto_delete, amqp_table_t args,
                   char *out, uint32_t *messages, uint32_t *consumers)
{
    amqp_queue_declare_ok_t *ok =
        amqp_queue_declare(c, ch, amqp_cstring_bytes(name ? name : ""), 0,
                           durable, exclusive, auto_delete, args);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "queue.declare");
    ck_assert(ok != NULL);
    if (out)
        bytes_to_str(out, 256, ok->queue);
    if (messages)
        *messages = ok->message_count;
    if (consumers)
        *consumers = ok->consumer_count;
}

uint32_t
h_queue_count_at(const char *file, int line, amqp_connection_state_t c,
                 amqp_channel_t ch, const char *name, uint32_t *consumers)
{
    amqp_queue_declare_ok_t *ok = amqp_queue_declare(
        c, ch, amqp_cstring_bytes(name), 1, 0, 0, 0, amqp_empty_table);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "passive queue.declare");
    if (consumers)
        *consumers = ok->consumer_count;
    return ok->message_count;
}

void
h_wait_count_at(const char *file, int line, amqp_connection_state_t c,
                amqp_channel_t ch, const char *name, uint32_t want)
{
    uint64_t deadline = h_now_ms() + WAIT_MS;
    uint32_t n;

    while ((n = h_queue_count_at(file, line, c, ch, name, NULL)) != want &&
           h_now_ms() < deadline)
        h_sleep_ms(POLL_MS);
    H_ASSERT_AT(file, line, n == want,
                "queue '%s' holds %u messages, expected %u", name, n, want);
}

void
h_bind_at(const char *file, int line, amqp_connection_state_t c,
          amqp_channel_t ch, const char *queue, const char *exchange,
          const char *key, amqp_table_t args)
{
    amqp_queue_bind(c, ch, amqp_cstring_bytes(queue),
                    amqp_cstring_bytes(exchange), amqp_cstring_bytes(key),
                    args);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "queue.bind");
}

void
h_declare_exchange_at(const char *file, int line, amqp_connection_state_t c,
                      amqp_channel_t ch, const char *name, const char *type,
                      bool durable, bool auto_delete, bool internal,
                      amqp_table_t args)
{
    amqp_exchange_declare(c, ch, amqp_cstring_bytes(name),
                          amqp_cstring_bytes(type), 0, durable, auto_delete,
                          internal, args);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "exchange.declare");
}

void
h_publish_at(const char *file, int line, amqp_connection_state_t c,
             amqp_channel_t ch, const char *exchange, const char *key,
             const void *body, size_t len, bool mandatory,
             const amqp_basic_properties_t *props)
{
    amqp_bytes_t b = { len, (void *)(uintptr_t)body };
    int st =
        amqp_basic_publish(c, ch, amqp_cstring_bytes(exchange),
                           amqp_cstring_bytes(key), mandatory, 0, props, b);
    H_ASSERT_AT(file, line, st == AMQP_STATUS_OK, "basic.publish: %s",
                amqp_error_string2(st));
}

void
h_publish_n_at(const char *file, int line, amqp_connection_state_t c,
               amqp_channel_t ch, const char *q, const char *prefix, int from,
               int to)
{
    char body[64];
    for (int i = from; i < to; i++) {
        snprintf(body, sizeof(body), "%s%d", prefix, i);
        h_publish_at(file, line, c, ch, "", q, body, strlen(body), false,
                     NULL);
    }
}

void
h_consume_at(const char *file, int line, amqp_connection_state_t c,
             amqp_channel_t ch, const char *queue, const char *tag, bool no_ack,
             bool exclusive, char *out)
{
    amqp_basic_consume_ok_t *ok = amqp_basic_consume(
        c, ch, amqp_cstring_bytes(queue), amqp_cstring_bytes(tag ? tag : ""), 0,
        no_ack, exclusive, amqp_empty_table);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "basic.consume");
    if (out)
        bytes_to_str(out, 256, ok->consumer_tag);
}

int
h_get_at(const char *file, int line, amqp_connection_state_t c,
         amqp_channel_t ch, const char *queue, bool no_ack, struct h_event *e)
{
    amqp_rpc_reply_t r =
        amqp_basic_get(c, ch, amqp_cstring_bytes(queue), no_ack);
    h_expect_ok_at(file, line, r, "basic.get");
    if (r.reply.id == AMQP_BASIC_GET_EMPTY_METHOD)
        return 0;
    H_ASSERT_AT(file, line, r.reply.id == AMQP_BASIC_GET_OK_METHOD,
                "basic.get: %s", h_method_name(r.reply.id));
    amqp_basic_get_ok_t *g = r.reply.decoded;
    memset(e, 0, sizeof(*e));
    e->channel = ch;
    e->id = AMQP_BASIC_GET_OK_METHOD;
    e->tag = g->delivery_tag;
    e->redelivered = g->redelivered;
    e->message_count = g->message_count;
    bytes_to_str(e->exchange, sizeof(e->exchange), g->exchange);
    bytes_to_str(e->rkey, sizeof(e->rkey), g->routing_key);
    read_content(c, e);
    return 1;
}

void
h_send_at(const char *file, int line, amqp_connection_state_t c,
          amqp_channel_t ch, amqp_method_number_t id, void *decoded)
{
    int st = amqp_send_method(c, ch, id, decoded);
    H_ASSERT_AT(file, line, st == AMQP_STATUS_OK, "sending %s: %s",
                h_method_name(id), amqp_error_string2(st));
}

/* Like h_connect, announcing the connection.blocked capability, which
 * rabbitmq-c 0.11 does not announce by itself. */
amqp_connection_state_t
h_connect_blocked_cap(const struct harness *h)
{
    amqp_connection_state_t c = amqp_new_connection();
    amqp_socket_t *s;
    struct timeval tv = { 10, 0 };
    amqp_table_entry_t cap, prop;
    amqp_table_t props;
    int st;

    ck_assert(c != NULL);
    s = amqp_tcp_socket_new(c);
    ck_assert(s != NULL);
    st = amqp_socket_open(s, h->host, h->port);
    ck_assert_msg(st == AMQP_STATUS_OK, "cannot connect to %s:%d: %s", h->host,
                  h->port, amqp_error_string2(st));
    amqp_set_rpc_timeout(c, &tv);
    cap.key = amqp_cstring_bytes("connection.blocked");
    cap.value.kind = AMQP_FIELD_KIND_BOOLEAN;
    cap.value.value.boolean = 1;
    prop.key = amqp_cstring_bytes("capabilities");
    prop.value.kind = AMQP_FIELD_KIND_TABLE;
    prop.value.value.table = h_table(&cap, 1);
    props = h_table(&prop, 1);
    h_expect_ok_at(__FILE__, __LINE__,
                   amqp_login_with_properties(c, "/", 0, 131072, 0, &props,
                                              AMQP_SASL_METHOD_PLAIN, "guest",
                                              "guest"),
                   "login");
    amqp_channel_open(c, 1);
    EXPECT_OK(c, "channel.open");
    return c;
}

void
h_expect_arg_refused_at(const char *file, int line, amqp_connection_state_t c,
                        const char *tag, amqp_table_entry_t arg,
                        const char *why)
{
    char name[64], want[512];
    h_name(name, sizeof(name), tag);
    amqp_queue_declare(c, 1, amqp_cstring_bytes(name), 0, 0, 0, 1,
                       h_table(&arg, 1));
    snprintf(want, sizeof(want), "PRECONDITION_FAILED - invalid arg '%.*s' "
             "for queue '%s' in vhost '/': %s", (int)arg.key.len,
             (const char *)arg.key.bytes, name, why);
    h_expect_channel_close_at(file, line, c, amqp_get_rpc_reply(c), 1, 406,
                              want);
    amqp_channel_open(c, 1);
    h_expect_ok_at(file, line, amqp_get_rpc_reply(c), "channel.open");
}
