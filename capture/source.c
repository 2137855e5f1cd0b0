/* The source interface: URI dispatch, intrinsics resolution and the generic
 * parts of reading (frame index, capture time, frame limit) shared by every
 * implementation behind capture/source_impl.h. */
#include "capture/source_impl.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define KR_SOURCE_FORMS                                                                            \
    "accepted sources: 'synthetic', 'synthetic:SEED', 'tum:DIR', 'fakenect:DIR', "                 \
    "'kinect[:N|:SERIAL]', or a directory DIR containing depth.txt (TUM) or INDEX.txt (fakenect)"

void kr_source_config_default(kr_source_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->uri = "synthetic";
    cfg->seed = 1;
    cfg->duration_s = 30.0;
    cfg->fps = 30.0;
    cfg->depth_mode = KR_KINECT_DEPTH_11BIT;
    cfg->stall_timeout_s = 2.0;
    cfg->live_queue = 4;
    cfg->jump_angle_deg = 30.0;
    cfg->jump_distance_m = 0.3;
    cfg->covered_frames = 10;
}

static kr_status check_intrinsics(const kr_intrinsics *k)
{
    if (k->width <= 0 || k->height <= 0 || k->width > 8192 || k->height > 8192 || !(k->fx > 0) ||
        !(k->fy > 0))
        return kr_error(KR_ERR_INVALID_ARG,
                        "custom intrinsics %dx%d fx %g fy %g are invalid: width and height must be "
                        "1..8192 and fx, fy positive",
                        k->width, k->height, k->fx, k->fy);
    return KR_OK;
}

/* The intrinsics the caller asked for, or *has = false for the source's own. */
static kr_status resolve_intrinsics(const kr_source_config *cfg, kr_intrinsics *k, bool *has)
{
    *has = false;
    if (cfg->override_intrinsics) {
        kr_status st = check_intrinsics(&cfg->custom);
        if (st != KR_OK) return st;
        *k = cfg->custom;
        *has = true;
    } else if (cfg->intrinsics && cfg->intrinsics[0]) {
        kr_status st = kr_intrinsics_preset(cfg->intrinsics, k);
        if (st != KR_OK) return st;
        *has = true;
    }
    return KR_OK;
}

static bool parse_seed(const char *s, unsigned *seed)
{
    if (!*s || !isdigit((unsigned char)*s)) return false;
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (*end || errno == ERANGE || v > 0xffffffffUL) return false;
    *seed = (unsigned)v;
    return true;
}

/* "word:" with a scheme-like word (letters, digits, '+', '-', '.'). */
static bool has_scheme(const char *uri)
{
    const char *c = strchr(uri, ':');
    if (!c || c == uri || !isalpha((unsigned char)uri[0])) return false;
    for (const char *p = uri; p < c; p++)
        if (!isalnum((unsigned char)*p) && *p != '+' && *p != '-' && *p != '.') return false;
    return true;
}

static bool dir_has(const char *dir, const char *name)
{
    char path[4096 + 32];
    struct stat sb;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return stat(path, &sb) == 0;
}

/* A bare directory: TUM when it holds depth.txt (checked first, so existing
 * sequences keep their meaning), a fakenect dump when it holds INDEX.txt. */
static kr_status open_dir(kr_source *src, const char *dir, const kr_source_config *cfg,
                          const kr_intrinsics *want)
{
    if (dir_has(dir, "depth.txt") || !dir_has(dir, "INDEX.txt"))
        return kr_tum_open(src, dir, cfg, want);
    return kr_fakenect_dump_open(src, dir, cfg, want);
}

/* "DIR/depth.txt" or "DIR/INDEX.txt" naming an existing index file: users
 * point at the file they see; the sequence is its directory. */
static bool index_file_dir(const char *path, char *dir, size_t size)
{
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    struct stat sb;
    if ((strcmp(base, "depth.txt") != 0 && strcmp(base, "INDEX.txt") != 0) || stat(path, &sb) != 0 ||
        !S_ISREG(sb.st_mode))
        return false;
    if (!slash)
        snprintf(dir, size, ".");
    else if (slash == path)
        snprintf(dir, size, "/");
    else
        snprintf(dir, size, "%.*s", (int)(slash - path), path);
    return true;
}

static kr_status open_uri(kr_source *src, const kr_source_config *cfg, const kr_intrinsics *want)
{
    const char *uri = cfg->uri && cfg->uri[0] ? cfg->uri : "synthetic";
    char dir[4096];
    if (strncmp(uri, "tum:", 4) == 0 && index_file_dir(uri + 4, dir, sizeof dir)) return kr_tum_open(src, dir, cfg, want);
    if (strncmp(uri, "fakenect:", 9) == 0 && index_file_dir(uri + 9, dir, sizeof dir))
        return kr_fakenect_dump_open(src, dir, cfg, want);
    if (index_file_dir(uri, dir, sizeof dir)) return open_dir(src, dir, cfg, want);
    if (strcmp(uri, "synthetic") == 0) return kr_synthetic_open(src, cfg, want);
    if (strncmp(uri, "synthetic:", 10) == 0) {
        kr_source_config c = *cfg;
        if (!parse_seed(uri + 10, &c.seed))
            return kr_error(KR_ERR_INVALID_ARG,
                            "source '%s': the seed must be an unsigned integer, as in synthetic:7",
                            uri);
        return kr_synthetic_open(src, &c, want);
    }
    if (strncmp(uri, "tum:", 4) == 0) return kr_tum_open(src, uri + 4, cfg, want);
    if (strncmp(uri, "fakenect:", 9) == 0) return kr_fakenect_dump_open(src, uri + 9, cfg, want);
    if (strcmp(uri, "kinect") == 0) return kr_kinect_open(src, NULL, cfg, want);
    if (strncmp(uri, "kinect:", 7) == 0) return kr_kinect_open(src, uri + 7, cfg, want);

    struct stat sb;
    if (stat(uri, &sb) == 0 && S_ISDIR(sb.st_mode)) return open_dir(src, uri, cfg, want);
    if (has_scheme(uri))
        return kr_error(KR_ERR_INVALID_ARG, "unknown source '%s': %s", uri, KR_SOURCE_FORMS);
    return kr_error(KR_ERR_IO,
                    "no such directory %s: give a TUM RGB-D sequence directory "
                    "containing depth.txt (%s)",
                    uri, KR_SOURCE_FORMS);
}

static void describe_settings(kr_source *src)
{
    const kr_intrinsics *k = &src->intrinsics;
    bool distorted = k->k1 != 0 || k->k2 != 0 || k->p1 != 0 || k->p2 != 0 || k->k3 != 0;
    int n = snprintf(src->settings, sizeof src->settings, "intrinsics fx %g fy %g cx %g cy %g %dx%d%s (%s)",
                     (double)k->fx, (double)k->fy, (double)k->cx, (double)k->cy, k->width, k->height,
                     distorted ? " with lens distortion" : "",
                     src->intrinsics_origin[0] ? src->intrinsics_origin : "the source's own");
    if (src->depth_origin[0] && n > 0 && (size_t)n < sizeof src->settings)
        snprintf(src->settings + n, sizeof src->settings - (size_t)n, "; depth %s", src->depth_origin);
}

kr_status kr_source_create(kr_source **out, const kr_source_config *cfg)
{
    if (!out || !cfg)
        return kr_error(KR_ERR_INVALID_ARG, "kr_source_create: output and config must not be NULL");
    if (cfg->max_frames < 0)
        return kr_error(KR_ERR_INVALID_ARG,
                        "max_frames is %d: use 0 for all frames or a positive limit",
                        cfg->max_frames);
    kr_intrinsics k;
    bool has_k;
    kr_status st = resolve_intrinsics(cfg, &k, &has_k);
    if (st != KR_OK) return st;

    kr_source *src = calloc(1, sizeof *src);
    if (!src) return kr_error(KR_ERR_NOMEM, "kr_source_create: out of memory");
    if (cfg->stride < 0)
        return kr_error(KR_ERR_INVALID_ARG, "stride %d: use 1 for every frame, or K > 1 for every K-th",
                        cfg->stride);
    src->skip_bad = cfg->skip_bad;
    src->stride = cfg->stride > 1 ? (unsigned)cfg->stride : 1;
    src->max_frames = (unsigned)cfg->max_frames;
    st = open_uri(src, cfg, has_k ? &k : NULL);
    if (st != KR_OK) {
        kr_trajectory_free(&src->groundtruth);
        free(src);
        return st;
    }
    if (has_k) {
        if (cfg->override_intrinsics)
            snprintf(src->intrinsics_origin, sizeof src->intrinsics_origin, "explicit values, as given (--intrinsics)");
        else
            snprintf(src->intrinsics_origin, sizeof src->intrinsics_origin, "preset %s, as given (--intrinsics)",
                     cfg->intrinsics);
    }
    describe_settings(src);
    /* A replayed source may be declared live to exercise the live policy;
     * sensors set live themselves. */
    src->live = src->live || cfg->live;
    if (src->stride > 1) {
        src->length = (src->length + src->stride - 1) / src->stride;
        size_t n = strlen(src->description);
        snprintf(src->description + n, sizeof src->description - n, ", every %u-th frame", src->stride);
    }
    if (src->max_frames && src->length > src->max_frames) src->length = src->max_frames;
    *out = src;
    return KR_OK;
}

void kr_source_destroy(kr_source **src)
{
    if (!src || !*src) return;
    kr_source *s = *src;
    if (s->ops && s->ops->close) s->ops->close(s);
    kr_trajectory_free(&s->groundtruth);
    free(s);
    *src = NULL;
}

kr_status kr_source_read(kr_source *src, kr_frame *frame)
{
    if (!src || !frame)
        return kr_error(KR_ERR_INVALID_ARG, "kr_source_read: source and frame must not be NULL");
    if (src->max_frames && src->delivered >= src->max_frames) return KR_END;
    /* A stride passes over the frames between two delivered ones. */
    for (unsigned k = 1; src->delivered > 0 && k < src->stride; k++) {
        if (src->ops->skip) {
            if (!src->ops->skip(src)) return KR_END;
            continue;
        }
        kr_frame skipped = {0};
        kr_status st = src->ops->read(src, &skipped);
        if (st != KR_OK) return st;
        kr_frame_release(&skipped);
    }
    kr_frame tmp = {0};
    kr_status st = src->ops->read(src, &tmp);
    if (st != KR_OK) return st;
    tmp.index = src->delivered++;
    if (tmp.capture_time == 0) tmp.capture_time = kr_now();
    *frame = tmp;
    return KR_OK;
}

kr_intrinsics kr_source_intrinsics(const kr_source *src)
{
    kr_intrinsics none = {0};
    return src ? src->intrinsics : none;
}

const kr_trajectory *kr_source_groundtruth(const kr_source *src)
{
    return src && src->has_groundtruth ? &src->groundtruth : NULL;
}

bool kr_source_is_live(const kr_source *src)
{
    return src && src->live;
}

unsigned kr_source_skipped(const kr_source *src)
{
    return src ? src->skipped : 0;
}

const char *kr_source_describe(const kr_source *src)
{
    return src ? src->description : "(no source)";
}

uint64_t kr_source_dropped(const kr_source *src)
{
    return src && src->ops && src->ops->dropped ? src->ops->dropped(src) : 0;
}

void kr_source_interrupt(kr_source *src)
{
    if (src && src->ops && src->ops->interrupt) src->ops->interrupt(src);
}

const char *kr_source_settings(const kr_source *src)
{
    return src ? src->settings : "(no source)";
}

unsigned kr_source_length(const kr_source *src)
{
    return src ? src->length : 0;
}
