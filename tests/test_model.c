/* Running model: clouds ray-cast by hand from analytic planes and spheres at
 * known poses are fused, and the voxel map is checked against brute-force
 * voxel counting, the analytic surfaces and normals, the weight rules, the
 * active window, snapshot threading and the PLY export. */
#include "kr_test.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "fusion/model_internal.h"
#include "fusion/voxel_map.h"
#include "kinreg/model.h"

/* ---- analytic scenes -------------------------------------------------------- */

typedef struct {
    bool sphere;
    double n[3], d; /* plane n·p = d, n unit */
    double c[3], r; /* sphere */
} surface;

static surface plane(double nx, double ny, double nz, double d)
{
    double l = sqrt(nx * nx + ny * ny + nz * nz);
    surface s = {.sphere = false, .n = {nx / l, ny / l, nz / l}, .d = d};
    return s;
}

static surface sphere(double cx, double cy, double cz, double r)
{
    surface s = {.sphere = true, .c = {cx, cy, cz}, .r = r};
    return s;
}

static double dot3(const double a[3], const double b[3])
{
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2];
}

/* Nearest positive hit of ray o + t·dir; the normal faces the ray's origin. */
static bool hit(const surface *s, const double o[3], const double dir[3], double *t, double n[3])
{
    if (!s->sphere) {
        double den = dot3(s->n, dir);
        if (fabs(den) < 1e-9) return false;
        *t = (s->d - dot3(s->n, o)) / den;
        for (int k = 0; k < 3; k++) n[k] = den > 0 ? -s->n[k] : s->n[k];
        return *t > 0;
    }
    double oc[3] = {o[0] - s->c[0], o[1] - s->c[1], o[2] - s->c[2]};
    double a = dot3(dir, dir), b = dot3(oc, dir), c = dot3(oc, oc) - s->r * s->r;
    double disc = b * b - a * c;
    if (disc < 0) return false;
    *t = (-b - sqrt(disc)) / a;
    if (*t <= 0) return false;
    for (int k = 0; k < 3; k++) n[k] = (o[k] + *t * dir[k] - s->c[k]) / s->r;
    return true;
}

static kr_intrinsics qvga(void)
{
    kr_intrinsics k = {320, 240, 262.5f, 262.5f, 159.5f, 119.5f, 0, 0, 0, 0, 0};
    return k;
}

/* Ray-casts the surfaces from camera pose T (camera-to-world) into an
 * organised cloud in camera coordinates, as preprocessing would deliver it. */
static bool make_cloud(kr_cloud *cl, kr_intrinsics K, const kr_pose *T, const surface *s, int ns)
{
    memset(cl, 0, sizeof *cl);
    cl->width = K.width;
    cl->height = K.height;
    cl->intrinsics = K;
    size_t n = (size_t)K.width * K.height;
    cl->points = malloc(n * 3 * sizeof(float));
    cl->normals = malloc(n * 3 * sizeof(float));
    if (!cl->points || !cl->normals) return false;
    kr_pose Tinv = kr_pose_inv(T);
    for (int v = 0; v < K.height; v++)
        for (int u = 0; u < K.width; u++) {
            size_t i = (size_t)v * K.width + u;
            double dc[3] = {(u - K.cx) / K.fx, (v - K.cy) / K.fy, 1.0}, dw[3];
            kr_pose_rotate(T, dc, dw);
            double best = INFINITY, bn[3] = {0, 0, 0};
            for (int j = 0; j < ns; j++) {
                double t, nn[3];
                if (hit(&s[j], T->t, dw, &t, nn) && t < best) {
                    best = t;
                    memcpy(bn, nn, sizeof bn);
                }
            }
            float *p = cl->points + 3 * i, *nm = cl->normals + 3 * i;
            if (!isfinite(best) || best > 6.0) {
                p[0] = nm[0] = NAN;
                p[1] = p[2] = nm[1] = nm[2] = 0;
                continue;
            }
            double pw[3] = {T->t[0] + best * dw[0], T->t[1] + best * dw[1], T->t[2] + best * dw[2]};
            double pc[3], nc[3];
            kr_pose_apply(&Tinv, pw, pc);
            kr_pose_rotate(&Tinv, bn, nc);
            for (int k = 0; k < 3; k++) {
                p[k] = (float)pc[k];
                nm[k] = (float)nc[k];
            }
            cl->valid_points++;
            cl->valid_normals++;
        }
    return true;
}

static void free_cloud(kr_cloud *cl)
{
    free(cl->points);
    free(cl->normals);
    cl->points = cl->normals = NULL;
}

static kr_pose pose_of(double rx, double ry, double rz, double tx, double ty, double tz)
{
    double x[6] = {rx, ry, rz, 0, 0, 0};
    kr_pose T = kr_pose_exp(x);
    T.t[0] = tx;
    T.t[1] = ty;
    T.t[2] = tz;
    return T;
}

/* ---- independent references ------------------------------------------------- */

typedef struct {
    long long k[3];
} vkey;

static int cmp_vkey(const void *a, const void *b)
{
    const vkey *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x->k[i] != y->k[i]) return x->k[i] < y->k[i] ? -1 : 1;
    return 0;
}

/* Distinct voxels hit by the cloud's points moved to the world (double math,
 * sort and count: no hashing). */
static size_t brute_voxel_count(const kr_cloud *cl, const kr_pose *T, double vs)
{
    size_t n = (size_t)cl->width * cl->height, m = 0;
    vkey *keys = malloc(n * sizeof *keys);
    if (!keys) return 0;
    for (size_t i = 0; i < n; i++) {
        const float *p = cl->points + 3 * i;
        if (!isfinite(p[0]) || !isfinite(cl->normals[3 * i])) continue;
        double pc[3] = {p[0], p[1], p[2]}, pw[3];
        kr_pose_apply(T, pc, pw);
        for (int a = 0; a < 3; a++) keys[m].k[a] = (long long)floor(pw[a] / vs);
        m++;
    }
    qsort(keys, m, sizeof *keys, cmp_vkey);
    size_t distinct = 0;
    for (size_t i = 0; i < m; i++) distinct += i == 0 || cmp_vkey(&keys[i], &keys[i - 1]) != 0;
    free(keys);
    return distinct;
}

/* Surface area the camera sees: Σ over pixels of the footprint
 * r²·dΩ / |cos θ|, with the pixel solid angle dΩ = 1 / (fx·fy·|d|³). */
static double seen_area(const kr_cloud *cl)
{
    const kr_intrinsics *K = &cl->intrinsics;
    double area = 0;
    for (int v = 0; v < cl->height; v++)
        for (int u = 0; u < cl->width; u++) {
            const float *p = cl->points + 3 * ((size_t)v * cl->width + u);
            const float *n = cl->normals + 3 * ((size_t)v * cl->width + u);
            if (!isfinite(p[0])) continue;
            double d[3] = {(u - K->cx) / K->fx, (v - K->cy) / K->fy, 1.0};
            double dl = sqrt(dot3(d, d));
            double pp[3] = {p[0], p[1], p[2]}, nn[3] = {n[0], n[1], n[2]};
            double r = sqrt(dot3(pp, pp));
            double cosang = fabs(dot3(nn, pp)) / r;
            area += r * r / (K->fx * K->fy * dl * dl * dl) / cosang;
        }
    return area;
}

static kr_voxel_map *new_map(float vs, float cap, bool geometric)
{
    kr_voxel_map_config cfg = {vs, cap, geometric};
    kr_voxel_map *m = NULL;
    return kr_voxel_map_create(&m, &cfg) == KR_OK ? m : NULL;
}

static kr_model *new_model(bool background, int window)
{
    kr_model_config cfg;
    kr_model_config_default(&cfg);
    cfg.background = background;
    cfg.active_window = window;
    cfg.voxel_size = 0.01f; /* the voxel counts below are computed for 1 cm */
    kr_model *m = NULL;
    return kr_model_create(&m, &cfg) == KR_OK ? m : NULL;
}

static double angle_deg(const float a[3], const double b[3])
{
    double c = (a[0] * b[0] + a[1] * b[1] + a[2] * b[2]) /
               (sqrt((double)a[0] * a[0] + (double)a[1] * a[1] + (double)a[2] * a[2]) * sqrt(dot3(b, b)));
    return acos(fmin(1.0, fmax(-1.0, c))) * 180.0 / M_PI;
}

/* ---- voxel map -------------------------------------------------------------- */

KR_TEST(model, frontal_plane_fills_the_expected_voxels)
{
    /* Plane z = 1.005: mid-layer of the 1 cm voxels, so exactly one layer. */
    surface s = plane(0, 0, 1, 1.005);
    kr_pose T = kr_pose_identity();
    kr_cloud cl;
    REQUIRE(make_cloud(&cl, qvga(), &T, &s, 1));
    kr_voxel_map *m = new_map(0.01f, 64, true);
    REQUIRE(m != NULL);
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, 0));

    size_t n = kr_voxel_map_size(m);
    CHECK_EQ(n, brute_voxel_count(&cl, &T, 0.01));
    /* Area of the seen rectangle / voxel area, plus at most one partial
     * voxel row/column on each border. */
    double w = 320 / 262.5 * 1.005, h = 240 / 262.5 * 1.005;
    CHECK_NEAR(seen_area(&cl), w * h, 0.01 * w * h); /* the area integrator itself */
    CHECK_GE((double)n, w * h / 1e-4);
    CHECK_LE((double)n, (w + 0.02) * (h + 0.02) / 1e-4);

    double n_expect[3] = {0, 0, -1};
    double worst_z = 0, worst_ang = 0;
    int outside_cell = 0;
    for (size_t i = 0; i < n; i++) {
        const kr_voxel *v = kr_voxel_map_at(m, i);
        worst_z = fmax(worst_z, fabs(v->point[2] - 1.005));
        float un[3];
        CHECK(kr_voxel_unit_normal(v, un));
        worst_ang = fmax(worst_ang, angle_deg(un, n_expect));
        /* A mean of points inside a (convex) voxel lies inside it. */
        if (kr_voxel_map_find(m, v->point) != v) outside_cell++;
    }
    CHECK_LT(worst_z, 1e-5);
    CHECK_LT(worst_ang, 0.01);
    CHECK_EQ(outside_cell, 0);
    free_cloud(&cl);
    kr_voxel_map_destroy(&m);
    CHECK(m == NULL);
}

/* Re-fusion empties the model and fuses the given clouds at their poses:
 * afterwards it holds exactly the voxels of those (brute-force count), none
 * of what it held before, and all of them are in the next snapshot. */
KR_TEST(model, refuse_replaces_the_model_with_the_given_clouds)
{
    surface s = plane(0, 0, 1, 1.005);
    kr_pose I = kr_pose_identity();
    kr_cloud cl;
    REQUIRE(make_cloud(&cl, qvga(), &I, &s, 1));
    kr_model_config c;
    kr_model_config_default(&c);
    c.voxel_size = 0.01f;
    c.background = false;
    c.active_window = 2;
    kr_model *m = NULL;
    REQUIRE_OK(kr_model_create(&m, &c));
    /* Before: the plane straight ahead, as frame 0. */
    REQUIRE_OK(kr_model_integrate(m, &cl, &I, 0));
    float ahead[3] = {0, 0, 1.005f};
    REQUIRE(kr_voxel_map_find(m->map, ahead) != NULL);
    /* Re-fused from the same cloud at two poses 3 m to the side, as frame 100. */
    kr_pose at[2] = {kr_pose_identity(), kr_pose_identity()};
    at[0].t[0] = 3;
    at[1].t[0] = 3.5;
    kr_cloud two[2] = {cl, cl};
    REQUIRE_OK(kr_model_refuse(m, two, at, 2, 100));
    CHECK(kr_voxel_map_find(m->map, ahead) == NULL);
    /* The union of the two shifted planes, counted without the map. */
    size_t first = brute_voxel_count(&cl, &at[0], 0.01),
           second = brute_voxel_count(&cl, &at[1], 0.01);
    size_t n = kr_model_size(m);
    CHECK_LE(n, first + second);
    CHECK_GE(n, first > second ? first : second);
    CHECK_EQ(n, kr_voxel_map_size(m->map));
    /* Every voxel is stamped with the re-fusion's frame: the snapshot holds them all. */
    kr_model_snapshot *snap = kr_model_snapshot_acquire(m);
    REQUIRE(snap != NULL);
    CHECK_EQ(kr_model_snapshot_frame(snap), 100);
    CHECK_EQ(kr_kdtree_size(kr_model_snapshot_tree(snap)), n);
    kr_model_snapshot_release(&snap);
    CHECK(kr_model_refuse(m, NULL, NULL, 1, 101) == KR_ERR_INVALID_ARG);
    free_cloud(&cl);
    kr_model_destroy(&m);
}

KR_TEST(model, tilted_plane_at_a_pose_lies_on_the_surface)
{
    /* A plane seen obliquely from a rotated, translated camera, sampled 4×
     * denser than QVGA so that nearly every voxel the plane cuts gets a
     * sample (at QVGA ~19% are thin corner cuts that no pixel hits). */
    surface s = plane(0.3, -0.2, 1.0, 1.4);
    kr_pose T = pose_of(0.15, -0.2, 0.1, 0.2, -0.1, 0.3);
    kr_intrinsics K = {1280, 960, 1050.0f, 1050.0f, 639.5f, 479.5f, 0, 0, 0, 0, 0};
    kr_cloud cl;
    REQUIRE(make_cloud(&cl, K, &T, &s, 1));
    REQUIRE(cl.valid_normals > 1000000);
    kr_voxel_map *m = new_map(0.01f, 64, true);
    REQUIRE(m != NULL);
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, 3));
    size_t n = kr_voxel_map_size(m);
    size_t brute = brute_voxel_count(&cl, &T, 0.01);
    /* Float versus double rounding may put a handful of boundary points in
     * a neighbouring voxel. */
    CHECK_NEAR((double)n, (double)brute, 0.002 * brute + 2);
    /* A plane with unit normal n crosses A·(|nx|+|ny|+|nz|)/s² voxels on
     * average; samples still miss a few tiny corner cuts (measured: 4% at
     * this density, 0.6% at 8×), so allow 7% below. */
    double l1 = fabs(s.n[0]) + fabs(s.n[1]) + fabs(s.n[2]);
    double expect = seen_area(&cl) * l1 / 1e-4;
    CHECK_GT((double)n, 0.93 * expect);
    CHECK_LT((double)n, 1.03 * expect);

    double worst_d = 0, worst_ang = 0;
    for (size_t i = 0; i < n; i++) {
        const kr_voxel *v = kr_voxel_map_at(m, i);
        double p[3] = {v->point[0], v->point[1], v->point[2]};
        worst_d = fmax(worst_d, fabs(dot3(s.n, p) - s.d));
        float un[3];
        CHECK(kr_voxel_unit_normal(v, un));
        double toward_camera[3] = {-s.n[0], -s.n[1], -s.n[2]};
        worst_ang = fmax(worst_ang, angle_deg(un, toward_camera));
        CHECK_EQ(v->last_seen, 3);
    }
    CHECK_LT(worst_d, 1e-4); /* means of points on a plane stay on it */
    CHECK_LT(worst_ang, 0.05);
    free_cloud(&cl);
    kr_voxel_map_destroy(&m);
}

KR_TEST(model, sphere_points_and_normals_match_the_analytic_sphere)
{
    surface s[1] = {sphere(0.05, -0.02, 0.9, 0.25)};
    kr_pose T = pose_of(0, 0.1, 0, -0.05, 0, 0.05);
    kr_cloud cl;
    REQUIRE(make_cloud(&cl, qvga(), &T, s, 1));
    kr_voxel_map *m = new_map(0.01f, 64, true);
    REQUIRE(m != NULL);
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, 0));
    /* A second view from elsewhere adds the sphere's other side. */
    kr_pose T2 = pose_of(0, -0.4, 0, 0.35, 0.05, 0.1);
    kr_cloud cl2;
    REQUIRE(make_cloud(&cl2, qvga(), &T2, s, 1));
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl2, &T2, 1));

    size_t n = kr_voxel_map_size(m);
    CHECK_GT(n, 1000);
    double worst_r = 0, worst_ang = 0;
    for (size_t i = 0; i < n; i++) {
        const kr_voxel *v = kr_voxel_map_at(m, i);
        double d[3] = {v->point[0] - s[0].c[0], v->point[1] - s[0].c[1], v->point[2] - s[0].c[2]};
        double r = sqrt(dot3(d, d));
        worst_r = fmax(worst_r, fabs(r - s[0].r));
        float un[3];
        REQUIRE(kr_voxel_unit_normal(v, un));
        worst_ang = fmax(worst_ang, angle_deg(un, d));
    }
    /* Points are on the sphere; a voxel's mean sits slightly inside (chord
     * of a 1.7 cm patch on a 25 cm sphere: sagitta < 0.2 mm). */
    CHECK_LT(worst_r, 0.0003);
    /* The mean normal over a voxel's patch versus the normal at its mean. */
    CHECK_LT(worst_ang, 2.0);
    free_cloud(&cl);
    free_cloud(&cl2);
    kr_voxel_map_destroy(&m);
}

KR_TEST(model, same_cloud_twice_does_not_grow_the_map)
{
    surface s[2] = {sphere(0, 0, 1.0, 0.2), plane(0.1, 0, 1, 1.3)};
    kr_pose T = pose_of(0.05, 0.02, 0, 0, 0, 0);
    kr_cloud cl;
    REQUIRE(make_cloud(&cl, qvga(), &T, s, 2));
    kr_voxel_map *m = new_map(0.01f, 1e9f, false);
    REQUIRE(m != NULL);
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, 0));
    size_t n = kr_voxel_map_size(m);
    float *pts = malloc(n * 3 * sizeof(float)), *w = malloc(n * sizeof(float));
    REQUIRE(pts && w);
    for (size_t i = 0; i < n; i++) {
        memcpy(pts + 3 * i, kr_voxel_map_at(m, i)->point, 3 * sizeof(float));
        w[i] = kr_voxel_map_at(m, i)->weight;
    }
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, 1));
    CHECK_EQ(kr_voxel_map_size(m), n);
    double worst_move = 0;
    int weight_not_doubled = 0;
    for (size_t i = 0; i < n; i++) {
        const kr_voxel *v = kr_voxel_map_at(m, i);
        for (int k = 0; k < 3; k++) worst_move = fmax(worst_move, fabs(v->point[k] - pts[3 * i + k]));
        weight_not_doubled += v->weight != 2 * w[i]; /* uniform weights: sample counts */
        CHECK_EQ(v->last_seen, 1);
    }
    CHECK_LT(worst_move, 1e-6);
    CHECK_EQ(weight_not_doubled, 0);
    free(pts);
    free(w);
    free_cloud(&cl);
    kr_voxel_map_destroy(&m);
}

KR_TEST(model, skips_points_without_normals)
{
    surface s = plane(0, 0, 1, 1.005);
    kr_pose T = kr_pose_identity();
    kr_cloud cl;
    REQUIRE(make_cloud(&cl, qvga(), &T, &s, 1));
    /* Remove the normals of the left half: only the right half is fused. */
    for (int v = 0; v < cl.height; v++)
        for (int u = 0; u < cl.width / 2; u++) cl.normals[3 * ((size_t)v * cl.width + u)] = NAN;
    kr_voxel_map *m = new_map(0.01f, 64, true);
    REQUIRE(m != NULL);
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, 0));
    CHECK_EQ(kr_voxel_map_size(m), brute_voxel_count(&cl, &T, 0.01));
    int left = 0;
    for (size_t i = 0; i < kr_voxel_map_size(m); i++) left += kr_voxel_map_at(m, i)->point[0] < -0.01f;
    CHECK_EQ(left, 0);
    for (size_t i = 0; i < (size_t)cl.width * cl.height; i++) cl.normals[3 * i] = NAN;
    kr_voxel_map *e = new_map(0.01f, 64, true);
    REQUIRE(e != NULL);
    CHECK_OK(kr_voxel_map_integrate(e, &cl, &T, 0));
    CHECK_EQ(kr_voxel_map_size(e), 0);
    free_cloud(&cl);
    kr_voxel_map_destroy(&m);
    kr_voxel_map_destroy(&e);
}

KR_TEST(model, weight_cap_is_honoured_and_lets_the_map_follow_change)
{
    /* The surface moves 3 mm along z within its voxel layer; the same pixels
     * keep their lateral positions, so exactly the same voxels are hit. */
    surface before = plane(0, 0, 1, 1.003);
    kr_pose T = kr_pose_identity();
    kr_cloud a, b;
    REQUIRE(make_cloud(&a, qvga(), &T, &before, 1));
    REQUIRE(make_cloud(&b, qvga(), &T, &before, 1));
    for (size_t i = 0; i < (size_t)b.width * b.height; i++) b.points[3 * i + 2] = 1.006f;
    kr_voxel_map *capped = new_map(0.01f, 5, false), *free_map = new_map(0.01f, 1e9f, false);
    REQUIRE(capped && free_map);
    for (uint64_t f = 0; f < 20; f++) {
        REQUIRE_OK(kr_voxel_map_integrate(capped, &a, &T, f));
        REQUIRE_OK(kr_voxel_map_integrate(free_map, &a, &T, f));
    }
    size_t n = kr_voxel_map_size(capped);
    int over_cap = 0, not_at_cap = 0;
    for (size_t i = 0; i < n; i++) {
        over_cap += kr_voxel_map_at(capped, i)->weight > 5;
        not_at_cap += kr_voxel_map_at(capped, i)->weight != 5; /* ≥ 1 sample × 20 frames */
    }
    CHECK_EQ(over_cap, 0);
    CHECK_EQ(not_at_cap, 0);
    for (uint64_t f = 20; f < 50; f++) {
        REQUIRE_OK(kr_voxel_map_integrate(capped, &b, &T, f));
        REQUIRE_OK(kr_voxel_map_integrate(free_map, &b, &T, f));
    }
    CHECK_EQ(kr_voxel_map_size(capped), n);
    double worst_capped = 0, worst_free = 0;
    for (size_t i = 0; i < n; i++) {
        /* Capped at 5, each unit sample closes ≥ 1/6 of the gap: after 30
         * frames the 3 mm move is left with < 3 mm·(5/6)^30 ≈ 0.013 mm. */
        worst_capped = fmax(worst_capped, fabs(kr_voxel_map_at(capped, i)->point[2] - 1.006));
        /* Uncapped it is the plain mean of 20 frames at 1.003 and 30 at 1.006. */
        worst_free = fmax(worst_free, fabs(kr_voxel_map_at(free_map, i)->point[2] - (20 * 1.003 + 30 * 1.006) / 50));
    }
    CHECK_LT(worst_capped, 2e-5);
    CHECK_LT(worst_free, 5e-6);
    free_cloud(&a);
    free_cloud(&b);
    kr_voxel_map_destroy(&capped);
    kr_voxel_map_destroy(&free_map);
}

KR_TEST(model, geometric_weight_favours_near_head_on_samples)
{
    /* Plane at 2.005 m: each sample weighs |n·ray|/z², clipped to [0.05, 1]. */
    surface s = plane(0, 0, 1, 2.005);
    kr_pose T = kr_pose_identity();
    kr_cloud cl;
    REQUIRE(make_cloud(&cl, qvga(), &T, &s, 1));
    kr_voxel_map *m = new_map(0.01f, 64, true);
    REQUIRE(m != NULL);
    REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, 0));
    float centre[3] = {0.005f, 0.005f, 2.005f};
    const kr_voxel *v = kr_voxel_map_find(m, centre);
    REQUIRE(v != NULL);
    double expect = 0;
    int samples = 0;
    for (size_t i = 0; i < (size_t)cl.width * cl.height; i++) {
        const float *p = cl.points + 3 * i;
        if (floor(p[0] / 0.01) != 0 || floor(p[1] / 0.01) != 0) continue;
        double r = sqrt((double)p[0] * p[0] + (double)p[1] * p[1] + (double)p[2] * p[2]);
        double w = (p[2] / r) / ((double)p[2] * p[2]); /* normal is the optical axis */
        expect += fmin(1.0, fmax(0.05, w));
        samples++;
    }
    CHECK_GT(samples, 0);
    CHECK_NEAR(v->weight, expect, 1e-4 * expect);
    CHECK_NEAR(v->weight, samples / (2.005 * 2.005), 0.01 * samples); /* ≈ 1/z² each */
    free_cloud(&cl);
    kr_voxel_map_destroy(&m);
}

/* ---- active list ------------------------------------------------------------ */

static int cmp_point(const void *a, const void *b)
{
    const float *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

KR_TEST(model, active_list_gather_equals_a_full_scan)
{
    /* Different regions seen at different frames, gathered with windows that
     * move forward and (once) back, must equal a scan of every voxel. */
    kr_voxel_map *m = new_map(0.01f, 64, true);
    REQUIRE(m != NULL);
    float *pa = NULL, *na = NULL, *pb = NULL, *nb = NULL;
    size_t ca = 0, cb = 0;
    uint64_t since_seq[] = {0, 2, 5, 5, 9, 3, 12, 15};
    for (int f = 0; f < 16; f++) {
        surface s = sphere(0.3 * sin(f * 0.7), 0.2 * cos(f * 1.3), 1.2, 0.15 + 0.01 * f);
        kr_pose T = pose_of(0, 0.02 * f, 0, 0.01 * f, 0, 0);
        kr_cloud cl;
        REQUIRE(make_cloud(&cl, qvga(), &T, &s, 1));
        REQUIRE_OK(kr_voxel_map_integrate(m, &cl, &T, (uint64_t)f));
        free_cloud(&cl);
        if (f % 2 == 1) {
            uint64_t since = since_seq[f / 2];
            size_t na_n = 0, nb_n = 0;
            REQUIRE_OK(kr_voxel_map_gather(m, since, &pa, &na, &ca, &na_n));
            REQUIRE_OK(kr_voxel_map_gather_scan(m, since, &pb, &nb, &cb, &nb_n));
            CHECK_EQ(na_n, nb_n);
            CHECK_GT(na_n, 0);
            qsort(pa, na_n, 3 * sizeof(float), cmp_point);
            qsort(pb, nb_n, 3 * sizeof(float), cmp_point);
            CHECK(na_n == nb_n && memcmp(pa, pb, na_n * 3 * sizeof(float)) == 0);
        }
    }
    free(pa);
    free(na);
    free(pb);
    free(nb);
    kr_voxel_map_destroy(&m);
}

/* ---- model and snapshots ---------------------------------------------------- */

static void integrate_scene(kr_model *m, uint64_t frames)
{
    surface s[2] = {sphere(0, 0, 1.0, 0.2), plane(0.1, -0.1, 1, 1.4)};
    for (uint64_t f = 0; f < frames; f++) {
        kr_pose T = pose_of(0.01 * f, -0.02 * f, 0, 0.02 * f, 0, 0);
        kr_cloud cl;
        if (!make_cloud(&cl, qvga(), &T, s, 2)) return;
        CHECK_OK(kr_model_integrate(m, &cl, &T, f));
        free_cloud(&cl);
    }
}

/* The snapshot's points, sorted, in a fresh array. */
static float *snapshot_points(kr_model_snapshot *snap, size_t *n)
{
    const kr_kdtree *tree = kr_model_snapshot_tree(snap);
    *n = kr_kdtree_size(tree);
    float *p = malloc(*n * 3 * sizeof(float) + 1);
    if (!p) return NULL;
    for (size_t i = 0; i < *n; i++) {
        float nn[3];
        kr_kdtree_point(tree, i, p + 3 * i, nn);
    }
    qsort(p, *n, 3 * sizeof(float), cmp_point);
    return p;
}

KR_TEST(model, background_and_synchronous_snapshots_agree)
{
    kr_model *bg = new_model(true, 100), *sync = new_model(false, 100);
    REQUIRE(bg && sync);
    CHECK(kr_model_snapshot_acquire(bg) == NULL); /* none before the first */
    integrate_scene(bg, 4);
    integrate_scene(sync, 4);
    CHECK_EQ(kr_model_size(bg), kr_model_size(sync));
    CHECK_OK(kr_model_request_snapshot(bg, 3));
    CHECK_OK(kr_model_request_snapshot(sync, 3));
    kr_model_wait_idle(bg);
    kr_model_snapshot *a = kr_model_snapshot_acquire(bg), *b = kr_model_snapshot_acquire(sync);
    REQUIRE(a && b);
    CHECK_EQ(kr_model_snapshot_frame(a), 3);
    CHECK_EQ(kr_model_snapshot_frame(b), 3);
    size_t na, nb;
    float *pa = snapshot_points(a, &na), *pb = snapshot_points(b, &nb);
    REQUIRE(pa && pb);
    CHECK_EQ(na, kr_model_size(bg)); /* every voxel is inside the window */
    CHECK_EQ(na, nb);
    CHECK(na == nb && memcmp(pa, pb, na * 3 * sizeof(float)) == 0);
    /* Normals in the tree are unit length. */
    float p[3], n[3];
    kr_kdtree_point(kr_model_snapshot_tree(a), 0, p, n);
    CHECK_NEAR(sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]), 1.0, 1e-5);
    free(pa);
    free(pb);
    kr_model_snapshot_release(&a);
    kr_model_snapshot_release(&b);
    CHECK(a == NULL);
    kr_model_destroy(&bg);
    kr_model_destroy(&sync);
    CHECK(bg == NULL);
}

KR_TEST(model, active_window_excludes_old_voxels)
{
    kr_model *m = new_model(false, 5);
    REQUIRE(m != NULL);
    surface old_plane = plane(0, 0, 1, 1.005), ball = sphere(0, 0, 0.8, 0.1);
    kr_pose T = kr_pose_identity();
    kr_cloud a, b;
    REQUIRE(make_cloud(&a, qvga(), &T, &old_plane, 1));
    REQUIRE(make_cloud(&b, qvga(), &T, &ball, 1));
    REQUIRE_OK(kr_model_integrate(m, &a, &T, 0));
    size_t plane_voxels = kr_model_size(m);
    for (uint64_t f = 1; f <= 10; f++) REQUIRE_OK(kr_model_integrate(m, &b, &T, f));
    size_t ball_voxels = kr_model_size(m) - plane_voxels;
    CHECK_EQ(ball_voxels, brute_voxel_count(&b, &T, 0.01));

    /* Frame 10, window 5: only voxels seen at frames ≥ 5 — the ball. */
    REQUIRE_OK(kr_model_request_snapshot(m, 10));
    kr_model_snapshot *s = kr_model_snapshot_acquire(m);
    REQUIRE(s != NULL);
    const kr_kdtree *tree = kr_model_snapshot_tree(s);
    CHECK_EQ(kr_kdtree_size(tree), ball_voxels);
    int far_from_ball = 0;
    for (size_t i = 0; i < kr_kdtree_size(tree); i++) {
        float p[3], n[3];
        kr_kdtree_point(tree, i, p, n);
        double d = sqrt(p[0] * p[0] + p[1] * p[1] + (p[2] - 0.8) * (p[2] - 0.8));
        far_from_ball += fabs(d - 0.1) > 0.005;
    }
    CHECK_EQ(far_from_ball, 0);
    kr_model_snapshot_release(&s);

    /* Frame 4 reaches back to frame 0: the plane is included again. */
    REQUIRE_OK(kr_model_request_snapshot(m, 4));
    s = kr_model_snapshot_acquire(m);
    REQUIRE(s != NULL);
    CHECK_EQ(kr_kdtree_size(kr_model_snapshot_tree(s)), plane_voxels + ball_voxels);
    kr_model_snapshot_release(&s);

    /* Far in the future nothing is active: the last snapshot stays. */
    CHECK_OK(kr_model_request_snapshot(m, 1000));
    s = kr_model_snapshot_acquire(m);
    REQUIRE(s != NULL);
    CHECK_EQ(kr_model_snapshot_frame(s), 4);
    kr_model_snapshot_release(&s);
    free_cloud(&a);
    free_cloud(&b);
    kr_model_destroy(&m);
}

typedef struct {
    kr_model *model;
    atomic_int stop;
    long acquired, empty_trees, frame_went_back, bad_points;
} reader_state;

static void *reader(void *arg)
{
    reader_state *r = arg;
    uint64_t last_frame = 0;
    while (!atomic_load(&r->stop)) {
        /* Pace the readers: the machine running the tests may have 2 cores. */
        struct timespec pause = {0, 200000};
        nanosleep(&pause, NULL);
        kr_model_snapshot *s = kr_model_snapshot_acquire(r->model);
        if (!s) continue;
        r->acquired++;
        const kr_kdtree *tree = kr_model_snapshot_tree(s);
        size_t n = kr_kdtree_size(tree);
        if (n == 0) r->empty_trees++;
        if (kr_model_snapshot_frame(s) < last_frame) r->frame_went_back++;
        last_frame = kr_model_snapshot_frame(s);
        /* Touch the tree: a freed one would show under ASan/valgrind. */
        for (size_t i = 0; i < n; i += n / 16 + 1) {
            float p[3], nn[3];
            kr_kdtree_point(tree, i, p, nn);
            if (!isfinite(p[0])) r->bad_points++;
        }
        float q[3] = {0, 0, 0.8f}, d2;
        kr_kdtree_nearest(tree, q, &d2);
        kr_model_snapshot_release(&s);
    }
    return NULL;
}

KR_TEST(model, snapshots_while_integrating_from_other_threads)
{
    kr_model *m = new_model(true, 10);
    REQUIRE(m != NULL);
    surface s[2] = {sphere(0, 0, 1.0, 0.2), plane(0.1, -0.1, 1, 1.4)};
    reader_state r = {.model = m};
    atomic_init(&r.stop, 0);
    pthread_t t[2];
    pthread_create(&t[0], NULL, reader, &r);
    reader_state r2 = {.model = m};
    atomic_init(&r2.stop, 0);
    pthread_create(&t[1], NULL, reader, &r2);
    kr_cloud cl;
    kr_pose T0 = kr_pose_identity();
    REQUIRE(make_cloud(&cl, qvga(), &T0, s, 2));
    for (uint64_t f = 0; f < 120; f++) {
        /* The same cloud placed at a drifting pose keeps the map changing. */
        kr_pose T = pose_of(0, 0.003 * f, 0, 0.004 * f, 0, 0);
        CHECK_OK(kr_model_integrate(m, &cl, &T, f));
        CHECK_OK(kr_model_request_snapshot(m, f)); /* ignored while building */
    }
    kr_model_wait_idle(m);
    atomic_store(&r.stop, 1);
    atomic_store(&r2.stop, 1);
    pthread_join(t[0], NULL);
    pthread_join(t[1], NULL);
    CHECK_GT(r.acquired + r2.acquired, 0);
    CHECK_EQ(r.empty_trees + r2.empty_trees, 0);
    CHECK_EQ(r.frame_went_back + r2.frame_went_back, 0);
    CHECK_EQ(r.bad_points + r2.bad_points, 0);

    /* A snapshot held across destroy stays usable; its release frees it. */
    kr_model_snapshot *held = kr_model_snapshot_acquire(m);
    REQUIRE(held != NULL);
    size_t held_n = kr_kdtree_size(kr_model_snapshot_tree(held));
    /* A request still in flight at destroy is finished, not deadlocked on. */
    CHECK_OK(kr_model_request_snapshot(m, 119));
    kr_model_destroy(&m);
    CHECK(m == NULL);
    CHECK_EQ(kr_kdtree_size(kr_model_snapshot_tree(held)), held_n);
    kr_model_snapshot_release(&held);
    free_cloud(&cl);
}

KR_TEST(model, empty_model_has_no_snapshot)
{
    kr_model *m = new_model(true, 100);
    REQUIRE(m != NULL);
    CHECK_EQ(kr_model_size(m), 0);
    CHECK_OK(kr_model_request_snapshot(m, 0));
    kr_model_wait_idle(m);
    CHECK(kr_model_snapshot_acquire(m) == NULL);
    kr_model_destroy(&m);
    kr_model_destroy(&m); /* NULL is accepted */
    kr_model_destroy(NULL);
}

KR_TEST(model, rejects_bad_arguments)
{
    kr_model_config cfg;
    kr_model_config_default(&cfg);
    CHECK_NEAR(cfg.voxel_size, 0.015, 1e-9);
    CHECK_EQ(cfg.active_window, 50);
    CHECK_NEAR(cfg.max_weight, 64, 0);
    CHECK(cfg.background);
    kr_model *m = NULL;
    cfg.voxel_size = 0;
    CHECK_STATUS(kr_model_create(&m, &cfg), KR_ERR_INVALID_ARG);
    CHECK(m == NULL);
    kr_model_config_default(&cfg);
    cfg.active_window = 0;
    CHECK_STATUS(kr_model_create(&m, &cfg), KR_ERR_INVALID_ARG);
    kr_model_config_default(&cfg);
    cfg.max_weight = -1;
    CHECK_STATUS(kr_model_create(&m, &cfg), KR_ERR_INVALID_ARG);
    CHECK(m == NULL);
    kr_model_config_default(&cfg);
    REQUIRE_OK(kr_model_create(&m, &cfg));
    kr_pose T = kr_pose_identity();
    CHECK_STATUS(kr_model_integrate(m, NULL, &T, 0), KR_ERR_INVALID_ARG);
    kr_model_destroy(&m);
}

/* ---- PLY export ------------------------------------------------------------- */

static float le_float(const unsigned char *b)
{
    uint32_t u = (uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

KR_TEST(model, save_ply_round_trips)
{
    kr_model *m = new_model(false, 100);
    REQUIRE(m != NULL);
    integrate_scene(m, 2);
    size_t n = kr_model_size(m);
    REQUIRE(n > 0);
    char path[512];
    snprintf(path, sizeof path, "%s/model.ply", kr_test_tmpdir());
    REQUIRE_OK(kr_model_save_ply(m, path));

    FILE *f = fopen(path, "rb");
    REQUIRE(f != NULL);
    char line[256];
    long vertices = -1;
    int properties = 0;
    bool binary_le = false, comment = false, magic = false, end = false;
    for (int i = 0; i < 32 && fgets(line, sizeof line, f); i++) {
        if (i == 0) magic = strcmp(line, "ply\n") == 0;
        if (!strcmp(line, "format binary_little_endian 1.0\n")) binary_le = true;
        if (!strncmp(line, "comment ", 8)) comment = true;
        if (sscanf(line, "element vertex %ld", &vertices) == 1) continue;
        if (!strncmp(line, "property float ", 15)) properties++;
        if (!strcmp(line, "end_header\n")) {
            end = true;
            break;
        }
    }
    CHECK(magic);
    CHECK(binary_le);
    CHECK(comment);
    CHECK(end);
    CHECK_EQ(properties, 6);
    CHECK_EQ(vertices, (long)n);
    unsigned char *data = malloc(n * 24 + 1);
    REQUIRE(data != NULL);
    CHECK_EQ(fread(data, 1, n * 24 + 1, f), n * 24); /* nothing after the vertices */
    fclose(f);

    /* Against the voxel records themselves (file order is record order). */
    double worst_p = 0, worst_n = 0;
    for (size_t i = 0; i < n; i++) {
        const kr_voxel *v = kr_voxel_map_at(m->map, i);
        float un[3] = {0, 0, 0};
        kr_voxel_unit_normal(v, un);
        for (int k = 0; k < 3; k++) {
            worst_p = fmax(worst_p, fabs(le_float(data + 24 * i + 4 * k) - v->point[k]));
            worst_n = fmax(worst_n, fabs(le_float(data + 24 * i + 12 + 4 * k) - un[k]));
        }
    }
    CHECK_EQ(worst_p, 0);
    CHECK_EQ(worst_n, 0);
    /* And against the snapshot: the same point set. */
    REQUIRE_OK(kr_model_request_snapshot(m, 1));
    kr_model_snapshot *s = kr_model_snapshot_acquire(m);
    REQUIRE(s != NULL);
    size_t ns;
    float *sp = snapshot_points(s, &ns), *fp = malloc(n * 3 * sizeof(float) + 1);
    REQUIRE(sp && fp);
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++) fp[3 * i + k] = le_float(data + 24 * i + 4 * k);
    qsort(fp, n, 3 * sizeof(float), cmp_point);
    CHECK_EQ(ns, n);
    CHECK(ns == n && memcmp(sp, fp, n * 3 * sizeof(float)) == 0);
    free(sp);
    free(fp);
    free(data);
    kr_model_snapshot_release(&s);
    kr_model_destroy(&m);
}

KR_TEST(model, save_ply_to_an_unwritable_path_names_it)
{
    kr_model *m = new_model(false, 100);
    REQUIRE(m != NULL);
    const char *bad = "/nonexistent-kinreg-dir/model.ply";
    CHECK_STATUS(kr_model_save_ply(m, bad), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), bad);
    CHECK_CONTAINS(kr_last_error(), "No such file or directory");
    /* A directory is not a writable file either. */
    CHECK_STATUS(kr_model_save_ply(m, kr_test_tmpdir()), KR_ERR_IO);
    CHECK_CONTAINS(kr_last_error(), kr_test_tmpdir());
    kr_model_destroy(&m);
}
