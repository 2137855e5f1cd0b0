/* fakenect:DIR — replays a libfreenect fakenect dump by reading its files
 * directly (no libfreenect needed): DIR/INDEX.txt lists the recorded files in
 * playback order; the depth frames among them, d-<time>-<ticks>.pgm, become
 * KR_DEPTH_DISPARITY11 frames stamped with <time> (host seconds). Colour
 * (r-) and accelerometer (a-) records are ignored. INDEX.txt is parsed whole
 * at open, so a malformed depth name or a timestamp going backwards fails
 * before any frame is read; PGM problems surface per frame, where skip_bad
 * can skip them.
 *
 * Intrinsics: the caller's, else DIR/kinreg-intrinsics.txt when the
 * recorder left one (capture/intrinsics_file.h), else the "kinect" preset
 * (the Kinect v1 IR camera, which raw disparity comes from).
 * DIR/groundtruth.txt, when present, is loaded as for TUM sequences. */
#include "capture/fakenect_name.h"
#include "capture/intrinsics_file.h"
#include "capture/pgm_depth.h"
#include "core/files.h"
#include "capture/source_impl.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define DUMP_HINT                                                                                  \
    "a fakenect dump directory holds INDEX.txt (as written by fakenect-record or `kinreg record`)"

typedef struct {
    double stamp;
    unsigned line; /* in INDEX.txt, for messages */
    char *path;    /* DIR/name */
} dump_entry;

typedef struct {
    char index_txt[PATH_MAX];
    dump_entry *entries;
    size_t count, cap, next;
} dump_source;

static void dump_free(dump_source *d)
{
    if (!d) return;
    for (size_t i = 0; i < d->count; i++)
        free(d->entries[i].path);
    free(d->entries);
    free(d);
}

static kr_status add_entry(dump_source *d, double stamp, unsigned line, const char *dir,
                           const char *name)
{
    if (d->count == d->cap) {
        size_t cap = d->cap ? 2 * d->cap : 64;
        dump_entry *p = realloc(d->entries, cap * sizeof *p);
        if (!p) return kr_error(KR_ERR_NOMEM, "out of memory reading %s", d->index_txt);
        d->entries = p;
        d->cap = cap;
    }
    size_t n = strlen(dir) + strlen(name) + 2;
    char *path = malloc(n);
    if (!path) return kr_error(KR_ERR_NOMEM, "out of memory reading %s", d->index_txt);
    snprintf(path, n, "%s/%s", dir, name);
    d->entries[d->count++] = (dump_entry){stamp, line, path};
    return KR_OK;
}

/* One INDEX.txt line: a file name; only depth frames (d-) are kept. */
static kr_status parse_line(dump_source *d, const char *dir, char *line, unsigned lineno,
                            unsigned *prev_line)
{
    size_t len = strlen(line);
    while (len && isspace((unsigned char)line[len - 1]))
        line[--len] = '\0';
    char *name = line;
    while (isspace((unsigned char)*name))
        name++;
    if (strncmp(name, "d-", 2) != 0) return KR_OK;
    double stamp;
    uint32_t ticks;
    if (!kr_fakenect_parse_depth_name(name, &stamp, &ticks))
        return kr_error(KR_ERR_FORMAT,
                        "%s:%u: malformed depth frame name '%.80s': expected "
                        "d-<time>-<ticks>.pgm, as fakenect-record writes",
                        d->index_txt, lineno, name);
    if (d->count && stamp < d->entries[d->count - 1].stamp)
        return kr_error(KR_ERR_ORDER,
                        "%s:%u: timestamp %.6f goes backwards (line %u has %.6f): the depth "
                        "frames must be listed in time order",
                        d->index_txt, lineno, stamp, *prev_line, d->entries[d->count - 1].stamp);
    *prev_line = lineno;
    return add_entry(d, stamp, lineno, dir, name);
}

static kr_status parse_index(dump_source *d, const char *dir)
{
    char why[160];
    FILE *f = kr_fopen_regular(d->index_txt, why, sizeof why);
    if (!f) return kr_error(KR_ERR_IO, "cannot open %s: %s: " DUMP_HINT, d->index_txt, why);
    char *line = NULL;
    size_t cap = 0;
    unsigned lineno = 0, prev_line = 0;
    kr_status st = KR_OK;
    while (st == KR_OK && getline(&line, &cap, f) >= 0)
        st = parse_line(d, dir, line, ++lineno, &prev_line);
    if (st == KR_OK && ferror(f))
        st = kr_error(KR_ERR_IO, "%s:%u: read error: %s", d->index_txt, lineno, strerror(errno));
    free(line);
    fclose(f);
    if (st == KR_OK && d->count == 0)
        st = kr_error(KR_ERR_FORMAT,
                      "%s lists no depth frames (d-<time>-<ticks>.pgm lines): record depth into "
                      "the dump",
                      d->index_txt);
    return st;
}

static kr_status dump_read(kr_source *src, kr_frame *frame)
{
    dump_source *d = src->impl;
    for (;;) {
        if (d->next >= d->count) return KR_END;
        const dump_entry *e = &d->entries[d->next++];
        char where[PATH_MAX + 16];
        snprintf(where, sizeof where, "%s:%u", d->index_txt, e->line);
        uint16_t *raw = NULL;
        kr_status st =
            kr_pgm_read_depth(e->path, where, src->intrinsics.width, src->intrinsics.height, &raw);
        if (st == KR_OK) {
            frame->timestamp = e->stamp;
            frame->width = src->intrinsics.width;
            frame->height = src->intrinsics.height;
            frame->encoding = KR_DEPTH_DISPARITY11;
            frame->depth_scale = 0; /* unused by the disparity encoding */
            frame->raw = raw;
            return KR_OK;
        }
        if (!kr_source_skip_corrupt(src, st)) return st;
    }
}

static void dump_close(kr_source *src)
{
    dump_free(src->impl);
    src->impl = NULL;
}

static const kr_source_ops dump_ops = {.name = "fakenect", .read = dump_read, .close = dump_close};

/* The caller's intrinsics, the recorder's sidecar, or the Kinect IR camera. */
static kr_status dump_intrinsics(const char *dir, const kr_intrinsics *want, kr_intrinsics *k, char *origin,
                                 size_t origin_size)
{
    if (want) {
        *k = *want;
        return KR_OK;
    }
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/" KR_INTRINSICS_FILE, dir);
    if (access(path, F_OK) == 0) {
        snprintf(origin, origin_size, "file %.500s", path);
        return kr_intrinsics_file_read(path, k);
    }
    snprintf(origin, origin_size, "preset kinect, the Kinect v1 IR camera: no " KR_INTRINSICS_FILE);
    kr_log(KR_LOG_WARN,
           "fakenect:%s has no " KR_INTRINSICS_FILE ": using the kinect preset (fx 570.3); give "
           "--intrinsics if the camera differs",
           dir);
    return kr_intrinsics_preset("kinect", k);
}

kr_status kr_fakenect_dump_open(kr_source *src, const char *dir, const kr_source_config *cfg,
                                const kr_intrinsics *want)
{
    (void)cfg; /* depth_scale does not apply to raw disparity */
    if (!dir || !dir[0])
        return kr_error(KR_ERR_INVALID_ARG,
                        "fakenect: needs a directory, as in fakenect:/data/planes");
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return kr_error(KR_ERR_IO, "no such directory %s: " DUMP_HINT, dir);
    dump_source *d = calloc(1, sizeof *d);
    if (!d) return kr_error(KR_ERR_NOMEM, "out of memory opening %s", dir);
    if ((size_t)snprintf(d->index_txt, sizeof d->index_txt, "%s/INDEX.txt", dir) >=
        sizeof d->index_txt) {
        dump_free(d);
        return kr_error(KR_ERR_INVALID_ARG, "directory name too long: %s", dir);
    }
    kr_intrinsics k;
    kr_status st = parse_index(d, dir);
    if (st == KR_OK) st = dump_intrinsics(dir, want, &k, src->intrinsics_origin, sizeof src->intrinsics_origin);
    snprintf(src->depth_origin, sizeof src->depth_origin, "raw 11-bit Kinect v1 disparity");
    char gt[PATH_MAX];
    snprintf(gt, sizeof gt, "%s/groundtruth.txt", dir);
    if (st == KR_OK && access(gt, F_OK) == 0) {
        st = kr_trajectory_read_tum(gt, &src->groundtruth);
        src->has_groundtruth = st == KR_OK;
    }
    if (st != KR_OK) {
        dump_free(d);
        return st;
    }
    src->intrinsics = k;
    src->ops = &dump_ops;
    src->impl = d;
    src->length = (unsigned)d->count;
    snprintf(src->description, sizeof src->description, "fakenect:%s (%zu frames)", dir, d->count);
    return KR_OK;
}
