/* The refinement's fields built on the CUDA device (pipeline/refine/refine_fields_cuda.cu)
 * against the host's (pipeline/refine/refine_normals.c, fusion/dfield*.c), and whole
 * refinements of the room scan with the fields on devices 0 and 0,0 against
 * the CPU engine. Needs a GPU: skips elsewhere (label gpu).
 *
 * References and tolerances:
 *   - normals: brute-force neighbours (every point's distance, sorted) for a
 *     sample, checked as an eigenvector of their covariance with the smallest
 *     Rayleigh quotient, facing the sensor, on all but 2 % of the sample (two
 *     points equally far as the 12th neighbour may be taken either way, and
 *     change the plane); and the host's normals for every
 *     point, within 1e-5 per component (the device's double PCA rounds its
 *     acos/cos differently), points on their planes within 1e-6 m;
 *   - unsigned fields: the host's bricks, values bit for bit (the same
 *     products, the minimum does not depend on the order) and grid points
 *     as the same set;
 *   - signed fields: the host's bricks; values within 1e-5 m on all but
 *     0.1 % of the corners (a normal one ulp off can hand a corner to an
 *     equally near point), grid points matched on 99.9 %, bounds within a
 *     cell (a point whose normal is NaN on one side only);
 *   - poses: within 0.02° / 0.2 mm of the CPU engine (the double atomics sum
 *     in any order), and back within 0.1° / 1 mm of the truth. */
#include "kr_test.h"
#include "parity_fixture.h"
#include "room_fixture.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "pipeline/refine/dfield_kernels.h"
#include "pipeline/refine/dfield.h"
#include "pipeline/refine/refine_engine.h"
#include "pipeline/refine/refine_internal.h"
#include "pipeline/refine/refine_fields_cuda.h"

/* needs a CUDA device: skips without one, runs on the GPU machine */
KR_LABELS("gpu");

enum { FV = 4 }; /* views of the field comparisons */

/* Brute-force k nearest (ascending by distance, ties by index) of point i,
 * the squared distances in float as the tree search takes them. */
static void brute_knn(const float *xyz, size_t n, size_t i, int k, size_t *out)
{
    float best[KR_REFINE_NEIGHBOURS];
    int found = 0;
    for (size_t j = 0; j < n; j++) {
        float dx = xyz[3 * i] - xyz[3 * j], dy = xyz[3 * i + 1] - xyz[3 * j + 1],
              dz = xyz[3 * i + 2] - xyz[3 * j + 2], d = dx * dx + dy * dy + dz * dz;
        if (found == k && d >= best[k - 1]) continue;
        int at = found < k ? found++ : k - 1;
        while (at > 0 && best[at - 1] > d) {
            best[at] = best[at - 1];
            out[at] = out[at - 1];
            at--;
        }
        best[at] = d;
        out[at] = j;
    }
}

/* n is a unit eigenvector of C with the smallest Rayleigh quotient among
 * itself and 64 seeded directions, and faces the origin from p. */
static int normal_is_right(const float *xyz, size_t n_pts, size_t i, const float nrm[3])
{
    size_t idx[KR_REFINE_NEIGHBOURS];
    brute_knn(xyz, n_pts, i, KR_REFINE_NEIGHBOURS, idx);
    double mean[3] = {0, 0, 0}, C[3][3] = {{0}};
    for (int j = 0; j < KR_REFINE_NEIGHBOURS; j++)
        for (int a = 0; a < 3; a++)
            mean[a] += xyz[3 * idx[j] + a] / (double)KR_REFINE_NEIGHBOURS;
    for (int j = 0; j < KR_REFINE_NEIGHBOURS; j++)
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                C[a][b] += (xyz[3 * idx[j] + a] - mean[a]) * (xyz[3 * idx[j] + b] - mean[b]);
    double nv[3] = {nrm[0], nrm[1], nrm[2]}, Cn[3] = {0, 0, 0}, tr = C[0][0] + C[1][1] + C[2][2];
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            Cn[a] += C[a][b] * nv[b];
    double lambda = nv[0] * Cn[0] + nv[1] * Cn[1] + nv[2] * Cn[2], res = 0;
    for (int a = 0; a < 3; a++)
        res += (Cn[a] - lambda * nv[a]) * (Cn[a] - lambda * nv[a]);
    if (!(sqrt(res) <= 1e-4 * tr)) return 0;
    if (fabs(nv[0] * nv[0] + nv[1] * nv[1] + nv[2] * nv[2] - 1) > 1e-5) return 0;
    unsigned s = 5;
    for (int t = 0; t < 64; t++) {
        double u[3] = {kr_nrand(&s), kr_nrand(&s), kr_nrand(&s)}, q = 0, len = 0;
        for (int a = 0; a < 3; a++)
            len += u[a] * u[a];
        for (int a = 0; a < 3; a++)
            for (int b = 0; b < 3; b++)
                q += u[a] * C[a][b] * u[b] / len;
        if (q < lambda - 1e-6 * tr) return 0;
    }
    const float *p = xyz + 3 * i;
    return nv[0] * p[0] + nv[1] * p[1] + nv[2] * p[2] <= 0;
}

static int cmp_grid(const void *a, const void *b)
{
    const float *x = a, *y = b;
    for (int i = 0; i < 3; i++)
        if (x[i] != y[i]) return x[i] < y[i] ? -1 : 1;
    return 0;
}

/* Host grid points (with their values) found in the device's, as a set. */
static size_t grid_matches(const kr_dfield *hf, const float *dgrid, const float *dval, size_t dn,
                           float tol, size_t *value_off)
{
    float *rows = malloc(sizeof *rows * 4 * (dn ? dn : 1));
    if (!rows) return 0;
    for (size_t i = 0; i < dn; i++) {
        memcpy(rows + 4 * i, dgrid + 3 * i, sizeof(float) * 3);
        rows[4 * i + 3] = dval[i];
    }
    qsort(rows, dn, sizeof(float) * 4, cmp_grid);
    size_t found = 0;
    *value_off = 0;
    for (size_t i = 0; i < hf->n_grid; i++) {
        float key[4] = {hf->grid[3 * i], hf->grid[3 * i + 1], hf->grid[3 * i + 2], 0};
        const float *hit = bsearch(key, rows, dn, sizeof(float) * 4, cmp_grid);
        if (!hit) continue;
        found++;
        if (!(fabsf(hit[3] - hf->grid_val[i]) <= tol)) (*value_off)++;
    }
    free(rows);
    return found;
}

/* Compares view k's device field (slot 0 of fields) with the host's hf:
 * corners beyond tol and grid points unmatched. */
static void compare_field(const kr_refine_cuda_fields *gf, int k, const kr_dfield *hf, float tol,
                          float bounds_tol, size_t *corners, size_t *off, size_t *unmatched,
                          size_t *value_off)
{
    uint32_t cap = 0;
    uint64_t *keys = NULL;
    int *slots = NULL;
    float *values = NULL, *grid = NULL, *gval = NULL;
    kr_refine_cuda_field_info info;
    CHECK_OK(kr_refine_cuda_fields_info(gf, 0, k, &info));
    REQUIRE_OK(
        kr_refine_cuda_fields_download(gf, 0, k, &cap, &keys, &slots, &values, &grid, &gval));
    CHECK_EQ(info.bricks, hf->bricks);
    CHECK_EQ(cap, hf->capacity);
    for (int a = 0; a < 3; a++) {
        CHECK(info.lo[a] == hf->lo[a] || fabsf(info.lo[a] - hf->lo[a]) <= bounds_tol);
        CHECK(info.hi[a] == hf->hi[a] || fabsf(info.hi[a] - hf->hi[a]) <= bounds_tol);
    }
    kr_dfield_lookup dv = {hf->h, 1.0f / hf->h, keys, slots, values, cap - 1};
    for (int b = 0; b < hf->bricks; b++) {
        int slot =
            kr_dfield_find_brick(keys, slots, cap - 1,
                                 kr_dfield_brick_key(hf->brick_xyz[3 * b], hf->brick_xyz[3 * b + 1],
                                                     hf->brick_xyz[3 * b + 2]));
        CHECK(slot >= 0);
        if (slot < 0) continue;
        for (int c = 0; c < KR_DFIELD_BRICK_CELLS; c++) {
            float hv = hf->values[(size_t)b * KR_DFIELD_BRICK_CELLS + c],
                  gv = dv.values[(size_t)slot * KR_DFIELD_BRICK_CELLS + c];
            (*corners)++;
            if (isinf(hv) || isinf(gv) ? hv != gv : !(fabsf(hv - gv) <= tol)) (*off)++;
        }
    }
    size_t vo = 0, found = grid_matches(hf, grid, gval, info.n_grid, tol, &vo);
    *unmatched += hf->n_grid - found + (info.n_grid > hf->n_grid ? info.n_grid - hf->n_grid : 0);
    *value_off += vo;
    free(keys), free(slots), free(values), free(grid), free(gval);
}

KR_TEST(gpu_refine_fields, device_fields_match_the_host)
{
    NEED_CUDA();
    float *xyz[FV];
    size_t n[FV];
    kr_pose truth[FV], start[FV];
    kr_refine_view views[FV];
    REQUIRE_OK(room_fixture(FV, xyz, n, views, truth, start));
    kr_device *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    const float h = 0.02f;
    const int band = 2;
    size_t stride[FV];
    for (int k = 0; k < FV; k++)
        stride[k] = 1;

    /* Unsigned: bit for bit. */
    kr_refine_engine *eu = NULL;
    REQUIRE_OK(kr_refine_engine_create(&eu, gpu, NULL, 0));
    REQUIRE(kr_refine_engine_device_fields(eu));
    REQUIRE_OK(kr_refine_engine_prepare(eu, views, FV, 0));
    kr_dfield sums[FV];
    REQUIRE_OK(kr_refine_engine_build_level(eu, 0, stride, h, band, 1.0, 1, 0, 1, sums));
    size_t corners = 0, off = 0, unmatched = 0, value_off = 0;
    for (int k = 0; k < FV; k++) {
        kr_dfield hf;
        REQUIRE_OK(kr_dfield_build(&hf, xyz[k], n[k], 1, h, band, 1.0, 1 + (unsigned)k));
        CHECK_EQ(sums[k].n_grid, hf.n_grid);
        compare_field(kr_refine_engine_gpu_fields(eu, 0), k, &hf, 0.0f, 0.0f, &corners, &off,
                      &unmatched, &value_off);
        kr_dfield_free(&hf);
        kr_dfield_free(&sums[k]);
    }
    printf("    unsigned: %zu corners, %zu differ; %zu grid points unmatched, %zu valued apart\n",
           corners, off, unmatched, value_off);
    CHECK_EQ(off, 0);
    CHECK_EQ(unmatched, 0);
    CHECK_EQ(value_off, 0);
    kr_refine_engine_destroy(&eu);

    /* Signed: normals, planes, then the fields. */
    float **hn = NULL, **hp = NULL;
    REQUIRE_OK(kr_refine_normals(views, FV, &hn, &hp));
    kr_refine_engine *es = NULL;
    REQUIRE_OK(kr_refine_engine_create(&es, gpu, NULL, 0));
    REQUIRE_OK(kr_refine_engine_prepare(es, views, FV, 1));
    const kr_refine_cuda_fields *gf = kr_refine_engine_gpu_fields(es, 0);
    REQUIRE(gf);
    size_t points = 0, normals_off = 0, planes_off = 0, nan_differ = 0, wrong = 0, checked = 0;
    for (int k = 0; k < FV; k++) {
        float *dn = malloc(sizeof *dn * 3 * n[k]), *dp = malloc(sizeof *dp * 3 * n[k]);
        REQUIRE(dn && dp);
        REQUIRE_OK(kr_refine_cuda_fields_download_normals(gf, k, dn, dp));
        for (size_t i = 0; i < n[k]; i++) {
            points++;
            int hnan = isnan(hn[k][3 * i]), dnan = isnan(dn[3 * i]);
            if (hnan || dnan) {
                nan_differ += hnan != dnan;
                continue;
            }
            for (int a = 0; a < 3; a++) {
                if (!(fabsf(hn[k][3 * i + a] - dn[3 * i + a]) <= 1e-5f)) {
                    normals_off++;
                    break;
                }
            }
            for (int a = 0; a < 3; a++) {
                if (!(fabsf(hp[k][3 * i + a] - dp[3 * i + a]) <= 1e-6f)) {
                    planes_off++;
                    break;
                }
            }
        }
        /* Brute force on a sample of view k's points. */
        for (size_t i = 0; i < n[k]; i += n[k] / 50 + 1) {
            if (isnan(dn[3 * i])) continue;
            checked++;
            wrong += !normal_is_right(xyz[k], n[k], i, dn + 3 * i);
        }
        free(dn);
        free(dp);
    }
    printf("    normals: %zu points, %zu beyond 1e-5, %zu planes beyond 1 um, %zu NaN on one side; "
           "brute force %zu of %zu wrong\n",
           points, normals_off, planes_off, nan_differ, wrong, checked);
    CHECK_LE(normals_off + nan_differ, points / 1000);
    CHECK_LE(planes_off, points / 1000);
    CHECK_LE(wrong, checked / 50);
    CHECK_GT(checked, 100);

    REQUIRE_OK(kr_refine_engine_build_level(es, 0, stride, h, band, 1.0, 1, 0, 1, sums));
    corners = off = unmatched = value_off = 0;
    size_t grid_total = 0;
    for (int k = 0; k < FV; k++) {
        kr_dfield hf;
        REQUIRE_OK(
            kr_dfield_build_signed(&hf, hp[k], hn[k], n[k], 1, h, band, 1.0, 1 + (unsigned)k));
        grid_total += hf.n_grid;
        compare_field(gf, k, &hf, 1e-5f, h, &corners, &off, &unmatched, &value_off);
        kr_dfield_free(&hf);
        kr_dfield_free(&sums[k]);
    }
    printf("    signed: %zu corners, %zu beyond 1e-5 m; %zu of %zu grid points unmatched, %zu "
           "valued apart\n",
           corners, off, unmatched, grid_total, value_off);
    CHECK_LE(off, corners / 1000);
    CHECK_LE(unmatched + value_off, grid_total / 1000);
    CHECK_GT(grid_total, 1000);
    kr_refine_engine_destroy(&es);
    kr_refine_normals_free(hn, FV);
    kr_refine_normals_free(hp, FV);
    for (int k = 0; k < FV; k++)
        free(xyz[k]);
    kr_device_destroy(&gpu);
}

/* The room scan of gpu_refine_devices with the fields on devices 0 and
 * 0,0 (two contexts on one GPU: each builds half of the views' fields and
 * copies the other half), against the CPU engine. */
KR_TEST(gpu_refine_fields, room_poses_on_devices_0_and_00_match_the_cpu)
{
    NEED_CUDA();
    enum { R = 24 };
    float *xyz[R];
    size_t n[R];
    kr_pose truth[R], start[R], cpu[R], dev[R];
    kr_refine_view views[R];
    REQUIRE_OK(room_fixture(R, xyz, n, views, truth, start));
    kr_refine_config cfg;
    room_refine_config(&cfg);
    kr_refine_result rc, rg;
    memcpy(cpu, start, sizeof cpu);
    REQUIRE_OK(kr_refine(&cfg, NULL, views, R, cpu, &rc));
    kr_device *gpu = make_device(KR_BACKEND_CUDA);
    REQUIRE(gpu);
    kr_pose t0 = kr_pose_inv(&truth[0]);
    for (int count = 1; count <= 2; count++) {
        cfg.devices[0] = cfg.devices[1] = 0;
        cfg.n_devices = count;
        memcpy(dev, start, sizeof dev);
        REQUIRE_OK(kr_refine(&cfg, gpu, views, R, dev, &rg));
        CHECK_EQ(rg.devices, count);
        printf("    devices %s: %.1f ms (fields %.1f, sums %.1f in %d evaluations), %d LM "
               "iterations; CPU %.1f ms (fields %.1f), %d\n",
               count == 1 ? "0" : "0,0", 1000 * rg.seconds, 1000 * rg.fields_seconds,
               1000 * rg.sums_seconds, rg.evaluations, rg.iterations, 1000 * rc.seconds,
               1000 * rc.fields_seconds, rc.iterations);
        kr_pose g0 = kr_pose_inv(&dev[0]);
        double worst_deg = 0, worst_m = 0;
        for (int k = 0; k < R; k++) {
            kr_pose ci = kr_pose_inv(&cpu[k]), d = kr_pose_mul(&ci, &dev[k]);
            worst_deg = fmax(worst_deg, kr_pose_angle(&d) * 180 / M_PI);
            worst_m = fmax(worst_m, kr_pose_translation_norm(&d));
            kr_pose re = kr_pose_mul(&g0, &dev[k]), rt = kr_pose_mul(&t0, &truth[k]);
            kr_pose ri = kr_pose_inv(&rt), e = kr_pose_mul(&ri, &re);
            CHECK_LT(kr_pose_angle(&e) * 180 / M_PI, 0.1);
            CHECK_LT(kr_pose_translation_norm(&e), 1e-3);
        }
        printf("    against the CPU engine: %.5f deg %.4f mm\n", worst_deg, 1000 * worst_m);
        CHECK_LT(worst_deg, 0.02);
        CHECK_LT(worst_m, 2e-4);
    }
    for (int k = 0; k < R; k++)
        free(xyz[k]);
    kr_device_destroy(&gpu);
}
