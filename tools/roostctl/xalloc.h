/*
 * SPDX-License-Identifier: Apache-2.0
 * Allocation that gives up on exhaustion, for roostctl's small strings and
 * buffers (every size a broker's answer controls is bounded before it is
 * allocated). A tool that runs one command has nothing better to do when
 * memory runs out than to say so and exit with EX_SOFTWARE.
 */
#ifndef ROOSTCTL_XALLOC_H
#define ROOSTCTL_XALLOC_H

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sysexits.h>

static inline void
xalloc_fail(void)
{
    fputs("roostctl: out of memory\n", stderr);
    exit(EX_SOFTWARE);
}

static inline void *
xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);

    if (p == NULL)
        xalloc_fail();
    return p;
}

static inline void *
xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);

    if (q == NULL)
        xalloc_fail();
    return q;
}

static inline char *
xstrdup(const char *s)
{
    size_t n = strlen(s) + 1;

    return memcpy(xmalloc(n), s, n);
}

/* A new string, printf-formatted; free it. */
static inline char * __attribute__((format(printf, 1, 2)))
xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        xalloc_fail();
    char *s = xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

#endif
