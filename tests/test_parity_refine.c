/* Parity: multi-view refinement on the CUDA engine against its OpenMP twin
 * (DESIGN.md §4) — the influenced-corner distances, the pair sums at the same
 * poses (all pairs and the thesis's star form), and a whole refinement of
 * synthetic views. Skips cleanly without a CUDA device (CTest label gpu). The
 * engines' times are `kinreg bench`'s and bench/refine_*.sh's, not here. */
#include "kr_test.h"
#include "parity.h"

#include <stdlib.h>

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

/* ---- the pair sums ---------------------------------------------------------- */

enum { V = 4 };

/* Both engines' sums over the same host-built fields at the same poses.
 * (The device-built fields' own parity is gpu_refine_fields'.) */
typedef struct {
    kr_dfield fields[V];
    kr_refine_posef poses[V];
    kr_refine_engine *cpu, *gpu;
} sums_in;

/* The sums of every pair (arg: 0) or the thesis's star form (arg: 1) on
 * `engine`: per pair its count, and each of its doubles with the scale of
 * its tolerance. */
static bool pair_sums(kr_refine_engine *engine, sums_in *in, int star, kr_parity_out *out)
{
    int pairs[2 * V * V], np = 0;
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++)
            if (i != j && (!star || i == 0)) {
                pairs[2 * np] = i;
                pairs[2 * np + 1] = j;
                np++;
            }
    kr_refine_problem pb = {
        .views = V, .fields = in->fields, .star = star, .gauge = 0, .huber = 0.003f, .cap = 0.006f};
    kr_refine_acc acc[V * V];
    kr_status st = kr_refine_engine_load(engine, &pb);
    CHECK_OK(st);
    if (st == KR_OK) CHECK_OK(st = kr_refine_engine_eval(engine, &pb, in->poses, pairs, np, acc));
    if (st != KR_OK) return false;
    enum { D = (int)(sizeof(kr_refine_acc) / sizeof(double)) };
    double *count = kr_parity_put(out, (size_t)np, 1, "count"),
           *sums = kr_parity_put(out, (size_t)np * D, 1, "sums"), scale[V * V * D];
    if (!count || !sums) return false;
    for (int p = 0; p < np; p++) {
        count[p] = acc[p].count;
        const double *a = (const double *)&acc[p];
        for (int c = 0; c < D; c++) {
            sums[p * D + c] = a[c];
            /* 1e-4 (1 + |a|) + 1e-8 count, as 1e-4 times this */
            scale[p * D + c] = 1 + fabs(a[c]) + 1e-4 * acc[p].count;
        }
    }
    kr_parity_scale(out, "sums", scale, (size_t)np * D);
    return true;
}

static bool cpu_sums(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev;
    sums_in *in = fixture;
    return pair_sums(in->cpu, in, *(const int *)arg, out);
}

static bool gpu_sums(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev;
    sums_in *in = fixture;
    return pair_sums(in->gpu, in, *(const int *)arg, out);
}

/* Each term is float math that nvcc contracts into FMAs and the host does
 * not; summed with cancellation, pair sums measured up to 1.5e-5 apart
 * relative on an H100 (2026-11-23) with identical counts, so 1e-4. */
static const int all_pairs = 0, star_form = 1;
static const kr_parity_step sums_steps[] = {
    PARITY_STEP("pair sums, all pairs", cpu_sums, gpu_sums, &all_pairs,
                PARITY_CHECK("count", KR_PARITY_BITS, 0),
                PARITY_CHECK("sums", KR_PARITY_ABS, 1e-4)),
    PARITY_STEP("pair sums, star", cpu_sums, gpu_sums, &star_form,
                PARITY_CHECK("count", KR_PARITY_BITS, 0),
                PARITY_CHECK("sums", KR_PARITY_ABS, 1e-4)),
};

KR_TEST(parity_refine, sums_match)
{
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return;
    float *xyz[V];
    size_t n[V];
    kr_pose truth[V];
    REQUIRE_OK(kr_scan_synthetic_object(V, 40000, xyz, n, truth));
    sums_in in = {0};
    REQUIRE_OK(kr_refine_engine_create(&in.cpu, NULL, NULL, 0));
    REQUIRE_OK(kr_refine_engine_create(&in.gpu, gpu, NULL, 0));
    for (int k = 0; k < V; k++)
        REQUIRE_OK(kr_refine_engine_field(in.cpu, &in.fields[k], xyz[k], NULL, n[k], 1, 0.003f, 2,
                                          1.0, 1));
    /* Sums at perturbed poses. */
    unsigned s = 3;
    for (int k = 0; k < V; k++) {
        double x[6];
        for (int i = 0; i < 6; i++)
            x[i] = k ? 0.01 * kr_nrand(&s) : 0;
        kr_pose d = kr_pose_exp(x), p = kr_pose_mul(&d, &truth[k]);
        in.poses[k] = fpose(&p);
    }
    kr_parity_run(sums_steps, 2, &in);
    for (int k = 0; k < V; k++) {
        kr_dfield_free(&in.fields[k]);
        free(xyz[k]);
    }
    kr_refine_engine_destroy(&in.cpu);
    kr_refine_engine_destroy(&in.gpu);
}

/* ---- a whole refinement ------------------------------------------------------ */

enum { TEN = 10 };

typedef struct {
    kr_refine_config cfg;
    kr_refine_view views[TEN];
    kr_pose start[TEN];
} refine_in;

static bool cpu_refine(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    refine_in *in = fixture;
    kr_pose p[TEN];
    kr_refine_result r;
    memcpy(p, in->start, sizeof p);
    kr_status st = kr_refine(&in->cfg, NULL, in->views, TEN, p, &r);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    kr_parity_put_poses(out, "poses", p, TEN);
    return true;
}

/* Twice: the second run warm, as a live refiner would see it. */
static bool gpu_refine(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    refine_in *in = fixture;
    kr_pose p[TEN];
    kr_refine_result r;
    kr_status st = KR_OK;
    for (int run = 0; run < 2 && st == KR_OK; run++) {
        memcpy(p, in->start, sizeof p);
        CHECK_OK(st = kr_refine(&in->cfg, dev, in->views, TEN, p, &r));
    }
    if (st != KR_OK) return false;
    printf("    10 synthetic views, %d LM iterations, cuda %.1f ms (warm)\n", r.iterations,
           1000 * r.seconds);
    CHECK_EQ(r.backend, KR_BACKEND_CUDA);
    kr_parity_put_poses(out, "poses", p, TEN);
    return true;
}

static const kr_parity_step refine_steps[] = {
    PARITY_STEP("refinement", cpu_refine, gpu_refine, NULL,
                PARITY_CHECK("poses", KR_PARITY_DEGREES, 0.02, .below = true),
                PARITY_CHECK("poses", KR_PARITY_DISTANCE, 2e-4, .below = true)),
};

/* 10 synthetic views perturbed by 3° and 6 mm: both engines reach the same
 * poses. */
KR_TEST(parity_refine, ten_views_refine_alike)
{
    PARITY_NEED();
    float *xyz[TEN];
    size_t n[TEN];
    kr_pose truth[TEN];
    REQUIRE_OK(kr_scan_synthetic_object(TEN, 60000, xyz, n, truth));
    refine_in in;
    unsigned s = 17;
    for (int k = 0; k < TEN; k++) {
        double x[6] = {0};
        for (int i = 0; i < 3 && k; i++)
            x[i] = 0.03 * kr_nrand(&s);
        for (int i = 3; i < 6 && k; i++)
            x[i] = 0.004 * kr_nrand(&s);
        kr_pose d = kr_pose_exp(x);
        in.start[k] = kr_pose_mul(&d, &truth[k]);
    }
    for (int k = 0; k < TEN; k++)
        in.views[k] = (kr_refine_view){xyz[k], n[k]};
    kr_refine_config_default(&in.cfg);
    in.cfg.cell = 0.003;
    kr_parity_run(refine_steps, 1, &in);
    for (int k = 0; k < TEN; k++)
        free(xyz[k]);
}
