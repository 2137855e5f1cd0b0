/* Parity: preprocessing on the CUDA engine against its OpenMP twin on the same
 * frames (DESIGN.md §4) — a noisy synthetic scene with holes in both depth
 * encodings, and a real TUM frame when the shared data is there. Skips
 * cleanly without a CUDA device (CTest label gpu). The CUDA time per frame,
 * upload and download included, is `kinreg bench -b cuda`'s (stages upload,
 * preprocess, download). */
#include "kr_test.h"
#include "parity.h"

#include <stdint.h>
#include <stdlib.h>

#include "gpu/engine.h"
#include "kinreg/device.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"

#if defined(__has_include)
#if __has_include(<png.h>)
#include <png.h>

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");
#define KR_TEST_HAVE_PNG 1
#endif
#endif

/* ---- a synthetic scene: floor, walls, two spheres; Kinect-like noise ---- */

static unsigned rng_next(unsigned *s)
{
    *s = *s * 1664525u + 1013904223u;
    return *s;
}

static double urand(unsigned *s)
{
    return (rng_next(s) >> 8) / 16777216.0;
}

static double gauss(unsigned *s)
{
    double u1 = urand(s) + 1e-12, u2 = urand(s);
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

/* Nearest hit along the ray (x̃, ỹ, 1); its parameter is the depth z. */
static double cast(double rx, double ry)
{
    double best = INFINITY;
    /* planes n·X = c */
    const double planes[3][4] = {{0, -1, 0, -1.1}, {0, 0, -1, -4.5}, {1, 0, 0, -2.0}};
    for (int i = 0; i < 3; i++) {
        double d = planes[i][0] * rx + planes[i][1] * ry + planes[i][2];
        double t = d != 0 ? planes[i][3] / d : -1;
        if (t > 0 && t < best) best = t;
    }
    const double spheres[2][4] = {{0.4, 0.2, 2.0, 0.5}, {-0.7, 0.5, 1.4, 0.25}};
    for (int i = 0; i < 2; i++) {
        const double *c = spheres[i];
        double a = rx * rx + ry * ry + 1, b = rx * c[0] + ry * c[1] + c[2];
        double cc = c[0] * c[0] + c[1] * c[1] + c[2] * c[2] - c[3] * c[3];
        double disc = b * b - a * cc;
        if (disc < 0) continue;
        double t = (b - sqrt(disc)) / a;
        if (t > 0 && t < best) best = t;
    }
    return best;
}

static kr_frame synthetic_frame(const kr_intrinsics *k, kr_depth_encoding enc, unsigned seed)
{
    kr_frame f;
    memset(&f, 0, sizeof f);
    f.width = k->width;
    f.height = k->height;
    f.encoding = enc;
    f.depth_scale = enc == KR_DEPTH_SCALED ? 5000.0f : 0.0f;
    f.raw = malloc(k->width > 0 && k->height > 0
                       ? (size_t)k->width * (size_t)k->height * sizeof(uint16_t)
                       : 1);
    unsigned s = seed;
    for (int v = 0; v < k->height; v++) {
        for (int u = 0; u < k->width; u++) {
            double z = cast((u - k->cx) / k->fx, (v - k->cy) / k->fy);
            z += 0.0015 * z * z * gauss(&s); /* noise grows with depth squared */
            bool hole = urand(&s) < 0.03;
            uint16_t raw;
            if (enc == KR_DEPTH_SCALED) {
                long q = lround(z * 5000);
                raw = hole || !isfinite(z) || q < 0 || q > 65535 ? 0 : (uint16_t)q;
            } else {
                long d = lround((1.0 / z - KR_DISPARITY_A) / KR_DISPARITY_B);
                raw = hole || !isfinite(z) || d < 0 || d >= KR_DISPARITY_INVALID
                          ? KR_DISPARITY_INVALID
                          : (uint16_t)d;
            }
            f.raw[v * k->width + u] = raw;
        }
    }
    return f;
}

/* ---- both engines on one frame ------------------------------------------- */

typedef struct {
    const kr_preprocess_config *cfg;
    const kr_frame *f;
    const kr_intrinsics *k;
} frame_in;

/* The pyramid of one engine: per level its size, points and normals (NaN:
 * none) and the counts of valid ones. */
static bool pyramid(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    const frame_in *in = fixture;
    kr_pyramid p = {0};
    kr_status st = kr_preprocess(dev, in->cfg, in->f, in->k, &p);
    CHECK_OK(st);
    if (st != KR_OK) {
        kr_pyramid_free(&p);
        return false;
    }
    kr_parity_put_scalar(out, "levels", p.levels);
    for (int l = 0; l < p.levels; l++) {
        const kr_cloud *c = &p.level[l];
        size_t n = (size_t)c->width * (size_t)c->height;
        double *size = kr_parity_put(out, 1, 2, "size level %d", l);
        if (size) size[0] = c->width, size[1] = c->height;
        char name[64];
        snprintf(name, sizeof name, "points level %d", l);
        kr_parity_put_f(out, name, c->points, n, 3);
        snprintf(name, sizeof name, "normals level %d", l);
        kr_parity_put_f(out, name, c->normals, n, 3);
        double *valid = kr_parity_put(out, 1, 1, "valid points level %d", l);
        if (valid) valid[0] = c->valid_points;
        valid = kr_parity_put(out, 1, 1, "valid normals level %d", l);
        if (valid) valid[0] = c->valid_normals;
    }
    kr_pyramid_free(&p);
    return true;
}

/* The valid normals counted by each engine differ by no more than the
 * pixels whose normal is there on one side only; and the CPU found some. */
static void normal_counts(const kr_parity_step *step, const kr_parity_out *a,
                          const kr_parity_out *b, void *fixture)
{
    (void)step;
    (void)fixture;
    const kr_parity_quantity *levels = kr_parity_get(a, "levels");
    for (int l = 0; levels && l < (int)levels->v[0]; l++) {
        char name[64];
        snprintf(name, sizeof name, "normals level %d", l);
        const kr_parity_quantity *na = kr_parity_get(a, name), *nb = kr_parity_get(b, name);
        snprintf(name, sizeof name, "valid normals level %d", l);
        const kr_parity_quantity *va = kr_parity_get(a, name), *vb = kr_parity_get(b, name);
        if (!na || !nb || !va || !vb || na->n != nb->n) continue; /* the checks said so */
        size_t one_sided = 0;
        for (size_t i = 0; i < na->n; i++)
            one_sided += isnan(na->v[3 * i]) != isnan(nb->v[3 * i]);
        CHECK_LE(fabs(va->v[0] - vb->v[0]), one_sided);
        CHECK_GT(va->v[0], 0);
    }
}

/* Depths and points come from identical float operations: the masks of
 * points must agree exactly, the points within 1e-5 of their distance.
 * Normals may flip only where rounding meets the rejection threshold: at
 * most 0.01 % of the pixels; elsewhere within 1e-4. */
static void run_both(const char *what, const kr_preprocess_config *cfg, const kr_frame *f,
                     const kr_intrinsics *k)
{
    frame_in in = {cfg, f, k};
    const kr_parity_step step = {
        .name = what,
        .cpu = pyramid,
        .cuda = pyramid,
        .checks = {PARITY_CHECK("levels", KR_PARITY_BITS, 0),
                   PARITY_CHECK("size", KR_PARITY_BITS, 0),
                   PARITY_CHECK("points", KR_PARITY_NORM, 1e-5, .nan_equal = true),
                   PARITY_CHECK("normals", KR_PARITY_ABS, 1e-4, .nan_equal = true, .allowed = 1e-4),
                   PARITY_CHECK("valid points", KR_PARITY_BITS, 0)},
        .also = normal_counts,
    };
    kr_parity_run(&step, 1, &in);
}

static const kr_intrinsics kinect = {640, 480, 525.0f, 525.0f, 319.5f, 239.5f, 0, 0, 0, 0, 0};

KR_TEST(parity_preprocess, synthetic_scaled)
{
    PARITY_NEED();
    kr_frame f = synthetic_frame(&kinect, KR_DEPTH_SCALED, 1);
    run_both("scaled", NULL, &f, &kinect);
    kr_frame_release(&f);
}

KR_TEST(parity_preprocess, synthetic_disparity)
{
    PARITY_NEED();
    kr_frame f = synthetic_frame(&kinect, KR_DEPTH_DISPARITY11, 2);
    run_both("disparity", NULL, &f, &kinect);
    kr_frame_release(&f);
}

KR_TEST(parity_preprocess, synthetic_odd_size_five_levels)
{
    PARITY_NEED();
    kr_intrinsics k = {645, 483, 525.0f, 525.0f, 322.0f, 241.0f, 0, 0, 0, 0, 0};
    kr_frame f = synthetic_frame(&k, KR_DEPTH_SCALED, 3);
    kr_preprocess_config cfg;
    kr_preprocess_config_default(&cfg);
    cfg.levels = KR_MAX_LEVELS;
    cfg.discontinuity = 0.02f;
    run_both("odd size", &cfg, &f, &k);
    kr_frame_release(&f);
}

#ifdef KR_TEST_HAVE_PNG
/* First depth image listed in DIR/depth.txt, as 16-bit samples. */
static bool read_first_tum_frame(const char *dir, kr_frame *out)
{
    char path[2048], line[1024], name[1024];
    snprintf(path, sizeof path, "%s/depth.txt", dir);
    FILE *fp = fopen(path, "r");
    if (!fp) return false;
    bool found = false;
    double ts;
    while (!found && fgets(line, sizeof line, fp))
        if (line[0] != '#' && sscanf(line, "%lf %1023s", &ts, name) == 2) found = true;
    fclose(fp);
    if (!found) return false;
    snprintf(path, sizeof path, "%s/%s", dir, name);
    png_image img;
    memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    if (!png_image_begin_read_from_file(&img, path)) return false;
    img.format = PNG_FORMAT_LINEAR_Y; /* 16-bit grey, samples unchanged */
    uint16_t *raw = malloc(PNG_IMAGE_SIZE(img));
    if (!raw || !png_image_finish_read(&img, NULL, raw, 0, NULL)) {
        free(raw);
        png_image_free(&img);
        return false;
    }
    memset(out, 0, sizeof *out);
    out->width = (int)img.width;
    out->height = (int)img.height;
    out->encoding = KR_DEPTH_SCALED;
    out->depth_scale = 5000.0f;
    out->timestamp = ts;
    out->raw = raw;
    return true;
}
#endif

KR_TEST(parity_preprocess, tum_frame)
{
    PARITY_NEED();
    const char *dir = kr_test_data("tum/fr1_xyz_head");
    if (!dir) SKIP("no shared data tum/fr1_xyz_head (set KINREG_DATA)");
#ifdef KR_TEST_HAVE_PNG
    kr_frame f;
    REQUIRE(read_first_tum_frame(dir, &f));
    /* TUM fr1 with its lens distortion: both engines undistort alike. */
    kr_intrinsics fr1;
    REQUIRE_OK(kr_intrinsics_preset("fr1", &fr1));
    CHECK(fr1.k1 != 0.0f);
    run_both("tum fr1", NULL, &f, &fr1);
    kr_frame_release(&f);
#else
    SKIP("built without png.h");
#endif
}

KR_TEST(parity_preprocess, cuda_device_context)
{
    PARITY_NEED();
    kr_device *dev = kr_parity_make_device(KR_BACKEND_AUTO);
    REQUIRE(dev);
    CHECK_EQ(kr_device_backend(dev), KR_BACKEND_CUDA); /* AUTO takes the GPU */
    CHECK_CONTAINS(kr_device_describe(dev), "cuda: ");
    printf("    device: %s\n", kr_device_describe(dev));
    /* Buffers are kept: same block, page-locked, for a repeated shape. */
    kr_frame f = synthetic_frame(&kinect, KR_DEPTH_SCALED, 4);
    kr_pyramid p = {0};
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &kinect, &p));
    void *block = p.storage;
    CHECK(p.storage_pinned);
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &kinect, &p));
    CHECK(p.storage == block);
    /* A CPU-filled pyramid handed to the GPU, and back. */
    kr_device *cpu = kr_parity_make_device(KR_BACKEND_CPU);
    REQUIRE_OK(kr_preprocess(cpu, NULL, &f, &kinect, &p));
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &kinect, &p));
    kr_pyramid_free(&p);
    kr_device_destroy(&cpu);
    kr_device_destroy(&dev);
    kr_frame_release(&f);

    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CUDA;
    dc.cuda_device = 99;
    kr_device *none = NULL;
    CHECK_STATUS(kr_device_create(&none, &dc), KR_ERR_NO_DEVICE);
    CHECK(none == NULL);
    CHECK_CONTAINS(kr_last_error(), "99");
}

KR_TEST(parity_preprocess, cuda_errors_name_the_statement)
{
    PARITY_NEED();
    /* An impossible page-locked allocation fails inside CUDA: the status is
     * KR_ERR_CUDA and the detail names the file, line and the call. */
    void *p = (void *)&p;
    CHECK_STATUS(kr_gpu_host_alloc(&p, (size_t)1 << 62), KR_ERR_CUDA);
    CHECK(p == (void *)&p);
    CHECK_CONTAINS(kr_last_error(), "gpu/context.cu:");
    CHECK_CONTAINS(kr_last_error(), "cudaMallocHost(");
    printf("    %s\n", kr_last_error());
    /* Not sticky: the device still works afterwards. */
    kr_device *dev = kr_parity_make_device(KR_BACKEND_CUDA);
    REQUIRE(dev);
    kr_frame f = synthetic_frame(&kinect, KR_DEPTH_SCALED, 6);
    kr_pyramid pyr = {0};
    CHECK_OK(kr_preprocess(dev, NULL, &f, &kinect, &pyr));
    CHECK_GT(pyr.level[0].valid_normals, 0);
    kr_pyramid_free(&pyr);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}
