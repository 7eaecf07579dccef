/*
 * SPDX-License-Identifier: Apache-2.0
 * Writing man pages: the few roff requests the generated pages use, with
 * text escaped so that no table string can be taken for a request. Shared
 * by roostd (broker/proc/manpage.c) and roostctl; no broker state.
 */
#ifndef ROOST_BROKER_ROFF_H
#define ROOST_BROKER_ROFF_H

#include <stdio.h>

/* ".TH NAME SECTION" with the package's version, then ".SH NAME" and
 * "name \- summary". */
void roff_header(FILE *fp, const char *name, const char *section,
                 const char *manual, const char *summary);

/* 's' as roff text within a line: '\' and '-' escaped; each "\n" a
 * line break in the source (not in the output: roff fills), and a line
 * after one that would start with '.' or '\'' guarded. */
void roff_text(FILE *fp, const char *s);

/* The same as a line of its own (guarded too), ended by a newline. */
void roff_line(FILE *fp, const char *s);

/* 's' in font 'font' ('B' bold, 'I' italic), then back to roman. */
void roff_font(FILE *fp, char font, const char *s);

/* An option's name as an .TP tag line: "-x, --name ARG" in bold (the
 * letter and ARG when not 0 and NULL), ARG in italics. */
void roff_option(FILE *fp, char letter, const char *name, const char *arg);

/* A request with one escaped argument: ".SH NAME", ".B text", ... */
void roff_request(FILE *fp, const char *request, const char *arg);

/* A file's path in italics on a line of its own, in no-fill mode: a
 * path holds no break point, and one longer than the line (an installed
 * path under a long configure prefix) is "can't break line" in fill
 * mode. Also right as the tag line of a .TP. */
void roff_path(FILE *fp, const char *path);

#endif
