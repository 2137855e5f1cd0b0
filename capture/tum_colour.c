/* A TUM sequence's colour stream (capture/tum_colour.h). */
#include "capture/tum_colour.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "capture/png_colour.h"
#include "core/files.h"

static kr_status add(kr_tum_colour *c, size_t *cap, double stamp, const char *dir, const char *rel)
{
    if (c->n == *cap) {
        size_t n = *cap ? 2 * *cap : 256;
        double *s = realloc(c->stamps, n * sizeof *s);
        if (s) c->stamps = s;
        char **p = s ? realloc(c->paths, n * sizeof *p) : NULL;
        if (!p) return kr_error(KR_ERR_NOMEM, "out of memory reading %s", c->rgb_txt);
        c->paths = p;
        *cap = n;
    }
    size_t len = strlen(dir) + strlen(rel) + 2;
    char *path = malloc(len);
    if (!path) return kr_error(KR_ERR_NOMEM, "out of memory reading %s", c->rgb_txt);
    snprintf(path, len, rel[0] == '/' ? "%s%s" : "%s/%s", rel[0] == '/' ? "" : dir, rel);
    c->stamps[c->n] = stamp;
    c->paths[c->n++] = path;
    return KR_OK;
}

kr_status kr_tum_colour_open(kr_tum_colour *c, const char *dir)
{
    memset(c, 0, sizeof *c);
    if ((size_t)snprintf(c->rgb_txt, sizeof c->rgb_txt, "%s/rgb.txt", dir) >= sizeof c->rgb_txt)
        return kr_error(KR_ERR_INVALID_ARG, "directory name too long: %s", dir);
    if (access(c->rgb_txt, F_OK) != 0) return KR_OK;
    char why[160];
    FILE *f = kr_fopen_regular(c->rgb_txt, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "cannot open %s: %s", c->rgb_txt, why);
    char *line = NULL;
    size_t line_cap = 0, cap = 0;
    unsigned lineno = 0;
    kr_status st = KR_OK;
    while (st == KR_OK && getline(&line, &line_cap, f) >= 0) {
        lineno++;
        char *p = line, *end;
        while (isspace((unsigned char)*p))
            p++;
        if (*p == '\0' || *p == '#') continue;
        size_t len = strlen(p);
        while (len && isspace((unsigned char)p[len - 1]))
            p[--len] = '\0';
        errno = 0;
        double stamp = strtod(p, &end);
        char *rel = end;
        while (isspace((unsigned char)*rel))
            rel++;
        if (end == p || errno == ERANGE || !isfinite(stamp) || fabs(stamp) > 1e10 ||
            !isspace((unsigned char)*end) || *rel == '\0')
            st = kr_error(KR_ERR_FORMAT,
                          "%s:%u: malformed line '%.80s': expected 'timestamp path/to/rgb.png'",
                          c->rgb_txt, lineno, p);
        else if (c->n && stamp < c->stamps[c->n - 1])
            st = kr_error(KR_ERR_ORDER,
                          "%s:%u: timestamp %.6f goes backwards: rgb.txt must be "
                          "sorted by time",
                          c->rgb_txt, lineno, stamp);
        else
            st = add(c, &cap, stamp, dir, rel);
    }
    free(line);
    fclose(f);
    if (st != KR_OK) kr_tum_colour_free(c);
    return st;
}

void kr_tum_colour_free(kr_tum_colour *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->paths[i]);
    free(c->paths);
    free(c->stamps);
    c->paths = NULL;
    c->stamps = NULL;
    c->n = 0;
}

long kr_tum_colour_nearest(const kr_tum_colour *c, double stamp)
{
    size_t lo = 0, hi = c->n; /* the first stamp >= stamp */
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (c->stamps[mid] < stamp)
            lo = mid + 1;
        else
            hi = mid;
    }
    long best = -1;
    double gap = KR_TUM_COLOUR_MAX_DT;
    if (lo < c->n && c->stamps[lo] - stamp <= gap) best = (long)lo, gap = c->stamps[lo] - stamp;
    if (lo > 0 && stamp - c->stamps[lo - 1] <= gap) best = (long)lo - 1;
    return best;
}

uint8_t *kr_tum_colour_read(kr_tum_colour *c, long i, int width, int height)
{
    char where[PATH_MAX + 32];
    snprintf(where, sizeof where, "%s (image %ld)", c->rgb_txt, i + 1);
    uint8_t *rgb = NULL;
    if (kr_png_read_rgb8(c->paths[i], where, width, height, &rgb) == KR_OK) return rgb;
    if (c->failed++ == 0)
        kr_log(KR_LOG_WARN, "%s; frames whose colour cannot be read go without it",
               kr_last_error());
    return NULL;
}
