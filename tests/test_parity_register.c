/* Parity: the two CUDA registration engines (the seed's cuBLAS formulation
 * and the fused streaming kernels) against the OpenMP engine on the same
 * points and settings. Skips cleanly without a CUDA device (CTest label gpu).
 *
 * Tolerances: the engines sum in different orders and the device's exp is
 * the special-function unit's (relative error ~1e-6, the host's 2e-7), so the
 * poses agree to rounding amplified by the iteration: within 0.02° and
 * 0.05 mm after the whole schedule, and the three reach the true motion
 * (0.5°, 2 mm). */
#include "kr_test.h"
#include "parity.h"

#include <stdlib.h>
#include <string.h>

#include "anchor_surface.h"
#include "kinreg/device.h"
#include "kinreg/register.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* The first n of p's points moved by T, in a new array. */
static float *moved(const float *p, size_t n, const kr_pose *T)
{
    float *out = malloc(3 * n * sizeof *out);
    for (size_t i = 0; out && i < n; i++) {
        double a[3] = {p[3 * i], p[3 * i + 1], p[3 * i + 2]}, o[3];
        kr_pose_apply(T, a, o);
        for (int k = 0; k < 3; k++)
            out[3 * i + k] = (float)o[k];
    }
    return out;
}

/* The motion src is moved by: 20° about (1, 2, 3), then (2, −1, 1.5) cm. */
static kr_pose the_motion(void)
{
    double h = 20 * M_PI / 360, t[3] = {0.02, -0.01, 0.015};
    kr_quat q = {sin(h) / sqrt(14), 2 * sin(h) / sqrt(14), 3 * sin(h) / sqrt(14), cos(h)};
    return kr_pose_from_quat(q, t);
}

/* ---- one registration on each engine ---------------------------------------- */

/* What every engine registers alike: src is (the first n points of) dst
 * moved by the inverse of the motion, so exact correspondences exist and
 * besides agreeing with each other every engine must land on the motion
 * (within max_deg and max_m). */
typedef struct {
    kr_register_config c;
    const float *src, *dst;
    size_t n, m;
    const kr_pose *init;
    kr_pose motion_inv;
    double max_deg, max_m;
    bool deterministic; /* of the fused engine's next run */
    kr_pose kept[2];    /* the fused engine's deterministic poses */
    int kept_count;
} reg_in;

/* kr_register with `engine`: the engine is the one asked for, the pose near
 * the motion; puts the pose and the number of steps. */
static bool register_with(kr_device *dev, reg_in *in, kr_reg_engine engine, kr_parity_out *out)
{
    kr_register_config c = in->c;
    c.engine = engine;
    c.deterministic = engine == KR_REG_ENGINE_FUSED && in->deterministic;
    kr_register_result r;
    kr_status st = kr_register(dev, &c, in->src, in->n, in->dst, in->m, in->init, &r);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    CHECK_EQ(r.engine, engine);
    kr_pose d = kr_pose_mul(&r.pose, &in->motion_inv);
    printf("  %s %s%s: %d steps %.2f ms, error %.4f deg %.4f mm\n", kr_reg_method_name(c.method),
           kr_reg_engine_name(r.engine), c.deterministic ? " deterministic" : "", r.iterations,
           r.seconds * 1e3, kr_pose_angle(&d) * 180 / M_PI, kr_pose_translation_norm(&d) * 1e3);
    CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, in->max_deg);
    CHECK_LT(kr_pose_translation_norm(&d), in->max_m);
    if (c.deterministic && in->kept_count < 2) in->kept[in->kept_count++] = r.pose;
    kr_parity_put_poses(out, "pose", &r.pose, 1);
    kr_parity_put_scalar(out, "steps", r.iterations);
    return true;
}

static bool on_cpu_engine(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    return register_with(dev, fixture, KR_REG_ENGINE_CPU, out);
}

static bool on_fused_engine(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    return register_with(dev, fixture, KR_REG_ENGINE_FUSED, out);
}

static bool on_cublas_engine(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    return register_with(dev, fixture, KR_REG_ENGINE_CUBLAS, out);
}

/* The fused engine with deterministic column sums. */
static bool on_fused_deterministic(kr_device *dev, void *fixture, const void *arg,
                                   kr_parity_out *out)
{
    reg_in *in = fixture;
    in->deterministic = true;
    bool ok = on_fused_engine(dev, fixture, arg, out);
    in->deterministic = false;
    return ok;
}

/* The same number of steps, and the pose within 0.02° and 0.05 mm of the
 * CPU engine's (see the head of this file). */
#define SAME_POSE                                                                                  \
    PARITY_CHECK("steps", KR_PARITY_BITS, 0),                                                      \
        PARITY_CHECK("pose", KR_PARITY_DEGREES, 0.02, .below = true),                              \
        PARITY_CHECK("pose", KR_PARITY_DISTANCE, 5e-5, .below = true)

static const kr_parity_step both_device_engines[] = {
    PARITY_STEP("fused engine", on_cpu_engine, on_fused_engine, NULL, SAME_POSE),
    PARITY_STEP("cublas engine", on_cpu_engine, on_cublas_engine, NULL, SAME_POSE),
};

/* n source points against m >= n destination points. */
static void compare(kr_reg_method method, size_t n, size_t m, int jmax)
{
    PARITY_NEED();
    unsigned s = 21;
    kr_pose T = the_motion(), Ti = kr_pose_inv(&T);
    float *dst = kr_test_anchor_surface(&s, m), *src = moved(dst, n, &Ti);
    REQUIRE(src != NULL);
    reg_in in = {
        .src = src, .dst = dst, .n = n, .m = m, .motion_inv = Ti, .max_deg = 0.5, .max_m = 0.002};
    kr_register_config_default(&in.c);
    in.c.method = method;
    in.c.extent = KR_REG_SEED_EXTENT;
    in.c.stop_motion = 0; /* the whole schedule on every engine */
    if (jmax) {
        in.c.jmax = jmax;
        in.c.t_factor = pow(0.95, 100.0 / jmax);
    }
    kr_parity_run(both_device_engines, 2, &in);
    free(src);
    free(dst);
}

KR_TEST(parity_register, emicp_engines_agree)
{
    compare(KR_REG_EMICP, 2000, 2000, 0);
}

/* More destination points than one shared-memory tile of the fused engine
 * holds (8192 on an H100): every row group then streams the columns in
 * several tiles, and a row's sums carry their shift from tile to tile. */
KR_TEST(parity_register, emicp_engines_agree_across_tiles)
{
    compare(KR_REG_EMICP, 1500, 9000, 0);
}

/* At 800 × 800 the fused engine holds the whole matrix in its threads'
 * registers (pipeline/register/softassign_onchip.cu: 115 blocks of 7 rows). */
KR_TEST(parity_register, softassign_engines_agree)
{
    compare(KR_REG_SOFTASSIGN, 800, 800, 40);
}

/* 7 rows of 6000 columns a block would need more than 8 columns a thread:
 * the fused engine streams the pairs instead (pipeline/register/register_persistent.cu). */
KR_TEST(parity_register, softassign_engines_agree_beyond_the_chip)
{
    compare(KR_REG_SOFTASSIGN, 800, 6000, 40);
}

static const kr_parity_step fused_both_ways[] = {
    PARITY_STEP("fused", on_cpu_engine, on_fused_engine, NULL, SAME_POSE),
    PARITY_STEP("fused deterministic", on_cpu_engine, on_fused_deterministic, NULL, SAME_POSE),
    PARITY_STEP("fused deterministic again", on_cpu_engine, on_fused_deterministic, NULL,
                SAME_POSE),
};

/* The CPU engine's pose and the fused engine's, with and without
 * deterministic (pipeline/register/softassign_onchip.cu: fixed-point or float column
 * sums), from `init`: within the tolerances above of each other and of the
 * motion. Deterministic runs twice must agree to the last bit. */
static void softassign_fused_both_ways(kr_register_config c, size_t n, const kr_pose *init)
{
    PARITY_NEED();
    unsigned s = 21;
    kr_pose T = the_motion(), Ti = kr_pose_inv(&T);
    float *dst = kr_test_anchor_surface(&s, n), *src = moved(dst, n, &Ti);
    REQUIRE(src);
    c.method = KR_REG_SOFTASSIGN;
    c.extent = KR_REG_SEED_EXTENT;
    c.stop_motion = 0;
    reg_in in = {.c = c,
                 .src = src,
                 .dst = dst,
                 .n = n,
                 .m = n,
                 .init = init,
                 .motion_inv = Ti,
                 .max_deg = 0.5,
                 .max_m = 0.002};
    kr_parity_run(fused_both_ways, 3, &in);
    CHECK_EQ(in.kept_count, 2);
    CHECK(memcmp(&in.kept[0], &in.kept[1], sizeof in.kept[0]) == 0);
    free(src);
    free(dst);
}

KR_TEST(parity_register, softassign_deterministic_repeats_to_the_bit)
{
    kr_register_config c;
    kr_register_config_default(&c);
    c.jmax = 40;
    c.t_factor = pow(0.95, 100.0 / 40);
    softassign_fused_both_ways(c, 800, NULL);
}

/* Cold from the start: at T₀ = 0.05 (seed units) α/T is 87 in log2 units,
 * beyond OC_ALPHA_SHIFT, so every row is shifted by its own largest y
 * instead of α'. From the true pose, as a cold start needs. */
KR_TEST(parity_register, softassign_engines_agree_when_cold)
{
    kr_register_config c;
    kr_register_config_default(&c);
    c.t0 = 0.05;
    c.jmax = 10;
    kr_pose T = the_motion();
    softassign_fused_both_ways(c, 800, &T);
}

/* A device fault of its own: the refusal comes on a device that no other
 * case uses. */
KR_TEST(parity_register, cublas_says_when_the_matrix_cannot_fit)
{
    PARITY_NEED();
    kr_device *gpu = kr_parity_make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    unsigned s = 3;
    size_t m = 70000;
    float *dst = kr_test_anchor_surface(&s, m), *src = kr_test_anchor_surface(&s, 100);
    kr_register_config c;
    kr_register_config_default(&c);
    c.method = KR_REG_EMICP; /* the seed's N x M matrix: EM-ICP's */
    c.engine = KR_REG_ENGINE_CUBLAS;
    kr_register_result r;
    CHECK_STATUS(kr_register(gpu, &c, src, 100, dst, m, NULL, &r), KR_ERR_NOMEM);
    CHECK_CONTAINS(kr_last_error(), "fused");
    free(dst);
    free(src);
    kr_device_destroy(&gpu);
}

/* Newton (the tracker's engines): the device's graph against the CPU's loop
 * on the surface moved by 10 degrees and 2 cm, within Newton's basin, both
 * within 0.1° and 0.5 mm of it. Both sum the same per-pair terms
 * (core/track_kernels.h) in different orders: within 0.01° and 0.02 mm of
 * each other. */
static const kr_parity_step newton_engines[] = {
    PARITY_STEP("newton", on_cpu_engine, on_fused_engine, NULL,
                PARITY_CHECK("pose", KR_PARITY_DEGREES, 0.01, .below = true),
                PARITY_CHECK("pose", KR_PARITY_DISTANCE, 2e-5, .below = true)),
};

KR_TEST(parity_register, newton_engines_agree)
{
    PARITY_NEED();
    unsigned s = 23;
    enum { N = 20000 };
    double h = 10 * M_PI / 360, t[3] = {0.02, 0, -0.01};
    kr_quat q = {sin(h) / sqrt(3), sin(h) / sqrt(3), sin(h) / sqrt(3), cos(h)};
    kr_pose T = kr_pose_from_quat(q, t), Ti = kr_pose_inv(&T);
    /* a second sample of the surface, moved: no exact correspondences */
    float *dst = kr_test_anchor_surface(&s, N), *other = kr_test_anchor_surface(&s, N),
          *src = moved(other, N, &Ti);
    free(other);
    REQUIRE(src != NULL);
    reg_in in = {
        .src = src, .dst = dst, .n = N, .m = N, .motion_inv = Ti, .max_deg = 0.1, .max_m = 0.0005};
    kr_register_config_default(&in.c);
    in.c.method = KR_REG_NEWTON;
    kr_parity_run(newton_engines, 1, &in);
    free(src);
    free(dst);
}
