/* File names of a fakenect dump, "T-time-ticks.ext" (capture/fakenect_format.h):
 * parsed by the dump reader, formatted by the recorder, so both agree on
 * them byte for byte with libfreenect's `%c-%f-%u.%s`. */
#ifndef KINREG_CAPTURE_FAKENECT_NAME_H
#define KINREG_CAPTURE_FAKENECT_NAME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Parses a depth frame's name "d-<time>-<ticks>.<ext>": <time> a finite
 * decimal number of seconds, <ticks> a 32-bit unsigned decimal, <ext> not
 * empty. Returns false when the name does not have that form. */
bool kr_fakenect_parse_depth_name(const char *name, double *stamp, uint32_t *ticks);

/* The Kinect frame counter a host time maps to: round(stamp · 60 MHz) modulo
 * 2^32. The recorder has no device clock for frames that did not come from
 * one (TUM, synthetic), so it derives a counter that advances like the
 * device's and wraps like it. Needs |stamp| < 1e11. */
uint32_t kr_fakenect_ticks(double stamp);

/* "d-<stamp %f>-<ticks %u>.pgm" into buf; returns snprintf's result. */
int kr_fakenect_format_depth_name(char *buf, size_t size, double stamp);

#endif
