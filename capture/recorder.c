/* The recorder (include/kinreg/recorder.h): one directory, one format.
 *
 * Layouts written:
 *
 *   fakenect   DIR/INDEX.txt           one line per frame: d-<T>-<K>.pgm
 *              DIR/d-<T>-<K>.pgm       "P5 640 480 65535\n" + 640·480 host-order
 *                                      uint16 raw 11-bit disparity (2047 = none)
 *              T = the frame timestamp, "%f" (seconds, 6 decimals);
 *              K = round(T · 60 MHz) mod 2^32, the Kinect frame counter that
 *              fakenect hands to the depth callback (capture/fakenect_name.h)
 *   tum        DIR/depth.txt           "# ..." header lines, then one line per
 *                                      frame: "<T> depth/<T>.png"
 *              DIR/depth/<T>.png       16-bit grayscale PNG, metres · 5000
 *   sidecars   DIR/groundtruth.txt     TUM trajectory (both formats)
 *              DIR/kinreg-intrinsics.txt  (both layouts; capture/intrinsics_file.h)
 *
 * Crash safety: a frame's file is written and closed before its index line
 * is appended, with one write(2) straight to the kernel (no stdio buffer to
 * lose); a failed append is cut back off, so INDEX.txt / depth.txt only ever
 * list complete frames. */
#include "kinreg/recorder.h"

#include "capture/fakenect_name.h"
#include "capture/intrinsics_file.h"
#include "capture/pgm_depth.h"
#include "capture/png_depth.h"
#include "capture/record_convert.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* libfreenect's fakenect hard-codes FREENECT_FRAME_W × FREENECT_FRAME_H. */
#define FAKENECT_W 640
#define FAKENECT_H 480

struct kr_recorder {
    kr_recorder_config cfg;
    char dir[PATH_MAX];
    char index_path[PATH_MAX]; /* INDEX.txt or depth.txt */
    int index_fd;
    off_t index_size; /* bytes of complete lines */
    uint64_t frames;
    double last_stamp;
    char last_name[64]; /* the previous frame's file name, "" before the first */
    bool wrote_groundtruth, wrote_intrinsics;
    uint16_t *samples; /* converted frame, reused */
    size_t samples_cap;
    kr_record_lut lut;
};

void kr_recorder_config_default(kr_recorder_config *cfg)
{
    if (!cfg) return;
    memset(cfg, 0, sizeof *cfg);
    cfg->format = KR_RECORD_FAKENECT;
}

kr_status kr_record_format_parse(const char *text, kr_record_format *out)
{
    if (text && out && strcmp(text, "fakenect") == 0)
        *out = KR_RECORD_FAKENECT;
    else if (text && out && strcmp(text, "tum") == 0)
        *out = KR_RECORD_TUM;
    else
        return kr_error(KR_ERR_INVALID_ARG, "unknown recording format '%s': use fakenect or tum",
                        text ? text : "(null)");
    return KR_OK;
}

const char *kr_record_format_name(kr_record_format f)
{
    return f == KR_RECORD_TUM ? "tum" : f == KR_RECORD_FAKENECT ? "fakenect" : "unknown";
}

/* mkdir -p: every missing component of `dir`. */
static kr_status make_dirs(const char *dir)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s", dir) >= sizeof path)
        return kr_error(KR_ERR_INVALID_ARG, "directory name too long: %s", dir);
    for (char *p = path + 1;; p++) {
        if (*p != '/' && *p != '\0') continue;
        char c = *p;
        *p = '\0';
        struct stat sb;
        if (mkdir(path, 0777) != 0 && errno != EEXIST)
            return kr_error(KR_ERR_IO, "cannot create directory %s: %s", path, strerror(errno));
        if (stat(path, &sb) != 0 || !S_ISDIR(sb.st_mode))
            return kr_error(KR_ERR_IO, "cannot record into %s: %s is not a directory", dir, path);
        if (c == '\0') return KR_OK;
        *p = c;
    }
}

static kr_status refuse_existing(const char *dir, const char *name, bool overwrite)
{
    char path[PATH_MAX + 16];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (overwrite || access(path, F_OK) != 0) return KR_OK;
    return kr_error(KR_ERR_EXISTS,
                    "%s already exists: %s holds a recording; pass overwrite (--force on the "
                    "command line) to replace it, or choose an empty directory",
                    path, dir);
}

static kr_status write_all(int fd, const char *text, size_t n)
{
    while (n) {
        ssize_t w = write(fd, text, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return KR_ERR_IO;
        text += w;
        n -= (size_t)w;
    }
    return KR_OK;
}

/* Appends whole lines to the index, or nothing: a partial append is cut off. */
static kr_status append_index(kr_recorder *r, const char *text)
{
    size_t n = strlen(text);
    errno = 0;
    if (write_all(r->index_fd, text, n) == KR_OK) {
        r->index_size += (off_t)n;
        return KR_OK;
    }
    int err = errno ? errno : EIO;
    if (ftruncate(r->index_fd, r->index_size) != 0)
        kr_log(KR_LOG_WARN, "cannot cut the partial line off %s: %s", r->index_path,
               strerror(errno));
    lseek(r->index_fd, r->index_size, SEEK_SET);
    return kr_error(KR_ERR_IO, "cannot append to %s: %s", r->index_path, strerror(err));
}

static kr_status open_index(kr_recorder *r)
{
    const char *name = r->cfg.format == KR_RECORD_TUM ? "depth.txt" : "INDEX.txt";
    if ((size_t)snprintf(r->index_path, sizeof r->index_path, "%s/%s", r->dir, name) >=
        sizeof r->index_path)
        return kr_error(KR_ERR_INVALID_ARG, "directory name too long: %s", r->dir);
    r->index_fd = open(r->index_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0666);
    if (r->index_fd < 0)
        return kr_error(KR_ERR_IO, "cannot create %s: %s", r->index_path, strerror(errno));
    if (r->cfg.format != KR_RECORD_TUM) return KR_OK; /* fakenect's index is names only */
    return append_index(r, "# depth maps\n"
                           "# written by kinreg (16-bit PNG, value / 5000 = metres, 0 = none)\n"
                           "# timestamp filename\n");
}

kr_status kr_recorder_create(kr_recorder **out, const char *dir, const kr_recorder_config *cfg)
{
    if (!out || !dir || !dir[0] || !cfg)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_recorder_create: output, directory and config must be given");
    if (cfg->format != KR_RECORD_FAKENECT && cfg->format != KR_RECORD_TUM)
        return kr_error(KR_ERR_INVALID_ARG, "unknown recording format %d: use fakenect or tum",
                        (int)cfg->format);
    kr_recorder *r = calloc(1, sizeof *r);
    if (!r) return kr_error(KR_ERR_NOMEM, "out of memory creating a recorder for %s", dir);
    r->cfg = *cfg;
    r->index_fd = -1;
    kr_status st = KR_OK;
    if ((size_t)snprintf(r->dir, sizeof r->dir, "%s", dir) >= sizeof r->dir - 32)
        st = kr_error(KR_ERR_INVALID_ARG, "directory name too long: %s", dir);
    if (st == KR_OK) st = make_dirs(dir);
    /* Either index means a recording is there: one format written over the
     * other would leave a directory that opens as the old one. */
    if (st == KR_OK) st = refuse_existing(dir, "INDEX.txt", cfg->overwrite);
    if (st == KR_OK) st = refuse_existing(dir, "depth.txt", cfg->overwrite);
    if (st == KR_OK && cfg->format == KR_RECORD_TUM) {
        char depth[PATH_MAX + 8];
        snprintf(depth, sizeof depth, "%s/depth", dir);
        st = make_dirs(depth);
    }
    if (st == KR_OK) st = open_index(r);
    if (st != KR_OK) {
        kr_recorder_destroy(&r);
        return st;
    }
    *out = r;
    return KR_OK;
}

/* Removes DIR/name (a file this recorder wrote). */
static void remove_file(const kr_recorder *r, const char *name)
{
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    unlink(path);
}

void kr_recorder_destroy(kr_recorder **rec)
{
    if (!rec || !*rec) return;
    kr_recorder *r = *rec;
    if (r->index_fd >= 0) {
        close(r->index_fd);
        /* No frame: leave no recording behind, so that a start that failed
         * (no sensor, a bad first input frame) can simply be run again. */
        if (r->frames == 0) {
            unlink(r->index_path);
            if (r->wrote_groundtruth) remove_file(r, "groundtruth.txt");
            if (r->wrote_intrinsics) remove_file(r, KR_INTRINSICS_FILE);
        }
    }
    free(r->samples);
    free(r);
    *rec = NULL;
}

static kr_status check_frame(const kr_recorder *r, const kr_frame *f)
{
    if (!f->raw || f->width <= 0 || f->height <= 0 || f->width > 8192 || f->height > 8192)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_recorder_write: frame %llu has no samples or a bad size %dx%d",
                        (unsigned long long)f->index, f->width, f->height);
    if (f->encoding != KR_DEPTH_SCALED && f->encoding != KR_DEPTH_DISPARITY11)
        return kr_error(KR_ERR_INVALID_ARG, "kr_recorder_write: frame %llu has unknown encoding %d",
                        (unsigned long long)f->index, (int)f->encoding);
    if (f->encoding == KR_DEPTH_SCALED && !(f->depth_scale > 0 && isfinite(f->depth_scale)))
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_recorder_write: frame %llu has depth scale %g: scaled depth needs "
                        "positive units per metre",
                        (unsigned long long)f->index, (double)f->depth_scale);
    if (!isfinite(f->timestamp) || fabs(f->timestamp) >= 1e11)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_recorder_write: frame %llu has timestamp %g: it must be seconds, "
                        "|t| < 1e11",
                        (unsigned long long)f->index, f->timestamp);
    if (r->cfg.format == KR_RECORD_FAKENECT && (f->width != FAKENECT_W || f->height != FAKENECT_H))
        return kr_error(KR_ERR_SIZE,
                        "frame %llu is %dx%d, but a fakenect dump holds 640x480 frames only "
                        "(libfreenect's fakenect hard-codes that size): record in TUM format "
                        "instead",
                        (unsigned long long)f->index, f->width, f->height);
    return KR_OK;
}

/* The frame's file name (relative to DIR) and, for a frame that may follow
 * the previous one, KR_OK. Equal names would overwrite a listed frame. */
static kr_status frame_name(const kr_recorder *r, const kr_frame *f, char *name, size_t size)
{
    if (r->cfg.format == KR_RECORD_TUM)
        snprintf(name, size, "depth/%f.png", f->timestamp);
    else
        kr_fakenect_format_depth_name(name, size, f->timestamp);
    if (!r->last_name[0]) return KR_OK;
    if (f->timestamp < r->last_stamp)
        return kr_error(KR_ERR_ORDER,
                        "frame %llu: timestamp %.6f goes backwards (the previous frame has "
                        "%.6f): %s must list frames in time order",
                        (unsigned long long)f->index, f->timestamp, r->last_stamp, r->index_path);
    if (strcmp(name, r->last_name) == 0)
        return kr_error(KR_ERR_ORDER,
                        "frame %llu: timestamp %.6f repeats the previous frame's to the "
                        "microsecond, so its file %s/%s would replace that frame's",
                        (unsigned long long)f->index, f->timestamp, r->dir, name);
    return KR_OK;
}

kr_status kr_recorder_write(kr_recorder *r, const kr_frame *f)
{
    if (!r || !f)
        return kr_error(KR_ERR_INVALID_ARG, "kr_recorder_write: recorder and frame must be given");
    kr_status st = check_frame(r, f);
    char name[64];
    if (st == KR_OK) st = frame_name(r, f, name, sizeof name);
    if (st != KR_OK) return st;

    size_t n = (size_t)f->width * (size_t)f->height;
    if (n > r->samples_cap) {
        uint16_t *p = realloc(r->samples, n * sizeof *p);
        if (!p) return kr_error(KR_ERR_NOMEM, "cannot allocate a %dx%d frame", f->width, f->height);
        r->samples = p;
        r->samples_cap = n;
    }
    kr_record_convert(&r->lut, r->cfg.format, f, r->samples);

    char path[PATH_MAX + 80], line[160];
    snprintf(path, sizeof path, "%s/%s", r->dir, name);
    if (r->cfg.format == KR_RECORD_TUM) {
        st = kr_png_write_depth16(path, f->width, f->height, r->samples);
        snprintf(line, sizeof line, "%f %s\n", f->timestamp, name);
    } else {
        st = kr_pgm_write_depth(path, f->width, f->height, r->samples);
        snprintf(line, sizeof line, "%s\n", name);
    }
    if (st == KR_OK) st = append_index(r, line);
    if (st != KR_OK) {
        /* An unlisted frame file is harmless, but leave no debris. */
        unlink(path);
        return st;
    }
    r->last_stamp = f->timestamp;
    snprintf(r->last_name, sizeof r->last_name, "%s", name);
    r->frames++;
    return KR_OK;
}

kr_status kr_recorder_write_groundtruth(kr_recorder *r, const kr_trajectory *gt)
{
    if (!r || !gt)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_recorder_write_groundtruth: recorder and trajectory must be given");
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/groundtruth.txt", r->dir);
    kr_status st = kr_trajectory_write_tum(path, gt);
    r->wrote_groundtruth |= st == KR_OK;
    return st;
}

kr_status kr_recorder_write_intrinsics(kr_recorder *r, const kr_intrinsics *k)
{
    if (!r || !k)
        return kr_error(KR_ERR_INVALID_ARG,
                        "kr_recorder_write_intrinsics: recorder and intrinsics must be given");
    /* Both layouts carry them: TUM tools ignore the extra file, kinreg's
     * tum:DIR reads it before guessing a preset from the directory name. */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/" KR_INTRINSICS_FILE, r->dir);
    kr_status st = kr_intrinsics_file_write(path, k);
    r->wrote_intrinsics |= st == KR_OK;
    return st;
}

uint64_t kr_recorder_frames(const kr_recorder *r)
{
    return r ? r->frames : 0;
}
