/* kinreg refine --sequence (tools/refine_sequence.c). */
#ifndef KINREG_TOOLS_REFINE_SEQUENCE_H
#define KINREG_TOOLS_REFINE_SEQUENCE_H

#include <stdbool.h>

#include "kinreg/refine.h"

typedef struct {
    const char *uri;        /* depth source, e.g. tum:DIR */
    const char *intrinsics; /* preset or NULL */
    const char *trajectory; /* TUM poses of the frames */
    const char *output;     /* refined keyframe poses (TUM), or NULL */
    const char *every_frame; /* every frame of `trajectory` corrected by its keyframes (TUM), or
                                NULL (refine_sequence.c, correct_frames) */
    double min_translation; /* keyframe spacing, metres */
    double min_angle_deg;
    bool verbose; /* say how many keyframes were chosen */
} kr_refine_sequence_args;

kr_status kr_refine_sequence(const kr_refine_sequence_args *a, kr_refine_config *cfg,
                             kr_device *dev, kr_refine_result *res, int *keyframes);

#endif
