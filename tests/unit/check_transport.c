/*
 * SPDX-License-Identifier: Apache-2.0
 * The plain TCP transport on a real socket pair: what it writes arrives,
 * an empty output is no error whatever errno says (evbuffer_write_atmost
 * returns -1 for it without a system call: roostd once dropped
 * connections for that when another call had left errno at EBADF), a
 * peer that closed is end of file.
 */
#include "tests/unit/testutil.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <event2/buffer.h>
#include <event2/event.h>

#include "base/transport.h"

static void
nothing(void *arg)
{
    (void)arg;
}

static struct event_base *base;
static struct transport *tp;
static int peer;

static void
pair_up(void)
{
    int sv[2];
    ck_assert_int_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    fcntl(sv[0], F_SETFL, O_NONBLOCK);
    base = event_base_new();
    tp = transport_tcp_new(base, sv[0], nothing, nothing, NULL);
    ck_assert_ptr_nonnull(tp);
    peer = sv[1];
}

static void
pair_down(void)
{
    transport_free(tp);
    close(peer);
    event_base_free(base);
}

START_TEST(writes_arrive)
{
    struct evbuffer *out = evbuffer_new();
    char got[16] = "";
    pair_up();
    evbuffer_add(out, "hello", 5);
    ck_assert_int_eq(transport_write(tp, out, 1 << 20), 5);
    ck_assert_uint_eq(evbuffer_get_length(out), 0);
    ck_assert_int_eq(read(peer, got, sizeof(got)), 5);
    ck_assert_str_eq(got, "hello");
    evbuffer_free(out);
    pair_down();
}
END_TEST

START_TEST(empty_output_is_no_error)
{
    struct evbuffer *out = evbuffer_new();
    pair_up();
    errno = EBADF;
    ck_assert_int_eq(transport_write(tp, out, 1 << 20), 0);
    errno = EPIPE;
    ck_assert_int_eq(transport_write(tp, out, 1 << 20), 0);
    evbuffer_add(out, "x", 1);
    errno = EBADF;
    ck_assert_int_eq(transport_write(tp, out, 0), 0);
    ck_assert_uint_eq(evbuffer_get_length(out), 1);
    evbuffer_free(out);
    pair_down();
}
END_TEST

START_TEST(peer_closed_is_eof)
{
    char buf[8];
    pair_up();
    ck_assert_int_eq(transport_read(tp, buf, sizeof(buf)), TRANSPORT_AGAIN);
    close(peer);
    peer = -1;
    ck_assert_int_eq(transport_read(tp, buf, sizeof(buf)), TRANSPORT_EOF);
    pair_down();
}
END_TEST

static Suite *
transport_suite(void)
{
    Suite *s = suite_create("transport");
    TCase *tc = tcase_create("tcp");
    tcase_add_test(tc, writes_arrive);
    tcase_add_test(tc, empty_output_is_no_error);
    tcase_add_test(tc, peer_closed_is_eof);
    suite_add_tcase(s, tc);
    return s;
}

int
main(void)
{
    return run_suite(transport_suite());
}
