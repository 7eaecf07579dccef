/*
 * SPDX-License-Identifier: Apache-2.0
 * OpenSSL's digests, random bytes and base64 for tls/hash.h.
 */
#include "tls/hash.h"

#include <string.h>

#include <openssl/evp.h>
#include <openssl/rand.h>

static const EVP_MD *
md_of(enum tls_digest d)
{
    switch (d) {
    case TLS_SHA256:
        return EVP_sha256();
    case TLS_SHA512:
        return EVP_sha512();
    case TLS_MD5:
        return EVP_md5();
    }
    return NULL;
}

size_t
tls_digest_len(enum tls_digest d)
{
    return d == TLS_SHA512 ? 64 : d == TLS_MD5 ? 16 : 32;
}

size_t
tls_digest2(enum tls_digest d, const void *a, size_t alen, const void *b,
            size_t blen, uint8_t *out)
{
    EVP_MD_CTX *ctx = EVP_MD_CTX_new();
    unsigned int n = 0;

    if (ctx == NULL)
        return 0;
    if (EVP_DigestInit_ex(ctx, md_of(d), NULL) != 1 ||
        EVP_DigestUpdate(ctx, a, alen) != 1 ||
        EVP_DigestUpdate(ctx, b, blen) != 1 ||
        EVP_DigestFinal_ex(ctx, out, &n) != 1)
        n = 0;
    EVP_MD_CTX_free(ctx);
    return n;
}

int
tls_random(void *out, size_t n)
{
    return RAND_bytes(out, (int)n) == 1 ? 0 : -1;
}

void
tls_base64(const uint8_t *in, size_t n, char *out)
{
    int len = EVP_EncodeBlock((unsigned char *)out, in, (int)n);
    out[len < 0 ? 0 : len] = '\0';
}

int
tls_unbase64(const char *in, uint8_t *out, size_t cap)
{
    size_t len = strlen(in);
    unsigned char buf[512];

    if (len == 0 || len % 4 != 0 || len / 4 * 3 > sizeof(buf))
        return -1;
    int n = EVP_DecodeBlock(buf, (const unsigned char *)in, (int)len);
    if (n < 0)
        return -1;
    /* EVP_DecodeBlock counts the padding as zero bytes. */
    if (in[len - 1] == '=')
        n--;
    if (in[len - 2] == '=')
        n--;
    if ((size_t)n > cap)
        return -1;
    memcpy(out, buf, (size_t)n);
    return n;
}
