/* Parity: multi-view refinement on the CUDA engine against its OpenMP twin
 * (DESIGN.md §4) — the influenced-corner distances, the pair sums at the same
 * poses (all pairs and the thesis's star form), and a whole refinement of
 * synthetic views. Skips cleanly without a CUDA device (CTest label gpu). Also
 * prints the time of both engines for 10 synthetic views. */
#include "kr_test.h"
#include "parity_fixture.h"

#include <stdlib.h>
#include <time.h>

#include "kinreg/scan.h"
#include "pipeline/refine/dfield.h"
#include "pipeline/refine/refine_engine.h"
#include "kinreg/device.h"
#include "kinreg/refine.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

static kr_refine_posef fpose(const kr_pose *p)
{
    kr_refine_posef f;
    for (int i = 0; i < 9; i++)
        f.R[i] = (float)p->R[i];
    for (int i = 0; i < 3; i++)
        f.t[i] = (float)p->t[i];
    return f;
}

/* The pair sums of the two engines on the same host-built fields. (The
 * device-built fields' own parity is gpu_refine_fields'.) */
KR_TEST(parity_refine, sums_match)
{
    NEED_CUDA();
    enum { V = 4 };
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 40000, xyz, n, truth));
    kr_device *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    kr_refine_engine *ec = NULL, *eg = NULL;
    REQUIRE_OK(kr_refine_engine_create(&ec, NULL, NULL, 0));
    REQUIRE_OK(kr_refine_engine_create(&eg, gpu, NULL, 0));
    kr_dfield fc[V];
    for (int k = 0; k < V; k++)
        REQUIRE_OK(kr_refine_engine_field(ec, &fc[k], xyz[k], NULL, n[k], 1, 0.003f, 2, 1.0, 1));
    /* Sums at perturbed poses. */
    kr_refine_posef poses[V];
    unsigned s = 3;
    for (int k = 0; k < V; k++) {
        double x[6];
        for (int i = 0; i < 6; i++)
            x[i] = k ? 0.01 * kr_nrand(&s) : 0;
        kr_pose d = kr_pose_exp(x), p = kr_pose_mul(&d, &truth[k]);
        poses[k] = fpose(&p);
    }
    for (int star = 0; star <= 1; star++) {
        int pairs[2 * V * V], np = 0;
        for (int i = 0; i < V; i++)
            for (int j = 0; j < V; j++)
                if (i != j && (!star || i == 0)) {
                    pairs[2 * np] = i;
                    pairs[2 * np + 1] = j;
                    np++;
                }
        kr_refine_problem pb = {
            .views = V, .fields = fc, .star = star, .gauge = 0, .huber = 0.003f, .cap = 0.006f};
        kr_refine_acc ac[V * V], ag[V * V];
        REQUIRE_OK(kr_refine_engine_load(ec, &pb));
        REQUIRE_OK(kr_refine_engine_eval(ec, &pb, poses, pairs, np, ac));
        REQUIRE_OK(kr_refine_engine_load(eg, &pb));
        REQUIRE_OK(kr_refine_engine_eval(eg, &pb, poses, pairs, np, ag));
        for (int p = 0; p < np; p++) {
            CHECK_EQ(ac[p].count, ag[p].count);
            const double *a = (const double *)&ac[p], *b = (const double *)&ag[p];
            for (int c = 0; c < (int)(sizeof(kr_refine_acc) / sizeof(double)); c++)
                /* Each term is float math that nvcc contracts into FMAs and
                 * the host does not; summed with cancellation, pair sums
                 * measured up to 1.5e-5 apart relative on an H100
                 * (2026-11-23) with identical counts, so 1e-4. */
                CHECK_NEAR(b[c], a[c], 1e-4 * (1 + fabs(a[c])) + 1e-8 * ac[p].count);
        }
    }
    for (int k = 0; k < V; k++) {
        kr_dfield_free(&fc[k]);
        free(xyz[k]);
    }
    kr_refine_engine_destroy(&ec);
    kr_refine_engine_destroy(&eg);
    kr_device_destroy(&gpu);
}

static double seconds(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + 1e-9 * t.tv_nsec;
}

/* 10 synthetic views perturbed by 3° and 6 mm: both engines reach the same
 * poses; prints each engine's time (the GPU target: 50 ms). */
KR_TEST(parity_refine, ten_views_refine_alike)
{
    NEED_CUDA();
    enum { V = 10 };
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V], start[V], pc[V], pg[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 60000, xyz, n, truth));
    unsigned s = 17;
    for (int k = 0; k < V; k++) {
        double x[6] = {0};
        for (int i = 0; i < 3 && k; i++)
            x[i] = 0.03 * kr_nrand(&s);
        for (int i = 3; i < 6 && k; i++)
            x[i] = 0.004 * kr_nrand(&s);
        kr_pose d = kr_pose_exp(x);
        start[k] = kr_pose_mul(&d, &truth[k]);
    }
    kr_refine_view views[V];
    for (int k = 0; k < V; k++)
        views[k] = (kr_refine_view){xyz[k], n[k]};
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    cfg.cell = 0.003;
    kr_device *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    kr_refine_result rc, rg;
    memcpy(pc, start, sizeof pc);
    memcpy(pg, start, sizeof pg);
    double t0 = seconds();
    REQUIRE_OK(kr_refine(&cfg, NULL, views, V, pc, &rc));
    double t1 = seconds();
    REQUIRE_OK(kr_refine(&cfg, gpu, views, V, pg, &rg));
    /* Warm: a second GPU run, as a live refiner would see it. */
    memcpy(pg, start, sizeof pg);
    double t2 = seconds();
    REQUIRE_OK(kr_refine(&cfg, gpu, views, V, pg, &rg));
    double t3 = seconds();
    printf("    10 synthetic views, %d LM iterations: cpu %.1f ms, cuda %.1f ms (warm; kr_refine's "
           "own: %.1f ms)\n",
           rg.iterations, 1000 * (t1 - t0), 1000 * (t3 - t2), 1000 * rg.seconds);
    CHECK_EQ(rg.backend, KR_BACKEND_CUDA);
    for (int k = 0; k < V; k++) {
        kr_pose ci = kr_pose_inv(&pc[k]), d = kr_pose_mul(&ci, &pg[k]);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.02);
        CHECK_LT(kr_pose_translation_norm(&d), 2e-4);
    }
    for (int k = 0; k < V; k++)
        free(xyz[k]);
    kr_device_destroy(&gpu);
}
