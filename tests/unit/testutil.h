/*
 * SPDX-License-Identifier: Apache-2.0
 * Helpers shared by the check programs: hex dumps in failure messages and
 * a main() that runs one suite and prints check's summary line.
 */
#ifndef ROOST_TESTS_TESTUTIL_H
#define ROOST_TESTS_TESTUTIL_H

#include <check.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NELEMS(a) (sizeof(a) / sizeof((a)[0]))

/* Hex of up to 64 bytes into a static buffer, for ck_assert messages. */
static inline const char *
hexdump(const uint8_t *p, size_t n)
{
    static char out[64 * 3 + 8];
    size_t k = 0;
    for (size_t i = 0; i < n && i < 64; i++)
        k += (size_t)snprintf(out + k, sizeof(out) - k, "%02x ", p[i]);
    if (n > 64)
        snprintf(out + k, sizeof(out) - k, "...");
    else if (k > 0)
        out[k - 1] = '\0';
    else
        out[0] = '\0';
    return out;
}

/* Run 'suite' and exit non-zero on any failure. */
static inline int
run_suite(Suite *s)
{
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed == 0 ? EXIT_SUCCESS : EXIT_FAILURE;
}

#endif
