/*
 * SPDX-License-Identifier: Apache-2.0
 * Helpers shared by the fuzz targets (fuzz_common.c). A failed CHECK
 * prints the file and line and aborts, which libFuzzer and the replay
 * driver report as a crash.
 */
#ifndef ROOST_TESTS_FUZZ_COMMON_H
#define ROOST_TESTS_FUZZ_COMMON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "amqp/codec.h"
#include "amqp/method.h"
#include "amqp/props.h"
#include "amqp/table.h"
#include "amqp/wire.h"

/* Table entries looked up again with table_get() per table. */
#define GET_CHECKS 8

/* class, weight, body size and the first flag word of a content header */
#define HEADER_FIXED_LEN 14

#define CHECK(cond)                                                       \
    do {                                                                  \
        if (!(cond))                                                      \
            check_failed(#cond, __FILE__, __LINE__);                      \
    } while (0)

void check_failed(const char *what, const char *file, int line)
    __attribute__((noreturn));
void *fuzz_xmalloc(size_t n);
bool bytes_equal(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen);
bool field_equal(const struct amqp_field *a, const struct amqp_field *b);
void walk_table(struct amqp_table t, unsigned depth);
void walk_array(struct amqp_array a, unsigned depth);
bool fields_equal(const struct codec_field *f, size_t n, uint32_t present, const void *a, const void *b);
bool method_canon(const struct method_info *mi, const struct amqp_method *m, uint8_t *buf, size_t len);
uint8_t * header_canon(const uint8_t *in, size_t len, size_t *outlen);
bool header_equal(const struct content_header *a, const struct content_header *b);

#endif
