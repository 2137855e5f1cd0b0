/* Refinement over several CUDA devices (pipeline/refine/refine_engine.c, --devices):
 * each device takes a share of every view's grid points and the sums are
 * added on the host, so the poses match the one-device run. With one GPU the
 * list "0,0" still splits the work over two contexts (streams) on it. Needs
 * a GPU: skips elsewhere (label gpu). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/scan.h"
#include "kinreg/refine.h"
#include "parity_fixture.h"
#include "room_fixture.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* The same problem as parity_refine: 10 views perturbed by 3° and 6 mm. */
enum { V = 10 };

static void start_poses(const kr_pose *truth, kr_pose *start)
{
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
}

static void refine_on(const int *devices, int n_devices, const kr_refine_view *views,
                      const kr_pose *start, kr_pose *out, kr_refine_result *res, kr_device *gpu)
{
    kr_refine_config cfg;
    kr_refine_config_default(&cfg);
    cfg.cell = 0.003;
    memcpy(cfg.devices, devices, sizeof *devices * (size_t)n_devices);
    cfg.n_devices = n_devices;
    memcpy(out, start, sizeof *out * V);
    CHECK_OK(kr_refine(&cfg, gpu, views, V, out, res));
}

KR_TEST(gpu_refine_devices, split_over_devices_matches_one_device)
{
    NEED_CUDA();
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V], start[V], one[V], split[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 60000, xyz, n, truth));
    start_poses(truth, start);
    kr_refine_view views[V];
    for (int k = 0; k < V; k++)
        views[k] = (kr_refine_view){xyz[k], n[k]};
    kr_device *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    int all[KR_REFINE_MAX_DEVICES], n_all = 0;
    REQUIRE_OK(kr_refine_devices_parse("all", all, &n_all));
    kr_refine_result r1, r2;
    refine_on(all, 0, views, start, one, &r1, gpu);
    CHECK_EQ(r1.devices, 1);
    /* Every visible device, or two contexts on the only one. */
    int list[KR_REFINE_MAX_DEVICES] = {0, 0}, count = 2;
    if (n_all >= 2) {
        memcpy(list, all, sizeof all);
        count = n_all;
    }
    refine_on(list, count, views, start, split, &r2, gpu);
    CHECK_EQ(r2.devices, count);
    printf("    %d devices (%s): %.1f ms against %.1f ms on one, %d and %d LM iterations\n", count,
           n_all >= 2 ? "all" : "0,0", 1000 * r2.seconds, 1000 * r1.seconds, r2.iterations,
           r1.iterations);
    /* The device sums are double atomics in any order, as the one-device
     * run's: the parity tolerance of parity_refine holds. */
    for (int k = 0; k < V; k++) {
        kr_pose ci = kr_pose_inv(&one[k]), d = kr_pose_mul(&ci, &split[k]);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.02);
        CHECK_LT(kr_pose_translation_norm(&d), 2e-4);
    }
    /* And the refinement did its work: back near the truth. */
    for (int k = 1; k < V; k++) {
        kr_pose g0 = kr_pose_inv(&split[0]), t0 = kr_pose_inv(&truth[0]);
        kr_pose re = kr_pose_mul(&g0, &split[k]), rt = kr_pose_mul(&t0, &truth[k]);
        kr_pose ri = kr_pose_inv(&rt), d = kr_pose_mul(&ri, &re);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.5);
    }
    for (int k = 0; k < V; k++)
        free(xyz[k]);
    kr_device_destroy(&gpu);
}

/* The long-scan settings (signed fields on the room, a 2 cm grid) on every
 * visible device (or two contexts on the only one): the same poses as the
 * CPU engine, back within 1 mm / 0.1° of the truth, and the time split into
 * fields and sums (both on the devices: pipeline/refine/refine_fields_cuda.cu,
 * pipeline/refine/refine_cuda.cu). */
KR_TEST(gpu_refine_devices, room_scan_split_matches_the_cpu)
{
    NEED_CUDA();
    enum { R = 24 };
    float *xyz[R];
    size_t n[R];
    kr_pose truth[R], start[R], cpu[R], split[R];
    kr_refine_view views[R];
    REQUIRE_OK(room_fixture(R, xyz, n, views, truth, start));
    kr_refine_config cfg;
    room_refine_config(&cfg);
    kr_refine_result rc, rg;
    memcpy(cpu, start, sizeof cpu);
    REQUIRE_OK(kr_refine(&cfg, NULL, views, R, cpu, &rc));
    int all[KR_REFINE_MAX_DEVICES], n_all = 0;
    REQUIRE_OK(kr_refine_devices_parse("all", all, &n_all));
    int list[KR_REFINE_MAX_DEVICES] = {0, 0}, count = 2;
    if (n_all >= 2) {
        memcpy(list, all, sizeof all);
        count = n_all;
    }
    memcpy(cfg.devices, list, sizeof *list * (size_t)count);
    cfg.n_devices = count;
    kr_device *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    memcpy(split, start, sizeof split);
    REQUIRE_OK(kr_refine(&cfg, gpu, views, R, split, &rg));
    CHECK_EQ(rg.devices, count);
    printf("    %d devices: %.1f ms (fields %.1f, sums %.1f in %d evaluations); CPU %.1f ms\n",
           count, 1000 * rg.seconds, 1000 * rg.fields_seconds, 1000 * rg.sums_seconds,
           rg.evaluations, 1000 * rc.seconds);
    kr_pose g0 = kr_pose_inv(&split[0]), t0 = kr_pose_inv(&truth[0]);
    for (int k = 0; k < R; k++) {
        kr_pose ci = kr_pose_inv(&cpu[k]), d = kr_pose_mul(&ci, &split[k]);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.02);
        CHECK_LT(kr_pose_translation_norm(&d), 2e-4);
        kr_pose re = kr_pose_mul(&g0, &split[k]), rt = kr_pose_mul(&t0, &truth[k]);
        kr_pose ri = kr_pose_inv(&rt), e = kr_pose_mul(&ri, &re);
        CHECK_LT(kr_pose_angle(&e) * 180 / M_PI, 0.1);
        CHECK_LT(kr_pose_translation_norm(&e), 1e-3);
    }
    for (int k = 0; k < R; k++)
        free(xyz[k]);
    kr_device_destroy(&gpu);
}
