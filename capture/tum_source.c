/* TUM RGB-D replay: DIR/depth.txt lists `timestamp path` lines of 16-bit PNG
 * depth images (value / 5000 = metres); DIR/groundtruth.txt, when present, is
 * the motion-capture trajectory. Intrinsics: the caller's, else
 * DIR/kinreg-intrinsics.txt (a kinreg recording or conversion), else a preset
 * guessed from the directory name, with a warning. depth.txt is parsed whole at open, so a
 * malformed line or a timestamp going backwards fails before any frame is
 * read; PNG problems surface per frame, where skip_bad can skip them. */
#include "capture/png_depth.h"
#include "capture/tum_colour.h"
#include "capture/intrinsics_file.h"
#include "capture/prefetch.h"
#include "core/files.h"
#include "capture/source_impl.h"

#include <ctype.h>
#include <errno.h>
#include <libgen.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TUM_DEFAULT_SCALE 5000.0f

typedef struct {
    double stamp;
    unsigned line; /* in depth.txt, for messages */
    char *path;    /* resolved against DIR */
} tum_entry;

typedef struct {
    char depth_txt[PATH_MAX];
    tum_entry *entries;
    size_t count, cap, next;
    float scale;
    int width, height;
    kr_png_reader png;
    kr_prefetch *prefetch; /* decoders running ahead (NULL: decode on demand) */
    bool colour;           /* deliver the colour stream (kr_source_config.colour) */
    kr_tum_colour rgb;
} tum_source;

static void tum_free(tum_source *t)
{
    if (!t) return;
    kr_prefetch_stop(&t->prefetch); /* joins the decoders before their entries go */
    for (size_t i = 0; i < t->count; i++)
        free(t->entries[i].path);
    free(t->entries);
    kr_png_reader_free(&t->png);
    kr_tum_colour_free(&t->rgb);
    free(t);
}

static kr_status add_entry(tum_source *t, double stamp, unsigned line, const char *dir,
                           const char *rel)
{
    if (t->count == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        tum_entry *p = realloc(t->entries, cap * sizeof *p);
        if (!p) return kr_error(KR_ERR_NOMEM, "out of memory reading %s", t->depth_txt);
        t->entries = p;
        t->cap = cap;
    }
    size_t n = strlen(dir) + strlen(rel) + 2;
    char *path = malloc(n);
    if (!path) return kr_error(KR_ERR_NOMEM, "out of memory reading %s", t->depth_txt);
    if (rel[0] == '/')
        snprintf(path, n, "%s", rel);
    else
        snprintf(path, n, "%s/%s", dir, rel);
    t->entries[t->count++] = (tum_entry){stamp, line, path};
    return KR_OK;
}

/* One depth.txt line: `timestamp path`. Trims the line in place. */
static kr_status parse_line(tum_source *t, const char *dir, char *line, unsigned lineno,
                            double *prev, unsigned *prev_line)
{
    size_t len = strlen(line);
    while (len && isspace((unsigned char)line[len - 1]))
        line[--len] = '\0';
    char *p = line;
    while (isspace((unsigned char)*p))
        p++;
    if (*p == '\0' || *p == '#') return KR_OK;

    char *end;
    errno = 0;
    double stamp = strtod(p, &end);
    /* A stamp is seconds (Unix time is 1.7e9; 1e10 is the year 2286), as a
     * trajectory's: a value past that is no frame's time. */
    bool ok = end != p && errno != ERANGE && isfinite(stamp) && fabs(stamp) <= 1e10 &&
              isspace((unsigned char)*end);
    char *rel = end;
    while (ok && isspace((unsigned char)*rel))
        rel++;
    if (!ok || *rel == '\0')
        return kr_error(KR_ERR_FORMAT,
                        "%s:%u: malformed line '%.80s': expected 'timestamp path/to/depth.png' "
                        "(timestamps in seconds, within +-1e10)",
                        t->depth_txt, lineno, p);
    if (t->count && stamp < *prev)
        return kr_error(KR_ERR_ORDER,
                        "%s:%u: timestamp %.6f goes backwards (line %u has %.6f): depth.txt must "
                        "be sorted by time",
                        t->depth_txt, lineno, stamp, *prev_line, *prev);
    *prev = stamp;
    *prev_line = lineno;
    return add_entry(t, stamp, lineno, dir, rel);
}

static kr_status parse_depth_txt(tum_source *t, const char *dir)
{
    char why[160];
    FILE *f = kr_fopen_regular(t->depth_txt, why, sizeof why);
    if (!f)
        return kr_error(KR_ERR_IO,
                        "cannot open %s: %s: give a TUM RGB-D sequence directory containing "
                        "depth.txt",
                        t->depth_txt, why);
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0, prev_line = 0;
    double prev = 0;
    kr_status st = KR_OK;
    while (st == KR_OK && getline(&line, &cap, f) >= 0)
        st = parse_line(t, dir, line, ++lineno, &prev, &prev_line);
    if (st == KR_OK && ferror(f))
        st = kr_error(KR_ERR_IO, "%s:%u: read error: %s", t->depth_txt, lineno, strerror(errno));
    free(line);
    fclose(f);
    if (st == KR_OK && t->count == 0)
        st = kr_error(KR_ERR_FORMAT, "%s lists no frames: expected 'timestamp path' lines",
                      t->depth_txt);
    return st;
}

/* The Freiburg sequence a directory name refers to ("rgbd_dataset_freiburg1_xyz",
 * "fr1_xyz_head"), whose calibration fits it best; "default" otherwise. */
static const char *guess_preset(const char *dir)
{
    char real[PATH_MAX];
    if (!realpath(dir, real)) snprintf(real, sizeof real, "%s", dir);
    const char *base = basename(real);
    static const char *const names[][3] = {
        {"freiburg1", "fr1", "fr1"}, {"freiburg2", "fr2", "fr2"}, {"freiburg3", "fr3", "fr3"}};
    for (int i = 0; i < 3; i++)
        if (strstr(base, names[i][0]) || strncmp(base, names[i][1], 3) == 0) return names[i][2];
    return "default";
}

/* Entry i's samples; also run by the decoder threads (reads t only). */
static kr_status tum_decode(const void *user, size_t i, kr_png_reader *png, uint16_t **raw)
{
    const tum_source *t = user;
    const tum_entry *e = &t->entries[i];
    char where[PATH_MAX + 16];
    snprintf(where, sizeof where, "%s:%u", t->depth_txt, e->line);
    return kr_png_read_depth16(png, e->path, where, t->width, t->height, raw);
}

static kr_status tum_read(kr_source *src, kr_frame *frame)
{
    tum_source *t = src->impl;
    for (;;) {
        if (t->next >= t->count) return KR_END;
        size_t i = t->next++;
        const tum_entry *e = &t->entries[i];
        uint16_t *raw = NULL;
        kr_status st = t->prefetch ? kr_prefetch_take(t->prefetch, i, &raw)
                                   : tum_decode(t, i, &t->png, &raw);
        if (st == KR_OK) {
            frame->timestamp = e->stamp;
            frame->width = src->intrinsics.width;
            frame->height = src->intrinsics.height;
            frame->encoding = KR_DEPTH_SCALED;
            frame->depth_scale = t->scale;
            frame->raw = raw;
            long c = t->colour ? kr_tum_colour_nearest(&t->rgb, e->stamp) : -1;
            if (c >= 0) frame->rgb = kr_tum_colour_read(&t->rgb, c, t->width, t->height);
            return KR_OK;
        }
        if (!kr_source_skip_corrupt(src, st)) return st;
    }
}

static bool tum_skip(kr_source *src)
{
    tum_source *t = src->impl;
    if (t->next >= t->count) return false;
    t->next++;
    return true;
}

static void tum_close(kr_source *src)
{
    tum_free(src->impl);
    src->impl = NULL;
}

static const kr_source_ops tum_ops = {.name = "tum", .read = tum_read, .close = tum_close, .skip = tum_skip};

kr_status kr_tum_open(kr_source *src, const char *dir, const kr_source_config *cfg,
                      const kr_intrinsics *want)
{
    if (!dir || !dir[0])
        return kr_error(KR_ERR_INVALID_ARG, "tum: needs a directory, as in tum:/data/fr1_xyz");
    if (!(cfg->depth_scale >= 0) || !isfinite(cfg->depth_scale))
        return kr_error(KR_ERR_INVALID_ARG,
                        "depth scale %g is invalid: give units per metre (TUM 5000) or 0 for the "
                        "default",
                        cfg->depth_scale);
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return kr_error(KR_ERR_IO,
                        "no such directory %s: give a TUM RGB-D sequence directory containing "
                        "depth.txt",
                        dir);
    tum_source *t = calloc(1, sizeof *t);
    if (!t) return kr_error(KR_ERR_NOMEM, "out of memory opening %s", dir);
    t->scale = cfg->depth_scale > 0 ? cfg->depth_scale : TUM_DEFAULT_SCALE;
    if ((size_t)snprintf(t->depth_txt, sizeof t->depth_txt, "%s/depth.txt", dir) >=
        sizeof t->depth_txt) {
        tum_free(t);
        return kr_error(KR_ERR_INVALID_ARG, "directory name too long: %s", dir);
    }
    kr_status st = parse_depth_txt(t, dir);
    if (st != KR_OK) {
        tum_free(t);
        return st;
    }

    char gt[PATH_MAX];
    snprintf(gt, sizeof gt, "%s/groundtruth.txt", dir);
    if (access(gt, F_OK) == 0) {
        st = kr_trajectory_read_tum(gt, &src->groundtruth);
        if (st != KR_OK) {
            tum_free(t);
            return st;
        }
        src->has_groundtruth = true;
    }

    if (cfg->depth_scale > 0)
        snprintf(src->depth_origin, sizeof src->depth_origin, "%g units/m, as given (--depth-scale)",
                 (double)cfg->depth_scale);
    else
        snprintf(src->depth_origin, sizeof src->depth_origin, "%g units/m (TUM default)",
                 (double)TUM_DEFAULT_SCALE);
    char sidecar[PATH_MAX + 32];
    snprintf(sidecar, sizeof sidecar, "%s/" KR_INTRINSICS_FILE, dir);
    if (want) {
        src->intrinsics = *want;
    } else if (access(sidecar, F_OK) == 0) {
        /* A recording or conversion by kinreg carries its intrinsics. */
        st = kr_intrinsics_file_read(sidecar, &src->intrinsics);
        if (st != KR_OK) {
            tum_free(t);
            return st;
        }
        snprintf(src->intrinsics_origin, sizeof src->intrinsics_origin, "file %.500s", sidecar);
    } else {
        const char *name = guess_preset(dir);
        kr_intrinsics_preset(name, &src->intrinsics);
        bool guessed = strcmp(name, "default") != 0;
        snprintf(src->intrinsics_origin, sizeof src->intrinsics_origin, "preset %s, %s", name,
                 guessed ? "from the directory name" : "no kinreg-intrinsics.txt and no Freiburg name");
        kr_log(KR_LOG_WARN,
               "tum:%s has no " KR_INTRINSICS_FILE ": using the %s preset (fx %g)%s; give --intrinsics "
               "if the camera differs",
               dir, name, (double)src->intrinsics.fx, guessed ? " named by the directory" : "");
    }
    t->width = src->intrinsics.width;
    t->height = src->intrinsics.height;
    if (cfg->colour) {
        if ((st = kr_tum_colour_open(&t->rgb, dir)) != KR_OK) {
            tum_free(t);
            return st;
        }
        t->colour = true;
        if (t->rgb.n == 0)
            kr_log(KR_LOG_INFO, "tum:%s has no rgb.txt: no colour (depth only)", dir);
    }
    /* PNG decoding is the replay's bottleneck with a fast backend: decode
     * ahead on spare cores, in order (none on a 2-core machine, where the
     * tracker needs both). The decoders walk every entry in order, so a
     * stride (every K-th frame, the rest passed over unread) decodes on
     * demand instead. */
    int workers = cfg->stride > 1 ? 0 : kr_prefetch_default_workers();
    if (workers > 0 &&
        kr_prefetch_start(&t->prefetch, workers, 4 * workers, t->count, tum_decode, t) != KR_OK) {
        kr_log(KR_LOG_WARN, "tum:%s: decoding on demand (%s)", dir, kr_last_error());
        t->prefetch = NULL;
    }
    src->ops = &tum_ops;
    src->impl = t;
    src->length = (unsigned)t->count;
    snprintf(src->description, sizeof src->description, "tum:%s (%zu frames)", dir, t->count);
    return KR_OK;
}
