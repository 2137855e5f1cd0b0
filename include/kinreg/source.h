/* kinreg — frame sources: one interface (open, read, intrinsics, close) with
 * several implementations. Live and replay look the same to the pipeline.
 *
 * URIs:  synthetic[:SEED]        procedural indoor scene, Kinect v1 model
 *        tum:DIR                 TUM RGB-D sequence (depth.txt + 16-bit PNG)
 *        fakenect:DIR            libfreenect fakenect dump (INDEX.txt + d-*.pgm),
 *                                read directly from the files
 *        DIR                     tum:DIR when DIR holds depth.txt,
 *                                fakenect:DIR when it holds INDEX.txt
 *        kinect[:N | :SERIAL]    live Kinect v1 through libfreenect: the first
 *                                device, device index N, or the device with
 *                                that camera serial (see `kinreg devices`)  */
#ifndef KINREG_SOURCE_H
#define KINREG_SOURCE_H

#include <stdbool.h>

#include "kinreg/frame.h"
#include "kinreg/kinect.h"
#include "kinreg/trajectory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_source kr_source;


typedef struct {
    const char *uri;            /* see above; default "synthetic" */
    const char *intrinsics;     /* preset "fr1" "fr2" "fr3" "default" or NULL = source's own */
    bool override_intrinsics;   /* use `custom` below instead */
    kr_intrinsics custom;
    float depth_scale;          /* 0 = source default (TUM 5000) */
    bool skip_bad;              /* skip and count corrupt frames instead of stopping */
    bool colour;                /* also deliver the colour stream, registered to the depth,
                                   in kr_frame.rgb where the source has one: synthetic (the
                                   scene's colours), TUM (rgb.txt, each depth frame with the
                                   nearest image within 0.02 s); default false */
    bool live;                  /* true for sensors: the pipeline drops the oldest when behind */
    /* synthetic only */
    unsigned seed;              /* default 1 */
    double duration_s;          /* default 30 */
    double fps;                 /* default 30 */
    int max_frames;             /* 0 = all (honoured by every source) */
    int render_threads;         /* synthetic only: threads per frame, 1 or 2 (0 = 2 with 8+ cores) */
    /* Loss you can reproduce (synthetic only; seeded, placed evenly through
     * the sequence with some jitter). The ground truth keeps the true poses. */
    int jumps;                  /* sudden camera jumps: away from the path, then back at the next */
    double jump_angle_deg;      /* each jump rotates by up to this about a random axis (default 30) */
    double jump_distance_m;     /* and moves by up to this in a random direction (default 0.3) */
    int covered;                /* covered-sensor stretches: frames with no valid depth */
    int covered_frames;         /* frames per covered stretch (default 10) */
    int stride;                 /* every source: deliver every stride-th frame (0 or 1 = all),
                                   like a camera moving stride times faster */
    /* live Kinect only */
    kr_kinect_depth_mode depth_mode; /* default KR_KINECT_DEPTH_11BIT */
    double stall_timeout_s;     /* no frame for this long = KR_ERR_STALLED (default 2) */
    int live_queue;             /* frames buffered between libfreenect's callback
                                   and kr_source_read, oldest dropped when full (default 4) */
} kr_source_config;

KR_API void kr_source_config_default(kr_source_config *cfg);
/* Opens the source; errors name the file or device and what to do. */
KR_API kr_status kr_source_create(kr_source **out, const kr_source_config *cfg);
KR_API void kr_source_destroy(kr_source **src);

/* Next frame: KR_OK and *frame filled (caller releases it), KR_END at the end
 * of the stream, or an error (frame untouched). With skip_bad, corrupt frames
 * are skipped, counted and logged instead of returned as errors. */
KR_API kr_status kr_source_read(kr_source *src, kr_frame *frame);
KR_API kr_intrinsics kr_source_intrinsics(const kr_source *src);
/* Ground truth when the source has it (synthetic, TUM with groundtruth.txt), else NULL. */
KR_API const kr_trajectory *kr_source_groundtruth(const kr_source *src);
KR_API bool kr_source_is_live(const kr_source *src);
/* Frames skipped as corrupt so far (skip_bad). */
KR_API unsigned kr_source_skipped(const kr_source *src);
/* Live sources: frames the sensor delivered that were dropped because the
 * reader was behind. Safe from any thread. */
KR_API uint64_t kr_source_dropped(const kr_source *src);
/* Makes a kr_source_read that is waiting for a live sensor (and every later
 * one) return KR_END promptly. For shutdown; safe from any thread. */
KR_API void kr_source_interrupt(kr_source *src);
/* Human-readable description, e.g. "tum:/data/fr1 (400 frames)". */
KR_API const char *kr_source_describe(const kr_source *src);
/* One line with the intrinsics and depth units in use and where each came
 * from (the caller's preset or values, DIR/kinreg-intrinsics.txt, a preset
 * guessed from a TUM directory's name, a sensor default), e.g.
 * "intrinsics fx 517.3 fy 516.5 cx 318.6 cy 255.3 640x480 with distortion
 * (preset fr1, from the directory name); depth 5000 units/m (TUM default)".
 * Programs print it at start so a run says what it assumed. */
KR_API const char *kr_source_settings(const kr_source *src);
/* Number of frames when known in advance, else 0. */
KR_API unsigned kr_source_length(const kr_source *src);

/* Named intrinsics presets: "fr1" "fr2" "fr3", "default" (525/525/319.5/239.5,
 * the usual colour-camera default, also right for registered depth), and
 * "kinect" (Kinect v1 IR/depth camera, 570.3/570.3/319.5/239.5 as OpenNI
 * reports it: raw 11-bit and millimetre depth that is not registered). */
KR_API kr_status kr_intrinsics_preset(const char *name, kr_intrinsics *out);

#ifdef __cplusplus
}
#endif
#endif
