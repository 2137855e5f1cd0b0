/* The live refiner's windows (pipeline/live_refine.c): when keyframes come
 * faster than the refiner's thread refines them, windows still follow each
 * other in keyframe order, and at the end of the source every keyframe has
 * been in one. Posting the newest window whenever the thread was idle
 * skipped keyframes and made the refined trajectory worse than the tracked
 * one on a loaded 2-core machine (docs/BENCHMARKS.md, issue 9 session 4). */
#include "kr_test.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/live_refine.h"

/* A bumpy surface seen by a camera at x = shift, looking along +z, as an
 * organised n×n cloud in the camera frame. */
static float *surface_view(double shift, int n)
{
    float *xyz = malloc(sizeof *xyz * 3 * (size_t)(n * n));
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double u = -0.6 + 1.2 * i / n, v = -0.6 + 1.2 * j / n;
            double z =
                1.5 + 0.05 * sin(11 * u) * cos(9 * v) + 0.03 * sin(23 * u + 17 * v) + 0.1 * u * u;
            float *p = xyz + 3 * (i * n + j);
            p[0] = (float)(u - shift);
            p[1] = (float)v;
            p[2] = (float)z;
        }
    return xyz;
}

KR_TEST(live_refine, windows_in_order_cover_every_keyframe)
{
    enum { FRAMES = 14, SIDE = 60, WINDOW = 4, EVERY = 2 };
    kr_live_refine_config cfg;
    kr_live_refine_config_default(&cfg);
    cfg.enabled = true;
    cfg.window = WINDOW;
    cfg.every = EVERY;
    cfg.keyframe_distance = 0.01; /* every frame moves 2 cm: every frame is a keyframe */
    cfg.keyframe_points = SIDE * SIDE;
    cfg.cell = 0.02;
    kr_live_refine lr;
    REQUIRE_OK(kr_live_refine_init(&lr, &cfg, KR_BACKEND_CPU, 0, false));
    kr_outbox box;
    REQUIRE_OK(kr_outbox_init(&box));
    for (int f = 0; f < FRAMES; f++) {
        double x[6] = {0, 0, 0, 0.02 * f, 0, 0};
        kr_pose tracked = kr_pose_exp(x), refined;
        float *xyz = surface_view(0.02 * f, SIDE);
        kr_cloud cloud = {.width = SIDE, .height = SIDE, .points = xyz};
        /* No waiting: keyframes arrive far faster than windows are refined. */
        CHECK_OK(kr_live_refine_frame(&lr, &box, (uint64_t)f, f / 30.0, &tracked, true, &cloud,
                                      &refined));
        free(xyz);
    }
    CHECK_EQ(lr.kf.n, FRAMES);
    unsigned long long during = (unsigned long long)lr.refinements;
    CHECK_OK(kr_live_refine_finish(&lr, &box, true));
    printf("    %d keyframes, %llu windows refined (%llu while frames came), %llu failed\n",
           lr.kf.n, (unsigned long long)lr.refinements, during, (unsigned long long)lr.failures);
    /* Windows end at keyframes 2, 4, …, 14 (every EVERY, the first at 2):
     * seven of them, all run, none skipped however the thread was timed. */
    CHECK_EQ(lr.refined_to, FRAMES);
    CHECK_EQ((long long)(lr.refinements + lr.failures), (long long)(FRAMES / EVERY));
    CHECK_EQ((long long)lr.failures, 0);
    kr_live_refine_free(&lr);
    kr_outbox_destroy(&box);
}
