/* Colour PNG images (the images of a TUM sequence's rgb.txt) through libpng's
 * simplified API: any bit depth and colour type, converted to 8-bit RGB. */
#ifndef KINREG_CAPTURE_PNG_COLOUR_H
#define KINREG_CAPTURE_PNG_COLOUR_H

#include <stdint.h>

#include "kinreg/status.h"

/* Reads `path`, which must be want_w × want_h, into a new malloc'd buffer of
 * 3 bytes a pixel. `where` names the reference to it in messages (e.g.
 * "/d/rgb.txt:12"). Errors: KR_ERR_IO (not a regular file, cannot open),
 * KR_ERR_FORMAT (not a PNG, corrupt), KR_ERR_SIZE (another size). On error
 * *out is untouched. */
kr_status kr_png_read_rgb8(const char *path, const char *where, int want_w, int want_h,
                           uint8_t **out);

#endif
