/* 16-bit grayscale PNG depth images through libpng, with buffers reused from
 * frame to frame (reading PNGs is on the replay hot path). */
#ifndef KINREG_CAPTURE_PNG_DEPTH_H
#define KINREG_CAPTURE_PNG_DEPTH_H

#include <stddef.h>
#include <stdint.h>

#include "kinreg/status.h"

typedef struct {
    unsigned char *file; /* the whole compressed file, reused */
    size_t file_cap;
    void **rows; /* libpng row pointers, reused */
    size_t rows_cap;
} kr_png_reader;

/* Reads `path` (a 16-bit grayscale PNG of exactly want_w × want_h) into a new
 * malloc'd buffer of host-order samples. `where` names the reference to the
 * file for messages (e.g. "/d/depth.txt:12"). Errors: KR_ERR_IO (cannot open
 * or read), KR_ERR_FORMAT (not a PNG, corrupt or truncated), KR_ERR_SIZE
 * (other bit depth, colour type or size). On error *out is untouched. Never
 * crashes on malformed input: libpng errors come back through setjmp. */
kr_status kr_png_read_depth16(kr_png_reader *r, const char *path, const char *where, int want_w,
                              int want_h, uint16_t **out);
void kr_png_reader_free(kr_png_reader *r);

/* Writes width × height host-order samples as a 16-bit grayscale PNG (the TUM
 * depth format), with fast compression so that recording keeps up with a
 * live sensor. On failure the partial file is removed and the error names
 * `path` (capture/png_write.c). */
kr_status kr_png_write_depth16(const char *path, int width, int height, const uint16_t *samples);

#endif
