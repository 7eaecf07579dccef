/*
 * SPDX-License-Identifier: Apache-2.0
 * Runs a libFuzzer target over files without libFuzzer: every file named
 * on the command line, or, with no arguments, every file of the target's
 * committed corpus ($srcdir/tests/fuzz/corpus/<target>/). `make check`
 * runs it, so each corpus input stays crash-free under the sanitizers.
 */
#include <dirent.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
extern const char fuzz_target_name[];

static int
run_file(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        perror(path);
        return -1;
    }
    uint8_t *buf = NULL;
    size_t len = 0, cap = 0, n;
    do {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            buf = realloc(buf, cap);
            if (buf == NULL)
                abort();
        }
        n = fread(buf + len, 1, cap - len, f);
        len += n;
    } while (n > 0);
    fclose(f);
    /* Hand the target a buffer of exactly 'len' bytes so that ASan sees
     * any read past the end. */
    uint8_t *exact = malloc(len ? len : 1);
    if (exact == NULL)
        abort();
    memcpy(exact, buf, len);
    free(buf);
    LLVMFuzzerTestOneInput(exact, len);
    free(exact);
    return 0;
}

int
main(int argc, char **argv)
{
    int ran = 0, failed = 0;

    if (argc > 1) {
        for (int i = 1; i < argc; i++, ran++)
            failed += run_file(argv[i]) != 0;
    } else {
        const char *srcdir = getenv("srcdir");
        char dir[4096], path[8192];
        snprintf(dir, sizeof(dir), "%s/tests/fuzz/corpus/%s",
                 srcdir ? srcdir : ".", fuzz_target_name);
        DIR *d = opendir(dir);
        if (d == NULL) {
            perror(dir);
            return 1;
        }
        struct dirent *de;
        while ((de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
            failed += run_file(path) != 0;
            ran++;
        }
        closedir(d);
    }
    printf("%s: replayed %d inputs, %d unreadable\n", fuzz_target_name, ran,
           failed);
    return failed == 0 && ran > 0 ? 0 : 1;
}
