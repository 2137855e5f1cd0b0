/* Signed distance fields of refinement (pipeline/refine/dfield_signed.c,
 * pipeline/refine/refine_normals.c, kr_refine_config.signed_field): exact on a plane
 * where the unsigned field is not, and a loop of views around the synthetic
 * room refined back to its ground truth within 1 mm and 0.1°. */
#include "kr_test.h"
#include "room_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/refine/dfield.h"
#include "pipeline/refine/refine_internal.h"
#include "kinreg/refine.h"

/* A tilted plane a metre in front of the sensor, sampled on an irregular
 * pattern (rows of points with random offsets), so the nearest point of a
 * corner lies anywhere off its foot on the plane. */
enum { PLANE_POINTS = 40000 };
static const double plane_n[3] = {0.2, -0.3, -0.932738}; /* unit, towards the sensor */
static const double plane_c[3] = {0.05, -0.02, 1.0};

static float *plane_points(size_t *n)
{
    float *xyz = malloc(sizeof *xyz * 3 * PLANE_POINTS);
    /* Two unit vectors in the plane. */
    double a[3] = {1, 0, 0}, dot = plane_n[0], b[3];
    for (int i = 0; i < 3; i++)
        a[i] -= dot * plane_n[i];
    double la = sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2]);
    for (int i = 0; i < 3; i++)
        a[i] /= la;
    b[0] = plane_n[1] * a[2] - plane_n[2] * a[1];
    b[1] = plane_n[2] * a[0] - plane_n[0] * a[2];
    b[2] = plane_n[0] * a[1] - plane_n[1] * a[0];
    unsigned s = 5;
    for (int k = 0; k < PLANE_POINTS; k++) {
        double u = 0.4 * (kr_urand(&s) - 0.5), v = 0.4 * (kr_urand(&s) - 0.5);
        for (int i = 0; i < 3; i++)
            xyz[3 * k + i] = (float)(plane_c[i] + u * a[i] + v * b[i]);
    }
    *n = PLANE_POINTS;
    return xyz;
}

static double plane_distance(const float p[3])
{
    double d = 0;
    for (int i = 0; i < 3; i++)
        d += plane_n[i] * (p[i] - plane_c[i]);
    return d;
}

KR_TEST(refine_signed, field_is_the_plane_distance)
{
    size_t n;
    float *xyz = plane_points(&n);
    kr_refine_view view = {xyz, n};
    float **normals = NULL;
    REQUIRE_OK(kr_refine_normals(&view, 1, &normals, NULL));
    /* PCA normals of a plane, turned towards the sensor at the origin. */
    for (size_t k = 0; k < n; k += 997) {
        double dot = 0;
        for (int i = 0; i < 3; i++)
            dot += normals[0][3 * k + i] * plane_n[i];
        CHECK_GT(dot, 0.9999);
    }
    const float h = 0.01f;
    kr_dfield sf, uf;
    REQUIRE_OK(kr_dfield_build_signed(&sf, xyz, normals[0], n, 1, h, 2, 1.0, 1));
    REQUIRE_OK(kr_dfield_build(&uf, xyz, n, 1, h, 2, 1.0, 1));
    kr_dfield_lookup sv = kr_dfield_lookup_of(&sf), uv = kr_dfield_lookup_of(&uf);
    /* Interpolated values at random places near the plane, against the
     * analytic distance: signed exact to float rounding, while the unsigned
     * field reads high near the surface. */
    unsigned s = 11;
    double worst_signed = 0, worst_unsigned = 0;
    int sampled = 0;
    for (int t = 0; t < 20000; t++) {
        double u = 0.3 * (kr_urand(&s) - 0.5), v = 0.3 * (kr_urand(&s) - 0.5),
               d = 1.5 * h * (kr_urand(&s) - 0.5);
        float p[3] = {(float)(plane_c[0] + u), (float)(plane_c[1] + v), 0};
        /* On the plane's normal line through (u, v): solve for z, then move by d. */
        p[2] = (float)(plane_c[2] -
                       (plane_n[0] * (p[0] - plane_c[0]) + plane_n[1] * (p[1] - plane_c[1])) /
                           plane_n[2]);
        for (int i = 0; i < 3; i++)
            p[i] += (float)(d * plane_n[i]);
        float vs, vu, g[3];
        if (!kr_dfield_sample(&sv, p, &vs, g) || !kr_dfield_sample(&uv, p, &vu, g)) continue;
        sampled++;
        double truth = plane_distance(p);
        worst_signed = fmax(worst_signed, fabs(vs - truth));
        worst_unsigned = fmax(worst_unsigned, fabs(vu - fabs(truth)));
    }
    CHECK_GT(sampled, 10000);
    CHECK_LT(worst_signed, 2e-5);   /* 0.02 mm on a 10 mm grid */
    CHECK_GT(worst_unsigned, 1e-3); /* the bias the signed field removes */
    kr_dfield_free(&sf);
    kr_dfield_free(&uf);
    kr_refine_normals_free(normals, 1);
    free(xyz);
}

/* The largest error of poses relative to view 0, against the truth. */
static void largest_error(const kr_pose *poses, const kr_pose *truth, int V, double *deg,
                          double *mm)
{
    *deg = *mm = 0;
    kr_pose g0 = kr_pose_inv(&poses[0]), t0 = kr_pose_inv(&truth[0]);
    for (int k = 1; k < V; k++) {
        kr_pose re = kr_pose_mul(&g0, &poses[k]), rt = kr_pose_mul(&t0, &truth[k]);
        kr_pose ri = kr_pose_inv(&rt), d = kr_pose_mul(&ri, &re);
        *deg = fmax(*deg, kr_pose_angle(&d) * 180 / M_PI);
        *mm = fmax(*mm, 1000 * kr_pose_translation_norm(&d));
    }
}

KR_TEST(refine_signed, room_loop_returns_to_the_ground_truth)
{
    enum { V = 24 };
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V], start[V], out[V];
    kr_refine_view views[V];
    REQUIRE_OK(room_fixture(V, xyz, n, views, truth, start));
    double deg0, mm0, deg, mm;
    largest_error(start, truth, V, &deg0, &mm0);
    CHECK_GT(deg0, 0.1);
    CHECK_GT(mm0, 3);
    kr_refine_config cfg;
    room_refine_config(&cfg);
    memcpy(out, start, sizeof out);
    kr_refine_result res;
    REQUIRE_OK(kr_refine(&cfg, NULL, views, V, out, &res));
    largest_error(out, truth, V, &deg, &mm);
    printf("    signed: %.3f deg %.2f mm -> %.4f deg %.3f mm, %d LM iterations, %.2f s\n", deg0,
           mm0, deg, mm, res.iterations, res.seconds);
    CHECK_LT(deg, 0.1);
    CHECK_LT(mm, 1.0);
    CHECK_GT(res.fields_seconds, 0);
    CHECK_GT(res.sums_seconds, 0);
    CHECK_LE(res.fields_seconds + res.sums_seconds, res.seconds);
    for (int k = 0; k < V; k++)
        free(xyz[k]);
}
