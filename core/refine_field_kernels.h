/* Per-element math of building the refinement's fields (DESIGN.md §5),
 * written once for the OpenMP build (fusion/refine_normals.c, fusion/dfield.c,
 * core/kdtree.c) and the CUDA build (gpu/refine_fields.cu):
 *
 *   - the k nearest neighbours of a point in a heap-order k-d tree
 *     (core/kdtree_internal.h), depth first, near child first;
 *   - a point's normal by PCA over its neighbours (the eigenvector of the
 *     covariance's smallest eigenvalue), turned towards the view's origin
 *     (its sensor), and the point moved onto its neighbourhood's plane;
 *   - a grid point of an influenced corner (its hash-chosen offset inside the
 *     corner's cell, kept with probability `subset`).
 *
 * The products that decide which neighbour is nearer or where a grid point
 * lies go through KR_MUL (no FMA on the device), so both engines find the
 * same neighbours and the same grid points; the PCA's double arithmetic may
 * round differently on the device (the parity test states its tolerance). */
#ifndef KINREG_CORE_REFINE_FIELD_KERNELS_H
#define KINREG_CORE_REFINE_FIELD_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "core/dfield_kernels.h"
#include "core/kdtree_internal.h"
#include "core/kr_hd.h"

/* PCA over this many nearest neighbours: enough for a stable plane on noisy
 * depth, few enough that a neighbourhood stays smaller than a bump (the
 * neighbours' mean sits off a curved surface by about κr²/4, which differs
 * between views that sample it at different densities). On the 200-view room
 * (2 cm grid): 10 neighbours end at 0.354 mm without noise and 0.929 mm with
 * 2 mm of depth noise, 16 at 0.775 and 0.759 mm, 12 at 0.407 and 0.839 mm. */
#define KR_RF_NEIGHBOURS 12
/* The largest k of kr_kd_knn (the host's kr_kdtree_knn caps k there too). */
#define KR_KD_KNN_MAX 64

/* Squared distance from q to a cell's point. */
static inline KR_HD float kr_kd_cell_dist2(const kr_kd_cell *c, const float q[3])
{
    float dx = q[0] - c->s[0], dy = q[1] - c->s[1], dz = q[2] - c->s[2];
    return KR_MUL(dx, dx) + KR_MUL(dy, dy) + KR_MUL(dz, dz);
}

/* The k (1 ≤ k ≤ KR_KD_KNN_MAX, ≤ the tree's size) nearest cells of q:
 * bc[0 … found) cell indices and bd their squared distances, ascending.
 * Depth-first search, near child first; the stack holds the far siblings of
 * the current path (at most the tree depth, < 33 for 32-bit sizes) with the
 * squared distance to their split plane as a lower bound. Returns found. */
static inline KR_HD int kr_kd_knn(const kr_kd_node *nodes, uint32_t n_internal,
                                  const kr_kd_cell *cells, const float q[3], int k, float *bd,
                                  uint32_t *bc)
{
    struct {
        uint32_t node;
        float bound;
    } stack[64];
    int sp = 0, found = 0;
    uint32_t node = 0;
    for (;;) {
        while (node < n_internal) {
            kr_kd_node nd = nodes[node];
            float diff = q[nd.axis] - nd.split;
            stack[sp].node = diff >= 0 ? 2 * node + 1 : 2 * node + 2;
            stack[sp].bound = KR_MUL(diff, diff);
            sp++;
            node = diff >= 0 ? 2 * node + 2 : 2 * node + 1;
        }
        uint32_t cell = node - n_internal;
        float dd = kr_kd_cell_dist2(&cells[cell], q);
        if (found < k || dd < bd[found - 1]) {
            int j = found < k ? found++ : k - 1;
            while (j > 0 && bd[j - 1] > dd) {
                bd[j] = bd[j - 1];
                bc[j] = bc[j - 1];
                j--;
            }
            bd[j] = dd;
            bc[j] = cell;
        }
        float bound = found < k ? INFINITY : bd[k - 1];
        while (sp > 0 && stack[sp - 1].bound >= bound)
            sp--;
        if (sp == 0) break;
        node = stack[--sp].node;
    }
    return found;
}

/* Unit eigenvector of the smallest eigenvalue of the symmetric 3×3 matrix
 * C = [a d e; d b f; e f c]; 0 when the two smallest eigenvalues are too
 * close for a plane (collinear or coincident points). The eigenvalues are
 * the roots of the characteristic cubic, by the trigonometric form (Smith,
 * CACM 1961); the eigenvector is the longest cross product of two rows of
 * C − λI, all of which are orthogonal to it. */
static inline KR_HD int kr_rf_smallest_eigenvector(const double C[6], double out[3])
{
    const double pi = 3.14159265358979323846;
    double a = C[0], b = C[1], c = C[2], d = C[3], e = C[4], f = C[5];
    double q = (a + b + c) / 3;
    double p1 = d * d + e * e + f * f;
    double p2 = (a - q) * (a - q) + (b - q) * (b - q) + (c - q) * (c - q) + 2 * p1;
    if (!(p2 > 0)) return 0;
    double p = sqrt(p2 / 6);
    double B[6] = {(a - q) / p, (b - q) / p, (c - q) / p, d / p, e / p, f / p};
    double detB = B[0] * (B[1] * B[2] - B[5] * B[5]) - B[3] * (B[3] * B[2] - B[5] * B[4]) +
                  B[4] * (B[3] * B[5] - B[1] * B[4]);
    double r = fmin(1.0, fmax(-1.0, detB / 2)), phi = acos(r) / 3;
    double l1 = q + 2 * p * cos(phi), l3 = q + 2 * p * cos(phi + 2 * pi / 3);
    double l2 = 3 * q - l1 - l3;
    if (!(l2 - l3 > 1e-12 * (fabs(l1) + 1e-30))) return 0;
    double r0[3] = {a - l3, d, e}, r1[3] = {d, b - l3, f}, r2[3] = {e, f, c - l3};
    const double *rows[3][2] = {{r0, r1}, {r0, r2}, {r1, r2}};
    double best = 0;
    for (int i = 0; i < 3; i++) {
        const double *u = rows[i][0], *v = rows[i][1];
        double x[3] = {u[1] * v[2] - u[2] * v[1], u[2] * v[0] - u[0] * v[2],
                       u[0] * v[1] - u[1] * v[0]};
        double n2 = x[0] * x[0] + x[1] * x[1] + x[2] * x[2];
        if (n2 > best) {
            best = n2;
            for (int k = 0; k < 3; k++)
                out[k] = x[k];
        }
    }
    if (!(best > 0)) return 0;
    double len = sqrt(best);
    for (int k = 0; k < 3; k++)
        out[k] /= len;
    return 1;
}

/* The normal of point p from its m neighbours nb[3j … 3j+2] (in the order the
 * search found them), turned towards the view's origin (where its sensor
 * was): out_n gets it, or NaN when the neighbourhood is degenerate;
 * out_plane (may be NULL) gets p moved along the normal onto the plane
 * through the neighbours' mean (p itself when there is no normal). */
static inline KR_HD void kr_rf_normal(const float p[3], const float *nb, int m, float out_n[3],
                                      float *out_plane)
{
    double mean[3] = {0, 0, 0}, C[6] = {0, 0, 0, 0, 0, 0}, nv[3] = {0, 0, 0};
    for (int j = 0; j < m; j++)
        for (int a = 0; a < 3; a++)
            mean[a] += nb[3 * j + a] / (double)m;
    for (int j = 0; j < m; j++) {
        const float *s = nb + 3 * j;
        double x = s[0] - mean[0], y = s[1] - mean[1], z = s[2] - mean[2];
        C[0] += x * x, C[1] += y * y, C[2] += z * z;
        C[3] += x * y, C[4] += x * z, C[5] += y * z;
    }
    if (out_plane)
        for (int a = 0; a < 3; a++)
            out_plane[a] = p[a];
    if (m < 3 || !kr_rf_smallest_eigenvector(C, nv)) {
        out_n[0] = out_n[1] = out_n[2] = NAN;
        return;
    }
    double sgn = nv[0] * p[0] + nv[1] * p[1] + nv[2] * p[2] > 0 ? -1 : 1;
    for (int a = 0; a < 3; a++)
        out_n[a] = (float)(sgn * nv[a]);
    if (out_plane) {
        double off = nv[0] * (p[0] - mean[0]) + nv[1] * (p[1] - mean[1]) + nv[2] * (p[2] - mean[2]);
        for (int a = 0; a < 3; a++)
            out_plane[a] = (float)(p[a] - off * nv[a]);
    }
}

/* The subset threshold of kr_rf_grid_point: a corner is kept when its hash
 * is at most this (subset ≥ 1 keeps all). */
static inline KR_HD uint32_t kr_rf_subset_threshold(double subset)
{
    return subset >= 1 ? UINT32_MAX : (uint32_t)(subset * 4294967295.0);
}

/* Corner (x, y, z) of a field's grid as the grid point it gives (core/
 * dfield_kernels.h, "Grid points"): a fixed offset inside the corner's cell,
 * valued by the field's interpolation there. Returns 0 when the corner is
 * not in the subset or the offset point samples outside the field. */
static inline KR_HD int kr_rf_grid_point(const kr_df_field *f, int x, int y, int z,
                                         uint32_t threshold, unsigned seed, float q[3], float *v)
{
    uint64_t key = ((uint64_t)(uint32_t)x << 40) ^ ((uint64_t)(uint32_t)y << 20) ^ (uint32_t)z ^
                   ((uint64_t)seed << 32);
    if (threshold != UINT32_MAX && kr_df_hash(key) > threshold) return 0;
    uint32_t r = kr_df_hash(key * 31 + 7);
    float h = f->h;
    float p[3] = {KR_MUL(h, (float)x), KR_MUL(h, (float)y), KR_MUL(h, (float)z)};
    float at[3] = {p[0] + KR_MUL(h, (float)(r & 1023)) / 1024.0f,
                   p[1] + KR_MUL(h, (float)((r >> 10) & 1023)) / 1024.0f,
                   p[2] + KR_MUL(h, (float)((r >> 20) & 1023)) / 1024.0f},
          grad[3];
    if (!kr_df_sample(f, at, v, grad)) return 0;
    for (int a = 0; a < 3; a++)
        q[a] = at[a];
    return 1;
}

/* Corner coordinates of cell c of brick b (brick_xyz: 3 ints per brick). */
static inline KR_HD void kr_rf_cell_corner(const int *brick_xyz, int b, int c, int xyz[3])
{
    xyz[0] = brick_xyz[3 * b] * KR_DF_BRICK + (c & (KR_DF_BRICK - 1));
    xyz[1] = brick_xyz[3 * b + 1] * KR_DF_BRICK + ((c >> KR_DF_BRICK_LOG) & (KR_DF_BRICK - 1));
    xyz[2] = brick_xyz[3 * b + 2] * KR_DF_BRICK + (c >> (2 * KR_DF_BRICK_LOG));
}

#endif
