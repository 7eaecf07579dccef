/*
 * SPDX-License-Identifier: Apache-2.0
 * CRC32C: reflected polynomial 0x82F63B78, initial and final value
 * inverted, as iSCSI and ext4 use it.
 */
#include "broker/store/crc32c.h"

#include <stdbool.h>
#include <string.h>

static uint32_t table[256];
static int have_sse42 = -1;

static void
init(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        table[i] = c;
    }
#if defined(__x86_64__)
    __builtin_cpu_init();
    have_sse42 = __builtin_cpu_supports("sse4.2") ? 1 : 0;
#else
    have_sse42 = 0;
#endif
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t
hw(uint32_t c, const uint8_t *p, size_t len)
{
    while (len >= 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = (uint32_t)__builtin_ia32_crc32di(c, v);
        p += 8;
        len -= 8;
    }
    while (len--)
        c = __builtin_ia32_crc32qi(c, *p++);
    return c;
}
#endif

uint32_t
crc32c(uint32_t crc, const void *data, size_t len)
{
    const uint8_t *p = data;
    uint32_t c = ~crc;

    if (have_sse42 < 0)
        init();
#if defined(__x86_64__)
    if (have_sse42)
        return ~hw(c, p, len);
#endif
    while (len--)
        c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}
