/* fakenect's depth PGM files: a tolerant header parser, a strict sample
 * check, and a writer that matches fakenect-record byte for byte. */
#include "capture/pgm_depth.h"
#include "core/files.h"

#include <ctype.h>
#include <stdbool.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "kinreg/frame.h"

/* Skips PGM whitespace and '#' comments (to the end of their line). */
static int skip_space(FILE *f)
{
    int c = getc(f);
    for (;;) {
        while (c != EOF && isspace(c))
            c = getc(f);
        if (c != '#') return c;
        while (c != EOF && c != '\n')
            c = getc(f);
    }
}

/* One header number: decimal digits after whitespace or comments, ended by
 * one whitespace character (consumed) or, except for the last number (after
 * which the samples start), a comment. Returns -1 when malformed. */
static long header_number(FILE *f, bool last)
{
    int c = skip_space(f);
    if (c == EOF || !isdigit(c)) return -1;
    long v = 0;
    while (c != EOF && isdigit(c)) {
        if (v > 1000000) return -1;
        v = v * 10 + (c - '0');
        c = getc(f);
    }
    if (c == '#' && !last)
        ungetc(c, f);
    else if (c == EOF || !isspace(c))
        return -1;
    return v;
}

static kr_status not_pgm(const char *path, const char *where, const char *why)
{
    return kr_error(KR_ERR_FORMAT,
                    "depth frame %s (%s) is not a fakenect depth PGM (%s): expected a "
                    "'P5 640 480 65535' header line and raw 11-bit samples",
                    path, where, why);
}

static kr_status read_header(FILE *f, const char *path, const char *where, int want_w, int want_h)
{
    if (getc(f) != 'P' || getc(f) != '5') return not_pgm(path, where, "no P5 magic");
    int c = getc(f);
    if (c != '#' && !isspace(c)) return not_pgm(path, where, "no P5 magic");
    ungetc(c, f);
    long w = header_number(f, false), h = w < 0 ? -1 : header_number(f, false);
    long maxval = h < 0 ? -1 : header_number(f, true);
    if (maxval < 0) return not_pgm(path, where, "malformed header");
    if (maxval != 65535)
        return kr_error(KR_ERR_SIZE,
                        "depth frame %s (%s) has maxval %ld, expected 65535 (16-bit samples of "
                        "raw 11-bit disparity, as fakenect-record writes)",
                        path, where, maxval);
    if (w != want_w || h != want_h)
        return kr_error(KR_ERR_SIZE,
                        "depth frame %s (%s) is %ldx%ld, expected %dx%d (the intrinsics' size; "
                        "fakenect dumps are 640x480)",
                        path, where, w, h, want_w, want_h);
    return KR_OK;
}

/* Raw 11-bit data never exceeds 2047; a larger sample means the file is not
 * what its name says (a big-endian PGM, a millimetre image, corruption). */
static kr_status check_samples(const uint16_t *s, int w, int h, const char *path, const char *where)
{
    size_t n = (size_t)w * (size_t)h;
    for (size_t i = 0; i < n; i++)
        if (s[i] > KR_DISPARITY_INVALID)
            return kr_error(KR_ERR_FORMAT,
                            "depth frame %s (%s): sample %u at x %zu, y %zu exceeds 2047, so "
                            "the file is not raw 11-bit Kinect disparity (corrupt, or written "
                            "big-endian or in millimetres)",
                            path, where, (unsigned)s[i], i % (size_t)w, i / (size_t)w);
    return KR_OK;
}

kr_status kr_pgm_read_depth(const char *path, const char *where, int want_w, int want_h,
                            uint16_t **out)
{
    char why[160];
    FILE *f = kr_fopen_regular(path, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "cannot open depth frame %s (%s): %s", path, where, why);
    kr_status st = read_header(f, path, where, want_w, want_h);
    uint16_t *s = NULL;
    size_t n = (size_t)want_w * (size_t)want_h;
    if (st == KR_OK && !(s = malloc(n * sizeof *s)))
        st = kr_error(KR_ERR_NOMEM, "cannot allocate a %dx%d depth frame for %s", want_w, want_h,
                      path);
    if (st == KR_OK) {
        size_t got = fread(s, sizeof *s, n, f);
        if (got != n && ferror(f))
            st = kr_error(KR_ERR_IO, "cannot read depth frame %s (%s): %s", path, where,
                          strerror(errno));
        else if (got != n)
            st = kr_error(KR_ERR_FORMAT,
                          "depth frame %s (%s) is truncated: %zu of %zu samples present", path,
                          where, got, n);
    }
    fclose(f);
    if (st == KR_OK) st = check_samples(s, want_w, want_h, path, where);
    if (st != KR_OK) {
        free(s);
        return st;
    }
    *out = s;
    return KR_OK;
}

kr_status kr_pgm_write_depth(const char *path, int width, int height, const uint16_t *samples)
{
    /* Whole or not at all: a failure leaves no truncated frame. */
    kr_output o;
    kr_status st = kr_output_open(&o, path, "the depth frame", true);
    if (st != KR_OK) return st;
    size_t n = (size_t)width * (size_t)height;
    fprintf(o.f, "P5 %d %d 65535\n", width, height);
    fwrite(samples, sizeof *samples, n, o.f);
    return kr_output_commit(&o);
}
