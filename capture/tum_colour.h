/* A TUM sequence's colour stream: DIR/rgb.txt (`timestamp path` lines, as
 * TUM writes them) and each depth frame's image — the one nearest in time
 * within 0.02 s (TUM's associate.py default). TUM's Kinect images are
 * registered to the depth, so a pixel's colour is the depth pixel's. */
#ifndef KINREG_CAPTURE_TUM_COLOUR_H
#define KINREG_CAPTURE_TUM_COLOUR_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "kinreg/status.h"

#define KR_TUM_COLOUR_MAX_DT 0.02

typedef struct {
    char rgb_txt[PATH_MAX];
    size_t n;
    double *stamps;  /* in time order */
    char **paths;    /* resolved against DIR */
    unsigned failed; /* images that could not be read (the frames went without colour) */
} kr_tum_colour;

/* Reads DIR/rgb.txt; a directory without one gives an empty list (n = 0).
 * Errors name the file and line: KR_ERR_IO, KR_ERR_FORMAT (a malformed
 * line), KR_ERR_ORDER (a timestamp going backwards). */
kr_status kr_tum_colour_open(kr_tum_colour *c, const char *dir);
void kr_tum_colour_free(kr_tum_colour *c);

/* The image nearest `stamp` within KR_TUM_COLOUR_MAX_DT, or -1. */
long kr_tum_colour_nearest(const kr_tum_colour *c, double stamp);

/* Image i as 3 bytes a pixel (malloc'd), or NULL when it cannot be read:
 * then the frame goes without colour and the first failure is logged as a
 * warning (the depth is never lost for its colour). */
uint8_t *kr_tum_colour_read(kr_tum_colour *c, long i, int width, int height);

#endif
