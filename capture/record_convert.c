/* Sample conversion between depth encodings for the recorder. */
#include "capture/record_convert.h"

#include <math.h>

uint16_t kr_record_sample(kr_record_format f, kr_depth_encoding enc, float scale, uint16_t v)
{
    if (f == KR_RECORD_FAKENECT) {
        if (enc == KR_DEPTH_DISPARITY11) return v > KR_DISPARITY_INVALID ? KR_DISPARITY_INVALID : v;
        return kr_metres_to_disparity(kr_depth_to_metres(v, enc, scale));
    }
    if (enc == KR_DEPTH_SCALED) {
        if (scale == (float)KR_TUM_SCALE) return v;
        /* In double: exact whenever the result is an integer (mm → ×5). */
        double u = v ? round((double)v * KR_TUM_SCALE / (double)scale) : 0;
        return u <= 65535 ? (uint16_t)u : 0;
    }
    double z = kr_depth_to_metres(v, enc, scale);
    double u = z > 0 ? round(z * KR_TUM_SCALE) : 0;
    return u <= 65535 ? (uint16_t)u : 0;
}

void kr_record_convert(kr_record_lut *lut, kr_record_format f, const kr_frame *frame, uint16_t *out)
{
    if (!lut->valid || lut->encoding != frame->encoding || lut->scale != frame->depth_scale) {
        for (unsigned v = 0; v < 65536; v++)
            lut->table[v] = kr_record_sample(f, frame->encoding, frame->depth_scale, (uint16_t)v);
        lut->encoding = frame->encoding;
        lut->scale = frame->depth_scale;
        lut->valid = true;
    }
    size_t n = (size_t)frame->width * (size_t)frame->height;
    for (size_t i = 0; i < n; i++)
        out[i] = lut->table[frame->raw[i]];
}
