/* Shared test fixtures for the k-d tree Newton tests (test_newton.c,
 * test_track.c): a seeded generator, random rigid motions, clouds built by
 * hand (unorganised levels: width = N, height = 1) and the Stanford bunny with
 * PCA normals. Header-only because the runner globs only test_*.c. */
#ifndef KR_TRACK_FIXTURE_H
#define KR_TRACK_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "kr_test.h"

#include "kinreg/scan.h"
#include "kinreg/kdtree.h"
#include "kinreg/pose.h"
#include "kinreg/preprocess.h"
#include "core/kdtree_layout.h"

typedef struct {
    uint64_t s;
} fx_rng;

static inline double fx_urand(fx_rng *r)
{
    r->s ^= r->s << 13;
    r->s ^= r->s >> 7;
    r->s ^= r->s << 17;
    return (double)(r->s >> 11) / 9007199254740992.0;
}

/* Uniform on [-1, 1]. */
static inline double fx_srand(fx_rng *r)
{
    return 2 * fx_urand(r) - 1;
}

/* A unit vector uniformly on the sphere. */
static inline void fx_unit(fx_rng *r, double v[3])
{
    double z = fx_srand(r), a = 2 * M_PI * fx_urand(r), s = sqrt(1 - z * z);
    v[0] = s * cos(a);
    v[1] = s * sin(a);
    v[2] = z;
}

/* Rotation by exactly `angle` about a random axis through `centre`, then a
 * translation of exactly `dist` in a random direction. */
static inline kr_pose fx_motion(fx_rng *r, double angle, double dist, const double centre[3])
{
    double ax[3], dir[3];
    fx_unit(r, ax);
    fx_unit(r, dir);
    double w[6] = {angle * ax[0], angle * ax[1], angle * ax[2], 0, 0, 0};
    kr_pose Rm = kr_pose_exp(w);
    double Rc[3];
    kr_pose_rotate(&Rm, centre, Rc);
    for (int i = 0; i < 3; i++)
        Rm.t[i] = centre[i] - Rc[i] + dist * dir[i];
    return Rm;
}

/* Rotation angle (degrees) and translation distance (m) between two poses. */
static inline void fx_pose_error(const kr_pose *a, const kr_pose *b, double *deg, double *m)
{
    kr_pose ia = kr_pose_inv(a), d = kr_pose_mul(&ia, b);
    *deg = kr_pose_angle(&d) * 180 / M_PI;
    double dt[3] = {a->t[0] - b->t[0], a->t[1] - b->t[1], a->t[2] - b->t[2]};
    *m = sqrt(dt[0] * dt[0] + dt[1] * dt[1] + dt[2] * dt[2]);
}

/* An unorganised level (width = m, height = 1) holding the selected world
 * points and normals moved into the camera frame by world_to_cam. A NULL
 * normal array gives points without normals. */
static inline void fx_level(kr_cloud *c, const float *pts, const float *nrm, const size_t *idx,
                            size_t m, const kr_pose *world_to_cam)
{
    memset(c, 0, sizeof *c);
    c->width = (int)m;
    c->height = 1;
    c->points = malloc((m ? m : 1) * 3 * sizeof(float));
    c->normals = malloc((m ? m : 1) * 3 * sizeof(float));
    for (size_t j = 0; j < m; j++) {
        size_t i = idx ? idx[j] : j;
        double p[3] = {pts[3 * i], pts[3 * i + 1], pts[3 * i + 2]}, q[3];
        kr_pose_apply(world_to_cam, p, q);
        for (int a = 0; a < 3; a++)
            c->points[3 * j + a] = (float)q[a];
        if (nrm && !isnan(nrm[3 * i])) {
            double n[3] = {nrm[3 * i], nrm[3 * i + 1], nrm[3 * i + 2]}, nr[3];
            kr_pose_rotate(world_to_cam, n, nr);
            for (int a = 0; a < 3; a++)
                c->normals[3 * j + a] = (float)nr[a];
            c->valid_normals++;
        } else {
            c->normals[3 * j] = c->normals[3 * j + 1] = c->normals[3 * j + 2] = NAN;
        }
        c->valid_points++;
    }
}

static inline void fx_cloud_free(kr_cloud *c)
{
    free(c->points);
    free(c->normals);
    memset(c, 0, sizeof *c);
}

/* Loads a bunny scan with PCA normals (10 neighbours) facing the scanner,
 * which looks down the scan's −z axis: the middle of the silhouette bulges
 * towards +z (bun000: mean z 0.046 within 2 cm of the centre against 0.022
 * beyond 6 cm). Returns 0, or 1 when the shared data is absent, −1 on error. */
static inline int fx_bunny(const char *name, float **pts, float **nrm, size_t *n)
{
    char rel[64];
    snprintf(rel, sizeof rel, "bunny/%s", name);
    const char *path = kr_test_data(rel);
    if (!path) return 1;
    if (kr_scan_read_ply(path, pts, n) != KR_OK) return -1;
    kr_kdtree *t = NULL;
    if (kr_kdtree_build(&t, *pts, NULL, *n) != KR_OK) return -1;
    *nrm = malloc(*n * 3 * sizeof(float));
    const float toward[3] = {0, 0, 1};
    kr_status st = kr_kdtree_normals_pca(t, 10, toward, *nrm);
    kr_kdtree_destroy(&t);
    return st == KR_OK ? 0 : -1;
}

/* Ground truth of a bunny scan from bun.conf: a scan point p maps into the
 * common (bun000) frame as R(q)ᵀ p + t, i.e. the pose (R(q)ᵀ, t). */
static inline int fx_bunny_conf(const char *name, kr_pose *pose)
{
    const char *path = kr_test_data("bunny/bun.conf");
    if (!path) return 1;
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    char line[512], file[128];
    int found = -1;
    while (fgets(line, sizeof line, f)) {
        double t[3];
        kr_quat q;
        if (sscanf(line, "bmesh %127s %lf %lf %lf %lf %lf %lf %lf", file, &t[0], &t[1], &t[2], &q.x,
                   &q.y, &q.z, &q.w) == 8 &&
            !strcmp(file, name)) {
            kr_pose R = kr_pose_from_quat(q, NULL);
            for (int r = 0; r < 3; r++)
                for (int c = 0; c < 3; c++)
                    pose->R[3 * r + c] = R.R[3 * c + r];
            memcpy(pose->t, t, sizeof t);
            found = 0;
        }
    }
    fclose(f);
    return found;
}

#endif
