/*
 * relay-ceiling: how many messages of a given size a store-and-forward
 * broker could possibly move on this machine. Three processes, as in a
 * roost-perf run: a producer writes SIZE-byte messages over loopback TCP
 * to a relay, the relay reads them (up to 256 KiB per read) and writes
 * them to a consumer, which counts them. The relay does nothing else: no
 * framing, no queue, no copy beyond the kernel's. Its rate bounds what
 * any broker can reach with the same load generator on the same cores.
 *
 *   bench/relay-ceiling [SIZE [SECONDS]]      (default 65536 5)
 *
 * Prints messages per second, GB/s and the relay's CPU microseconds per
 * message. See docs/performance.md, "What limits 64 KiB messages".
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

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
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
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
    return s;
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
        for (size_t off = 0; off < size;) {
            ssize_t n = write(s, msg + off, size - off);
            if (n <= 0)
                die("producer write");
            off += (size_t)n;
        }
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
    int pin, pout, lin, lout, in, out;
    unsigned long long relayed = 0;
    struct rusage ru;
    char *buf;
    ssize_t n;

    if (size == 0 || seconds <= 0) {
        fprintf(stderr, "usage: relay-ceiling [SIZE [SECONDS]]\n");
        return 1;
    }
    lin = listen_loopback(&pin);
    lout = listen_loopback(&pout);
    if (fork() == 0)
        producer(pin, size, seconds);
    if (fork() == 0)
        consumer(pout, size);
    if ((in = accept(lin, NULL, NULL)) < 0 || (out = accept(lout, NULL, NULL)) < 0)
        die("accept");
    if ((buf = malloc(RELAY_READ)) == NULL)
        die("malloc");
    while ((n = read(in, buf, RELAY_READ)) > 0) {
        relayed += (unsigned long long)n;
        for (char *p = buf; n > 0;) {
            ssize_t w = write(out, p, (size_t)n);
            if (w <= 0)
                die("relay write");
            p += w;
            n -= w;
        }
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
