/* Reading and writing kinreg-intrinsics.txt (format in intrinsics_file.h). */
#include "capture/intrinsics_file.h"
#include "core/files.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FIELDS "width height fx fy cx cy k1 k2 p1 p2 k3"

/* The ranges of `--intrinsics` (tools/cli/pipeline_options.c), so a file can
 * hold nothing the option would refuse: pixels for a sensor of at most
 * 8192x8192, focal lengths 1..100000, centres within +-100000, distortion
 * coefficients of real lenses within +-1000 (fx = 1e30 once gave an empty
 * model and identity poses without a word). */
static bool valid(const kr_intrinsics *k)
{
    const float v[] = {k->fx, k->fy, k->cx, k->cy, k->k1, k->k2, k->p1, k->p2, k->k3};
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
        if (!isfinite(v[i])) return false;
    if (k->fx < 1 || k->fx > 100000 || k->fy < 1 || k->fy > 100000) return false;
    if (fabsf(k->cx) > 100000 || fabsf(k->cy) > 100000) return false;
    for (size_t i = 4; i < sizeof v / sizeof v[0]; i++)
        if (fabsf(v[i]) > 1000) return false;
    return k->width >= 1 && k->width <= 8192 && k->height >= 1 && k->height <= 8192;
}

/* The data line: 6 or 11 numbers, nothing else. */
static bool parse_values(const char *line, kr_intrinsics *k)
{
    double v[11];
    int n = 0;
    const char *p = line;
    for (;;) {
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\0') break;
        if (n == 11) return false;
        char *end;
        errno = 0;
        v[n] = strtod(p, &end);
        if (end == p || errno == ERANGE || (*end && *end != ' ' && *end != '\t')) return false;
        n++;
        p = end;
    }
    if (n != 6 && n != 11) return false;
    if (v[0] != floor(v[0]) || v[1] != floor(v[1]) || fabs(v[0]) > 1e6 || fabs(v[1]) > 1e6)
        return false;
    /* Checked as doubles, before a conversion to float could overflow. */
    for (int i = 2; i < n; i++)
        if (fabs(v[i]) > 1e6) return false;
    kr_intrinsics r = {
        (int)v[0], (int)v[1], (float)v[2], (float)v[3], (float)v[4], (float)v[5], 0, 0, 0, 0, 0};
    if (n == 11) {
        r.k1 = (float)v[6];
        r.k2 = (float)v[7];
        r.p1 = (float)v[8];
        r.p2 = (float)v[9];
        r.k3 = (float)v[10];
    }
    *k = r;
    return valid(k);
}

kr_status kr_intrinsics_file_read(const char *path, kr_intrinsics *out)
{
    char why[160];
    FILE *f = kr_fopen_regular(path, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "cannot open intrinsics %s: %s", path, why);
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0, data_line = 0;
    kr_intrinsics k = {0};
    kr_status st = KR_OK;
    while (st == KR_OK && getline(&line, &cap, f) >= 0) {
        lineno++;
        size_t len = strlen(line);
        while (len && isspace((unsigned char)line[len - 1]))
            line[--len] = '\0';
        const char *p = line;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == '#') continue;
        if (data_line)
            st = kr_error(KR_ERR_FORMAT,
                          "%s:%u: a second data line (the first is line %u): the file holds one "
                          "line '" FIELDS "'",
                          path, lineno, data_line);
        else if (!parse_values(p, &k))
            st = kr_error(KR_ERR_FORMAT,
                          "%s:%u: malformed intrinsics '%.80s': expected '" FIELDS
                          "' (or the first 6) with width and height 1..8192, fx and fy "
                          "1..100000, cx and cy within +-100000, distortion within +-1000",
                          path, lineno, p);
        data_line = lineno;
    }
    if (st == KR_OK && ferror(f))
        st = kr_error(KR_ERR_IO, "%s:%u: read error: %s", path, lineno, strerror(errno));
    free(line);
    fclose(f);
    if (st == KR_OK && !data_line)
        st = kr_error(KR_ERR_FORMAT, "%s holds no intrinsics: expected a line '" FIELDS "'", path);
    if (st == KR_OK) *out = k;
    return st;
}

/* The shortest decimal that reads back as the same float ("517.3", not
 * "517.299988"), so the file stays readable and exact. */
static void shortest(char *buf, size_t size, float v)
{
    for (int digits = 6; digits <= 9; digits++) {
        snprintf(buf, size, "%.*g", digits, (double)v);
        if (strtof(buf, NULL) == v) return;
    }
}

kr_status kr_intrinsics_file_write(const char *path, const kr_intrinsics *k)
{
    if (!k || !valid(k))
        return kr_error(KR_ERR_INVALID_ARG,
                        "cannot record intrinsics in %s: width and height must be 1..8192, fx "
                        "and fy 1..100000, cx and cy within +-100000, distortion within +-1000",
                        path);
    const float v[] = {k->fx, k->fy, k->cx, k->cy, k->k1, k->k2, k->p1, k->p2, k->k3};
    char values[9 * 20] = "", one[24];
    for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) {
        shortest(one, sizeof one, v[i]);
        strcat(values, " ");
        strcat(values, one);
    }
    /* Whole or not at all: a failure leaves the file that was there. */
    kr_output o;
    kr_status st = kr_output_open(&o, path, "the intrinsics", false);
    if (st != KR_OK) return st;
    fprintf(o.f,
            "# kinreg intrinsics of the depth frames in this directory (pixels; distortion in\n"
            "# OpenCV order); read by kinreg's fakenect:DIR and tum:DIR sources, ignored by\n"
            "# libfreenect and the TUM RGB-D tools\n"
            "# " FIELDS "\n"
            "%d %d%s\n",
            k->width, k->height, values);
    return kr_output_commit(&o);
}
