/* PLY reader and writer (core/ply.h). */
#include "core/ply.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/files.h"

#define PLY_MAX_ELEMENTS 32
#define PLY_MAX_PROPS 64

typedef enum { T_NONE = 0, T_I8, T_U8, T_I16, T_U16, T_I32, T_U32, T_F32, T_F64 } ply_type;

static const struct {
    const char *name, *alias;
    ply_type type;
    int size;
} ply_types[] = {
    {"char", "int8", T_I8, 1},      {"uchar", "uint8", T_U8, 1},     {"short", "int16", T_I16, 2},
    {"ushort", "uint16", T_U16, 2}, {"int", "int32", T_I32, 4},      {"uint", "uint32", T_U32, 4},
    {"float", "float32", T_F32, 4}, {"double", "float64", T_F64, 8},
};

static int type_size(ply_type t)
{
    for (size_t i = 0; i < sizeof ply_types / sizeof ply_types[0]; i++)
        if (ply_types[i].type == t) return ply_types[i].size;
    return 0;
}

static ply_type parse_type(const char *s)
{
    for (size_t i = 0; i < sizeof ply_types / sizeof ply_types[0]; i++)
        if (!strcmp(s, ply_types[i].name) || !strcmp(s, ply_types[i].alias))
            return ply_types[i].type;
    return T_NONE;
}

typedef struct {
    ply_type type;       /* scalar type, or the list's item type */
    ply_type count_type; /* T_NONE for a scalar */
    char name[64];
} ply_prop;

typedef struct {
    char name[64];
    unsigned long long count;
    int n_props;
    ply_prop props[PLY_MAX_PROPS];
} ply_element;

enum { FMT_ASCII, FMT_LE, FMT_BE };

typedef struct {
    FILE *f;
    const char *path;
    long line;    /* ASCII: the line of the last token read (1-based, header included) */
    long pending; /* ASCII: newlines passed since that token */
    int format;
    int n_el;
    ply_element el[PLY_MAX_ELEMENTS];
    long skipped_line;   /* the first header line not understood (0: none) */
    char skipped_kw[32]; /* and its first word, for the error that may follow */
} ply_reader;

/* Strips trailing white space (also a CR of files written on Windows). */
static void chomp(char *s)
{
    size_t n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = 0;
}

static kr_status read_header(ply_reader *r)
{
    char *line = NULL;
    size_t cap = 0;
    kr_status st = KR_OK;
    bool have_format = false;
    for (;;) {
        if (getline(&line, &cap, r->f) < 0) {
            st =
                kr_error(KR_ERR_FORMAT, "%s:%ld: header ends without end_header", r->path, r->line);
            break;
        }
        r->line++;
        chomp(line);
        char kw[32] = "", a[64] = "", b[64] = "", c[64] = "", d[64] = "";
        int nt = sscanf(line, "%31s %63s %63s %63s %63s", kw, a, b, c, d);
        if (r->line == 1) {
            if (strcmp(line, "ply") != 0) {
                st = kr_error(KR_ERR_FORMAT, "%s:1: not a PLY file (no 'ply' magic)", r->path);
                break;
            }
            continue;
        }
        if (nt <= 0) continue;
        if (!strcmp(kw, "end_header")) break;
        if (!strcmp(kw, "comment") || !strcmp(kw, "obj_info")) continue;
        if (!strcmp(kw, "format")) {
            if (nt < 3) {
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: malformed format line", r->path, r->line);
                break;
            }
            if (!strcmp(a, "ascii"))
                r->format = FMT_ASCII;
            else if (!strcmp(a, "binary_little_endian"))
                r->format = FMT_LE;
            else if (!strcmp(a, "binary_big_endian"))
                r->format = FMT_BE;
            else {
                st =
                    kr_error(KR_ERR_FORMAT, "%s:%ld: unknown PLY format '%s'", r->path, r->line, a);
                break;
            }
            have_format = true;
        } else if (!strcmp(kw, "element")) {
            char *end;
            errno = 0;
            unsigned long long cnt = nt >= 3 ? strtoull(b, &end, 10) : 0;
            if (nt < 3 || *end || errno || b[0] == '-') {
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: malformed element line '%s'", r->path,
                              r->line, line);
                break;
            }
            if (r->n_el == PLY_MAX_ELEMENTS) {
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: more than %d elements", r->path, r->line,
                              PLY_MAX_ELEMENTS);
                break;
            }
            ply_element *e = &r->el[r->n_el++];
            memset(e, 0, sizeof *e);
            snprintf(e->name, sizeof e->name, "%s", a);
            e->count = cnt;
        } else if (!strcmp(kw, "property")) {
            if (r->n_el == 0) {
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: property before any element", r->path,
                              r->line);
                break;
            }
            ply_element *e = &r->el[r->n_el - 1];
            if (e->n_props == PLY_MAX_PROPS) {
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: more than %d properties", r->path, r->line,
                              PLY_MAX_PROPS);
                break;
            }
            ply_prop *p = &e->props[e->n_props];
            bool list = nt >= 5 && !strcmp(a, "list");
            p->count_type = list ? parse_type(b) : T_NONE;
            p->type = parse_type(list ? c : a);
            snprintf(p->name, sizeof p->name, "%s", list ? d : b);
            if ((!list && nt < 3) || p->type == T_NONE || (list && p->count_type == T_NONE) ||
                (list && (p->count_type == T_F32 || p->count_type == T_F64))) {
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: malformed property line '%s'", r->path,
                              r->line, line);
                break;
            }
            e->n_props++;
        } else if (r->skipped_line == 0) {
            /* Any other line is skipped like a comment: real files carry
             * lines the format does not define (the Stanford repository's
             * Happy Buddha scans have three 'bye' lines before their first
             * element). The first is remembered for the error a misspelt
             * keyword would cause later. */
            r->skipped_line = r->line;
            snprintf(r->skipped_kw, sizeof r->skipped_kw, "%s", kw);
        }
    }
    free(line);
    if (st == KR_OK && !have_format)
        st = kr_error(KR_ERR_FORMAT, "%s:%ld: header has no format line", r->path, r->line);
    return st;
}

/* ---- values ---------------------------------------------------------------- */

/* The next white-space separated token of an ASCII body; r->line becomes
 * the line it is on (the last token's line at the end of the file). */
static bool next_token(ply_reader *r, char *tok, size_t size)
{
    int ch;
    while ((ch = getc_unlocked(r->f)) != EOF && isspace(ch))
        r->pending += ch == '\n';
    if (ch == EOF) return false;
    r->line += r->pending;
    r->pending = 0;
    size_t n = 0;
    do {
        if (n + 1 < size) tok[n++] = (char)ch;
    } while ((ch = getc_unlocked(r->f)) != EOF && !isspace(ch));
    if (ch == '\n') ungetc(ch, r->f);
    tok[n] = 0;
    return true;
}

/* True at the end of the data (only white space left). */
static bool at_end(ply_reader *r)
{
    int ch;
    if (r->format != FMT_ASCII) {
        if ((ch = getc_unlocked(r->f)) == EOF) return true;
        ungetc(ch, r->f);
        return false;
    }
    while ((ch = getc_unlocked(r->f)) != EOF && isspace(ch))
        r->pending += ch == '\n';
    if (ch == EOF) return true;
    ungetc(ch, r->f);
    return false;
}

/* One value of type t, as a double. */
static kr_status read_value(ply_reader *r, ply_type t, double *v, const char *what)
{
    if (r->format == FMT_ASCII) {
        char tok[128], *end;
        if (!next_token(r, tok, sizeof tok))
            return kr_error(KR_ERR_FORMAT, "%s:%ld: file ends inside %s", r->path, r->line, what);
        *v = strtod(tok, &end);
        if (end == tok || *end)
            return kr_error(KR_ERR_FORMAT, "%s:%ld: '%.32s' in %s is not a number", r->path,
                            r->line, tok, what);
        return KR_OK;
    }
    unsigned char b[8];
    int n = type_size(t);
    if (fread(b, 1, (size_t)n, r->f) != (size_t)n)
        return kr_error(ferror(r->f) ? KR_ERR_IO : KR_ERR_FORMAT, "%s: file ends inside %s",
                        r->path, what);
    uint64_t u = 0;
    for (int k = 0; k < n; k++)
        u |= (uint64_t)b[r->format == FMT_LE ? k : n - 1 - k] << (8 * k);
    switch (t) {
    case T_I8:
        *v = (int8_t)u;
        break;
    case T_U8:
        *v = (uint8_t)u;
        break;
    case T_I16:
        *v = (int16_t)u;
        break;
    case T_U16:
        *v = (uint16_t)u;
        break;
    case T_I32:
        *v = (int32_t)u;
        break;
    case T_U32:
        *v = (uint32_t)u;
        break;
    case T_F32: {
        uint32_t w = (uint32_t)u;
        float f;
        memcpy(&f, &w, sizeof f);
        *v = f;
        break;
    }
    case T_F64:
        memcpy(v, &u, sizeof *v);
        break;
    default:
        return kr_error(KR_ERR_FORMAT, "%s: bad property type", r->path);
    }
    return KR_OK;
}

/* Reads (and drops) one item of element e, or the values of its scalar
 * properties into vals (NULL: drop). */
static kr_status read_item(ply_reader *r, const ply_element *e, double *vals, const char *what)
{
    for (int k = 0; k < e->n_props; k++) {
        const ply_prop *p = &e->props[k];
        double v;
        kr_status st;
        if (p->count_type == T_NONE) {
            if ((st = read_value(r, p->type, &v, what)) != KR_OK) return st;
            if (vals) vals[k] = v;
            continue;
        }
        if ((st = read_value(r, p->count_type, &v, what)) != KR_OK) return st;
        if (!(v >= 0) || v > 1e6)
            return kr_error(KR_ERR_FORMAT, "%s:%ld: list of %g items in %s", r->path, r->line, v,
                            what);
        for (long i = 0; i < (long)v; i++)
            if ((st = read_value(r, p->type, &(double){0}, what)) != KR_OK) return st;
        if (vals) vals[k] = NAN;
    }
    return KR_OK;
}

/* The fewest bytes an item of e can take: binary, its scalars' sizes and its
 * lists' counts; ASCII, two per value ("0 "). */
static unsigned long long min_item_bytes(const ply_reader *r, const ply_element *e)
{
    unsigned long long n = 0;
    for (int k = 0; k < e->n_props; k++) {
        const ply_prop *p = &e->props[k];
        n += r->format == FMT_ASCII
                 ? 2
                 : (unsigned)type_size(p->count_type != T_NONE ? p->count_type : p->type);
    }
    return n;
}

/* Refuses element counts that the rest of the file cannot hold (the very
 * last separator may be missing). Files whose size is unknown are not
 * checked here; arrays then grow only for vertices actually read. */
static kr_status check_counts(ply_reader *r, int v)
{
    struct stat sb;
    long pos = ftell(r->f);
    if (fstat(fileno(r->f), &sb) != 0 || !S_ISREG(sb.st_mode) || pos < 0) return KR_OK;
    unsigned long long left = sb.st_size > pos ? (unsigned long long)(sb.st_size - pos) : 0;
    unsigned long long need = 0; /* minimum bytes, saturating at left + 2 */
    for (int i = 0; i <= v && need <= left + 1; i++) {
        unsigned long long per = min_item_bytes(r, &r->el[i]);
        if (per == 0) continue;
        unsigned long long room = left + 2 - need; /* > 0 here */
        need = r->el[i].count >= room / per + 1 ? left + 2 : need + r->el[i].count * per;
    }
    if (need > left + 1)
        return kr_error(KR_ERR_FORMAT,
                        "%s: the header claims %llu vertices (element '%s' and those before it), "
                        "but only %llu bytes follow the header: the file is truncated or its "
                        "header is wrong",
                        r->path, r->el[v].count, r->el[v].name, left);
    return KR_OK;
}

/* ---- reading ----------------------------------------------------------------- */

static int find_prop(const ply_element *e, const char *const *names)
{
    for (int k = 0; k < e->n_props; k++)
        for (const char *const *n = names; *n; n++)
            if (e->props[k].count_type == T_NONE && !strcmp(e->props[k].name, *n)) return k;
    return -1;
}

/* Grows *a (`per` items of `size` bytes per vertex) to hold at least `need`
 * vertices. */
static kr_status grow(void **a, size_t size, size_t *have, size_t need, const char *path)
{
    if (need <= *have) return KR_OK;
    size_t cap = *have ? *have : 4096;
    while (cap < need)
        cap *= 2;
    void *p = realloc(*a, cap * size);
    if (!p) return kr_error(KR_ERR_NOMEM, "%s: no memory for %zu vertices", path, cap);
    *a = p;
    *have = cap;
    return KR_OK;
}

static kr_status read_vertices(ply_reader *r, const ply_element *e, kr_ply_points *out)
{
    static const char *const xs[] = {"x", NULL}, *const ys[] = {"y", NULL},
                             *const zs[] = {"z", NULL}, *const nxs[] = {"nx", "normal_x", NULL},
                             *const nys[] = {"ny", "normal_y", NULL},
                             *const nzs[] = {"nz", "normal_z", NULL},
                             *const rs[] = {"red", "r", "diffuse_red", NULL},
                             *const gs[] = {"green", "g", "diffuse_green", NULL},
                             *const bs[] = {"blue", "b", "diffuse_blue", NULL};
    int ix[3] = {find_prop(e, xs), find_prop(e, ys), find_prop(e, zs)};
    int in[3] = {find_prop(e, nxs), find_prop(e, nys), find_prop(e, nzs)};
    int ic[3] = {find_prop(e, rs), find_prop(e, gs), find_prop(e, bs)};
    if (ix[0] < 0 || ix[1] < 0 || ix[2] < 0)
        return kr_error(KR_ERR_FORMAT, "%s: the vertex element lacks an x, y or z property",
                        r->path);
    bool normals = in[0] >= 0 && in[1] >= 0 && in[2] >= 0;
    bool colours = ic[0] >= 0 && ic[1] >= 0 && ic[2] >= 0;
    /* Float colours are fractions of full intensity. */
    bool colour_fraction =
        colours && (e->props[ic[0]].type == T_F32 || e->props[ic[0]].type == T_F64);
    size_t have_p = 0, have_n = 0, have_c = 0;
    kr_ply_points p = {0};
    kr_status st = KR_OK;
    double vals[PLY_MAX_PROPS];
    char what[64];
    for (unsigned long long i = 0; st == KR_OK && i < e->count; i++) {
        snprintf(what, sizeof what, "vertex %llu", i);
        if ((st = grow((void **)&p.xyz, 3 * sizeof(float), &have_p, (size_t)i + 1, r->path)) !=
                KR_OK ||
            (normals && (st = grow((void **)&p.normals, 3 * sizeof(float), &have_n, (size_t)i + 1,
                                   r->path)) != KR_OK) ||
            (colours && (st = grow((void **)&p.rgb, 3, &have_c, (size_t)i + 1, r->path)) != KR_OK))
            break;
        if (at_end(r)) {
            st = kr_error(KR_ERR_FORMAT, "%s:%ld: file ends after %llu of %llu vertices", r->path,
                          r->line, i, e->count);
            break;
        }
        if ((st = read_item(r, e, vals, what)) != KR_OK) break;
        for (int a = 0; a < 3; a++) {
            double x = vals[ix[a]];
            if (!isfinite(x) || fabs(x) > 3.0e38) {
                st = kr_error(KR_ERR_FORMAT, "%s:%ld: vertex %llu has a non-finite coordinate",
                              r->path, r->line, i);
                break;
            }
            p.xyz[3 * i + a] = (float)x;
            if (normals) p.normals[3 * i + a] = (float)vals[in[a]];
            if (colours) {
                double c = colour_fraction ? 255.0 * vals[ic[a]] : vals[ic[a]];
                p.rgb[3 * i + a] = (uint8_t)(c <= 0 ? 0 : c >= 255 ? 255 : lround(c));
            }
        }
    }
    if (st != KR_OK) {
        kr_ply_points_free(&p);
        return st;
    }
    p.n = (size_t)e->count;
    p.format = r->format == FMT_ASCII ? "ascii"
               : r->format == FMT_LE  ? "binary_little_endian"
                                      : "binary_big_endian";
    *out = p;
    return KR_OK;
}

kr_status kr_ply_read(const char *path, kr_ply_points *out)
{
    if (!path || !out) return kr_error(KR_ERR_INVALID_ARG, "kr_ply_read: NULL argument");
    ply_reader *r = calloc(1, sizeof *r);
    if (!r) return kr_error(KR_ERR_NOMEM, "no memory to read %s", path);
    r->path = path;
    kr_status st = kr_open_input(path, "the PLY file", &r->f);
    if (st != KR_OK) {
        free(r);
        return st;
    }
    st = read_header(r);
    if (r->format == FMT_ASCII) r->pending = 1; /* the data starts on the next line */
    int v = -1;
    for (int i = 0; st == KR_OK && i < r->n_el && v < 0; i++)
        if (!strcmp(r->el[i].name, "vertex")) v = i;
    if (st == KR_OK && v < 0)
        st = r->skipped_line
                 ? kr_error(KR_ERR_FORMAT,
                            "%s: no vertex element in the header (line %ld, '%s', was skipped "
                            "as unknown)",
                            path, r->skipped_line, r->skipped_kw)
                 : kr_error(KR_ERR_FORMAT, "%s: no vertex element in the header", path);
    if (st == KR_OK) st = check_counts(r, v);
    if (st == KR_OK && r->el[v].count > ((size_t)-1) / (3 * sizeof(float)))
        st = kr_error(KR_ERR_FORMAT, "%s: vertex count %llu is too large", path, r->el[v].count);
    /* The items of earlier elements are read and dropped. An element without
     * properties takes no bytes whatever its count (a fuzzed header claimed
     * 4e18 of them, which the size check cannot refuse): nothing to read. */
    for (int i = 0; st == KR_OK && i < v; i++)
        for (unsigned long long k = 0; st == KR_OK && r->el[i].n_props > 0 && k < r->el[i].count;
             k++)
            st = read_item(r, &r->el[i], NULL, r->el[i].name);
    kr_ply_points p = {0};
    if (st == KR_OK) st = read_vertices(r, &r->el[v], &p);
    if (st == KR_OK && ferror(r->f)) st = kr_error(KR_ERR_IO, "%s: read error", path);
    fclose(r->f);
    free(r);
    if (st != KR_OK) return st;
    *out = p;
    return KR_OK;
}

void kr_ply_points_free(kr_ply_points *p)
{
    if (!p) return;
    free(p->xyz);
    free(p->normals);
    free(p->rgb);
    memset(p, 0, sizeof *p);
}

/* ---- writing ----------------------------------------------------------------- */

/* Little-endian whatever the host's byte order. */
static void put_u32(unsigned char *o, uint32_t u)
{
    for (int b = 0; b < 4; b++)
        o[b] = (unsigned char)(u >> (8 * b));
}

static void put_f32(unsigned char *o, float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    put_u32(o, u);
}

kr_status kr_ply_write(const char *path, const char *what, const kr_ply_data *d)
{
    if (!path || !d || (d->n && !d->xyz) || (d->n_faces && !d->faces))
        return kr_error(KR_ERR_INVALID_ARG, "kr_ply_write: NULL argument");
    if (!what) what = "the PLY file";
    kr_output o;
    kr_status st = kr_output_open(&o, path, what, true);
    if (st != KR_OK) return st;
    fprintf(o.f, "ply\nformat binary_little_endian 1.0\n");
    if (d->comment) fprintf(o.f, "comment %s\n", d->comment);
    fprintf(o.f, "element vertex %zu\nproperty float x\nproperty float y\nproperty float z\n",
            d->n);
    if (d->normals) fprintf(o.f, "property float nx\nproperty float ny\nproperty float nz\n");
    if (d->rgb) fprintf(o.f, "property uchar red\nproperty uchar green\nproperty uchar blue\n");
    if (d->faces)
        fprintf(o.f, "element face %zu\nproperty list uchar int vertex_indices\n", d->n_faces);
    fprintf(o.f, "end_header\n");

    enum { CHUNK = 4096, MAX_VERTEX = 27 };
    unsigned char *buf = malloc(CHUNK * MAX_VERTEX);
    if (!buf) {
        kr_output_abort(&o);
        return kr_error(KR_ERR_NOMEM, "no memory to write %s", what);
    }
    size_t per = 12 + (d->normals ? 12 : 0) + (d->rgb ? 3 : 0), filled = 0;
    for (size_t i = 0; i < d->n; i++) {
        unsigned char *b = buf + filled * per;
        for (int k = 0; k < 3; k++) {
            put_f32(b + 4 * k, d->xyz[3 * i + k]);
            if (d->normals) put_f32(b + 12 + 4 * k, d->normals[3 * i + k]);
            if (d->rgb) b[(d->normals ? 24 : 12) + k] = d->rgb[3 * i + k];
        }
        if (++filled == CHUNK || i + 1 == d->n) {
            fwrite(buf, per, filled, o.f); /* errors show at commit (ferror) */
            filled = 0;
        }
    }
    filled = 0;
    for (size_t i = 0; i < d->n_faces; i++) {
        unsigned char *b = buf + filled * 13;
        b[0] = 3;
        for (int k = 0; k < 3; k++)
            put_u32(b + 1 + 4 * k, d->faces[3 * i + k]);
        if (++filled == CHUNK || i + 1 == d->n_faces) {
            fwrite(buf, 13, filled, o.f);
            filled = 0;
        }
    }
    free(buf);
    return kr_output_commit(&o);
}
