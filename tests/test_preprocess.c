/* Preprocessing on the CPU engine and the device context, against values
 * computed here independently: hand-computed depth conversions, analytic
 * planes (points on the plane, normals equal to the plane normal), a depth
 * step, pyramid sizes and intrinsics, invalid pixels, bad input. */
#include "kr_test.h"

#include <stdint.h>
#include <stdlib.h>

#include "kinreg/device.h"
#include "kinreg/preprocess.h"
#include "kinreg/source.h"
#include "pipeline/preprocess/preprocess_kernels.h"

/* ---- helpers ------------------------------------------------------------- */

static kr_device *cpu_device(void)
{
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CPU;
    kr_device *dev = NULL;
    if (kr_device_create(&dev, &dc) != KR_OK) return NULL;
    return dev;
}

static kr_frame make_frame(int w, int h, kr_depth_encoding enc, float scale)
{
    kr_frame f;
    memset(&f, 0, sizeof f);
    f.width = w;
    f.height = h;
    f.encoding = enc;
    f.depth_scale = scale;
    f.raw = calloc(w > 0 && h > 0 ? (size_t)w * (size_t)h : 1, sizeof(uint16_t));
    return f;
}

static kr_intrinsics make_k(int w, int h, float f, float cx, float cy)
{
    kr_intrinsics k = {.width = w, .height = h, .fx = f, .fy = f, .cx = cx, .cy = cy};
    return k;
}

static const float *pt(const kr_cloud *c, int u, int v)
{
    return c->points + 3 * ((size_t)v * (size_t)c->width + (size_t)u);
}

static const float *nm(const kr_cloud *c, int u, int v)
{
    return c->normals + 3 * ((size_t)v * (size_t)c->width + (size_t)u);
}

static bool all_nan(const float *p)
{
    return isnan(p[0]) && isnan(p[1]) && isnan(p[2]);
}

/* A plane n·X = c with unit n facing the camera (c < 0: the camera at the
 * origin is on the side n points to). */
typedef struct {
    double n[3], c;
} plane;

static plane make_plane(double nx, double ny, double nz, double c)
{
    double l = sqrt(nx * nx + ny * ny + nz * nz);
    plane p = {{nx / l, ny / l, nz / l}, c};
    return p;
}

/* Depth where the ray of pixel (u, v) meets the plane. */
static double plane_depth(const plane *pl, const kr_intrinsics *k, double u, double v)
{
    double rx = (u - k->cx) / k->fx, ry = (v - k->cy) / k->fy;
    return pl->c / (pl->n[0] * rx + pl->n[1] * ry + pl->n[2]);
}

static double plane_dist(const plane *pl, const float *p)
{
    return pl->n[0] * p[0] + pl->n[1] * p[1] + pl->n[2] * p[2] - pl->c;
}

/* Fine depth steps for the analytic tests: the largest scale whose samples
 * still fit 16 bits, so quantisation stays far below the tolerances. */
static float scale_for(double zmax)
{
    return (float)floor(65000.0 / zmax);
}

/* Most tests use a small, wide-angle camera: neighbouring pixels are 5 cm
 * apart at 1 m, so depth quantisation (±8 µm) tilts normals by < 1e-3. */
enum { W = 40, H = 30 };
static const float F = 20.0f, CX = 19.5f, CY = 14.5f;

/* ---- depth conversion ------------------------------------------------------ */

KR_TEST(preprocess, depth_conversion_scaled)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_frame f = make_frame(8, 4, KR_DEPTH_SCALED, 5000.0f);
    kr_intrinsics k = make_k(8, 4, 100.0f, 3.5f, 1.5f);
    /* value/5000 m; 0 = no return; outside [0.3, 6.0] clipped (bounds kept). */
    const uint16_t raw[8] = {5000, 7500, 12345, 0, 1000, 35000, 1500, 30000};
    const double expect[8] = {1.0, 1.5, 2.469, NAN, NAN, NAN, 0.3, 6.0};
    memcpy(f.raw, raw, sizeof raw);
    kr_preprocess_config cfg;
    kr_preprocess_config_default(&cfg);
    cfg.levels = 1;
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k, &pyr));
    const kr_cloud *c = &pyr.level[0];
    for (int u = 0; u < 8; u++) {
        const float *p = pt(c, u, 0);
        if (isnan(expect[u])) {
            CHECK_MSG(all_nan(p), "pixel %d (raw %u) should be invalid, got z %g", u, raw[u], p[2]);
        } else {
            CHECK_NEAR(p[2], expect[u], 1e-6 * expect[u]);
            /* x = (u − cx)·z/fx, y = (v − cy)·z/fy */
            CHECK_NEAR(p[0], (u - 3.5) * expect[u] / 100.0, 1e-6);
            CHECK_NEAR(p[1], (0 - 1.5) * expect[u] / 100.0, 1e-6);
        }
    }
    /* Row 0 has 5 valid samples, rows 1-3 are all 0 (no return). */
    CHECK_EQ(c->valid_points, 5);

    /* libfreenect millimetre modes: value/1000. */
    f.depth_scale = 1000.0f;
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k, &pyr));
    CHECK_NEAR(pt(&pyr.level[0], 0, 0)[2], 5.0, 1e-6);
    CHECK_NEAR(pt(&pyr.level[0], 4, 0)[2], 1.0, 1e-6);
    CHECK(all_nan(pt(&pyr.level[0], 1, 0))); /* 7.5 m > 6 m */
    kr_pyramid_free(&pyr);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}

KR_TEST(preprocess, depth_conversion_disparity)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_frame f = make_frame(8, 1, KR_DEPTH_DISPARITY11, 0.0f);
    kr_intrinsics k = make_k(8, 1, 100.0f, 3.5f, 0.0f);
    /* z = 1/(3.3309495161 − 0.0030711016·d), computed by hand (Python, double):
     * d = 0 → 0.300214697, 600 → 0.671912712, 1000 → 3.848404925,
     * 1084 → 533.2 m (beyond 6 m), 1090 and 2046 → a + b·d < 0 (no depth),
     * 2047 → no return. */
    const uint16_t raw[8] = {0, 600, 1000, 1084, 1090, 2046, 2047, 65535};
    const double expect[8] = {0.30021469709, 0.67191271202, 3.84840492473, NAN, NAN, NAN, NAN, NAN};
    memcpy(f.raw, raw, sizeof raw);
    kr_preprocess_config cfg;
    kr_preprocess_config_default(&cfg);
    cfg.levels = 1;
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k, &pyr));
    for (int u = 0; u < 8; u++) {
        const float *p = pt(&pyr.level[0], u, 0);
        if (isnan(expect[u]))
            CHECK_MSG(all_nan(p), "disparity %u should be invalid, got z %g", raw[u], p[2]);
        else
            CHECK_NEAR(p[2], expect[u], 1e-6 * expect[u]);
    }
    CHECK_EQ(pyr.level[0].valid_points, 3);
    kr_pyramid_free(&pyr);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}

/* ---- analytic planes ------------------------------------------------------- */

/* Raw samples of a scene of planes: pixel (u, v) sees plane which(u, v). */
typedef const plane *(*plane_at_fn)(int u, int v, const void *user);

static kr_frame render(const kr_intrinsics *k, plane_at_fn at, const void *user)
{
    double zmax = 0;
    for (int v = 0; v < k->height; v++)
        for (int u = 0; u < k->width; u++)
            zmax = fmax(zmax, plane_depth(at(u, v, user), k, u, v));
    kr_frame f = make_frame(k->width, k->height, KR_DEPTH_SCALED, scale_for(zmax));
    for (int v = 0; v < k->height; v++)
        for (int u = 0; u < k->width; u++)
            f.raw[v * k->width + u] =
                (uint16_t)lround(plane_depth(at(u, v, user), k, u, v) * f.depth_scale);
    return f;
}

static const plane *one_plane(int u, int v, const void *user)
{
    (void)u;
    (void)v;
    return user;
}

/* A point from a quantised depth lies within half a depth step (along the
 * ray, |ray| ≤ 1.5 here) of the plane, plus float rounding. */
static double on_plane_tol(const kr_frame *f)
{
    return 0.75 / f->depth_scale + 2e-6;
}

KR_TEST(preprocess, tilted_plane_points_and_normals)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_intrinsics k = make_k(W, H, F, CX, CY);
    plane pl = make_plane(0.3, -0.2, -1.0, -0.65);
    kr_frame f = render(&k, one_plane, &pl);
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &k, &pyr));
    const kr_cloud *c = &pyr.level[0];
    CHECK_EQ(c->valid_points, W * H);
    /* Every interior pixel has a normal; border pixels lack a neighbour. */
    CHECK_EQ(c->valid_normals, (W - 2) * (H - 2));
    double tol = on_plane_tol(&f), worst_dist = 0, worst_normal = 0;
    for (int v = 0; v < H; v++) {
        for (int u = 0; u < W; u++) {
            const float *p = pt(c, u, v), *n = nm(c, u, v);
            double z = f.raw[v * W + u] / (double)f.depth_scale;
            CHECK_NEAR(p[0], (u - CX) * z / F, 1e-6);
            CHECK_NEAR(p[1], (v - CY) * z / F, 1e-6);
            worst_dist = fmax(worst_dist, fabs(plane_dist(&pl, p)));
            bool border = u == 0 || v == 0 || u == W - 1 || v == H - 1;
            if (border) {
                CHECK(all_nan(n));
                continue;
            }
            for (int i = 0; i < 3; i++)
                worst_normal = fmax(worst_normal, fabs(n[i] - pl.n[i]));
            /* Oriented towards the camera: the camera (origin) is in front. */
            CHECK_LT(n[0] * p[0] + n[1] * p[1] + n[2] * p[2], 0);
            CHECK_NEAR(n[0] * n[0] + n[1] * n[1] + n[2] * n[2], 1.0, 1e-5);
        }
    }
    CHECK_LE(worst_dist, tol);
    CHECK_LE(worst_normal, 1e-3);
    printf("    plane: max distance %.3g m (tol %.3g), max normal error %.3g\n", worst_dist, tol,
           worst_normal);
    kr_pyramid_free(&pyr);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}

typedef struct {
    plane near, far;
    int edge; /* columns < edge see `near` */
} step_scene;

static const plane *step_plane(int u, int v, const void *user)
{
    (void)v;
    const step_scene *s = user;
    return u < s->edge ? &s->near : &s->far;
}

KR_TEST(preprocess, depth_step_rejects_normals_on_the_edge)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_intrinsics k = make_k(W, H, F, CX, CY);
    /* Two parallel tilted planes, 0.6 and 0.9 m away: a step of ~50 % of z at
     * column 21, far beyond discontinuity·z = 4 %. */
    step_scene sc = {make_plane(0.2, 0.1, -1.0, -0.6), make_plane(0.2, 0.1, -1.0, -0.9), 21};
    kr_frame f = render(&k, step_plane, &sc);
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &k, &pyr));
    const kr_cloud *c = &pyr.level[0];
    CHECK_EQ(c->valid_points, W * H);
    CHECK_EQ(c->valid_normals, (W - 2 - 2) * (H - 2));
    int wrong = 0;
    for (int v = 1; v < H - 1; v++) {
        for (int u = 1; u < W - 1; u++) {
            const float *n = nm(c, u, v);
            bool on_edge = u == sc.edge - 1 || u == sc.edge; /* a neighbour on the other plane */
            if (on_edge) {
                if (!all_nan(n)) wrong++;
                continue;
            }
            const plane *pl = step_plane(u, v, &sc);
            for (int i = 0; i < 3; i++)
                CHECK_NEAR(n[i], pl->n[i], 1e-3);
            CHECK_NEAR(plane_dist(pl, pt(c, u, v)), 0, on_plane_tol(&f));
        }
    }
    CHECK_EQ(wrong, 0);

    /* Downsampling never averages across the step: every coarse point lies
     * on one of the two planes, 0.3 m apart. Blocks straddling the edge keep
     * one side's samples, whose mean depth then sits on the block-centre ray
     * up to a pixel off: a few millimetres, against 0.15 m for an average. */
    for (int l = 1; l < pyr.levels; l++) {
        const kr_cloud *cl = &pyr.level[l];
        CHECK_EQ(cl->valid_points, cl->width * cl->height);
        double worst = 0, worst_straddling = 0;
        for (int v = 0; v < cl->height; v++)
            for (int u = 0; u < cl->width; u++) {
                const float *p = pt(cl, u, v);
                double d = fmin(fabs(plane_dist(&sc.near, p)), fabs(plane_dist(&sc.far, p)));
                bool straddles = (u << l) <= sc.edge - 1 && ((u + 1) << l) > sc.edge;
                if (straddles)
                    worst_straddling = fmax(worst_straddling, d);
                else
                    worst = fmax(worst, d);
            }
        /* Elsewhere only the plane's curvature in this very wide-angle
         * image separates a block's mean depth from the plane. */
        CHECK_LE(worst, 1e-3);
        /* An average of both sides would be ~0.15 m from either plane. */
        CHECK_LE(worst_straddling, 0.03);
        printf("    level %d: max distance %.3g m, %.3g m where a block straddles the step\n", l,
               worst, worst_straddling);
    }
    kr_pyramid_free(&pyr);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}

/* ---- pyramid --------------------------------------------------------------- */

KR_TEST(preprocess, level_intrinsics)
{
    /* fr1: cx' = (cx + 0.5)/2^l − 0.5, fx' = fx/2^l (computed by hand). */
    kr_intrinsics k = {640, 480, 517.3f, 516.5f, 318.6f, 255.3f, 0, 0, 0, 0, 0};
    kr_intrinsics k1 = kr_intrinsics_level(&k, 1), k2 = kr_intrinsics_level(&k, 2);
    CHECK_EQ(k1.width, 320);
    CHECK_EQ(k1.height, 240);
    CHECK_NEAR(k1.fx, 258.65, 1e-4);
    CHECK_NEAR(k1.fy, 258.25, 1e-4);
    CHECK_NEAR(k1.cx, 159.05, 1e-4);
    CHECK_NEAR(k1.cy, 127.4, 1e-4);
    CHECK_EQ(k2.width, 160);
    CHECK_EQ(k2.height, 120);
    CHECK_NEAR(k2.fx, 129.325, 1e-4);
    CHECK_NEAR(k2.cx, 79.275, 1e-4);
    CHECK_NEAR(k2.cy, 63.45, 1e-4);
    kr_intrinsics k0 = kr_intrinsics_level(&k, 0);
    CHECK_EQ(k0.width, 640);
    CHECK_NEAR(k0.cx, 318.6, 1e-5);
    /* The ray of coarse pixel u' is the ray through the centre of its 2×2
     * block, u = 2u' + 0.5, at every level. */
    for (int l = 1; l < 4; l++) {
        kr_intrinsics kl = kr_intrinsics_level(&k, l);
        double s = 1 << l, u = 37, fine_u = s * u + (s - 1) / 2;
        CHECK_NEAR((u - kl.cx) / kl.fx, (fine_u - k.cx) / k.fx, 1e-6);
    }
}

KR_TEST(preprocess, pyramid_sizes_and_downsampled_plane)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    /* A Kinect-like camera; odd sizes round down: 645×485 → 322×242 →
     * 161×121 → 80×60. */
    kr_intrinsics k = make_k(645, 485, 525.0f, 322.0f, 242.0f);
    plane pl = make_plane(-0.25, 0.3, -1.0, -1.2);
    kr_frame f = render(&k, one_plane, &pl);
    kr_preprocess_config cfg;
    kr_preprocess_config_default(&cfg);
    cfg.levels = 4;
    /* Normals from the nearest neighbours everywhere (the widening with
     * depth has its own test below): every interior pixel has one. */
    cfg.depth_step = 0;
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k, &pyr));
    CHECK_EQ(pyr.levels, 4);
    double zmin = INFINITY;
    for (int i = 0; i < k.width * k.height; i++)
        zmin = fmin(zmin, f.raw[i] / (double)f.depth_scale);
    const int ew[4] = {645, 322, 161, 80}, eh[4] = {485, 242, 121, 60};
    for (int l = 0; l < 4; l++) {
        const kr_cloud *c = &pyr.level[l];
        kr_intrinsics kl = kr_intrinsics_level(&k, l);
        CHECK_EQ(c->width, ew[l]);
        CHECK_EQ(c->height, eh[l]);
        CHECK_EQ(c->intrinsics.width, ew[l]);
        CHECK_EQ(c->intrinsics.height, eh[l]);
        CHECK_NEAR(c->intrinsics.fx, kl.fx, 0);
        CHECK_NEAR(c->intrinsics.cx, kl.cx, 0);
        CHECK_NEAR(c->intrinsics.cy, kl.cy, 0);
        CHECK_EQ(c->valid_points, ew[l] * eh[l]);
        CHECK_EQ(c->valid_normals, (ew[l] - 2) * (eh[l] - 2));
        int s = 1 << l;
        double worst = 0, worst_z = 0, worst_n = 0;
        for (int v = 0; v < c->height; v++) {
            for (int u = 0; u < c->width; u++) {
                const float *p = pt(c, u, v);
                /* On a fully valid plane every sample passes the median test,
                 * so level l's depth is the plain mean of its 2^l×2^l block
                 * of level-0 depths. */
                double z = 0;
                for (int j = 0; j < s; j++)
                    for (int i = 0; i < s; i++)
                        z += f.raw[(v * s + j) * k.width + u * s + i];
                z /= (double)(s * s) * f.depth_scale;
                worst_z = fmax(worst_z, fabs(p[2] - z) / z);
                /* ... on its pixel's ray at this level ... */
                CHECK_NEAR(p[0], (u - kl.cx) * p[2] / kl.fx, 1e-6);
                CHECK_NEAR(p[1], (v - kl.cy) * p[2] / kl.fy, 1e-6);
                /* ... and still on the plane. */
                worst = fmax(worst, fabs(plane_dist(&pl, p)));
                const float *n = nm(c, u, v);
                if (!isnan(n[0]))
                    for (int i = 0; i < 3; i++)
                        worst_n = fmax(worst_n, fabs(n[i] - pl.n[i]));
            }
        }
        CHECK_LE(worst_z, 1e-6);
        /* Half a depth step, plus the plane's tiny curvature in image
         * coordinates over a block (second order, < 1 µm here). */
        CHECK_LE(worst, on_plane_tol(&f) + 1e-6);
        /* Depth quantisation (±δ) tilts a normal by about δ over the
         * neighbours' spacing z/fx: with fx = 525 that is ~1e-2 at level 0
         * (the small-camera tests check 1e-3); bound it with a margin. */
        CHECK_LE(worst_n, 3.0 * (0.5 / f.depth_scale) * kl.fx / zmin);
        printf("    level %d (%dx%d): max distance to the plane %.3g m, depth vs block mean %.3g, "
               "max normal error %.3g\n",
               l, c->width, c->height, worst, worst_z, worst_n);
    }
    kr_pyramid_free(&pyr);
    CHECK(pyr.storage == NULL);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}

/* Three slightly tilted planes side by side, 1.0, 2.0 and 3.3 m away. */
typedef struct {
    plane p[3];
    int edge[2]; /* columns < edge[0] see p[0], < edge[1] p[1], the rest p[2] */
} band_scene;

static const plane *band_plane(int u, int v, const void *user)
{
    (void)v;
    const band_scene *s = user;
    return &s->p[u < s->edge[0] ? 0 : u < s->edge[1] ? 1 : 2];
}

/* Normal at (u, v) from the points k pixels away, in double, oriented
 * towards the camera: the definition, computed independently. */
static void normal_from(const kr_cloud *c, int u, int v, int k, double n[3])
{
    const float *l = pt(c, u - k, v), *r = pt(c, u + k, v), *t = pt(c, u, v - k),
                *b = pt(c, u, v + k), *p = pt(c, u, v);
    double dx[3] = {r[0] - l[0], r[1] - l[1], r[2] - l[2]};
    double dy[3] = {b[0] - t[0], b[1] - t[1], b[2] - t[2]};
    n[0] = dx[1] * dy[2] - dx[2] * dy[1];
    n[1] = dx[2] * dy[0] - dx[0] * dy[2];
    n[2] = dx[0] * dy[1] - dx[1] * dy[0];
    double len = sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
    if (n[0] * p[0] + n[1] * p[1] + n[2] * p[2] > 0) len = -len;
    for (int i = 0; i < 3; i++)
        n[i] /= len;
}

/* Angle in degrees between unit vectors a (float) and b (double). */
static double angle_deg(const float *a, const double *b)
{
    double c = a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
    return acos(fmax(-1.0, fmin(1.0, c))) * 180 / M_PI;
}

KR_TEST(preprocess, normal_baseline_widens_with_depth)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    /* A Kinect v1 camera and raw 11-bit disparity with the sensor's noise
     * (Gaussian, 0.5 disparity units, then rounded): depth quantised in
     * steps of depth_step·z², 3 mm at 1 m and 3.3 cm at 3.3 m, where one
     * step between neighbours 1 cm apart tilts a normal by 70°. */
    kr_intrinsics k = make_k(640, 480, 570.3f, 319.5f, 239.5f);
    band_scene sc;
    const double zc[3] = {1.0, 2.0, 3.3};
    for (int i = 0; i < 3; i++)
        sc.p[i] = make_plane(0.12, 0.08, -1.0, 0); /* tilted by 8° */
    sc.edge[0] = 213;
    sc.edge[1] = 426;
    for (int i = 0; i < 3; i++) /* depth zc[i] at the band's centre column, row cy */
        sc.p[i].c = zc[i] * (sc.p[i].n[0] * ((106.0 + 213 * i) - k.cx) / k.fx + sc.p[i].n[2]);
    kr_frame f = make_frame(k.width, k.height, KR_DEPTH_DISPARITY11, 0.0f);
    unsigned rng = 2024;
    for (int v = 0; v < k.height; v++)
        for (int u = 0; u < k.width; u++) {
            double z = plane_depth(band_plane(u, v, &sc), &k, u, v);
            f.raw[v * k.width + u] =
                (uint16_t)lround((1 / z - KR_DISPARITY_A) / KR_DISPARITY_B + 0.5 * kr_nrand(&rng));
        }
    kr_preprocess_config wide, narrow;
    kr_preprocess_config_default(&wide);
    wide.levels = 2;
    CHECK_NEAR(wide.depth_step, 0.0030711016, 1e-9); /* the Kinect v1's step */
    narrow = wide;
    narrow.depth_step = 0;
    kr_pyramid pw = {0}, pn = {0};
    REQUIRE_OK(kr_preprocess(dev, &wide, &f, &k, &pw));
    REQUIRE_OK(kr_preprocess(dev, &narrow, &f, &k, &pn));
    for (int l = 0; l < 2; l++) {
        const kr_cloud *cw = &pw.level[l], *cn = &pn.level[l];
        const int w = cw->width, h = cw->height, s = 1 << l;
        CHECK_EQ(cw->valid_points, w * h);
        int per_k[KR_NORMAL_MAX_REACH + 1] = {0}, wrong_validity = 0, wrong_normal = 0;
        int checked = 0, changed_k1 = 0;
        double err_w[3] = {0}, err_n[3] = {0};
        int cnt[3] = {0};
        for (int v = 0; v < h; v++)
            for (int u = 0; u < w; u++) {
                const float *p = pt(cw, u, v), *nw = nm(cw, u, v), *nn = nm(cn, u, v);
                /* The half-baseline the rule asks for: the smallest k >= 1
                 * with depth_step·z·fx/(2k) < 1, here in double. Pixels
                 * within float rounding of a boundary are left out. */
                double x = 0.0030711016 * p[2] * cw->intrinsics.fx / 2;
                if (fabs(x - round(x)) < 1e-4) continue;
                int ke = (int)fmin(floor(x) + 1, KR_NORMAL_MAX_REACH);
                /* Valid where the neighbours k away exist and see the same
                 * plane (the bands are 1 m apart: depth edges). */
                int band = band_plane(u * s, 0, &sc) - sc.p;
                bool inside = u >= ke && v >= ke && u < w - ke && v < h - ke &&
                              band_plane((u - ke) * s, 0, &sc) - sc.p == band &&
                              band_plane((u + ke) * s + s - 1, 0, &sc) - sc.p == band;
                /* Level 1 leaves out pixels whose block, or whose left or
                 * right neighbour's block, straddles an edge: such a block
                 * keeps one side's samples, whichever its median picks. */
                bool straddles = false;
                for (int du = -ke; du <= ke && l > 0; du += ke)
                    if (u + du >= 0 && u + du < w)
                        straddles |= band_plane((u + du) * s, 0, &sc) !=
                                     band_plane((u + du) * s + s - 1, 0, &sc);
                if (straddles) continue;
                checked++;
                wrong_validity += inside == all_nan(nw);
                if (!inside || all_nan(nw)) continue;
                per_k[ke]++;
                double ne[3];
                normal_from(cw, u, v, ke, ne);
                wrong_normal += angle_deg(nw, ne) > 0.05;
                /* Where k = 1 nothing changes, bit for bit. */
                if (ke == 1) changed_k1 += memcmp(nw, nn, 3 * sizeof(float)) != 0;
                if (!all_nan(nn)) {
                    err_w[band] += angle_deg(nw, sc.p[band].n);
                    err_n[band] += angle_deg(nn, sc.p[band].n);
                    cnt[band]++;
                }
            }
        CHECK_EQ(wrong_validity, 0);
        CHECK_EQ(wrong_normal, 0);
        CHECK_EQ(changed_k1, 0);
        CHECK_GT(checked, w * h * 9 / 10);
        /* Level 0 needs k = 1 (1 m), 2 (2 m) and 3 (3.3 m); level 1 half that. */
        CHECK(per_k[1] > 1000 / s / s && per_k[2] > 1000 / s / s);
        if (l == 0) CHECK(per_k[3] > 1000);
        for (int b = 0; b < 3; b++) {
            REQUIRE(cnt[b] > 1000 / s / s);
            err_w[b] /= cnt[b];
            err_n[b] /= cnt[b];
        }
        /* With the nearest neighbours the error grows with depth (one step
         * tilts the slope by depth_step·z·fx/2: 0.88, 1.75 and 2.9 at
         * level 0); the rule holds that slope change at 0.88, 0.88 and
         * 0.72–0.96, so the error stays what it is at 1 m. Never worse. */
        for (int b = 0; b < 3; b++)
            CHECK_LE(err_w[b], err_n[b] + 0.5);
        if (l == 0) {
            CHECK_GT(err_n[2], 1.3 * err_n[0]);
            CHECK_LT(fabs(err_w[1] - err_w[0]), 0.15 * err_w[0]);
            CHECK_LT(fabs(err_w[2] - err_w[0]), 0.15 * err_w[0]);
        }
        printf("    level %d: k = 1 / 2 / 3 / 4 at %d / %d / %d / %d pixels; mean normal error at "
               "1 / 2 / 3.3 m: %.1f / %.1f / %.1f° (nearest neighbours: %.1f / %.1f / %.1f°)\n",
               l, per_k[1], per_k[2], per_k[3], per_k[4], err_w[0], err_w[1], err_w[2], err_n[0],
               err_n[1], err_n[2]);
    }
    kr_pyramid_free(&pw);
    kr_pyramid_free(&pn);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}

KR_TEST(preprocess, invalid_pixels_stay_invalid)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_intrinsics k = make_k(W, H, F, CX, CY);
    plane pl = make_plane(0.1, 0.3, -1.0, -0.8);
    kr_frame f = render(&k, one_plane, &pl);
    /* ~5 % random holes, a 2×2 hole that empties level-1 pixel (5, 5) and a
     * 4×4 hole that empties level-2 pixel (5, 5). */
    unsigned s = 12345;
    for (int i = 0; i < W * H; i++) {
        s = s * 1103515245u + 12345u;
        if (((s >> 16) & 0xffff) < 3277) f.raw[i] = 0;
    }
    for (int v = 10; v < 12; v++)
        for (int u = 10; u < 12; u++)
            f.raw[v * W + u] = 0;
    for (int v = 20; v < 24; v++)
        for (int u = 20; u < 24; u++)
            f.raw[v * W + u] = 0;
    /* Keep level-1 pixel (6, 6) half empty: it must stay valid. */
    f.raw[12 * W + 12] = f.raw[12 * W + 13] = 0;
    f.raw[13 * W + 12] = (uint16_t)lround(plane_depth(&pl, &k, 12, 13) * f.depth_scale);
    f.raw[13 * W + 13] = (uint16_t)lround(plane_depth(&pl, &k, 13, 13) * f.depth_scale);

    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &k, &pyr));
    const kr_cloud *c = &pyr.level[0];
    int holes = 0, expect_normals = 0;
    for (int v = 0; v < H; v++) {
        for (int u = 0; u < W; u++) {
            bool valid = f.raw[v * W + u] != 0;
            holes += !valid;
            CHECK_MSG(valid == !all_nan(pt(c, u, v)), "pixel (%d,%d) raw %u: point validity wrong",
                      u, v, f.raw[v * W + u]);
            if (!valid) CHECK(all_nan(pt(c, u, v)));
            bool interior = u > 0 && v > 0 && u < W - 1 && v < H - 1;
            bool has_normal = interior && valid && f.raw[v * W + u - 1] && f.raw[v * W + u + 1] &&
                              f.raw[(v - 1) * W + u] && f.raw[(v + 1) * W + u];
            expect_normals += has_normal;
            CHECK_MSG(has_normal == !all_nan(nm(c, u, v)), "pixel (%d,%d): normal validity wrong",
                      u, v);
        }
    }
    CHECK_EQ(c->valid_points, W * H - holes);
    CHECK_EQ(c->valid_normals, expect_normals);
    CHECK(all_nan(pt(&pyr.level[1], 5, 5)));
    CHECK(!all_nan(pt(&pyr.level[1], 6, 6)));
    /* Only its lower row is valid: its depth is the mean of that row's two
     * samples (both within tolerance of their median). */
    double z66 = (f.raw[13 * W + 12] + f.raw[13 * W + 13]) / (2.0 * f.depth_scale);
    CHECK_NEAR(pt(&pyr.level[1], 6, 6)[2], z66, 1e-6 * z66);
    CHECK(all_nan(pt(&pyr.level[2], 5, 5)));
    /* Counts agree with the arrays at every level. */
    for (int l = 0; l < pyr.levels; l++) {
        const kr_cloud *cl = &pyr.level[l];
        int np = 0, nn = 0;
        for (int i = 0; i < cl->width * cl->height; i++) {
            np += !isnan(cl->points[3 * i]);
            nn += !isnan(cl->normals[3 * i]);
        }
        CHECK_EQ(cl->valid_points, np);
        CHECK_EQ(cl->valid_normals, nn);
    }
    kr_pyramid_free(&pyr);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}

/* ---- buffers and errors ---------------------------------------------------- */

KR_TEST(preprocess, buffers_reused_while_shape_repeats)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_intrinsics k = make_k(W, H, F, CX, CY);
    plane pl = make_plane(0.0, 0.0, -1.0, -1.0);
    kr_frame f = render(&k, one_plane, &pl);
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &k, &pyr));
    void *block = pyr.storage;
    float *points0 = pyr.level[0].points;
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &k, &pyr));
    CHECK(pyr.storage == block);
    CHECK(pyr.level[0].points == points0);
    /* A new shape gets new buffers and sizes. */
    kr_frame g = make_frame(40, 30, KR_DEPTH_SCALED, 5000.0f);
    for (int i = 0; i < 40 * 30; i++)
        g.raw[i] = 5000;
    kr_intrinsics kg = make_k(40, 30, 20.0f, 19.5f, 14.5f);
    REQUIRE_OK(kr_preprocess(dev, NULL, &g, &kg, &pyr));
    CHECK_EQ(pyr.level[0].width, 40);
    CHECK_EQ(pyr.level[2].width, 10);
    CHECK_EQ(pyr.level[0].valid_points, 40 * 30);
    kr_pyramid_free(&pyr);
    kr_pyramid_free(&pyr); /* twice is harmless */
    kr_frame_release(&f);
    kr_frame_release(&g);
    kr_device_destroy(&dev);
}

KR_TEST(preprocess, size_mismatch_is_an_error_and_leaves_output)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_intrinsics k = make_k(W, H, F, CX, CY);
    plane pl = make_plane(0.0, 0.0, -1.0, -1.0);
    kr_frame f = render(&k, one_plane, &pl);
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, NULL, &f, &k, &pyr));
    kr_pyramid before = pyr;
    float first = pyr.level[0].points[2];

    kr_frame big = make_frame(640, 480, KR_DEPTH_SCALED, 5000.0f);
    kr_intrinsics small = make_k(320, 240, 262.5f, 159.5f, 119.5f);
    CHECK_STATUS(kr_preprocess(dev, NULL, &big, &small, &pyr), KR_ERR_SIZE);
    CHECK_CONTAINS(kr_last_error(), "640x480");
    CHECK_CONTAINS(kr_last_error(), "320x240");
    CHECK(memcmp(&before, &pyr, sizeof pyr) == 0);
    CHECK_EQ(pyr.level[0].points[2], first);

    /* Too small for the levels, bad settings, NULLs. */
    kr_frame tiny = make_frame(3, 3, KR_DEPTH_SCALED, 5000.0f);
    kr_intrinsics kt = make_k(3, 3, 3.0f, 1.0f, 1.0f);
    CHECK_STATUS(kr_preprocess(dev, NULL, &tiny, &kt, &pyr), KR_ERR_SIZE);
    kr_preprocess_config cfg;
    kr_preprocess_config_default(&cfg);
    cfg.levels = 0;
    CHECK_STATUS(kr_preprocess(dev, &cfg, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    cfg.levels = KR_MAX_LEVELS + 1;
    CHECK_STATUS(kr_preprocess(dev, &cfg, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    kr_preprocess_config_default(&cfg);
    cfg.min_depth = 7.0f;
    CHECK_STATUS(kr_preprocess(dev, &cfg, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    kr_preprocess_config_default(&cfg);
    cfg.discontinuity = 0.0f;
    CHECK_STATUS(kr_preprocess(dev, &cfg, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    kr_preprocess_config_default(&cfg);
    cfg.depth_step = -1e-3f;
    CHECK_STATUS(kr_preprocess(dev, &cfg, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    cfg.depth_step = NAN;
    CHECK_STATUS(kr_preprocess(dev, &cfg, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    f.depth_scale = 0.0f;
    CHECK_STATUS(kr_preprocess(dev, NULL, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_preprocess(NULL, NULL, &f, &k, &pyr), KR_ERR_INVALID_ARG);
    CHECK_STATUS(kr_preprocess(dev, NULL, &f, &k, NULL), KR_ERR_INVALID_ARG);
    CHECK(memcmp(&before, &pyr, sizeof pyr) == 0);

    kr_pyramid_free(&pyr);
    kr_frame_release(&f);
    kr_frame_release(&big);
    kr_frame_release(&tiny);
    kr_device_destroy(&dev);
}

KR_TEST(preprocess, config_default)
{
    kr_preprocess_config cfg;
    kr_preprocess_config_default(&cfg);
    CHECK_EQ(cfg.levels, 3);
    CHECK_NEAR(cfg.min_depth, 0.3, 1e-7);
    CHECK_NEAR(cfg.max_depth, 6.0, 1e-7);
    CHECK_NEAR(cfg.discontinuity, 0.04, 1e-7);
    CHECK_NEAR(cfg.depth_step, -KR_DISPARITY_B, 1e-9);
}

/* ---- device ---------------------------------------------------------------- */

KR_TEST(preprocess, backend_names)
{
    kr_backend b = KR_BACKEND_CUDA;
    CHECK_OK(kr_backend_parse("cpu", &b));
    CHECK_EQ(b, KR_BACKEND_CPU);
    CHECK_OK(kr_backend_parse("auto", &b));
    CHECK_EQ(b, KR_BACKEND_AUTO);
    CHECK_OK(kr_backend_parse("CUDA", &b));
    CHECK_EQ(b, KR_BACKEND_CUDA);
    CHECK_STATUS(kr_backend_parse("gpu", &b), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "gpu");
    CHECK_EQ(b, KR_BACKEND_CUDA); /* untouched on failure */
    CHECK_STR(kr_backend_name(KR_BACKEND_AUTO), "auto");
    CHECK_STR(kr_backend_name(KR_BACKEND_CPU), "cpu");
    CHECK_STR(kr_backend_name(KR_BACKEND_CUDA), "cuda");
}

KR_TEST(preprocess, cpu_device)
{
    kr_device_config dc;
    kr_device_config_default(&dc);
    CHECK_EQ(dc.backend, KR_BACKEND_AUTO);
    CHECK_EQ(dc.cuda_device, 0);
    CHECK_EQ(dc.cpu_threads, 0);
    dc.backend = KR_BACKEND_CPU;
    dc.cpu_threads = 3;
    kr_device *dev = NULL;
    REQUIRE_OK(kr_device_create(&dev, &dc));
    CHECK_EQ(kr_device_backend(dev), KR_BACKEND_CPU);
    CHECK_STR(kr_device_describe(dev), "cpu (3 OpenMP threads)");
    kr_device_destroy(&dev);
    CHECK(dev == NULL);
    kr_device_destroy(&dev);
    kr_device_destroy(NULL);
    dc.cpu_threads = -1;
    CHECK_STATUS(kr_device_create(&dev, &dc), KR_ERR_INVALID_ARG);
}

KR_TEST(preprocess, cuda_without_device_is_an_error)
{
    if (kr_cuda_available())
        SKIP("a CUDA device is present; tests/test_parity_preprocess.c covers it");
    kr_device_config dc;
    kr_device_config_default(&dc);
    dc.backend = KR_BACKEND_CUDA;
    kr_device *dev = (kr_device *)&dc; /* a sentinel: must stay untouched */
    CHECK_STATUS(kr_device_create(&dev, &dc), KR_ERR_NO_DEVICE);
    CHECK(dev == (kr_device *)&dc);
    CHECK_CONTAINS(kr_last_error(), "--backend cpu");
    printf("    %s\n", kr_last_error());
    /* AUTO quietly means the CPU when there is no device. */
    dc.backend = KR_BACKEND_AUTO;
    dev = NULL;
    REQUIRE_OK(kr_device_create(&dev, &dc));
    CHECK_EQ(kr_device_backend(dev), KR_BACKEND_CPU);
    kr_device_destroy(&dev);
}

/* Brown–Conrady forward model in double (OpenCV's formula). */
static void distort(const kr_intrinsics *k, double x, double y, double *xd, double *yd)
{
    double r2 = x * x + y * y;
    double radial = 1 + k->k1 * r2 + k->k2 * r2 * r2 + k->k3 * r2 * r2 * r2;
    *xd = x * radial + 2 * k->p1 * x * y + k->p2 * (r2 + 2 * x * x);
    *yd = y * radial + k->p1 * (r2 + 2 * y * y) + 2 * k->p2 * x * y;
}

KR_TEST(preprocess, distorted_lens_back_projection_inverts_the_forward_model)
{
    /* Every pixel's back-projected ray, pushed through the forward distortion
     * model, must land on that pixel again (fr1's strong lens: ~6 % at the
     * corners). The pinhole model is the special case of zero coefficients. */
    kr_intrinsics k;
    REQUIRE_OK(kr_intrinsics_preset("fr1", &k));
    CHECK(k.k1 != 0.0f);
    double worst = 0, moved = 0;
    for (int v = 0; v < k.height; v += 7)
        for (int u = 0; u < k.width; u += 7) {
            float p[3];
            kr_preprocess_backproject(u, v, 2.0f, &k, p);
            CHECK_NEAR(p[2], 2.0, 0);
            double xd, yd;
            distort(&k, p[0] / 2.0, p[1] / 2.0, &xd, &yd);
            double du = xd * k.fx + k.cx - u, dv = yd * k.fy + k.cy - v;
            worst = fmax(worst, sqrt(du * du + dv * dv));
            double pu = p[0] / 2.0 * k.fx + k.cx - u, pv = p[1] / 2.0 * k.fy + k.cy - v;
            moved = fmax(moved, sqrt(pu * pu + pv * pv));
        }
    CHECK_LT(worst, 1e-3); /* pixels */
    CHECK_GT(moved, 5.0);  /* the correction is real: many pixels at the corners */
    kr_intrinsics pin = k;
    pin.k1 = pin.k2 = pin.k3 = pin.p1 = pin.p2 = 0;
    float p[3];
    kr_preprocess_backproject(100, 50, 1.5f, &pin, p);
    CHECK_NEAR(p[0], (100 - pin.cx) * 1.5 / pin.fx, 1e-6);
    CHECK_NEAR(p[1], (50 - pin.cy) * 1.5 / pin.fy, 1e-6);
    /* Coarser levels keep the coefficients (they act on normalised coordinates). */
    kr_intrinsics l2 = kr_intrinsics_level(&k, 2);
    CHECK_EQ(l2.k1 == k.k1 && l2.k3 == k.k3 && l2.p2 == k.p2, 1);
}

/* ---- the CPU engine's ray table (distorted lenses) ------------------------- */

/* Every level's points as the inline path computes them: kr_preprocess_backproject
 * per pixel, undistorting as it goes, each coarser level downsampled from the
 * finer one computed here. pts[l] gets 3 floats per pixel of level l. */
static void inline_points(const kr_frame *f, const kr_preprocess_config *cfg,
                          const kr_intrinsics *k, float *pts[KR_MAX_LEVELS])
{
    const kr_preprocess_depth_params dp = {(int)f->encoding, f->depth_scale, cfg->min_depth,
                                           cfg->max_depth};
    const float tol = KR_DOWNSAMPLE_TOLERANCE * cfg->discontinuity;
    for (int l = 0; l < cfg->levels; l++) {
        kr_intrinsics kl = kr_intrinsics_level(k, l);
        pts[l] = malloc(3 * sizeof(float) * (size_t)kl.width * (size_t)kl.height);
        int fine_w = l ? kr_intrinsics_level(k, l - 1).width : 0;
        for (int v = 0; v < kl.height; v++)
            for (int u = 0; u < kl.width; u++) {
                size_t i = (size_t)v * (size_t)kl.width + (size_t)u;
                float z = l ? kr_preprocess_downsample_depth(pts[l - 1], fine_w, u, v, tol)
                            : kr_preprocess_depth(f->raw[i], &dp);
                kr_preprocess_backproject(u, v, z, &kl, pts[l] + 3 * i);
            }
    }
}

/* Pixels of the pyramid whose points differ, bit for bit, from pts. */
static int bit_differences(const kr_pyramid *pyr, float *const pts[KR_MAX_LEVELS])
{
    int differ = 0;
    for (int l = 0; l < pyr->levels; l++) {
        const kr_cloud *c = &pyr->level[l];
        for (int i = 0; i < c->width * c->height; i++)
            if (memcmp(c->points + 3 * i, pts[l] + 3 * i, 3 * sizeof(float)) != 0) {
                if (differ < 3)
                    printf("    level %d pixel %d: (%.9g %.9g %.9g) vs inline (%.9g %.9g %.9g)\n",
                           l, i, c->points[3 * i], c->points[3 * i + 1], c->points[3 * i + 2],
                           pts[l][3 * i], pts[l][3 * i + 1], pts[l][3 * i + 2]);
                differ++;
            }
    }
    return differ;
}

static void free_points(float *pts[KR_MAX_LEVELS])
{
    for (int l = 0; l < KR_MAX_LEVELS; l++) {
        free(pts[l]);
        pts[l] = NULL;
    }
}

KR_TEST(preprocess, ray_table_matches_inline_undistortion_bit_for_bit)
{
    kr_device *dev = cpu_device();
    REQUIRE(dev);
    kr_intrinsics k1, k2;
    REQUIRE_OK(kr_intrinsics_preset("fr1", &k1));
    REQUIRE_OK(kr_intrinsics_preset("fr2", &k2));
    REQUIRE(k1.width == k2.width && k1.height == k2.height);
    /* A tilted plane with a step, ~5 % holes and some depths out of range,
     * so downsampling sees partial and mixed blocks. */
    step_scene sc = {make_plane(0.2, -0.1, -1.0, -0.9), make_plane(0.2, -0.1, -1.0, -1.6), 300};
    kr_frame f = render(&k1, step_plane, &sc);
    unsigned r = 777;
    for (int i = 0; i < k1.width * k1.height; i++) {
        r = r * 1103515245u + 12345u;
        unsigned x = (r >> 16) & 0xffff;
        if (x < 3277)
            f.raw[i] = 0;
        else if (x < 3600)
            f.raw[i] = (uint16_t)(0.2 * f.depth_scale); /* below min_depth */
    }
    f.raw[0] = (uint16_t)(1.0 * f.depth_scale); /* a point at the far corner */
    kr_preprocess_config cfg;
    kr_preprocess_config_default(&cfg);
    float *expect[KR_MAX_LEVELS] = {0};

    /* fr1: the table is built and the engine's points are the inline bits. */
    kr_pyramid pyr = {0};
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k1, &pyr));
    REQUIRE(pyr.rays != NULL);
    CHECK_EQ(pyr.rays_levels, cfg.levels);
    CHECK(memcmp(&pyr.rays_intrinsics, &k1, sizeof k1) == 0);
    size_t px = 0;
    for (int l = 0; l < cfg.levels; l++)
        px += (size_t)pyr.level[l].width * (size_t)pyr.level[l].height;
    CHECK_EQ(pyr.rays_bytes, 2 * sizeof(float) * px);
    inline_points(&f, &cfg, &k1, expect);
    CHECK_EQ(bit_differences(&pyr, expect), 0);
    /* The undistortion is real: far from the pinhole ray at the corner. */
    float pin = (0.0f - k1.cx) / k1.fx * pt(&pyr.level[0], 0, 0)[2];
    CHECK_GT(fabs(pt(&pyr.level[0], 0, 0)[0] - pin), 0.005);
    int valid = pyr.level[0].valid_points;
    CHECK_GT(valid, k1.width * k1.height * 8 / 10);

    /* Same intrinsics: the table is reused, not rebuilt — a value planted in
     * it shows up in the next frame's point. */
    float *rays = pyr.rays;
    const float saved = rays[0];
    rays[0] = 0.5f;
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k1, &pyr));
    CHECK(pyr.rays == rays);
    CHECK_EQ(pt(&pyr.level[0], 0, 0)[0], 0.5f * pt(&pyr.level[0], 0, 0)[2]);
    rays[0] = saved;

    /* fr2 (same size): rebuilt in place for the new intrinsics; the points
     * follow them, again bit for bit. */
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k2, &pyr));
    CHECK(pyr.rays == rays);
    CHECK(memcmp(&pyr.rays_intrinsics, &k2, sizeof k2) == 0);
    float *expect2[KR_MAX_LEVELS] = {0};
    inline_points(&f, &cfg, &k2, expect2);
    CHECK_EQ(bit_differences(&pyr, expect2), 0);
    int changed = 0;
    for (int i = 0; i < k1.width * k1.height; i++)
        changed +=
            expect[0][3 * i + 2] > 0.0f && (expect[0][3 * i] != pyr.level[0].points[3 * i] ||
                                            expect[0][3 * i + 1] != pyr.level[0].points[3 * i + 1]);
    CHECK_EQ(pyr.level[0].valid_points, valid);
    CHECK_EQ(changed, valid); /* every point moved with the new lens */
    free_points(expect2);

    /* Only a coefficient changes: still rebuilt. */
    kr_intrinsics k3 = k2;
    k3.p2 = 0.001f;
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k3, &pyr));
    inline_points(&f, &cfg, &k3, expect2);
    CHECK_EQ(bit_differences(&pyr, expect2), 0);
    free_points(expect2);

    /* More levels: a bigger table for the new shape. */
    cfg.levels = 4;
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &k1, &pyr));
    REQUIRE(pyr.rays != NULL);
    CHECK_EQ(pyr.rays_levels, 4);
    inline_points(&f, &cfg, &k1, expect2);
    CHECK_EQ(bit_differences(&pyr, expect2), 0);
    free_points(expect2);

    /* The pinhole model keeps the fast path: no table, same points as inline. */
    kr_intrinsics pin_k = k1;
    pin_k.k1 = pin_k.k2 = pin_k.k3 = pin_k.p1 = pin_k.p2 = 0.0f;
    REQUIRE_OK(kr_preprocess(dev, &cfg, &f, &pin_k, &pyr));
    CHECK(pyr.rays == NULL);
    CHECK_EQ(pyr.rays_bytes, 0);
    inline_points(&f, &cfg, &pin_k, expect2);
    CHECK_EQ(bit_differences(&pyr, expect2), 0);
    free_points(expect2);

    free_points(expect);
    kr_pyramid_free(&pyr);
    CHECK(pyr.rays == NULL);
    kr_frame_release(&f);
    kr_device_destroy(&dev);
}
