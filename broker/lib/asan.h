/*
 * SPDX-License-Identifier: Apache-2.0
 * Poisoning for memory that Roost keeps for reuse instead of freeing
 * (msg.c's pool, inbuf.c's spare blocks), so that AddressSanitizer still
 * catches a use after "free"; nothing without it.
 */
#ifndef ROOST_BROKER_ASAN_H
#define ROOST_BROKER_ASAN_H

#if defined(__SANITIZE_ADDRESS__)        /* gcc */
#define ROOST_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)    /* clang */
#define ROOST_ASAN 1
#endif
#endif

#ifdef ROOST_ASAN
#include <sanitizer/asan_interface.h>
#else
#define ASAN_POISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#define ASAN_UNPOISON_MEMORY_REGION(p, n) ((void)(p), (void)(n))
#endif

#endif
