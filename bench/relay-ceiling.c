/*
 * SPDX-License-Identifier: Apache-2.0
 * relay-ceiling: how many messages of a given size a store-and-forward
 * broker could possibly move on this machine. Three processes, as in a
 * roost-perf run: a producer writes SIZE-byte messages over loopback TCP
 * to a relay, the relay reads them (up to 256 KiB per read) and writes
 * them to a consumer, which counts them. The relay does nothing else: no
 * framing, no queue, no copy beyond the kernel's. Its rate bounds what
 * any broker can reach with the same load generator on the same cores.
 *
 *   bench/relay-ceiling [SIZE [SECONDS [RATE]]]   (default 65536 5 0)
 *
 * Prints messages per second, GB/s and the relay's CPU microseconds per
 * message. See docs/performance.md, "What limits 64 KiB messages".
 *
 * With a RATE (messages per second), the producer sends at that rate
 * instead, each message stamped with its send time, and the consumer
 * prints the end-to-end latency percentiles: the floor that the wake-ups
 * of three processes on these cores put under any broker's latency (see
 * "What limits p99 at 1,000 msg/s").
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "tools/perf_clock.h"

#define RELAY_READ (256 * 1024)

static void
die(const char *what)
{
    perror(what);
    exit(1);
}

static double
now_s(void)
{
    return (double)now_ns() / 1e9;
}

/* TCP_NODELAY, as roostd, RabbitMQ and rabbitmq-c set it. */
static void
nodelay(int s)
{
    int one = 1;
    setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int
listen_loopback(int *port)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    socklen_t len = sizeof(a);
    int s = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || bind(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        listen(s, 1) != 0 || getsockname(s, (struct sockaddr *)&a, &len) != 0)
        die("listen");
    *port = ntohs(a.sin_port);
    return s;
}

static int
connect_loopback(int port)
{
    struct sockaddr_in a = { .sin_family = AF_INET };
    int s = socket(AF_INET, SOCK_STREAM, 0);

    a.sin_port = htons((uint16_t)port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (s < 0 || connect(s, (struct sockaddr *)&a, sizeof(a)) != 0)
        die("connect");
    nodelay(s);
    return s;
}

static void
write_all(int s, const char *p, size_t len, const char *who)
{
    while (len > 0) {
        ssize_t n = write(s, p, len);
        if (n <= 0)
            die(who);
        p += n;
        len -= (size_t)n;
    }
}

/* 'rate' messages a second, each starting with its send time. */
static void
paced_producer(int port, size_t size, double seconds, double rate)
{
    int s = connect_loopback(port);
    char *msg = calloc(1, size < 8 ? 8 : size);
    uint64_t start = now_ns(), period = (uint64_t)(1e9 / rate);
    uint64_t n = (uint64_t)(seconds * rate);

    if (msg == NULL)
        die("calloc");
    /* The default 50 us timer slack would blur the schedule. */
    prctl(PR_SET_TIMERSLACK, 1UL);
    for (uint64_t k = 0; k < n; k++) {
        sleep_until(start + k * period);
        uint64_t t = now_ns();
        memcpy(msg, &t, sizeof(t));
        write_all(s, msg, size, "producer write");
    }
    close(s);
    _exit(0);
}

static int
cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* Reads whole messages and prints latency percentiles. */
static void
timing_consumer(int port, size_t size, uint64_t expect)
{
    int s = connect_loopback(port);
    char *msg = malloc(size < 8 ? 8 : size);
    uint64_t *lat = malloc((expect + 1) * sizeof(*lat)), n = 0;

    if (msg == NULL || lat == NULL)
        die("malloc");
    for (;;) {
        size_t got = 0;
        ssize_t r = 0;
        while (got < size && (r = read(s, msg + got, size - got)) > 0)
            got += (size_t)r;
        if (got < size)
            break;
        uint64_t sent, t = now_ns();
        memcpy(&sent, msg, sizeof(sent));
        if (n <= expect)
            lat[n++] = t - sent;
    }
    if (n == 0)
        die("no messages");
    qsort(lat, n, sizeof(*lat), cmp_u64);
    printf("%zu B messages at a fixed rate: %llu received; latency p50 %.1f "
           "us, p99 %.1f us, p99.9 %.1f us, max %.1f us\n",
           size, (unsigned long long)n, lat[n / 2] / 1e3,
           lat[n * 99 / 100] / 1e3, lat[n * 999 / 1000] / 1e3,
           lat[n - 1] / 1e3);
    fflush(stdout);
    _exit(0);
}

static void
producer(int port, size_t size, double seconds)
{
    int s = connect_loopback(port);
    char *msg = calloc(1, size);
    double end = now_s() + seconds;

    if (msg == NULL)
        die("calloc");
    while (now_s() < end)
        write_all(s, msg, size, "producer write");
    close(s);
    _exit(0);
}

static void
consumer(int port, size_t size)
{
    int s = connect_loopback(port);
    char *buf = malloc(RELAY_READ);
    unsigned long long total = 0;
    double start = now_s(), t;
    ssize_t n;

    if (buf == NULL)
        die("malloc");
    while ((n = read(s, buf, RELAY_READ)) > 0)
        total += (unsigned long long)n;
    t = now_s() - start;
    printf("%zu B messages: %.0f msg/s, %.2f GB/s\n", size,
           (double)total / (double)size / t, (double)total / t / 1e9);
    fflush(stdout);
    _exit(0);
}

int
main(int argc, char **argv)
{
    size_t size = argc > 1 ? strtoul(argv[1], NULL, 10) : 65536;
    double seconds = argc > 2 ? atof(argv[2]) : 5;
    double rate = argc > 3 ? atof(argv[3]) : 0;
    int pin, pout, lin, lout, in, out;
    unsigned long long relayed = 0;
    struct rusage ru;
    char *buf;
    ssize_t n;

    if (size == 0 || seconds <= 0 || rate < 0 || (rate > 0 && size < 8)) {
        fprintf(stderr, "usage: relay-ceiling [SIZE [SECONDS [RATE]]]\n");
        return 1;
    }
    lin = listen_loopback(&pin);
    lout = listen_loopback(&pout);
    if (fork() == 0) {
        if (rate > 0)
            paced_producer(pin, size, seconds, rate);
        producer(pin, size, seconds);
    }
    if (fork() == 0) {
        if (rate > 0)
            timing_consumer(pout, size, (uint64_t)(seconds * rate));
        consumer(pout, size);
    }
    if ((in = accept(lin, NULL, NULL)) < 0 || (out = accept(lout, NULL, NULL)) < 0)
        die("accept");
    nodelay(in);
    nodelay(out);
    if ((buf = malloc(RELAY_READ)) == NULL)
        die("malloc");
    while ((n = read(in, buf, RELAY_READ)) > 0) {
        relayed += (unsigned long long)n;
        write_all(out, buf, (size_t)n, "relay write");
    }
    close(out);
    getrusage(RUSAGE_SELF, &ru);
    while (wait(NULL) > 0)
        ;
    printf("relay CPU per message: %.1f us\n",
           ((double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
            (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6) * 1e6 /
               ((double)relayed / (double)size));
    return 0;
}
