/*
 * SPDX-License-Identifier: Apache-2.0
 * The web page's files, built into roostd: www/embed.sh turns the files
 * of www/ into broker/mgmt/www_files.c (in the build directory) at build
 * time, and mgmt_www.c serves them. The table and its bytes are
 * constant and live as long as the program.
 */
#ifndef ROOST_BROKER_MGMT_WWW_H
#define ROOST_BROKER_MGMT_WWW_H

#include <stddef.h>

struct www_file {
    const char *path;           /* "/index.html", "/app.js", ... */
    const char *type;           /* its Content-Type */
    const char *etag;           /* "\"CRC-LENGTH\"", quotes included */
    const unsigned char *data;
    size_t len;
};

extern const struct www_file www_files[];
extern const size_t www_nfiles;

#endif
