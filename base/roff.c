/*
 * SPDX-License-Identifier: Apache-2.0
 * roff output for the generated man pages (roff.h). The escaping is the
 * part that matters: help strings hold '-', '\', quotes and leading dots,
 * and groff -ww warns (or drops text) on each of them unescaped.
 */
#include "base/roff.h"

#include <stdbool.h>
#include <string.h>

#include "roost-config.h"

/* 'line_start': 's' begins a source line. */
static void
text(FILE *fp, const char *s, bool line_start)
{
    for (; *s != '\0'; s++) {
        /* A control character at the start of a source line makes the
         * line a request: the zero-width \& keeps it text. */
        if (line_start && (*s == '.' || *s == '\''))
            fputs("\\&", fp);
        line_start = false;
        switch (*s) {
        case '\\':
            fputs("\\e", fp);
            break;
        case '-':
            fputs("\\-", fp);
            break;
        case '\t':
            fputc(' ', fp);
            break;
        case '\n':
            fputc('\n', fp);
            line_start = true;
            break;
        default:
            fputc(*s, fp);
        }
    }
}

void
roff_text(FILE *fp, const char *s)
{
    text(fp, s, false);
}

void
roff_line(FILE *fp, const char *s)
{
    text(fp, s, true);
    fputc('\n', fp);
}

void
roff_font(FILE *fp, char font, const char *s)
{
    fprintf(fp, "\\f%c", font);
    roff_text(fp, s);
    fputs("\\fR", fp);
}

void
roff_option(FILE *fp, char letter, const char *name, const char *arg)
{
    if (letter != 0)
        fprintf(fp, "\\fB\\-%c\\fR, ", letter);
    fputs("\\fB\\-\\-", fp);
    roff_text(fp, name);
    fputs("\\fR", fp);
    if (arg != NULL) {
        fputc(' ', fp);
        roff_font(fp, 'I', arg);
    }
    fputc('\n', fp);
}

void
roff_request(FILE *fp, const char *request, const char *arg)
{
    fprintf(fp, ".%s ", request);
    /* Quoted, so spaces stay inside one argument; a quote inside is
     * roff's "" (one literal quote in a quoted argument). */
    fputc('"', fp);
    for (const char *p = arg; *p != '\0'; p++) {
        if (*p == '"')
            fputs("\"\"", fp);
        else if (*p == '\\')
            fputs("\\e", fp);
        else if (*p == '-')
            fputs("\\-", fp);
        else if (*p != '\n')
            fputc(*p, fp);
    }
    fputs("\"\n", fp);
}

void
roff_path(FILE *fp, const char *path)
{
    fputs(".nf\n", fp);
    roff_request(fp, "I", path);
    fputs(".fi\n", fp);
}

void
roff_header(FILE *fp, const char *name, const char *section,
            const char *manual, const char *summary)
{
    char upper[64];
    size_t i;

    for (i = 0; name[i] != '\0' && i < sizeof(upper) - 1; i++)
        upper[i] = (char)(name[i] >= 'a' && name[i] <= 'z' ? name[i] - 32
                                                           : name[i]);
    upper[i] = '\0';
    fprintf(fp, ".\\\" Generated from the program's own tables; do not "
            "edit.\n");
    fprintf(fp, ".TH %s %s \"\" \"%s %s\" \"%s\"\n", upper, section,
            PACKAGE_NAME, PACKAGE_VERSION, manual);
    fprintf(fp, ".SH NAME\n");
    roff_text(fp, name);
    fputs(" \\- ", fp);
    roff_line(fp, summary);
}
