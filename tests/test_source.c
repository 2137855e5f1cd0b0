/* The source interface and the synthetic source. The synthetic frames are
 * checked against the scene description with geometry of their own
 * (scene_distance.h: signed distance functions) and ray-plane intersections,
 * independent of the library's ray caster: back-projected depth must lie on
 * the scene's surfaces within the sensor's noise, and the disparity noise
 * must have the documented statistics. */
#include "kr_test.h"

#include <stdint.h>
#include <stdlib.h>

#include "capture/synthetic_scene.h"
#include "scene_distance.h"
#include "kinreg/source.h"

/* ---- presets and dispatch ------------------------------------------------- */

KR_TEST(source, config_default)
{
    kr_source_config cfg;
    memset(&cfg, 0x5a, sizeof cfg);
    kr_source_config_default(&cfg);
    CHECK_STR(cfg.uri, "synthetic");
    CHECK_EQ(cfg.seed, 1);
    CHECK_NEAR(cfg.duration_s, 30, 0);
    CHECK_NEAR(cfg.fps, 30, 0);
    CHECK_EQ(cfg.max_frames, 0);
    CHECK(!cfg.skip_bad && !cfg.live && !cfg.override_intrinsics && cfg.intrinsics == NULL);
    CHECK_NEAR(cfg.depth_scale, 0, 0);
}

KR_TEST(source, intrinsics_presets)
{
    struct {
        const char *name;
        float fx, fy, cx, cy;
    } want[] = {{"fr1", 517.3f, 516.5f, 318.6f, 255.3f},
                {"fr2", 520.9f, 521.0f, 325.1f, 249.7f},
                {"fr3", 535.4f, 539.2f, 320.1f, 247.6f},
                {"default", 525, 525, 319.5f, 239.5f},
                {"kinect", 570.3f, 570.3f, 319.5f, 239.5f}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        kr_intrinsics k;
        REQUIRE_OK(kr_intrinsics_preset(want[i].name, &k));
        CHECK_EQ(k.width, 640);
        CHECK_EQ(k.height, 480);
        CHECK_NEAR(k.fx, want[i].fx, 0);
        CHECK_NEAR(k.fy, want[i].fy, 0);
        CHECK_NEAR(k.cx, want[i].cx, 0);
        CHECK_NEAR(k.cy, want[i].cy, 0);
    }
    kr_intrinsics k = {1, 2, 3, 4, 5, 6, 0, 0, 0, 0, 0};
    CHECK_STATUS(kr_intrinsics_preset("fr4", &k), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "fr4");
    CHECK_CONTAINS(kr_last_error(), "fr1");
    CHECK_EQ(k.width, 1); /* untouched */
}

static kr_status create_uri(const char *uri, kr_source **src)
{
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = uri;
    cfg.duration_s = 1;
    return kr_source_create(src, &cfg);
}

KR_TEST(source, dispatch_errors)
{
    kr_source *src = NULL;
    CHECK_STATUS(create_uri("freenect:0", &src), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "freenect:0");
    CHECK_CONTAINS(kr_last_error(), "synthetic:SEED");
    CHECK_CONTAINS(kr_last_error(), "tum:DIR");
    CHECK_CONTAINS(kr_last_error(), "depth.txt");
    CHECK(src == NULL);
    CHECK_STATUS(create_uri("synthetic:abc", &src), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "synthetic:abc");
    CHECK_STATUS(create_uri("synthetic:", &src), KR_ERR_INVALID_ARG);
    CHECK_STATUS(create_uri("/no/such/sequence", &src), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "no such directory /no/such/sequence");
    CHECK_STATUS(create_uri("tum:/no/such/sequence", &src), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), "/no/such/sequence");
    CHECK(src == NULL);
    CHECK_STATUS(kr_source_create(NULL, NULL), KR_ERR_INVALID_ARG);

    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.intrinsics = "bogus";
    CHECK_STATUS(kr_source_create(&src, &cfg), KR_ERR_INVALID_ARG);
    CHECK_CONTAINS(kr_last_error(), "bogus");
    kr_source_config_default(&cfg);
    cfg.fps = 0;
    CHECK_STATUS(kr_source_create(&src, &cfg), KR_ERR_INVALID_ARG);
    kr_source_config_default(&cfg);
    cfg.override_intrinsics = true; /* custom left zero */
    CHECK_STATUS(kr_source_create(&src, &cfg), KR_ERR_INVALID_ARG);
    CHECK(src == NULL);
    kr_source_destroy(&src); /* accepts NULL */
    kr_source_destroy(NULL);
}

KR_TEST(source, synthetic_uri_and_overrides)
{
    kr_source *src = NULL;
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = "synthetic:42";
    cfg.duration_s = 2;
    cfg.fps = 15;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    CHECK_EQ(kr_source_length(src), 30);
    CHECK_CONTAINS(kr_source_describe(src), "synthetic:42");
    CHECK(!kr_source_is_live(src));
    kr_intrinsics k = kr_source_intrinsics(src);
    CHECK_NEAR(k.fx, 525, 0);
    CHECK_NEAR(k.cx, 319.5, 0);
    const kr_trajectory *gt = kr_source_groundtruth(src);
    REQUIRE(gt != NULL);
    CHECK_EQ(gt->count, 30);
    CHECK_NEAR(gt->stamps[29], 29.0 / 15, 1e-12);
    kr_source_destroy(&src);

    /* custom intrinsics change the rendered size; max_frames and live apply */
    cfg.override_intrinsics = true;
    cfg.custom = (kr_intrinsics){160, 120, 131.25f, 131.25f, 79.5f, 59.5f, 0, 0, 0, 0, 0};
    cfg.max_frames = 3;
    cfg.live = true;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    CHECK_EQ(kr_source_length(src), 3);
    CHECK(kr_source_is_live(src));
    kr_frame f;
    int n = 0;
    while (kr_source_read(src, &f) == KR_OK) {
        CHECK_EQ(f.width, 160);
        CHECK_EQ(f.height, 120);
        CHECK_EQ(f.encoding, KR_DEPTH_DISPARITY11);
        CHECK_EQ(f.index, n);
        CHECK_NEAR(f.timestamp, n / 15.0, 1e-12);
        CHECK_GT(f.capture_time, 0);
        kr_frame_release(&f);
        n++;
    }
    CHECK_EQ(n, 3);
    kr_source_destroy(&src);
}

/* ---- determinism ---------------------------------------------------------- */

static uint16_t *read_all(const char *uri, int frames, int threads)
{
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = uri;
    cfg.max_frames = frames;
    cfg.render_threads = threads;
    kr_source *src = NULL;
    if (kr_source_create(&src, &cfg) != KR_OK) return NULL;
    uint16_t *all = malloc((size_t)frames * 640 * 480 * sizeof *all);
    for (int i = 0; all && i < frames; i++) {
        kr_frame f;
        if (kr_source_read(src, &f) != KR_OK) {
            free(all);
            all = NULL;
            break;
        }
        memcpy(all + (size_t)i * 640 * 480, f.raw, 640 * 480 * sizeof *all);
        kr_frame_release(&f);
    }
    kr_source_destroy(&src);
    return all;
}

KR_TEST(source, synthetic_deterministic_from_seed)
{
    const size_t n = 3 * 640 * 480;
    uint16_t *a = read_all("synthetic:5", 3, 1), *b = read_all("synthetic:5", 3, 2),
             *c = read_all("synthetic:6", 3, 1);
    REQUIRE(a && b && c);
    CHECK(memcmp(a, b, n * sizeof *a) == 0); /* same seed, any thread count: same bytes */
    size_t differ = 0;
    for (size_t i = 0; i < n; i++)
        differ += a[i] != c[i];
    CHECK_GT(differ, n / 4);
    /* consecutive frames differ too (the camera moves, the noise is fresh) */
    size_t moved = 0;
    for (size_t i = 0; i < 640 * 480; i++)
        moved += a[i] != a[i + 640 * 480];
    CHECK_GT(moved, 640 * 480 / 10);
    free(a);
    free(b);
    free(c);
}

static void back_project(const kr_intrinsics *k, const kr_pose *T, int u, int v, double z,
                         double world[3])
{
    double c[3] = {(u - k->cx) * z / k->fx, (v - k->cy) * z / k->fy, z};
    kr_pose_apply(T, c, world);
}

KR_TEST(source, synthetic_trajectory_is_handheld_and_clear)
{
    kr_source *src = NULL;
    REQUIRE_OK(create_uri("synthetic:3", &src));
    kr_source_destroy(&src);
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = "synthetic:3";
    REQUIRE_OK(kr_source_create(&src, &cfg));
    const kr_trajectory *gt = kr_source_groundtruth(src);
    REQUIRE(gt != NULL);
    CHECK_EQ(gt->count, 900); /* 30 s at 30 Hz */
    CHECK_EQ(kr_source_length(src), 900);
    kr_synth_scene scene;
    kr_synth_scene_build(3, &scene);

    double min_clear = 1e9, vsum = 0, wsum = 0, vmax = 0, wmax = 0;
    for (size_t i = 0; i < gt->count; i++) {
        const kr_pose *T = &gt->poses[i];
        /* rotation matrix stays orthonormal */
        double RtR00 = T->R[0] * T->R[0] + T->R[3] * T->R[3] + T->R[6] * T->R[6];
        CHECK_NEAR(RtR00, 1, 1e-9);
        int face;
        double inside = room_distance(&scene, T->t, &face);
        for (int a = 0; a < 3; a++)
            CHECK(T->t[a] > scene.room_min[a] && T->t[a] < scene.room_max[a]);
        min_clear = fmin(min_clear, fmin(inside, scene_distance(&scene, T->t, NULL)));
        if (i == 0) continue;
        kr_pose inv = kr_pose_inv(&gt->poses[i - 1]);
        kr_pose rel = kr_pose_mul(&inv, T);
        double dt = gt->stamps[i] - gt->stamps[i - 1];
        double v = kr_pose_translation_norm(&rel) / dt, w = kr_pose_angle(&rel) / dt * 180 / M_PI;
        vsum += v, wsum += w;
        vmax = fmax(vmax, v), wmax = fmax(wmax, w);
    }
    double vmean = vsum / (gt->count - 1), wmean = wsum / (gt->count - 1);
    printf("    synthetic path: speed mean %.2f max %.2f m/s, rotation mean %.1f max %.1f deg/s, "
           "clearance %.2f m\n",
           vmean, vmax, wmean, wmax, min_clear);
    CHECK_GT(min_clear, 0.5); /* never inside or brushing against anything */
    CHECK(vmean > 0.15 && vmean < 0.45);
    CHECK_LT(vmax, 0.8);
    CHECK(wmean > 12 && wmean < 35);
    CHECK_LT(wmax, 60);

    /* The same path sampled at 1 Hz passes through every 30th pose. */
    kr_source *slow = NULL;
    cfg.fps = 1;
    REQUIRE_OK(kr_source_create(&slow, &cfg));
    const kr_trajectory *g1 = kr_source_groundtruth(slow);
    REQUIRE(g1 && g1->count == 30);
    for (int i = 0; i < 30; i++) {
        for (int a = 0; a < 3; a++)
            CHECK_NEAR(g1->poses[i].t[a], gt->poses[30 * i].t[a], 1e-9);
        for (int a = 0; a < 9; a++)
            CHECK_NEAR(g1->poses[i].R[a], gt->poses[30 * i].R[a], 1e-9);
    }
    kr_source_destroy(&slow);
    kr_source_destroy(&src);
}

/* Point-to-plane information of one frame: the smallest over the largest
 * eigenvalue of Σ [p×n; n][p×n; n]ᵀ (points centred, metres) — near 0 when
 * the visible geometry leaves a degree of freedom unconstrained. */
static double constraint_ratio(const double (*pts)[3], const double (*nrm)[3], size_t n)
{
    double c[3] = {0};
    for (size_t i = 0; i < n; i++)
        for (int a = 0; a < 3; a++)
            c[a] += pts[i][a] / n;
    double H[36] = {0};
    for (size_t i = 0; i < n; i++) {
        double p[3] = {pts[i][0] - c[0], pts[i][1] - c[1], pts[i][2] - c[2]};
        const double *m = nrm[i];
        double J[6] = {p[1] * m[2] - p[2] * m[1],
                       p[2] * m[0] - p[0] * m[2],
                       p[0] * m[1] - p[1] * m[0],
                       m[0],
                       m[1],
                       m[2]};
        for (int r = 0; r < 6; r++)
            for (int k = 0; k < 6; k++)
                H[6 * r + k] += J[r] * J[k];
    }
    double ev[6];
    kr_eigen_sym(6, H, ev, NULL);
    return ev[0] / ev[5];
}

/* Numerical normal of the nearest surface (gradient of the distance). */
static void surface_normal(const kr_synth_scene *s, const double p[3], double n[3])
{
    const double h = 1e-4;
    double len = 0;
    for (int a = 0; a < 3; a++) {
        double q0[3] = {p[0], p[1], p[2]}, q1[3] = {p[0], p[1], p[2]};
        q0[a] -= h, q1[a] += h;
        n[a] = scene_distance(s, q1, NULL) - scene_distance(s, q0, NULL);
        len += n[a] * n[a];
    }
    len = sqrt(len) + 1e-300;
    for (int a = 0; a < 3; a++)
        n[a] /= len;
}

KR_TEST(source, synthetic_depth_lies_on_the_scene)
{
    /* 30 frames spread over the whole default path (1 Hz sampling of it). */
    const unsigned seed = 9;
    kr_source_config cfg;
    kr_source_config_default(&cfg);
    cfg.uri = "synthetic:9";
    cfg.fps = 1;
    kr_source *src = NULL;
    REQUIRE_OK(kr_source_create(&src, &cfg));
    const kr_trajectory *gt = kr_source_groundtruth(src);
    REQUIRE(gt && gt->count == 30);
    kr_intrinsics K = kr_source_intrinsics(src);
    kr_synth_scene scene;
    kr_synth_scene_build(seed, &scene);

    const double B = fabs(KR_DISPARITY_B);
    size_t checked = 0, within = 0, floor_n = 0;
    double floor_sum = 0, floor_sum2 = 0, worst_invalid = 0, best_invalid = 1, worst_ratio = 1;
    double zmin = 1e9, zmax = 0;
    size_t cap = 640 * 480 / 16;
    double(*pts)[3] = malloc(cap * sizeof *pts), (*nrm)[3] = malloc(cap * sizeof *nrm);
    REQUIRE(pts && nrm);
    kr_frame f;
    for (unsigned i = 0; i < 30; i++) {
        REQUIRE_OK(kr_source_read(src, &f));
        REQUIRE(f.width == 640 && f.height == 480 && f.encoding == KR_DEPTH_DISPARITY11);
        const kr_pose *T = &gt->poses[f.index];
        size_t invalid = 0, above = 0, np = 0;
        for (int v = 0; v < 480; v++) {
            for (int u = 0; u < 640; u++) {
                uint16_t d = f.raw[v * 640 + u];
                above += d > KR_DISPARITY_INVALID;
                if (d == KR_DISPARITY_INVALID) {
                    invalid++;
                    continue;
                }
                if ((u | v) & 1) continue; /* every 4th pixel is plenty */
                double z = kr_depth_to_metres(d, KR_DEPTH_DISPARITY11, 0);
                zmin = fmin(zmin, z), zmax = fmax(zmax, z);
                double p[3], room;
                back_project(&K, T, u, v, z, p);
                double dist = scene_distance(&scene, p, &room);
                /* Depth error of ±(0.5 rounding + 4σ noise) disparity units is
                 * (2.5·|B|·z²); along a ray that is at most |ray|/z longer. */
                double ray = sqrt(1 + pow((u - K.cx) / K.fx, 2) + pow((v - K.cy) / K.fy, 2));
                double bound = 1.1 * 2.5 * B * z * z * ray;
                checked++;
                within += dist <= bound;
                if (((u | v) & 7) == 0 && np < cap && dist <= bound) {
                    for (int a = 0; a < 3; a++)
                        pts[np][a] = p[a];
                    surface_normal(&scene, p, nrm[np]);
                    np++;
                }
                /* Floor pixels far from every object: compare the disparity
                 * with the exact one of the ray-floor intersection. */
                int face = -1;
                room_distance(&scene, p, &face);
                if (face == 4 && room < bound && dist == room) { /* face 4: z = room_min[2] */
                    double obj = 1e300;
                    for (int k = 0; k < scene.count; k++)
                        obj = fmin(obj, prim_distance(&scene.prims[k], p));
                    double dir[3], cam[3] = {(u - K.cx) / K.fx, (v - K.cy) / K.fy, 1};
                    kr_pose_rotate(T, cam, dir);
                    if (obj > 0.2 && dir[2] < 0) {
                        double z_true =
                            -T->t[2] / dir[2]; /* camera depth where the ray meets z = 0 */
                        double d_true = (1 / z_true - KR_DISPARITY_A) / KR_DISPARITY_B;
                        double r = d - d_true;
                        floor_sum += r, floor_sum2 += r * r, floor_n++;
                    }
                }
            }
        }
        CHECK_EQ(above, 0);
        double frac = invalid / (640.0 * 480);
        worst_invalid = fmax(worst_invalid, frac);
        best_invalid = fmin(best_invalid, frac);
        double ratio = constraint_ratio((const double(*)[3])pts, (const double(*)[3])nrm, np);
        worst_ratio = fmin(worst_ratio, ratio);
        kr_frame_release(&f);
    }
    free(pts);
    free(nrm);
    kr_source_destroy(&src);

    double on = (double)within / (checked ? checked : 1);
    double mean = floor_sum / (floor_n ? floor_n : 1);
    double sd = sqrt(floor_sum2 / (floor_n ? floor_n : 1) - mean * mean);
    printf("    synthetic: %.4f of %zu points on the scene; invalid %.3f..%.3f; z %.2f..%.2f m; "
           "floor disparity residual mean %.3f sd %.3f (n %zu); worst 6-DoF ratio %.2e\n",
           on, checked, best_invalid, worst_invalid, zmin, zmax, mean, sd, floor_n, worst_ratio);
    CHECK_GT(checked, 30 * 640 * 480 / 4 / 2);
    CHECK_GT(on, 0.999);
    /* missing returns exist (grazing, range, dropouts) but never dominate */
    CHECK_GT(best_invalid, 0.003);
    CHECK_LT(worst_invalid, 0.5);
    CHECK_GT(zmin, 0.45);
    CHECK_LT(zmax, 5.3);
    /* rounding of N(0, 0.5²) noise: sd = sqrt(0.25 + 1/12) = 0.577 */
    CHECK_GT(floor_n, 10000);
    CHECK_NEAR(mean, 0, 0.03);
    CHECK_NEAR(sd, 0.577, 0.04);
    CHECK_GT(worst_ratio, 1e-3);
}
