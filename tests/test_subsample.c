/* Voxel subsampling (pipeline/register/subsample.c) against the definition, done the
 * slow way: grow the voxel by half pass by pass until at most max_points
 * voxels are occupied, keep the first point of each (found by comparing
 * every point's voxel with every earlier one's). The library starts near
 * the voxel needed instead; it must land on the same voxel and keep the
 * same points, in order. */
#include "kr_test.h"

#include <stdint.h>
#include <stdlib.h>

#include "pipeline/register/subsample.h"

static void voxel_of(const float *p, double voxel, int64_t v[3])
{
    for (int a = 0; a < 3; a++)
        v[a] = (int64_t)floor(p[a] * (1.0 / voxel));
}

/* The first point of each occupied voxel: marks in keep, returns the count. */
static size_t reference_pass(const float *pts, size_t n, double voxel, unsigned char *keep)
{
    size_t count = 0;
    for (size_t i = 0; i < n; i++) {
        const float *p = pts + 3 * i;
        keep[i] = 0;
        if (!(p[0] == p[0] && p[1] == p[1] && p[2] == p[2])) continue;
        int64_t vi[3];
        voxel_of(p, voxel, vi);
        bool first = true;
        for (size_t j = 0; j < i && first; j++) {
            if (!keep[j]) continue;
            int64_t vj[3];
            voxel_of(pts + 3 * j, voxel, vj);
            first = !(vi[0] == vj[0] && vi[1] == vj[1] && vi[2] == vj[2]);
        }
        keep[i] = first;
        count += first;
    }
    return count;
}

/* A room-like cloud: points on the floor and two walls, some NaN. */
static float *surface_cloud(size_t n, unsigned seed)
{
    float *pts = malloc(3 * n * sizeof *pts);
    for (size_t i = 0; pts && i < n; i++) {
        float u[2];
        for (int a = 0; a < 2; a++)
            u[a] = (float)(3 * kr_urand(&seed));
        float *p = pts + 3 * i;
        switch (i % 3) {
        case 0:
            p[0] = u[0], p[1] = 0, p[2] = u[1];
            break;
        case 1:
            p[0] = 0, p[1] = u[0], p[2] = u[1];
            break;
        default:
            p[0] = u[0], p[1] = u[1], p[2] = 3;
            break;
        }
        if (i % 97 == 5) p[1] = NAN;
    }
    return pts;
}

static void check_against_reference(size_t n, double start, size_t max_points, unsigned seed)
{
    float *pts = surface_cloud(n, seed), *ref = surface_cloud(n, seed);
    unsigned char *keep = malloc(n);
    REQUIRE(pts && ref && keep);
    double voxel = start;
    size_t count = reference_pass(ref, n, voxel, keep);
    for (int pass = 0; count > max_points && pass < 64; pass++) {
        voxel *= 1.5;
        count = reference_pass(ref, n, voxel, keep);
    }
    size_t kept = 0;
    double used = 0;
    CHECK_OK(kr_voxel_subsample(pts, n, start, max_points, &kept, &used));
    CHECK(used == voxel);
    CHECK_EQ(kept, count);
    CHECK_LE(kept, max_points);
    size_t w = 0;
    for (size_t i = 0; i < n && w < kept; i++)
        if (keep[i]) {
            CHECK(memcmp(pts + 3 * w, ref + 3 * i, 3 * sizeof *pts) == 0);
            w++;
        }
    free(pts);
    free(ref);
    free(keep);
}

KR_TEST(subsample, lands_on_the_voxel_growing_pass_by_pass_would)
{
    /* Many growths (a 2 mm start), a few, one, none (max above the count). */
    check_against_reference(6000, 0.002, 300, 1);
    check_against_reference(6000, 0.02, 1000, 2);
    check_against_reference(6000, 0.2, 200, 3);
    check_against_reference(3000, 0.05, 5000, 4);
    /* A start far too small: the estimate is capped, and a single point. */
    check_against_reference(2000, 1e-6, 50, 5);
    check_against_reference(2000, 0.1, 1, 6);
}

KR_TEST(subsample, bad_arguments_are_refused)
{
    float p[3] = {0, 0, 0};
    size_t kept;
    CHECK_EQ(kr_voxel_subsample(NULL, 1, 0.1, 10, &kept, NULL), KR_ERR_INVALID_ARG);
    CHECK_EQ(kr_voxel_subsample(p, 1, 0, 10, &kept, NULL), KR_ERR_INVALID_ARG);
    CHECK_EQ(kr_voxel_subsample(p, 1, 0.1, 0, &kept, NULL), KR_ERR_INVALID_ARG);
    CHECK_OK(kr_voxel_subsample(p, 0, 0.1, 10, &kept, NULL));
    CHECK_EQ(kept, 0);
}
