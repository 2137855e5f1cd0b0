/* The synthetic scene's geometry computed independently of the ray caster
 * (signed distance functions of its primitives, the room's faces): what
 * tests compare renders, clouds and meshes against. */
#ifndef KINREG_TESTS_SCENE_DISTANCE_H
#define KINREG_TESTS_SCENE_DISTANCE_H

#include <math.h>

#include "capture/synthetic_scene.h"

/* Unsigned distance from p to the surface of one primitive. */
static inline double prim_distance(const kr_synth_prim *q, const double p[3])
{
    double d[3] = {p[0] - q->c[0], p[1] - q->c[1], p[2] - q->c[2]};
    if (q->kind == KR_SYNTH_SPHERE)
        return fabs(sqrt(d[0] * d[0] + d[1] * d[1] + d[2] * d[2]) - q->half[0]);
    double e[3];
    if (q->kind == KR_SYNTH_CYLINDER) {
        e[0] = sqrt(d[0] * d[0] + d[1] * d[1]) - q->half[0];
        e[1] = fabs(d[2]) - q->half[2];
        double out = hypot(fmax(e[0], 0), fmax(e[1], 0)), in = fmin(fmax(e[0], e[1]), 0);
        return fabs(out + in);
    }
    double c = cos(q->yaw), s = sin(q->yaw);
    double l[3] = {c * d[0] + s * d[1], -s * d[0] + c * d[1], d[2]};
    double out = 0, in = -1e300;
    for (int a = 0; a < 3; a++) {
        e[a] = fabs(l[a]) - q->half[a];
        out += fmax(e[a], 0) * fmax(e[a], 0);
        in = fmax(in, e[a]);
    }
    return fabs(sqrt(out) + fmin(in, 0));
}

/* Distance to the room's faces (floor, walls, ceiling), for points inside it. */
static inline double room_distance(const kr_synth_scene *s, const double p[3], int *face)
{
    double best = 1e300;
    for (int a = 0; a < 3; a++) {
        double lo = fabs(p[a] - s->room_min[a]), hi = fabs(s->room_max[a] - p[a]);
        if (lo < best) best = lo, *face = 2 * a;
        if ((a < 2 || s->ceiling) && hi < best) best = hi, *face = 2 * a + 1;
    }
    return best;
}

static inline double scene_distance(const kr_synth_scene *s, const double p[3], double *room_only)
{
    int face;
    double room = room_distance(s, p, &face), best = room;
    for (int i = 0; i < s->count; i++)
        best = fmin(best, prim_distance(&s->prims[i], p));
    if (room_only) *room_only = room;
    return best;
}

#endif
