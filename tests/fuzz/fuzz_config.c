/*
 * SPDX-License-Identifier: Apache-2.0
 * libFuzzer target: the configuration file parser (broker/lib/config.c with
 * broker/lib/rabbitconf.c). The input is a whole file. It is loaded onto the
 * defaults twice, without and with CONFIG_IGNORE_UNSUPPORTED, and
 *
 *  - each load returns as many errors as it wrote lines to 'errs', and
 *    every error and warning line starts with "path:";
 *  - the flag turns errors into warnings one for one (the refusals),
 *    and changes nothing else;
 *  - loading the same file again gives the same errors and warnings;
 *  - what the settings come to holds together: a log output, a level
 *    Roost has, and config_validate() and config_free() run on it.
 *
 * A failed check prints the line and calls abort().
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "broker/lib/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
const char fuzz_target_name[] = "fuzz_config";

#define CHECK(c) \
    do { \
        if (!(c)) { \
            fprintf(stderr, "fuzz_config: %s:%d: %s\n", __FILE__, __LINE__, \
                    #c); \
            abort(); \
        } \
    } while (0)

/* Large enough that no input of scripts/fuzz.sh's 64 KiB fills them: a
 * line of two bytes makes a message of at most about 60. */
static char errs[2][1 << 22], warns[2][1 << 22];

/* Lines of 'buf', each checked to start with "path:". */
static int
lines(const char *buf, const char *path)
{
    int n = 0;
    size_t plen = strlen(path);
    for (const char *p = buf; *p != '\0';) {
        const char *nl = strchr(p, '\n');
        CHECK(nl != NULL);
        CHECK(strncmp(p, path, plen) == 0 && p[plen] == ':');
        n++;
        p = nl + 1;
    }
    return n;
}

static void
load(const char *path, int flags, int slot, int *nerr)
{
    struct config c;
    char err[512];

    config_defaults(&c);
    *nerr = config_load_file(&c, path, flags, errs[slot], sizeof(errs[slot]),
                             warns[slot], sizeof(warns[slot]));
    CHECK(c.log_file != NULL && c.log_file[0] != '\0');
    CHECK(c.log_level >= 0 && c.log_level <= 3);
    CHECK(c.disk_free_limit >= 0 && c.mem_high_watermark_absolute >= 0);
    (void)config_validate(&c, err, sizeof(err));
    config_free(&c);
}

/* The file each input is written to, removed at exit. */
static char path[64];

static void
remove_file(void)
{
    unlink(path);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    int nerr[2], again;

    if (path[0] == '\0') {
        snprintf(path, sizeof(path), "/tmp/fuzz-config-XXXXXX");
        int fd = mkstemp(path);
        CHECK(fd >= 0);
        close(fd);
        atexit(remove_file);
    }
    FILE *fp = fopen(path, "wb");
    CHECK(fp != NULL);
    CHECK(fwrite(data, 1, size, fp) == size);
    CHECK(fclose(fp) == 0);

    load(path, 0, 0, &nerr[0]);
    CHECK(lines(errs[0], path) == nerr[0]);
    load(path, CONFIG_IGNORE_UNSUPPORTED, 1, &nerr[1]);
    CHECK(lines(errs[1], path) == nerr[1]);
    CHECK(nerr[1] <= nerr[0]);
    CHECK(lines(warns[1], path) == lines(warns[0], path) + nerr[0] - nerr[1]);

    /* The same file again: the same answer. */
    char *first = strdup(errs[0]), *wfirst = strdup(warns[0]);
    CHECK(first != NULL && wfirst != NULL);
    load(path, 0, 0, &again);
    CHECK(again == nerr[0]);
    CHECK(strcmp(first, errs[0]) == 0 && strcmp(wfirst, warns[0]) == 0);
    free(first);
    free(wfirst);
    return 0;
}
