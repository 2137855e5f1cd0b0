/* Refinement over several CUDA devices (pipeline/refine/refine_engine.c, --devices):
 * each device takes a share of every view's grid points and the sums are
 * added on the host, so the poses match the one-device run. With one GPU the
 * list "0,0" still splits the work over two contexts (streams) on it; and a
 * device that runs out of memory ends the run with an error, not a crash or
 * a hang. Needs a GPU: skips elsewhere (label gpu). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/scan.h"
#include "kinreg/refine.h"
#include "device_hold.h"
#include "parity.h"
#include "pipeline/refine/refine_fit.h"
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

/* The device lists to split over: every visible device, or two contexts on
 * the only one. */
static int split_list(int *list)
{
    int all[KR_REFINE_MAX_DEVICES], n_all = 0;
    CHECK_OK(kr_refine_devices_parse("all", all, &n_all));
    list[0] = list[1] = 0;
    if (n_all >= 2) {
        memcpy(list, all, sizeof all);
        return n_all;
    }
    return 2;
}

/* One refinement problem: its views, start poses, settings and truth. */
typedef struct {
    int views;
    kr_refine_view *view;
    const kr_pose *start, *truth;
    kr_refine_config cfg;
    kr_device *gpu;
    double truth_deg, truth_m; /* how near the truth the split run lands (m: 0 unchecked) */
    bool every_view;           /* near the truth: every view, else views 1.. against view 0 */
} split_in;

/* kr_refine of the problem with `n_devices` of `devices` on the CUDA device
 * (n_devices < 0: the CPU engine); the poses, and the devices it used. */
static bool refine_with(split_in *in, const int *devices, int n_devices, kr_parity_out *out)
{
    kr_refine_config cfg = in->cfg;
    if (n_devices >= 0) {
        memcpy(cfg.devices, devices, sizeof *devices * (size_t)n_devices);
        cfg.n_devices = n_devices;
    }
    kr_pose *p = malloc(sizeof *p * (size_t)in->views);
    if (!p) return false;
    memcpy(p, in->start, sizeof *p * (size_t)in->views);
    kr_refine_result r;
    kr_status st = kr_refine(&cfg, n_devices >= 0 ? in->gpu : NULL, in->view, in->views, p, &r);
    CHECK_OK(st);
    if (st == KR_OK) {
        printf("    %d devices: %.1f ms (fields %.1f, sums %.1f in %d evaluations), %d LM "
               "iterations\n",
               n_devices < 0 ? 0 : r.devices, 1000 * r.seconds, 1000 * r.fields_seconds,
               1000 * r.sums_seconds, r.evaluations, r.iterations);
        kr_parity_put_poses(out, "poses", p, (size_t)in->views);
        kr_parity_put_scalar(out, "devices used", r.devices);
    }
    free(p);
    return st == KR_OK;
}

/* The refinement did its work: back near the truth, relative to view 0. */
static void near_the_truth(const split_in *in, const kr_parity_out *out)
{
    const kr_parity_quantity *q = kr_parity_get(out, "poses");
    if (!q) return;
    kr_pose p0, t0 = kr_pose_inv(&in->truth[0]);
    memcpy(p0.R, q->v, sizeof p0.R);
    memcpy(p0.t, q->v + 9, sizeof p0.t);
    kr_pose g0 = kr_pose_inv(&p0);
    for (int k = in->every_view ? 0 : 1; k < in->views; k++) {
        kr_pose pk;
        memcpy(pk.R, q->v + 12 * k, sizeof pk.R);
        memcpy(pk.t, q->v + 12 * k + 9, sizeof pk.t);
        kr_pose re = kr_pose_mul(&g0, &pk), rt = kr_pose_mul(&t0, &in->truth[k]);
        kr_pose ri = kr_pose_inv(&rt), d = kr_pose_mul(&ri, &re);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, in->truth_deg);
        if (in->truth_m > 0) CHECK_LT(kr_pose_translation_norm(&d), in->truth_m);
    }
}

static bool on_one_device(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    int all[KR_REFINE_MAX_DEVICES], n_all = 0;
    CHECK_OK(kr_refine_devices_parse("all", all, &n_all));
    bool ok = refine_with(fixture, all, 0, out);
    if (ok) CHECK_EQ(kr_parity_get(out, "devices used")->v[0], 1);
    return ok;
}

static bool on_the_cpu(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    return refine_with(fixture, NULL, -1, out);
}

static bool split_staged(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out);

static bool split(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    int list[KR_REFINE_MAX_DEVICES];
    int count = split_list(list);
    bool ok = refine_with(fixture, list, count, out);
    if (ok) CHECK_EQ(kr_parity_get(out, "devices used")->v[0], count);
    if (ok) near_the_truth(fixture, out);
    return ok;
}

/* The same split with every field copied through the host. */
static bool split_staged(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    split_in *in = fixture;
    in->cfg.staged_copies = true;
    bool ok = split(dev, fixture, arg, out);
    in->cfg.staged_copies = false;
    return ok;
}

/* The device sums are double atomics in any order, as the one-device run's
 * (and the CPU's): the parity tolerance of parity_refine holds. */
static const kr_parity_step split_steps[] = {
    {.name = "split over devices",
     .cpu = on_one_device,
     .cuda = split,
     .checks = {PARITY_CHECK("poses", KR_PARITY_DEGREES, 0.02, .below = true),
                PARITY_CHECK("poses", KR_PARITY_DISTANCE, 2e-4, .below = true)},
     .cpu_name = "one device",
     .cuda_name = "split"},
};

KR_TEST(gpu_refine_devices, split_over_devices_matches_one_device)
{
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return;
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V], start[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 60000, xyz, n, truth));
    start_poses(truth, start);
    kr_refine_view views[V];
    for (int k = 0; k < V; k++)
        views[k] = (kr_refine_view){xyz[k], n[k]};
    split_in in = {
        .views = V, .view = views, .start = start, .truth = truth, .gpu = gpu, .truth_deg = 0.5};
    kr_refine_config_default(&in.cfg);
    in.cfg.cell = 0.003;
    kr_parity_run(split_steps, 1, &in);
    for (int k = 0; k < V; k++)
        free(xyz[k]);
}

/* The two routes of a field between devices, peer to peer and through the
 * host (or, with one GPU, two contexts on it): the same fields, so the same
 * poses within the sums' rounding (the 1 µm / 1e-4°). */
static const kr_parity_step route_steps[] = {
    {.name = "staged against peer copies",
     .cpu = split,
     .cuda = split_staged,
     .checks = {PARITY_CHECK("poses", KR_PARITY_DEGREES, 1e-4, .below = true),
                PARITY_CHECK("poses", KR_PARITY_DISTANCE, 1e-6, .below = true)},
     .cpu_name = "peer",
     .cuda_name = "staged"},
};

KR_TEST(gpu_refine_devices, staged_copies_match_peer_copies)
{
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return;
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V], start[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 60000, xyz, n, truth));
    start_poses(truth, start);
    kr_refine_view views[V];
    for (int k = 0; k < V; k++)
        views[k] = (kr_refine_view){xyz[k], n[k]};
    split_in in = {
        .views = V, .view = views, .start = start, .truth = truth, .gpu = gpu, .truth_deg = 0.5};
    kr_refine_config_default(&in.cfg);
    in.cfg.cell = 0.003;
    kr_parity_run(route_steps, 1, &in);
    for (int k = 0; k < V; k++)
        free(xyz[k]);
}

static const kr_parity_step room_steps[] = {
    {.name = "room scan split over devices",
     .cpu = on_the_cpu,
     .cuda = split,
     .checks = {PARITY_CHECK("poses", KR_PARITY_DEGREES, 0.02, .below = true),
                PARITY_CHECK("poses", KR_PARITY_DISTANCE, 2e-4, .below = true)},
     .cuda_name = "split"},
};

/* The long-scan settings (signed fields on the room, a 2 cm grid) on every
 * visible device (or two contexts on the only one): the same poses as the
 * CPU engine, back within 1 mm / 0.1° of the truth, and the time split into
 * fields and sums (both on the devices: pipeline/refine/refine_fields_cuda.cu,
 * pipeline/refine/refine_cuda.cu). */
KR_TEST(gpu_refine_devices, room_scan_split_matches_the_cpu)
{
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return;
    enum { R = 24 };
    float *xyz[R];
    size_t n[R];
    kr_pose truth[R], start[R];
    kr_refine_view views[R];
    REQUIRE_OK(room_fixture(R, xyz, n, views, truth, start));
    split_in in = {.views = R,
                   .view = views,
                   .start = start,
                   .truth = truth,
                   .gpu = gpu,
                   .truth_deg = 0.1,
                   .truth_m = 1e-3,
                   .every_view = true};
    room_refine_config(&in.cfg);
    kr_parity_run(room_steps, 1, &in);
    for (int k = 0; k < R; k++)
        free(xyz[k]);
}

/* The independent measure on the devices (pipeline/refine/refine_fit_cuda.cu)
 * gives the host's figures bit for bit: on the kr_device's own GPU, split
 * over the devices (or two contexts of the one GPU), with the occupancy
 * skip (the default radius) and without it (a wider one). */
KR_TEST(gpu_refine_devices, measure_on_devices_matches_the_host)
{
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return;
    enum { R = 16 };
    float *xyz[R];
    size_t n[R];
    kr_pose truth[R], poses[R];
    kr_refine_view views[R];
    REQUIRE_OK(room_fixture(R, xyz, n, views, truth, poses));
    kr_refine_fitter *f = NULL;
    REQUIRE_OK(kr_refine_fitter_create(views, R, &f));
    int split[KR_REFINE_MAX_DEVICES], n_split = split_list(split);
    for (int wide = 0; wide < 2; wide++) {
        kr_refine_fit host, dev;
        double ov_host[R], ov_dev[R];
        REQUIRE_OK(kr_refine_fitter_use_devices(f, cpu, NULL, 0));
        REQUIRE_OK(kr_refine_fitter_eval(f, poses, 0, NULL, &host));
        double radius = wide ? 2 * host.radius : 0;
        REQUIRE_OK(kr_refine_fitter_eval(f, poses, radius, ov_host, &host));
        for (int how = 0; how < 2; how++) {
            REQUIRE_OK(kr_refine_fitter_use_devices(f, gpu, split, how ? n_split : 0));
            REQUIRE_OK(kr_refine_fitter_eval(f, poses, radius, ov_dev, &dev));
            printf("    radius %.2f mm, %s: score %.9g mm (host %.9g), overlap %.6f (%.6f)\n",
                   dev.radius * 1e3, how ? "split" : "one device", dev.score * 1e3,
                   host.score * 1e3, dev.overlap, host.overlap);
            CHECK(dev.overlap > 0.2 && dev.overlap < 1);
            CHECK(dev.score == host.score);
            CHECK(dev.overlap == host.overlap);
            CHECK(dev.residual == host.residual);
            CHECK(memcmp(ov_dev, ov_host, sizeof ov_host) == 0);
        }
    }
    kr_refine_fitter_destroy(&f);
    for (int k = 0; k < R; k++)
        free(xyz[k]);
}

/* The most of each pose's difference, in metres and degrees. */
static void poses_apart(const kr_pose *a, const kr_pose *b, int n, double *m, double *deg)
{
    *m = *deg = 0;
    for (int k = 0; k < n; k++) {
        kr_pose inv = kr_pose_inv(&a[k]), d = kr_pose_mul(&inv, &b[k]);
        *m = fmax(*m, kr_pose_translation_norm(&d));
        *deg = fmax(*deg, kr_pose_angle(&d) * 180 / M_PI);
    }
}

/* A device of the split that runs out of memory (another program took it,
 * as on a shared GPU): the refinement returns an error that says it was the
 * device's memory, the poses given are left as they were, and once the
 * memory is back the same call gives the poses of a run that never failed
 * (nothing stuck in the devices or the library). The ctest timeout is the
 * "no hang". */
KR_TEST(gpu_refine_devices, a_device_out_of_memory_ends_the_run_cleanly)
{
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return;
    enum { R = 16 };
    float *xyz[R];
    size_t n[R];
    kr_pose truth[R], start[R], good[R], p[R];
    kr_refine_view views[R];
    REQUIRE_OK(room_fixture(R, xyz, n, views, truth, start));
    kr_refine_config cfg;
    room_refine_config(&cfg);
    cfg.n_devices = split_list(cfg.devices);
    kr_refine_result r;
    memcpy(good, start, sizeof good);
    CHECK_OK(kr_refine(&cfg, gpu, views, R, good, &r));

    kr_test_device_hold hold;
    int last = cfg.devices[cfg.n_devices - 1];
    if (kr_test_device_hold_begin(&hold, last, (size_t)4 << 20)) {
        memcpy(p, start, sizeof p);
        kr_status s = kr_refine(&cfg, gpu, views, R, p, &r);
        char why[512];
        snprintf(why, sizeof why, "%s", s != KR_OK ? kr_last_error() : "");
        kr_test_device_hold_end(&hold);
        printf("    device %d out of memory: %s\n", last, s != KR_OK ? why : "(no error)");
        CHECK(s != KR_OK);
        CHECK_CONTAINS(why, "memory");
        CHECK(memcmp(p, start, sizeof p) == 0);
    } else {
        CHECK(!"the device's memory could be held");
    }

    memcpy(p, start, sizeof p);
    CHECK_OK(kr_refine(&cfg, gpu, views, R, p, &r));
    double m, deg;
    poses_apart(good, p, R, &m, &deg);
    printf("    after the memory came back: %.3g um, %.3g deg from the first run\n", 1e6 * m, deg);
    CHECK_LT(m, 1e-6);
    CHECK_LT(deg, 1e-4);
    for (int k = 0; k < R; k++)
        free(xyz[k]);
}
