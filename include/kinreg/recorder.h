/* kinreg — recording depth frames to disk in formats other tools replay:
 *
 *   KR_RECORD_FAKENECT  libfreenect's fakenect dump: DIR/INDEX.txt lists
 *                       d-<time>-<ticks>.pgm files, each "P5 640 480 65535\n"
 *                       then raw 11-bit disparity as host-order uint16
 *                       (what fakenect-record writes and fakenect replays).
 *   KR_RECORD_TUM       TUM RGB-D layout: DIR/depth.txt and DIR/depth/<time>.png,
 *                       16-bit PNG with value / 5000 = metres.
 *
 * Depth is converted between encodings with the disparity model of frame.h.
 * Every frame is written and its index line flushed before kr_recorder_write
 * returns, so a recording cut short (Ctrl-C, a stalled sensor, a crash) is
 * still a valid dump of every frame written. */
#ifndef KINREG_RECORDER_H
#define KINREG_RECORDER_H

#include <stdbool.h>
#include <stdint.h>

#include "kinreg/frame.h"
#include "kinreg/trajectory.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_recorder kr_recorder;

typedef enum { KR_RECORD_FAKENECT = 0, KR_RECORD_TUM = 1 } kr_record_format;

typedef struct {
    kr_record_format format; /* default KR_RECORD_FAKENECT */
    bool overwrite;          /* allow a directory that already holds a recording */
} kr_recorder_config;

KR_API void kr_recorder_config_default(kr_recorder_config *cfg);
/* Creates DIR when missing. An existing recording there (INDEX.txt or
 * depth.txt) is KR_ERR_EXISTS unless overwrite is set. */
KR_API kr_status kr_recorder_create(kr_recorder **out, const char *dir, const kr_recorder_config *cfg);
/* Closes the recording. One that received no frame is removed again (its
 * index and the sidecars written), so that a failed start leaves DIR free
 * for the next attempt; the directories created stay. */
KR_API void kr_recorder_destroy(kr_recorder **rec);
/* Writes one frame (borrowed). */
KR_API kr_status kr_recorder_write(kr_recorder *rec, const kr_frame *frame);
/* Sidecars: groundtruth.txt (TUM trajectory) and the intrinsics the frames
 * were taken with (kinreg-intrinsics.txt, in both layouts: read back by the
 * fakenect:DIR and tum:DIR sources; libfreenect and TUM tools ignore it). */
KR_API kr_status kr_recorder_write_groundtruth(kr_recorder *rec, const kr_trajectory *gt);
KR_API kr_status kr_recorder_write_intrinsics(kr_recorder *rec, const kr_intrinsics *k);
KR_API uint64_t kr_recorder_frames(const kr_recorder *rec);

/* Parses "fakenect" or "tum". */
KR_API kr_status kr_record_format_parse(const char *text, kr_record_format *out);
KR_API const char *kr_record_format_name(kr_record_format f);

#ifdef __cplusplus
}
#endif
#endif
