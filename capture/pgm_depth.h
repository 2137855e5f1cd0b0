/* The depth frames of a fakenect dump: binary PGM files, one header line
 * "P5 640 480 65535\n" followed by width·height uint16 samples of raw 11-bit
 * Kinect disparity (0..2047, 2047 = no return).
 *
 * Unlike standard 16-bit PGM (big-endian), libfreenect writes and reads the
 * samples in host byte order: fakenect-record fwrite()s the frame buffer
 * straight after the header, and fakenect memcpy()s everything after the
 * first newline back into the depth buffer. These functions keep that
 * convention, so a dump moves between machines of one byte order only (all
 * machines libfreenect runs on today are little-endian). */
#ifndef KINREG_CAPTURE_PGM_DEPTH_H
#define KINREG_CAPTURE_PGM_DEPTH_H

#include <stdint.h>

#include "kinreg/status.h"

/* Reads `path` into a new malloc'd buffer of want_w × want_h samples. The
 * header may use any PGM whitespace and '#' comments, but must say P5, the
 * wanted size and maxval 65535. `where` names the reference to the file for
 * messages (e.g. "/d/INDEX.txt:12"). Errors: KR_ERR_IO (cannot open or
 * read), KR_ERR_FORMAT (not a binary PGM, truncated, or a sample above 2047,
 * which raw 11-bit data never has), KR_ERR_SIZE (other size or maxval). On
 * error *out is untouched. Bytes after the last sample are ignored, as
 * fakenect ignores them. */
kr_status kr_pgm_read_depth(const char *path, const char *where, int want_w, int want_h,
                            uint16_t **out);

/* Writes a dump frame exactly as fakenect-record does: the one-line header
 * and the samples in host order. On failure the partial file is removed and
 * the error names `path` and the system's reason. */
kr_status kr_pgm_write_depth(const char *path, int width, int height, const uint16_t *samples);

#endif
