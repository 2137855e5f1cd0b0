/* How the recorder turns a frame's samples into the samples of an output
 * format, through the disparity model of kinreg/frame.h:
 *
 *   fakenect  raw 11-bit disparity: KR_DEPTH_DISPARITY11 samples are copied
 *             (anything above 2047, which no sensor sends, becomes 2047 = no
 *             return, so the dump stays readable); KR_DEPTH_SCALED samples go
 *             through kr_metres_to_disparity(kr_depth_to_metres(v)).
 *   tum       round(metres · 5000), 0 = no return; depths beyond 65535/5000 =
 *             13.1 m become 0. KR_DEPTH_SCALED samples with scale 5000 are
 *             copied exactly.
 *
 * A sample's output depends only on its value, the encoding and the scale,
 * so a 65536-entry table caches the conversion for as long as those stay. */
#ifndef KINREG_CAPTURE_RECORD_CONVERT_H
#define KINREG_CAPTURE_RECORD_CONVERT_H

#include <stdbool.h>
#include <stdint.h>

#include "kinreg/frame.h"
#include "kinreg/recorder.h"

typedef struct {
    uint16_t table[65536];
    bool valid;
    kr_depth_encoding encoding;
    float scale;
} kr_record_lut;

#define KR_TUM_SCALE 5000.0

/* One sample in format `f`. */
uint16_t kr_record_sample(kr_record_format f, kr_depth_encoding enc, float scale, uint16_t v);
/* The frame's samples in format `f` into `out` (width·height). */
void kr_record_convert(kr_record_lut *lut, kr_record_format f, const kr_frame *frame,
                       uint16_t *out);

#endif
