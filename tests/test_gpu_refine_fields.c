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
#include "parity.h"
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

/* ---- the fields of both engines ---------------------------------------------- */

/* The room's first views, the host's fields and normals, the device engine
 * and what it downloaded of each view's field. */
typedef struct {
    float *xyz[FV];
    size_t n[FV];
    kr_refine_view views[FV];
    kr_device *gpu;
    kr_dfield host[FV];
    int host_built;
    float **hn, **hp; /* the host's normals and planes */
    kr_refine_engine *engine;
    const kr_refine_cuda_fields *gf;
    kr_refine_cuda_field_info info[FV];
    uint32_t cap[FV];
    uint64_t *keys[FV];
    int *slots[FV];
    float *values[FV], *grid[FV], *gval[FV];
} fields_in;

enum { BAND = 2 };
static const float H = 0.02f;

static void free_host(fields_in *in)
{
    for (int k = 0; k < in->host_built; k++)
        kr_dfield_free(&in->host[k]);
    in->host_built = 0;
}

static void free_downloads(fields_in *in)
{
    for (int k = 0; k < FV; k++) {
        free(in->keys[k]), free(in->slots[k]), free(in->values[k]), free(in->grid[k]);
        free(in->gval[k]);
        in->keys[k] = NULL, in->slots[k] = NULL, in->values[k] = in->grid[k] = in->gval[k] = NULL;
    }
}

/* Per view: bricks, table capacity, bounds and grid points. */
static void put_shape(kr_parity_out *out, const int *bricks, const uint32_t *cap,
                      const float (*lo)[3], const float (*hi)[3], const size_t *grid)
{
    double *b = kr_parity_put(out, FV, 1, "bricks"), *c = kr_parity_put(out, FV, 1, "capacity"),
           *bounds = kr_parity_put(out, FV, 6, "bounds"),
           *g = kr_parity_put(out, FV, 1, "grid points");
    for (int k = 0; b && c && bounds && g && k < FV; k++) {
        b[k] = bricks[k];
        c[k] = cap[k];
        for (int a = 0; a < 3; a++) {
            bounds[6 * k + a] = lo[k][a];
            bounds[6 * k + 3 + a] = hi[k][a];
        }
        g[k] = (double)grid[k];
    }
}

static void put_host_shape(fields_in *in, kr_parity_out *out)
{
    int bricks[FV];
    uint32_t cap[FV];
    float lo[FV][3], hi[FV][3];
    size_t grid[FV];
    for (int k = 0; k < FV; k++) {
        bricks[k] = in->host[k].bricks;
        cap[k] = in->host[k].capacity;
        memcpy(lo[k], in->host[k].lo, sizeof lo[k]);
        memcpy(hi[k], in->host[k].hi, sizeof hi[k]);
        grid[k] = in->host[k].n_grid;
    }
    put_shape(out, bricks, cap, (const float(*)[3])lo, (const float(*)[3])hi, grid);
}

/* The host's fields: unsigned from the points (arg NULL), or signed from
 * the host's planes and normals. */
static bool host_fields(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev;
    fields_in *in = fixture;
    free_host(in);
    bool is_signed = arg != NULL;
    for (int k = 0; k < FV; k++) {
        kr_status st = is_signed
                           ? kr_dfield_build_signed(&in->host[k], in->hp[k], in->hn[k], in->n[k], 1,
                                                    H, BAND, 1.0, 1 + (unsigned)k)
                           : kr_dfield_build(&in->host[k], in->xyz[k], in->n[k], 1, H, BAND, 1.0,
                                             1 + (unsigned)k);
        CHECK_OK(st);
        if (st != KR_OK) return false;
        in->host_built = k + 1;
    }
    put_host_shape(in, out);
    return true;
}

/* The device engine's fields of every view, built at one level, and the
 * download of each; `grid` is what the build reported per view. */
static bool device_fields(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev;
    fields_in *in = fixture;
    bool is_signed = arg != NULL;
    if (!is_signed) {
        kr_status st = kr_refine_engine_create(&in->engine, in->gpu, NULL, 0);
        CHECK_OK(st);
        if (st != KR_OK) return false;
        CHECK(kr_refine_engine_device_fields(in->engine));
        if (!kr_refine_engine_device_fields(in->engine)) return false;
        CHECK_OK(st = kr_refine_engine_prepare(in->engine, in->views, FV, 0));
        if (st != KR_OK) return false;
        in->gf = kr_refine_engine_gpu_fields(in->engine, 0);
    }
    size_t stride[FV];
    for (int k = 0; k < FV; k++)
        stride[k] = 1;
    kr_dfield sums[FV];
    kr_status st = kr_refine_engine_build_level(in->engine, 0, stride, H, BAND, 1.0, 1, 0, 1, sums);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    int bricks[FV];
    float lo[FV][3], hi[FV][3];
    size_t grid[FV];
    free_downloads(in);
    for (int k = 0; k < FV && st == KR_OK; k++) {
        grid[k] = sums[k].n_grid;
        kr_dfield_free(&sums[k]);
        CHECK_OK(st = kr_refine_cuda_fields_info(in->gf, 0, k, &in->info[k]));
        if (st == KR_OK)
            CHECK_OK(st = kr_refine_cuda_fields_download(in->gf, 0, k, &in->cap[k], &in->keys[k],
                                                         &in->slots[k], &in->values[k],
                                                         &in->grid[k], &in->gval[k]));
        bricks[k] = in->info[k].bricks;
        memcpy(lo[k], in->info[k].lo, sizeof lo[k]);
        memcpy(hi[k], in->info[k].hi, sizeof hi[k]);
    }
    if (st != KR_OK) return false;
    put_shape(out, bricks, in->cap, (const float(*)[3])lo, (const float(*)[3])hi, grid);
    return true;
}

/* How near the device's fields must be: corners, the share of corners
 * that may be off, and whether grid points may be unmatched. */
typedef struct {
    float tol;
    double allowed;
    bool is_signed;
} field_tolerance;

/* Corners compared brick by brick through the device's table (each host
 * brick found there), and the grid points as sets (every host grid point,
 * with its value, among the device's). */
static void compare_fields(const kr_parity_step *step, const kr_parity_out *a,
                           const kr_parity_out *b, void *fixture)
{
    (void)a, (void)b;
    fields_in *in = fixture;
    const field_tolerance *t = step->arg ? step->arg : &(field_tolerance){0, 0, false};
    size_t corners = 0, unmatched = 0, value_off = 0, grid_total = 0;
    for (int k = 0; k < FV; k++)
        corners += (size_t)in->host[k].bricks * KR_DFIELD_BRICK_CELLS;
    kr_parity_out ha = {0}, da = {0};
    double *hv = kr_parity_put(&ha, corners, 1, "corners"),
           *dv = kr_parity_put(&da, corners, 1, "corners");
    size_t at = 0;
    for (int k = 0; hv && dv && k < FV; k++) {
        const kr_dfield *hf = &in->host[k];
        if (!in->keys[k] || in->cap[k] == 0) continue;
        for (int bk = 0; bk < hf->bricks; bk++) {
            int slot = kr_dfield_find_brick(in->keys[k], in->slots[k], in->cap[k] - 1,
                                            kr_dfield_brick_key(hf->brick_xyz[3 * bk],
                                                                hf->brick_xyz[3 * bk + 1],
                                                                hf->brick_xyz[3 * bk + 2]));
            CHECK(slot >= 0);
            for (int c = 0; c < KR_DFIELD_BRICK_CELLS; c++, at++) {
                hv[at] = hf->values[(size_t)bk * KR_DFIELD_BRICK_CELLS + c];
                dv[at] = slot < 0 ? NAN : in->values[k][(size_t)slot * KR_DFIELD_BRICK_CELLS + c];
            }
        }
        size_t vo = 0,
               found = grid_matches(hf, in->grid[k], in->gval[k], in->info[k].n_grid, t->tol, &vo);
        unmatched += hf->n_grid - found +
                     (in->info[k].n_grid > hf->n_grid ? in->info[k].n_grid - hf->n_grid : 0);
        value_off += vo;
        grid_total += hf->n_grid;
    }
    kr_parity_check corner_check =
        PARITY_CHECK("corners", KR_PARITY_ABS, t->tol, .allowed = t->allowed);
    kr_parity_apply(step, &corner_check, &ha, &da);
    printf("    %s: %zu of %zu grid points unmatched, %zu valued apart\n", step->name, unmatched,
           grid_total, value_off);
    if (t->is_signed) {
        CHECK_LE(unmatched + value_off, grid_total / 1000);
        CHECK_GT(grid_total, 1000);
    } else {
        CHECK_EQ(unmatched, 0);
        CHECK_EQ(value_off, 0);
    }
    kr_parity_out_free(&ha);
    kr_parity_out_free(&da);
    free_downloads(in);
}

/* ---- the normals -------------------------------------------------------------- */

static size_t total_points(const fields_in *in)
{
    size_t n = 0;
    for (int k = 0; k < FV; k++)
        n += in->n[k];
    return n;
}

static bool host_normals(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    fields_in *in = fixture;
    kr_status st = kr_refine_normals(in->views, FV, &in->hn, &in->hp);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    double *nv = kr_parity_put(out, total_points(in), 3, "normals"),
           *pv = kr_parity_put(out, total_points(in), 3, "planes");
    for (int k = 0, at = 0; nv && pv && k < FV; k++)
        for (size_t i = 0; i < 3 * in->n[k]; i++, at++) {
            nv[at] = in->hn[k][i];
            pv[at] = in->hp[k][i];
        }
    return nv && pv;
}

/* The device's normals (and planes) from the signed engine's preparation;
 * checked on a sample of each view against brute force too. */
static bool device_normals(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    fields_in *in = fixture;
    kr_refine_engine_destroy(&in->engine);
    kr_status st = kr_refine_engine_create(&in->engine, in->gpu, NULL, 0);
    CHECK_OK(st);
    if (st == KR_OK) CHECK_OK(st = kr_refine_engine_prepare(in->engine, in->views, FV, 1));
    if (st != KR_OK) return false;
    in->gf = kr_refine_engine_gpu_fields(in->engine, 0);
    CHECK(in->gf != NULL);
    if (!in->gf) return false;
    double *nv = kr_parity_put(out, total_points(in), 3, "normals"),
           *pv = kr_parity_put(out, total_points(in), 3, "planes");
    size_t wrong = 0, checked = 0, at = 0;
    for (int k = 0; nv && pv && k < FV && st == KR_OK; k++) {
        float *dn = malloc(sizeof *dn * 3 * in->n[k]), *dp = malloc(sizeof *dp * 3 * in->n[k]);
        CHECK(dn && dp);
        if (dn && dp) CHECK_OK(st = kr_refine_cuda_fields_download_normals(in->gf, k, dn, dp));
        for (size_t i = 0; st == KR_OK && dn && dp && i < 3 * in->n[k]; i++, at++) {
            nv[at] = dn[i];
            pv[at] = dp[i];
        }
        /* Brute force on a sample of view k's points. */
        for (size_t i = 0; st == KR_OK && dn && i < in->n[k]; i += in->n[k] / 50 + 1) {
            if (isnan(dn[3 * i])) continue;
            checked++;
            wrong += !normal_is_right(in->xyz[k], in->n[k], i, dn + 3 * i);
        }
        if (!dn || !dp) st = KR_ERR_NOMEM;
        free(dn);
        free(dp);
    }
    printf("    normals: brute force %zu of %zu wrong\n", wrong, checked);
    CHECK_LE(wrong, checked / 50);
    CHECK_GT(checked, 100);
    return st == KR_OK && nv && pv;
}

/* Unsigned fields: bit for bit (the same products; the minimum does not
 * depend on the order), grid points the same set. Normals within 1e-5 per
 * component (the device's double PCA rounds its acos/cos differently),
 * planes within 1e-6 m where both have a normal, on all but 0.1 % of the
 * points. Signed fields: within 1e-5 m on all but 0.1 % of the corners,
 * grid points matched on 99.9 %, bounds within a cell. */
static const field_tolerance signed_tolerance = {1e-5f, 1e-3, true};
static const kr_parity_step fields_steps[] = {
    {.name = "unsigned fields",
     .cpu = host_fields,
     .cuda = device_fields,
     .checks = {PARITY_CHECK("bricks", KR_PARITY_BITS, 0),
                PARITY_CHECK("capacity", KR_PARITY_BITS, 0),
                PARITY_CHECK("bounds", KR_PARITY_ABS, 0),
                PARITY_CHECK("grid points", KR_PARITY_BITS, 0)},
     .also = compare_fields},
    PARITY_STEP("normals", host_normals, device_normals, NULL,
                PARITY_CHECK("normals", KR_PARITY_ABS, 1e-5f, .nan_equal = true, .allowed = 1e-3),
                PARITY_CHECK("planes", KR_PARITY_ABS, 1e-6f, .mask = "normals", .allowed = 1e-3)),
    {.name = "signed fields",
     .cpu = host_fields,
     .cuda = device_fields,
     .arg = &signed_tolerance,
     .checks = {PARITY_CHECK("bricks", KR_PARITY_BITS, 0),
                PARITY_CHECK("capacity", KR_PARITY_BITS, 0),
                PARITY_CHECK("bounds", KR_PARITY_ABS, H)},
     .also = compare_fields},
};

KR_TEST(gpu_refine_fields, device_fields_match_the_host)
{
    kr_device *cpu, *gpu;
    if (!kr_parity_devices(&cpu, &gpu)) return;
    fields_in in = {.gpu = gpu};
    kr_pose truth[FV], start[FV];
    REQUIRE_OK(room_fixture(FV, in.xyz, in.n, in.views, truth, start));
    kr_parity_run(fields_steps, sizeof fields_steps / sizeof *fields_steps, &in);
    free_host(&in);
    free_downloads(&in);
    kr_refine_engine_destroy(&in.engine);
    kr_refine_normals_free(in.hn, FV);
    kr_refine_normals_free(in.hp, FV);
    for (int k = 0; k < FV; k++)
        free(in.xyz[k]);
}

/* ---- whole refinements ---------------------------------------------------------- */

enum { R = 24 };

typedef struct {
    kr_refine_config cfg;
    kr_refine_view views[R];
    kr_pose start[R], truth[R];
    kr_device *gpu;
} room_in;

static bool room_on(room_in *in, kr_device *gpu, int count, kr_parity_out *out)
{
    kr_refine_config cfg = in->cfg;
    if (gpu) {
        cfg.devices[0] = cfg.devices[1] = 0;
        cfg.n_devices = count;
    }
    kr_pose p[R];
    memcpy(p, in->start, sizeof p);
    kr_refine_result r;
    kr_status st = kr_refine(&cfg, gpu, in->views, R, p, &r);
    CHECK_OK(st);
    if (st != KR_OK) return false;
    printf("    %s: %.1f ms (fields %.1f, sums %.1f in %d evaluations), %d LM iterations\n",
           !gpu         ? "cpu"
           : count == 1 ? "devices 0"
                        : "devices 0,0",
           1000 * r.seconds, 1000 * r.fields_seconds, 1000 * r.sums_seconds, r.evaluations,
           r.iterations);
    if (gpu) {
        CHECK_EQ(r.devices, count);
        /* Back within 0.1° and 1 mm of the truth, relative to view 0. */
        kr_pose g0 = kr_pose_inv(&p[0]), t0 = kr_pose_inv(&in->truth[0]);
        for (int k = 0; k < R; k++) {
            kr_pose re = kr_pose_mul(&g0, &p[k]), rt = kr_pose_mul(&t0, &in->truth[k]);
            kr_pose ri = kr_pose_inv(&rt), e = kr_pose_mul(&ri, &re);
            CHECK_LT(kr_pose_angle(&e) * 180 / M_PI, 0.1);
            CHECK_LT(kr_pose_translation_norm(&e), 1e-3);
        }
    }
    kr_parity_put_poses(out, "poses", p, R);
    return true;
}

static bool room_cpu(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)dev, (void)arg;
    return room_on(fixture, NULL, 0, out);
}

static bool room_device_0(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    return room_on(fixture, dev, 1, out);
}

static bool room_devices_00(kr_device *dev, void *fixture, const void *arg, kr_parity_out *out)
{
    (void)arg;
    return room_on(fixture, dev, 2, out);
}

/* Within 0.02° / 0.2 mm of the CPU engine (the double atomics sum in any
 * order). */
static const kr_parity_step room_steps[] = {
    PARITY_STEP("devices 0", room_cpu, room_device_0, NULL,
                PARITY_CHECK("poses", KR_PARITY_DEGREES, 0.02, .below = true),
                PARITY_CHECK("poses", KR_PARITY_DISTANCE, 2e-4, .below = true)),
    PARITY_STEP("devices 0,0", room_cpu, room_devices_00, NULL,
                PARITY_CHECK("poses", KR_PARITY_DEGREES, 0.02, .below = true),
                PARITY_CHECK("poses", KR_PARITY_DISTANCE, 2e-4, .below = true)),
};

/* The room scan of gpu_refine_devices with the fields on devices 0 and
 * 0,0 (two contexts on one GPU: each builds half of the views' fields and
 * copies the other half), against the CPU engine. */
KR_TEST(gpu_refine_fields, room_poses_on_devices_0_and_00_match_the_cpu)
{
    PARITY_NEED();
    float *xyz[R];
    size_t n[R];
    room_in in;
    REQUIRE_OK(room_fixture(R, xyz, n, in.views, in.truth, in.start));
    room_refine_config(&in.cfg);
    kr_parity_run(room_steps, 2, &in);
    for (int k = 0; k < R; k++)
        free(xyz[k]);
}
