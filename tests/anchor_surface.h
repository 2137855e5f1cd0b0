/* The CuPy anchor's bumpy closed surface (shared/tools/anchors/
 * emicp_dense_cupy.py; `kinreg register --synthetic`): n points, directions
 * uniform on the sphere, radius 0.1 m modulated by two smooth bumps. Two
 * samples of it are two scans of one object that share no point. */
#ifndef KINREG_TESTS_ANCHOR_SURFACE_H
#define KINREG_TESTS_ANCHOR_SURFACE_H

#include <math.h>
#include <stdlib.h>

#include "kr_test.h"

static inline float *kr_test_anchor_surface(unsigned *s, size_t n)
{
    float *p = malloc(3 * n * sizeof *p);
    for (size_t i = 0; p && i < n; i++) {
        double u[3] = {kr_nrand(s), kr_nrand(s), kr_nrand(s)};
        double l = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        for (int k = 0; k < 3; k++)
            u[k] /= l;
        double r = 0.1 * (1 + 0.25 * sin(5 * u[0]) * cos(4 * u[1]) + 0.15 * sin(7 * u[2]));
        for (int k = 0; k < 3; k++)
            p[3 * i + k] = (float)(u[k] * r);
    }
    return p;
}

#endif
