/* ASCII PLY vertex reader. The header is read generically (any elements, any
 * scalar properties, in any order); only the vertex element's rows are parsed,
 * elements before it are skipped line by line and elements after it are not
 * read at all. One item per line, as every ASCII PLY writer produces.
 *
 * The header's counts are claims, not facts: before anything is allocated
 * they are checked against the bytes the file still holds (a vertex line of
 * p values takes at least 2p bytes, any other item line at least 1), and the
 * point array grows as vertices are actually read, so a 100-byte file that
 * claims 200 million vertices costs nothing (found by tests/fuzz/fuzz_ply). */
#include "kinreg/scan.h"

#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define PLY_MAX_ELEMENTS 32
#define PLY_MAX_PROPS 64

typedef struct {
    char name[64];
    unsigned long long count;
    int props;
    int has_list;
    int xyz[3]; /* property positions of x, y, z (−1 when absent) */
} ply_element;

/* Strips trailing white space (also a CR of files written on Windows). */
static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = 0;
}

static kr_status read_header(FILE *f, const char *path, long *lineno, ply_element *el, int *n_el,
                             char **line, size_t *cap)
{
    int ne = 0;
    bool have_format = false;
    for (;;) {
        if (getline(line, cap, f) < 0)
            return kr_error(KR_ERR_FORMAT, "%s:%ld: header ends without end_header", path, *lineno);
        (*lineno)++;
        chomp(*line);
        char *s = *line, kw[32] = "", a[64] = "", b[64] = "", c[64] = "";
        int nt = sscanf(s, "%31s %63s %63s %63s", kw, a, b, c);
        if (*lineno == 1) {
            if (strcmp(s, "ply") != 0)
                return kr_error(KR_ERR_FORMAT, "%s:1: not a PLY file (no 'ply' magic)", path);
            continue;
        }
        if (nt <= 0) continue;
        if (!strcmp(kw, "end_header")) break;
        if (!strcmp(kw, "comment") || !strcmp(kw, "obj_info")) continue;
        if (!strcmp(kw, "format")) {
            if (nt < 3)
                return kr_error(KR_ERR_FORMAT, "%s:%ld: malformed format line", path, *lineno);
            if (strcmp(a, "ascii") != 0)
                return kr_error(KR_ERR_UNSUPPORTED,
                                "%s:%ld: PLY format '%s' is not supported (ascii only)", path,
                                *lineno, a);
            have_format = true;
        } else if (!strcmp(kw, "element")) {
            char *end;
            errno = 0;
            unsigned long long cnt = nt >= 3 ? strtoull(b, &end, 10) : 0;
            if (nt < 3 || *end || errno || b[0] == '-')
                return kr_error(KR_ERR_FORMAT, "%s:%ld: malformed element line '%s'", path, *lineno,
                                s);
            if (ne == PLY_MAX_ELEMENTS)
                return kr_error(KR_ERR_FORMAT, "%s:%ld: more than %d elements", path, *lineno,
                                PLY_MAX_ELEMENTS);
            ply_element *e = &el[ne++];
            memset(e, 0, sizeof *e);
            snprintf(e->name, sizeof e->name, "%s", a);
            e->count = cnt;
            e->xyz[0] = e->xyz[1] = e->xyz[2] = -1;
        } else if (!strcmp(kw, "property")) {
            if (ne == 0)
                return kr_error(KR_ERR_FORMAT, "%s:%ld: property before any element", path,
                                *lineno);
            ply_element *e = &el[ne - 1];
            if (nt < 3)
                return kr_error(KR_ERR_FORMAT, "%s:%ld: malformed property line '%s'", path,
                                *lineno, s);
            if (!strcmp(a, "list")) {
                e->has_list = 1;
            } else {
                for (int k = 0; k < 3; k++)
                    if (!strcmp(b, (const char *[]){"x", "y", "z"}[k])) e->xyz[k] = e->props;
            }
            if (++e->props > PLY_MAX_PROPS)
                return kr_error(KR_ERR_FORMAT, "%s:%ld: more than %d properties", path, *lineno,
                                PLY_MAX_PROPS);
        } else {
            return kr_error(KR_ERR_FORMAT, "%s:%ld: unknown header keyword '%s'", path, *lineno,
                            kw);
        }
    }
    if (!have_format)
        return kr_error(KR_ERR_FORMAT, "%s:%ld: header has no format line", path, *lineno);
    *n_el = ne;
    return KR_OK;
}

/* Grows *xyz (3 floats per vertex) to hold at least `need` vertices. */
static kr_status grow_points(float **xyz, size_t *have, size_t need, const char *path)
{
    if (need <= *have) return KR_OK;
    size_t cap = *have ? *have : 4096;
    while (cap < need)
        cap *= 2;
    float *p = realloc(*xyz, cap * 3 * sizeof *p);
    if (!p) return kr_error(KR_ERR_NOMEM, "%s: no memory for %zu vertices", path, cap);
    *xyz = p;
    *have = cap;
    return KR_OK;
}

static kr_status read_vertices(FILE *f, const char *path, long *lineno, const ply_element *e,
                               float **out, char **line, size_t *cap)
{
    size_t have = 0;
    float *xyz = NULL;
    kr_status st = grow_points(&xyz, &have, 1, path);
    if (st != KR_OK) return st;
    *out = xyz;
    for (unsigned long long i = 0; i < e->count; i++) {
        if ((st = grow_points(out, &have, (size_t)i + 1, path)) != KR_OK) return st;
        xyz = *out;
        if (getline(line, cap, f) < 0)
            return kr_error(KR_ERR_FORMAT, "%s:%ld: file ends after %llu of %llu vertices", path,
                            *lineno, i, e->count);
        (*lineno)++;
        char *p = *line;
        for (int k = 0; k < e->props; k++) {
            char *end;
            double v = strtod(p, &end);
            if (end == p)
                return kr_error(KR_ERR_FORMAT, "%s:%ld: vertex %llu has %d values, expected %d",
                                path, *lineno, i, k, e->props);
            for (int a = 0; a < 3; a++)
                if (e->xyz[a] == k) {
                    if (!isfinite(v) || fabs(v) > 3.0e38)
                        return kr_error(KR_ERR_FORMAT,
                                        "%s:%ld: vertex %llu has a non-finite coordinate", path,
                                        *lineno, i);
                    xyz[3 * i + a] = (float)v;
                }
            p = end;
        }
    }
    return KR_OK;
}

/* Refuses element counts that the rest of the file cannot hold: items of
 * elements before the vertex element take at least 1 byte (a line), vertices
 * at least 2 bytes per property ("0 " or "0\n"), the very last newline may
 * be missing. Files whose size is unknown (pipes) are not checked here; the
 * reader then only allocates for vertices it has read. */
static kr_status check_counts(FILE *f, const char *path, const ply_element *el, int v)
{
    struct stat sb;
    long pos = ftell(f);
    if (fstat(fileno(f), &sb) != 0 || !S_ISREG(sb.st_mode) || pos < 0) return KR_OK;
    unsigned long long left = sb.st_size > pos ? (unsigned long long)(sb.st_size - pos) : 0;
    unsigned long long need = 0; /* minimum bytes, saturating at left + 2 */
    for (int i = 0; i <= v && need <= left + 1; i++) {
        unsigned long long per = i == v ? 2ull * (unsigned)el[i].props : 1ull;
        if (per == 0) continue;
        unsigned long long room = left + 2 - need; /* > 0 here */
        need = el[i].count >= room / per + 1 ? left + 2 : need + el[i].count * per;
    }
    if (need > left + 1)
        return kr_error(KR_ERR_FORMAT,
                        "%s: the header claims %llu vertices (element '%s' and those before it), "
                        "but only %llu bytes follow the header: the file is truncated or its "
                        "header is wrong",
                        path, el[v].count, el[v].name, left);
    return KR_OK;
}

kr_status kr_scan_read_ply(const char *path, float **xyz, size_t *n)
{
    if (!path || !xyz || !n) return kr_error(KR_ERR_INVALID_ARG, "kr_scan_read_ply: NULL argument");
    FILE *f = fopen(path, "r");
    if (!f) return kr_error(KR_ERR_IO, "cannot open %s: %s", path, strerror(errno));
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    ply_element el[PLY_MAX_ELEMENTS];
    int ne = 0;
    float *pts = NULL;
    kr_status st = read_header(f, path, &lineno, el, &ne, &line, &cap);
    int v = -1;
    for (int i = 0; st == KR_OK && i < ne && v < 0; i++)
        if (!strcmp(el[i].name, "vertex")) v = i;
    if (st == KR_OK && v < 0)
        st = kr_error(KR_ERR_FORMAT, "%s: no vertex element in the header", path);
    if (st == KR_OK && (el[v].xyz[0] < 0 || el[v].xyz[1] < 0 || el[v].xyz[2] < 0))
        st = kr_error(KR_ERR_FORMAT, "%s: the vertex element lacks an x, y or z property", path);
    if (st == KR_OK && el[v].has_list)
        st = kr_error(KR_ERR_UNSUPPORTED,
                      "%s: list properties in the vertex element are not supported", path);
    if (st == KR_OK) st = check_counts(f, path, el, v);
    if (st == KR_OK && el[v].count > ((size_t)-1) / (3 * sizeof(float)))
        st = kr_error(KR_ERR_FORMAT, "%s: vertex count %llu is too large", path, el[v].count);
    /* Skip the items of earlier elements, one line each. */
    for (int i = 0; st == KR_OK && i < v; i++)
        for (unsigned long long k = 0; st == KR_OK && k < el[i].count; k++) {
            if (getline(&line, &cap, f) < 0)
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: file ends inside element '%s'", path, lineno,
                              el[i].name);
            lineno++;
        }
    if (st == KR_OK) st = read_vertices(f, path, &lineno, &el[v], &pts, &line, &cap);
    if (st == KR_OK && ferror(f)) st = kr_error(KR_ERR_IO, "%s: read error", path);
    free(line);
    fclose(f);
    if (st != KR_OK) {
        free(pts);
        return st;
    }
    *xyz = pts;
    *n = (size_t)el[v].count;
    return KR_OK;
}
