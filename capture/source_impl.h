/* Internal interface every frame source implements (DESIGN.md §7.6): the
 * public kr_source is this struct; an implementation's open function fills in
 * `ops`, `impl` and the descriptive fields. A libfreenect or fakenect source
 * plugs in by adding one open function here and one URI form in source.c.
 * Frames carry capture_time = 0 unless the implementation knows when the
 * frame arrived (a live callback); kr_source_read fills it in otherwise. */
#ifndef KINREG_CAPTURE_SOURCE_IMPL_H
#define KINREG_CAPTURE_SOURCE_IMPL_H

#include <stdbool.h>

#include "kinreg/source.h"

typedef struct {
    const char *name;
    /* Fills a complete frame (raw allocated, width/height/encoding/scale/
     * timestamp set); index and capture_time are set by kr_source_read. On an
     * error nothing is allocated. With skip_bad the implementation skips,
     * counts (src->skipped) and logs corrupt frames itself. */
    kr_status (*read)(kr_source *src, kr_frame *frame);
    /* Frees `impl`; the generic fields are freed by kr_source_destroy. */
    void (*close)(kr_source *src);
    /* Optional (live sources): wake a waiting read and make reads return
     * KR_END from now on. Called from another thread. */
    void (*interrupt)(kr_source *src);
    /* Optional (live sources): frames dropped so far. Called from any thread. */
    uint64_t (*dropped)(const kr_source *src);
    /* Optional (file sources): pass over the next frame without decoding it;
     * false at the end. Without it a stride reads and releases the frame. */
    bool (*skip)(kr_source *src);
} kr_source_ops;

struct kr_source {
    const kr_source_ops *ops;
    void *impl;
    kr_intrinsics intrinsics;
    kr_trajectory groundtruth; /* valid when has_groundtruth */
    bool has_groundtruth;
    bool live;
    bool skip_bad;
    unsigned skipped;
    unsigned length;     /* frames known in advance, 0 = unknown */
    unsigned max_frames; /* 0 = all */
    unsigned stride;     /* deliver every stride-th frame (1 = all) */
    uint64_t delivered;  /* frames returned so far: the next frame's index */
    char description[512];
    /* Where the intrinsics and depth units came from, for kr_source_settings
     * (e.g. "file DIR/kinreg-intrinsics.txt", "TUM default 5000 units/m"). */
    char intrinsics_origin[600];
    char depth_origin[160];
    char settings[1024];
};

/* For a file source that failed to read a frame with `st`: true when the
 * frame is corrupt (I/O, format or size) and skip_bad is set, after counting
 * and logging it; false when the error must be returned. */
bool kr_source_skip_corrupt(kr_source *src, kr_status st);

/* Open functions. `want` is the intrinsics the caller asked for (override or
 * preset) or NULL for the source's own; on error they leave `src` with
 * impl == NULL and nothing allocated. */
kr_status kr_synthetic_open(kr_source *src, const kr_source_config *cfg, const kr_intrinsics *want);
kr_status kr_tum_open(kr_source *src, const char *dir, const kr_source_config *cfg,
                      const kr_intrinsics *want);
kr_status kr_fakenect_dump_open(kr_source *src, const char *dir, const kr_source_config *cfg,
                                const kr_intrinsics *want);
/* `device` is what follows "kinect:" (index or serial), or NULL/"" for the first. */
kr_status kr_kinect_open(kr_source *src, const char *device, const kr_source_config *cfg,
                         const kr_intrinsics *want);

#endif
