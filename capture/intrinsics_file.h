/* kinreg-intrinsics.txt: the intrinsics of the frames in a recording
 * directory, written by the recorder beside a fakenect dump or a TUM sequence
 * (neither format has a place for them; libfreenect and TUM tools ignore the
 * file) and read back by fakenect:DIR and tum:DIR.
 *
 * Format: text; lines starting with '#' and blank lines are comments; exactly
 * one data line of 11 numbers separated by spaces or tabs,
 *
 *     width height fx fy cx cy k1 k2 p1 p2 k3
 *
 * (pixels; Brown–Conrady distortion in OpenCV order, all zero for a plain
 * pinhole), or the first 6 of them with the distortion taken as zero. Width
 * and height are 1..8192, fx and fy 1..100000, cx and cy within +-100000 and
 * the distortion within +-1000 (the ranges of --intrinsics). Example:
 *
 *     # kinreg intrinsics: width height fx fy cx cy k1 k2 p1 p2 k3
 *     640 480 570.3 570.3 319.5 239.5 0 0 0 0 0                             */
#ifndef KINREG_CAPTURE_INTRINSICS_FILE_H
#define KINREG_CAPTURE_INTRINSICS_FILE_H

#include "kinreg/frame.h"

#define KR_INTRINSICS_FILE "kinreg-intrinsics.txt"

/* Errors: KR_ERR_IO (cannot open or read), KR_ERR_FORMAT naming file:line.
 * On error *out is untouched. */
kr_status kr_intrinsics_file_read(const char *path, kr_intrinsics *out);
/* Errors: KR_ERR_INVALID_ARG (values the reader would refuse), KR_ERR_IO. */
kr_status kr_intrinsics_file_write(const char *path, const kr_intrinsics *k);

#endif
