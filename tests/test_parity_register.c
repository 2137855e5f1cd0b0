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
#include "parity_fixture.h"

#include <stdlib.h>
#include <string.h>

#include "kinreg/device.h"
#include "kinreg/register.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

/* A bumpy closed surface (the CuPy anchor's shape) sampled at n points. */
static float *surface(unsigned *s, size_t n)
{
    float *p = malloc(3 * n * sizeof *p);
    for (size_t i = 0; i < n; i++) {
        double u[3] = {kr_nrand(s), kr_nrand(s), kr_nrand(s)};
        double l = sqrt(u[0] * u[0] + u[1] * u[1] + u[2] * u[2]);
        for (int k = 0; k < 3; k++)
            u[k] /= l;
        double r = 0.1 * (1 + 0.25 * sin(5 * u[0]) * cos(4 * u[1]) + 0.15 * sin(7 * u[2]));
        for (int k = 0; k < 3; k++)
            p[3 * i + k] = (float)(u[k] * r);
    }
    return p;
}

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

/* n source points against m >= n destination points. */
static void compare(kr_reg_method method, size_t n, size_t m, int jmax)
{
    NEED_CUDA();
    unsigned s = 21;
    /* src is (the first n points of) dst moved: exact correspondences exist,
     * so besides agreeing with each other every engine must land on the
     * motion itself. */
    kr_pose T = the_motion(), Ti = kr_pose_inv(&T);
    float *dst = surface(&s, m), *src = moved(dst, n, &Ti);
    REQUIRE(src != NULL);
    kr_device *cpu = make_device(KR_BACKEND_CPU), *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(cpu && gpu);
    kr_register_config c;
    kr_register_config_default(&c);
    c.method = method;
    c.extent = KR_REG_SEED_EXTENT;
    c.stop_motion = 0; /* the whole schedule on every engine */
    if (jmax) {
        c.jmax = jmax;
        c.t_factor = pow(0.95, 100.0 / jmax);
    }
    kr_register_result r[3];
    kr_reg_engine engines[3] = {KR_REG_ENGINE_CPU, KR_REG_ENGINE_FUSED, KR_REG_ENGINE_CUBLAS};
    for (int e = 0; e < 3; e++) {
        c.engine = engines[e];
        REQUIRE_OK(kr_register(e ? gpu : cpu, &c, src, n, dst, m, NULL, &r[e]));
        CHECK_EQ(r[e].engine, engines[e]);
        CHECK_EQ(r[e].iterations, r[0].iterations);
        kr_pose d = kr_pose_mul(&r[e].pose, &Ti);
        printf("  %s %s: %d steps %.2f ms, error %.4f deg %.3f mm, vs cpu ",
               kr_reg_method_name(method), kr_reg_engine_name(engines[e]), r[e].iterations,
               r[e].seconds * 1e3, kr_pose_angle(&d) * 180 / M_PI,
               kr_pose_translation_norm(&d) * 1e3);
        kr_pose ic = kr_pose_inv(&r[0].pose), x = kr_pose_mul(&ic, &r[e].pose);
        double dt = 0;
        for (int k = 0; k < 3; k++)
            dt += pow(r[e].pose.t[k] - r[0].pose.t[k], 2);
        printf("%.5f deg %.4f mm\n", kr_pose_angle(&x) * 180 / M_PI, sqrt(dt) * 1e3);
        CHECK_LT(kr_pose_angle(&x) * 180 / M_PI, 0.02);
        CHECK_LT(sqrt(dt), 5e-5);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.5);
        CHECK_LT(kr_pose_translation_norm(&d), 0.002);
    }
    kr_device_destroy(&cpu);
    kr_device_destroy(&gpu);
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

/* The CPU engine's pose and the fused engine's, with and without
 * deterministic (pipeline/register/softassign_onchip.cu: fixed-point or float column
 * sums), from `init`: within the tolerances above of each other and of the
 * motion. Deterministic runs twice must agree to the last bit. */
static void softassign_fused_both_ways(kr_register_config c, size_t n, const kr_pose *init)
{
    NEED_CUDA();
    unsigned s = 21;
    kr_pose T = the_motion(), Ti = kr_pose_inv(&T);
    float *dst = surface(&s, n), *src = moved(dst, n, &Ti);
    kr_device *cpu = make_device(KR_BACKEND_CPU), *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(src && cpu && gpu);
    c.method = KR_REG_SOFTASSIGN;
    c.extent = KR_REG_SEED_EXTENT;
    c.stop_motion = 0;
    kr_register_result ref, r[3];
    c.engine = KR_REG_ENGINE_CPU;
    REQUIRE_OK(kr_register(cpu, &c, src, n, dst, n, init, &ref));
    c.engine = KR_REG_ENGINE_FUSED;
    for (int k = 0; k < 3; k++) {
        c.deterministic = k > 0;
        REQUIRE_OK(kr_register(gpu, &c, src, n, dst, n, init, &r[k]));
        kr_pose ic = kr_pose_inv(&ref.pose), x = kr_pose_mul(&ic, &r[k].pose);
        kr_pose d = kr_pose_mul(&r[k].pose, &Ti);
        printf("  fused%s: %d steps, vs cpu %.5f deg %.4f mm, error %.4f deg %.3f mm\n",
               k ? " deterministic" : "", r[k].iterations, kr_pose_angle(&x) * 180 / M_PI,
               kr_pose_translation_norm(&x) * 1e3, kr_pose_angle(&d) * 180 / M_PI,
               kr_pose_translation_norm(&d) * 1e3);
        CHECK_EQ(r[k].iterations, ref.iterations);
        CHECK_LT(kr_pose_angle(&x) * 180 / M_PI, 0.02);
        CHECK_LT(kr_pose_translation_norm(&x), 5e-5);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.5);
        CHECK_LT(kr_pose_translation_norm(&d), 0.002);
    }
    CHECK(memcmp(&r[1].pose, &r[2].pose, sizeof r[1].pose) == 0);
    kr_device_destroy(&cpu);
    kr_device_destroy(&gpu);
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

KR_TEST(parity_register, cublas_says_when_the_matrix_cannot_fit)
{
    NEED_CUDA();
    kr_device *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    unsigned s = 3;
    size_t m = 70000;
    float *dst = surface(&s, m), *src = surface(&s, 100);
    kr_register_config c;
    kr_register_config_default(&c);
    c.engine = KR_REG_ENGINE_CUBLAS;
    kr_register_result r;
    CHECK_STATUS(kr_register(gpu, &c, src, 100, dst, m, NULL, &r), KR_ERR_NOMEM);
    CHECK_CONTAINS(kr_last_error(), "fused");
    free(dst);
    free(src);
    kr_device_destroy(&gpu);
}

/* Newton (the tracker's engines): the device's graph against the CPU's loop
 * on the surface moved by 10 degrees and 2 cm, within Newton's basin. Both
 * sum the same per-pair terms (core/track_kernels.h) in different orders. */
KR_TEST(parity_register, newton_engines_agree)
{
    NEED_CUDA();
    unsigned s = 23;
    enum { N = 20000 };
    double h = 10 * M_PI / 360, t[3] = {0.02, 0, -0.01};
    kr_quat q = {sin(h) / sqrt(3), sin(h) / sqrt(3), sin(h) / sqrt(3), cos(h)};
    kr_pose T = kr_pose_from_quat(q, t), Ti = kr_pose_inv(&T);
    /* a second sample of the surface, moved: no exact correspondences */
    float *dst = surface(&s, N), *other = surface(&s, N), *src = moved(other, N, &Ti);
    free(other);
    REQUIRE(src != NULL);
    kr_device *cpu = make_device(KR_BACKEND_CPU), *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(cpu && gpu);
    kr_register_config c;
    kr_register_config_default(&c);
    c.method = KR_REG_NEWTON;
    kr_register_result r[2];
    c.engine = KR_REG_ENGINE_CPU;
    REQUIRE_OK(kr_register(cpu, &c, src, N, dst, N, NULL, &r[0]));
    c.engine = KR_REG_ENGINE_FUSED;
    REQUIRE_OK(kr_register(gpu, &c, src, N, dst, N, NULL, &r[1]));
    for (int e = 0; e < 2; e++) {
        kr_pose d = kr_pose_mul(&r[e].pose, &Ti);
        printf("  newton %s: %d steps %.2f ms, error %.4f deg %.4f mm\n",
               kr_reg_engine_name(r[e].engine), r[e].iterations, r[e].seconds * 1e3,
               kr_pose_angle(&d) * 180 / M_PI, kr_pose_translation_norm(&d) * 1e3);
        CHECK_LT(kr_pose_angle(&d) * 180 / M_PI, 0.1);
        CHECK_LT(kr_pose_translation_norm(&d), 0.0005);
    }
    kr_pose ic = kr_pose_inv(&r[0].pose), x = kr_pose_mul(&ic, &r[1].pose);
    CHECK_LT(kr_pose_angle(&x) * 180 / M_PI, 0.01);
    CHECK_LT(kr_pose_translation_norm(&x), 2e-5);
    kr_device_destroy(&cpu);
    kr_device_destroy(&gpu);
    free(src);
    free(dst);
}
