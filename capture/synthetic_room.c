/* The synthetic room scan (capture/synthetic_room.h). Rays are cast against
 * the box and then moved onto the bumpy surface by bisection: on a face with
 * inward normal m the surface is the set of points at depth r(p, q) inside
 * the face's plane, r ∈ [0, A] a sum of sines of the two in-plane
 * coordinates with a phase per face (no shift maps one face onto another).
 * Along a ray the depth minus r is ≥ 0 where the depth is A and ≤ 0 on the
 * plane, so the bisection brackets the hit. Near the room's edges a bump of
 * the neighbouring face may hide it; at 6 cm bumps that is a thin strip
 * ignored here. */
#include "kinreg/scan.h"

#include <math.h>
#include <stdlib.h>

#define ROOM_AMPLITUDE 0.06

static const double room_lo[3] = {-2.0, -1.5, 0.0}, room_hi[3] = {2.0, 1.5, 2.5};

/* Relief of face `face` (0..5: −x, +x, −y, +y, floor, ceiling) at in-plane
 * coordinates (p, q), metres, in [0, ROOM_AMPLITUDE]. */
static double relief(int face, double p, double q)
{
    double f = 1 + 0.7 * face;
    return ROOM_AMPLITUDE *
           (0.5 + 0.25 * sin(2 * M_PI * p / 0.37 + f) * sin(2 * M_PI * q / 0.29 + 2 * f) +
            0.25 * sin(2 * M_PI * (p + 0.6 * q) / 0.61 + 3 * f));
}

/* Depth of w inside face `face`'s plane minus the relief there. */
static double excess(int face, const double w[3])
{
    int axis = face / 2;
    double depth = (face & 1) ? room_hi[axis] - w[axis] : w[axis] - room_lo[axis];
    int a = (axis + 1) % 3, b = (axis + 2) % 3;
    return depth - relief(face, w[a], w[b]);
}

/* Distance along the unit ray o + t·d to the bumpy surface; 0 when none. */
static double cast(const double o[3], const double d[3])
{
    double t_exit = INFINITY;
    int face = -1;
    for (int a = 0; a < 3; a++) {
        if (d[a] > 1e-12) {
            double t = (room_hi[a] - o[a]) / d[a];
            if (t < t_exit) t_exit = t, face = 2 * a + 1;
        } else if (d[a] < -1e-12) {
            double t = (room_lo[a] - o[a]) / d[a];
            if (t < t_exit) t_exit = t, face = 2 * a;
        }
    }
    if (face < 0) return 0;
    double cosine = fabs(d[face / 2]);
    double lo = t_exit - ROOM_AMPLITUDE / cosine, hi = t_exit;
    if (lo <= 0) return 0;
    for (int it = 0; it < 50; it++) {
        double mid = 0.5 * (lo + hi),
               w[3] = {o[0] + mid * d[0], o[1] + mid * d[1], o[2] + mid * d[2]};
        if (excess(face, w) > 0)
            lo = mid;
        else
            hi = mid;
    }
    return 0.5 * (lo + hi);
}

/* Camera k of n on the loop: position and the axes x (right), y (down),
 * z (forward) in the world, as the columns of R. */
static kr_pose camera(int k, int n)
{
    double th = 2 * M_PI * k / n;
    double c[3] = {0.75 * cos(th), 0.6 * sin(th), 1.3 + 0.1 * sin(3 * th)};
    double yaw = th + 0.25 * sin(2 * th), pitch = 0.12 * sin(5 * th);
    double f[3] = {cos(yaw) * cos(pitch), sin(yaw) * cos(pitch), sin(pitch)};
    double nr = hypot(f[0], f[1]);
    double r[3] = {f[1] / nr, -f[0] / nr, 0};
    double dn[3] = {f[1] * r[2] - f[2] * r[1], f[2] * r[0] - f[0] * r[2],
                    f[0] * r[1] - f[1] * r[0]};
    kr_pose T;
    for (int i = 0; i < 3; i++) {
        T.R[3 * i] = r[i];
        T.R[3 * i + 1] = dn[i];
        T.R[3 * i + 2] = f[i];
        T.t[i] = c[i];
    }
    return T;
}

static double gauss(unsigned *state)
{
    double u1, u2;
    do {
        *state = *state * 1664525u + 1013904223u;
        u1 = ((*state >> 8) + 0.5) / 16777216.0;
        *state = *state * 1664525u + 1013904223u;
        u2 = ((*state >> 8) + 0.5) / 16777216.0;
    } while (u1 <= 0);
    return sqrt(-2 * log(u1)) * cos(2 * M_PI * u2);
}

kr_status kr_scan_synthetic_room(int n_views, int width, int height, double noise_m, unsigned seed,
                                 float **xyz, size_t *n, kr_pose *poses)
{
    if (n_views < 2 || width < 8 || height < 8 || !(noise_m >= 0) || !xyz || !n || !poses)
        return kr_error(KR_ERR_INVALID_ARG,
                        "synthetic room: needs 2 or more views of at least 8x8 pixels");
    double fx = width / (2 * tan(M_PI / 6)), cx = 0.5 * width, cy = 0.5 * height;
    float **pts = calloc((size_t)n_views, sizeof *pts);
    size_t *cnt = calloc((size_t)n_views, sizeof *cnt);
    kr_pose *T = calloc((size_t)n_views, sizeof *T);
    kr_status s = pts && cnt && T ? KR_OK : kr_error(KR_ERR_NOMEM, "synthetic room: no memory");
    for (int k = 0; k < n_views && s == KR_OK; k++) {
        T[k] = camera(k, n_views);
        pts[k] = malloc(sizeof *pts[k] * 3 * (size_t)width * (size_t)height);
        if (!pts[k]) s = kr_error(KR_ERR_NOMEM, "synthetic room: no memory for view %d", k);
    }
    /* Every view has its own noise stream, so the views can be cast in any
     * order and on any number of threads with the same points: a 200-view
     * room took seconds on one core. */
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < (s == KR_OK ? n_views : 0); k++) {
        unsigned state = seed * 2654435761u + 977u * (unsigned)k + 1;
        size_t m = 0;
        for (int v = 0; v < height; v++)
            for (int u = 0; u < width; u++) {
                double dc[3] = {(u + 0.5 - cx) / fx, (v + 0.5 - cy) / fx, 1}, d[3];
                double len = sqrt(dc[0] * dc[0] + dc[1] * dc[1] + 1);
                for (int i = 0; i < 3; i++)
                    d[i] = (T[k].R[3 * i] * dc[0] + T[k].R[3 * i + 1] * dc[1] + T[k].R[3 * i + 2]) /
                           len;
                double t = cast(T[k].t, d);
                if (!(t > 0)) continue;
                if (noise_m > 0) t += noise_m * gauss(&state);
                for (int i = 0; i < 3; i++)
                    pts[k][3 * m + i] = (float)(t * dc[i] / len);
                m++;
            }
        cnt[k] = m;
    }
    if (s != KR_OK) {
        for (int k = 0; pts && k < n_views; k++)
            free(pts[k]);
        free(pts);
        free(cnt);
        free(T);
        return s;
    }
    for (int k = 0; k < n_views; k++) {
        xyz[k] = pts[k];
        n[k] = cnt[k];
        poses[k] = T[k];
    }
    free(pts);
    free(cnt);
    free(T);
    return KR_OK;
}
