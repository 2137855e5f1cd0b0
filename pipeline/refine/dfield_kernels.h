/* Per-element math of multi-view distance-field refinement (DESIGN.md §5),
 * written once for the OpenMP engine (pipeline/refine/refine_cpu.c) and the CUDA
 * kernels (pipeline/refine/refine_cuda.cu).
 *
 * Sparse field. A view's field lives on the uniform grid of corners h·(i,j,k)
 * in the view's own frame (origin 0, so the grid needs no bounds). Corners are
 * stored in bricks of KR_DFIELD_BRICK³; a brick's key packs its three brick
 * coordinates (21 bits each, offset by 2²⁰) and an open-addressed table
 * (linear probing, power-of-two capacity) maps keys to brick slots. A corner
 * that no point influenced holds +∞. Distances are ≥ 0, so the IEEE bit
 * patterns of the values order like the values: a minimum on the float is a
 * minimum on its 32-bit pattern (atomicMin on the GPU, a CAS loop on the CPU).
 *
 * Influenced corners (thesis §3.2, no search over all points). A point p in
 * cell c = ⌊p/h⌋ updates the corners c + k, k ∈ [−(b−1), b]³ (b = band; b = 1
 * is the cell's 8 corners) with |p − corner|, keeping the minimum. A corner g
 * whose true nearest point lies closer than b·h in every axis sees that point
 * (each axis offset in (−b, b) cells gives g − c ∈ [−(b−1), b]), so its value
 * is exact whenever the true distance is < b·h, and an upper bound otherwise.
 *
 * Trilinear interpolation. With u = p/h, i = ⌊u⌋, f = u − i and the 8 corner
 * values v_abc (a, b, c ∈ {0,1} along x, y, z),
 *   D(p) = Σ w_a(f_x) w_b(f_y) w_c(f_z) v_abc,  w_0(f) = 1 − f, w_1(f) = f,
 *   ∂D/∂p_x = (1/h) Σ (2a − 1) w_b(f_y) w_c(f_z) v_abc   (w_a' = ±1),
 * and alike for y and z. A sample is inside the field only when all 8 corners
 * hold a value.
 *
 * Grid points. The distance is |d|, with a kink at the surface, and a cell
 * the surface crosses interpolates it high (a plane through the cell's middle
 * reads h/2 instead of 0), by an amount that depends on where the grid lies.
 * Were g a corner of i (value exact) and D_j interpolated, e would carry that
 * bias on one side only and pull the views by it. So each influenced corner
 * gives a grid point at a fixed pseudo-random offset inside its cell, valued
 * by i's own trilinear interpolation there: both sides of e then carry the
 * same kind of bias, which cancels on average (measured on the bunny: the
 * largest error against bun.conf fell from 0.25° to 0.22°).
 *
 * Residual. Poses are T_k = T_world_k. A grid point g of view i lands in
 * view j at
 *   p = T_j⁻¹ T_i g = R_jᵀ (w − t_j),  w = T_i g (world),
 * and e = D_i(g) − D_j(p).
 *
 * Jacobian. Increments are left (world-frame) twists, as kr_pose_exp and the
 * Newton tracker use them: T_k ← exp(ξ_k^)·T_k, ξ = (θ, t). To first order
 * exp(ξ^) w = w + θ×w + t, so with both views moved
 *   p' = R_jᵀ (exp(−ξ_j^) exp(ξ_i^) w − t_j) ≈ p + R_jᵀ (θ_i − θ_j)×w + R_jᵀ (t_i − t_j),
 * and with n = R_j ∇D_j(p) (the gradient turned into the world frame)
 *   ∂e/∂θ_i = −n·(· × w) → −(w × n),   ∂e/∂t_i = −n,
 * since n·(θ×w) = θ·(w×n). Hence J_i = −(w×n, n) and J_j = −J_i: every
 * residual of the pair (i, j) adds s = J_i J_iᵀ to the blocks (i,i) and (j,j),
 * −s to (i,j) and (j,i), J_i e to the gradient of i and −J_i e to that of j.
 * One 6×6 sum (21 values) and one 6-vector per pair carry all of it. */
#ifndef KINREG_PIPELINE_REFINE_DFIELD_KERNELS_H
#define KINREG_PIPELINE_REFINE_DFIELD_KERNELS_H

#include <math.h>
#include <stdint.h>

#include "core/kr_hd.h"

#define KR_DFIELD_BRICK_LOG 3
#define KR_DFIELD_BRICK (1 << KR_DFIELD_BRICK_LOG)
#define KR_DFIELD_BRICK_CELLS (KR_DFIELD_BRICK * KR_DFIELD_BRICK * KR_DFIELD_BRICK)
#define KR_DFIELD_EMPTY_KEY UINT64_MAX
#define KR_DFIELD_INF_BITS 0x7f800000u
#define KR_DFIELD_COORD_OFFSET (1 << 20)

/* A read-only view of one sparse field (arrays on the host or the device). */
typedef struct {
    float h, inv_h;
    const uint64_t *keys; /* capacity entries, KR_DFIELD_EMPTY_KEY when free */
    const int *slots;     /* brick slot of each key */
    const float *values;  /* bricks × KR_DFIELD_BRICK_CELLS, +∞ where not influenced */
    uint32_t mask;        /* capacity − 1 */
} kr_dfield_lookup;

/* A pose as floats for the per-element loops: row-major R, then t. */
typedef struct {
    float R[9], t[3];
} kr_refine_posef;

/* Per-pair sums: Σ w J Jᵀ (upper triangle, 21), Σ w J e (J = J_i), Σ ρ(e),
 * Σ e² and the count of residuals that landed. */
typedef struct {
    double H[21], g[6], cost, sq;
    double count;
} kr_refine_acc;

static inline KR_HD int kr_dfield_floor(float u)
{
    return (int)floorf(u);
}

static inline KR_HD uint64_t kr_dfield_brick_key(int bx, int by, int bz)
{
    return ((uint64_t)(uint32_t)(bx + KR_DFIELD_COORD_OFFSET) << 42) |
           ((uint64_t)(uint32_t)(by + KR_DFIELD_COORD_OFFSET) << 21) |
           (uint64_t)(uint32_t)(bz + KR_DFIELD_COORD_OFFSET);
}

static inline KR_HD uint32_t kr_dfield_hash(uint64_t key)
{
    key ^= key >> 33;
    key *= 0xff51afd7ed558ccdull;
    key ^= key >> 33;
    return (uint32_t)key;
}

/* Slot of the brick holding corner (x, y, z), or −1. */
static inline KR_HD int kr_dfield_find_brick(const uint64_t *keys, const int *slots, uint32_t mask,
                                             uint64_t key)
{
    uint32_t at = kr_dfield_hash(key) & mask;
    for (uint32_t probe = 0; probe <= mask; probe++) {
        uint64_t k = keys[at];
        if (k == key) return slots[at];
        if (k == KR_DFIELD_EMPTY_KEY) return -1;
        at = (at + 1) & mask;
    }
    return -1;
}

/* Index into values of corner (x, y, z), or −1 when its brick is absent. */
static inline KR_HD long kr_dfield_corner_index(const kr_dfield_lookup *f, int x, int y, int z)
{
    int slot =
        kr_dfield_find_brick(f->keys, f->slots, f->mask,
                             kr_dfield_brick_key(x >> KR_DFIELD_BRICK_LOG, y >> KR_DFIELD_BRICK_LOG,
                                                 z >> KR_DFIELD_BRICK_LOG));
    if (slot < 0) return -1;
    int lx = x & (KR_DFIELD_BRICK - 1), ly = y & (KR_DFIELD_BRICK - 1),
        lz = z & (KR_DFIELD_BRICK - 1);
    return (long)slot * KR_DFIELD_BRICK_CELLS + (lz * KR_DFIELD_BRICK + ly) * KR_DFIELD_BRICK + lx;
}

/* Value of corner (x, y, z); +∞ (or a huge value) when not influenced. */
static inline KR_HD float kr_dfield_corner(const kr_dfield_lookup *f, int x, int y, int z)
{
    long i = kr_dfield_corner_index(f, x, y, z);
    return i < 0 ? INFINITY : f->values[i];
}

/* Trilinear value and gradient (both in the field's frame, metres) at p.
 * Returns 0 when any of the 8 corners holds no value. */
static inline KR_HD int kr_dfield_sample(const kr_dfield_lookup *f, const float p[3], float *value,
                                         float grad[3])
{
    float u[3], fr[3];
    int c[3];
    for (int a = 0; a < 3; a++) {
        u[a] = p[a] * f->inv_h;
        if (!(fabsf(u[a]) < (float)(KR_DFIELD_COORD_OFFSET - 2) * KR_DFIELD_BRICK)) return 0;
        c[a] = kr_dfield_floor(u[a]);
        fr[a] = u[a] - (float)c[a];
    }
    float v[8];
    int lx = c[0] & (KR_DFIELD_BRICK - 1), ly = c[1] & (KR_DFIELD_BRICK - 1),
        lz = c[2] & (KR_DFIELD_BRICK - 1);
    if (lx < KR_DFIELD_BRICK - 1 && ly < KR_DFIELD_BRICK - 1 && lz < KR_DFIELD_BRICK - 1) {
        /* All 8 corners in one brick (343 of 512 cells): one table look-up
         * instead of 8, the same values. Sampling was most of a refinement's
         * time on the CPU. */
        int slot = kr_dfield_find_brick(f->keys, f->slots, f->mask,
                                        kr_dfield_brick_key(c[0] >> KR_DFIELD_BRICK_LOG,
                                                            c[1] >> KR_DFIELD_BRICK_LOG,
                                                            c[2] >> KR_DFIELD_BRICK_LOG));
        if (slot < 0) return 0;
        const float *b = f->values + (long)slot * KR_DFIELD_BRICK_CELLS +
                         (lz * KR_DFIELD_BRICK + ly) * KR_DFIELD_BRICK + lx;
        for (int k = 0; k < 8; k++) {
            v[k] = b[(k & 1) + ((k >> 1) & 1) * KR_DFIELD_BRICK +
                     (k >> 2) * KR_DFIELD_BRICK * KR_DFIELD_BRICK];
            if (!(v[k] < INFINITY)) return 0;
        }
    } else {
        for (int k = 0; k < 8; k++) {
            v[k] = kr_dfield_corner(f, c[0] + (k & 1), c[1] + ((k >> 1) & 1), c[2] + (k >> 2));
            if (!(v[k] < INFINITY)) return 0;
        }
    }
    float D = 0, gx = 0, gy = 0, gz = 0;
    for (int k = 0; k < 8; k++) {
        int a = k & 1, b = (k >> 1) & 1, cc = k >> 2;
        float wx = a ? fr[0] : 1 - fr[0], wy = b ? fr[1] : 1 - fr[1], wz = cc ? fr[2] : 1 - fr[2];
        float sx = a ? 1.0f : -1.0f, sy = b ? 1.0f : -1.0f, sz = cc ? 1.0f : -1.0f;
        D += wx * wy * wz * v[k];
        gx += sx * wy * wz * v[k];
        gy += wx * sy * wz * v[k];
        gz += wx * wy * sz * v[k];
    }
    *value = D;
    grad[0] = gx * f->inv_h;
    grad[1] = gy * f->inv_h;
    grad[2] = gz * f->inv_h;
    return 1;
}

static inline KR_HD void kr_refine_apply(const kr_refine_posef *T, const float p[3], float out[3])
{
    for (int r = 0; r < 3; r++)
        out[r] = T->R[3 * r] * p[0] + T->R[3 * r + 1] * p[1] + T->R[3 * r + 2] * p[2] + T->t[r];
}

/* p = T_jᵀ (w − t_j): a world point into view j's frame. */
static inline KR_HD void kr_refine_apply_inv(const kr_refine_posef *T, const float w[3],
                                             float out[3])
{
    float d[3] = {w[0] - T->t[0], w[1] - T->t[1], w[2] - T->t[2]};
    for (int r = 0; r < 3; r++)
        out[r] = T->R[r] * d[0] + T->R[3 + r] * d[1] + T->R[6 + r] * d[2];
}

/* The residual of grid point g (value Dg) of view i against view j:
 * e = Dg − D_j(T_j⁻¹ T_i g) and J = J_i (J_j = −J). Returns 0 outside j. */
static inline KR_HD int kr_refine_pair_residual(const kr_refine_posef *Ti,
                                                const kr_refine_posef *Tj,
                                                const kr_dfield_lookup *fj, const float g[3],
                                                float Dg, float *e, float J[6])
{
    float w[3], p[3], Dj, grad[3];
    kr_refine_apply(Ti, g, w);
    kr_refine_apply_inv(Tj, w, p);
    if (!kr_dfield_sample(fj, p, &Dj, grad)) return 0;
    *e = Dg - Dj;
    if (J) {
        float n[3];
        for (int r = 0; r < 3; r++)
            n[r] = Tj->R[3 * r] * grad[0] + Tj->R[3 * r + 1] * grad[1] + Tj->R[3 * r + 2] * grad[2];
        J[0] = -(w[1] * n[2] - w[2] * n[1]);
        J[1] = -(w[2] * n[0] - w[0] * n[2]);
        J[2] = -(w[0] * n[1] - w[1] * n[0]);
        J[3] = -n[0];
        J[4] = -n[1];
        J[5] = -n[2];
    }
    return 1;
}

/* Robust weight and cost of residual e: Huber with threshold k (k ≤ 0: plain
 * squares), truncated at |e| = cap, where the cost stays at ρ(cap) and the
 * weight is 0. A grid point that misses the other field costs ρ(cap) too, so
 * moving a view away from the others never lowers the objective. The weight
 * w makes w·J Jᵀ and w·J e the IRLS normal equations. */
static inline KR_HD float kr_refine_rho(float a, float k)
{
    return (k <= 0 || a <= k) ? a * a : 2 * k * a - k * k;
}

static inline KR_HD void kr_refine_robust(float e, float k, float cap, float *weight, float *cost)
{
    float a = fabsf(e);
    if (a > cap) {
        *weight = 0;
        *cost = kr_refine_rho(cap, k);
    } else if (k <= 0 || a <= k) {
        *weight = 1;
        *cost = e * e;
    } else {
        *weight = k / a;
        *cost = 2 * k * a - k * k;
    }
}

/* Adds a residual to the pair's sums. */
static inline KR_HD void kr_refine_accumulate(kr_refine_acc *acc, const float J[6], float e,
                                              float weight, float cost)
{
    int at = 0;
    for (int r = 0; r < 6; r++) {
        double wj = (double)weight * J[r];
        for (int c = r; c < 6; c++)
            acc->H[at++] += wj * J[c];
        acc->g[r] += wj * e;
    }
    acc->cost += cost;
    acc->sq += (double)e * e;
    acc->count += 1;
}

static inline KR_HD void kr_refine_acc_zero(kr_refine_acc *acc)
{
    for (int i = 0; i < 21; i++)
        acc->H[i] = 0;
    for (int i = 0; i < 6; i++)
        acc->g[i] = 0;
    acc->cost = 0;
    acc->sq = 0;
    acc->count = 0;
}

static inline KR_HD void kr_refine_acc_add(kr_refine_acc *to, const kr_refine_acc *from)
{
    for (int i = 0; i < 21; i++)
        to->H[i] += from->H[i];
    for (int i = 0; i < 6; i++)
        to->g[i] += from->g[i];
    to->cost += from->cost;
    to->sq += from->sq;
    to->count += from->count;
}

/* The corners [lo, hi] per axis that point p influences with the given band;
 * 0 when p is too far out for the brick keys (it influences nothing). */
static inline KR_HD int kr_dfield_corner_range(const float p[3], float inv_h, int band, int lo[3],
                                               int hi[3])
{
    for (int a = 0; a < 3; a++) {
        float u = p[a] * inv_h;
        if (!(fabsf(u) < (float)(KR_DFIELD_COORD_OFFSET - 4) * KR_DFIELD_BRICK)) return 0;
        int c = kr_dfield_floor(u);
        lo[a] = c - (band - 1);
        hi[a] = c + band;
    }
    return 1;
}

/* Distance from a point to corner (x, y, z) of spacing h. Products through
 * KR_MUL so that nvcc does not fuse them: both engines then round alike and
 * the influenced corners hold the same bits on both (the parity test checks). */
static inline KR_HD float kr_dfield_corner_distance(const float p[3], int x, int y, int z, float h)
{
    float dx = p[0] - KR_MUL(h, (float)x), dy = p[1] - KR_MUL(h, (float)y),
          dz = p[2] - KR_MUL(h, (float)z);
    return sqrtf(KR_MUL(dx, dx) + KR_MUL(dy, dy) + KR_MUL(dz, dz));
}

/* Signed fields (kr_refine_config.signed_field). The unsigned distance has a
 * kink at the surface that trilinear interpolation rounds off by up to a
 * quarter cell, differently on each view's grid, so two views that agree
 * exactly still differ by millimetres on a 2 cm grid, and those per-pair
 * differences pull a long loop out of shape. The signed distance to the
 * nearest point's tangent plane, n·(g − p), is linear across a planar surface,
 * which trilinear interpolation reproduces exactly, and it does not depend on
 * where the samples fall on the surface (the distance to the nearest point
 * does: √(d² + r²) for a sample r off the foot). Normals point to the side the
 * sensor saw (towards the view's origin), so every view agrees on the sign.
 *
 * The nearest point is chosen with one 64-bit atomic minimum on
 * (distance bits << 32 | value bits): distances are ≥ 0, so the high half
 * orders like the distance, and the low half carries the plane distance of
 * the point that won (ties: the smaller bit pattern, the same on every run). */
#define KR_DFIELD_EMPTY_PAIR UINT64_MAX

static inline KR_HD uint32_t kr_dfield_float_bits(float v)
{
    union {
        float f;
        uint32_t u;
    } c;
    c.f = v;
    return c.u;
}

static inline KR_HD float kr_dfield_bits_float(uint32_t u)
{
    union {
        float f;
        uint32_t u;
    } c;
    c.u = u;
    return c.f;
}

/* The (distance, signed plane distance) pair of point p with unit normal nrm
 * at corner (x, y, z). */
static inline KR_HD uint64_t kr_dfield_signed_pair(const float p[3], const float nrm[3], int x,
                                                   int y, int z, float h)
{
    float dx = KR_MUL(h, (float)x) - p[0], dy = KR_MUL(h, (float)y) - p[1],
          dz = KR_MUL(h, (float)z) - p[2];
    float dist = sqrtf(KR_MUL(dx, dx) + KR_MUL(dy, dy) + KR_MUL(dz, dz));
    float plane = KR_MUL(nrm[0], dx) + KR_MUL(nrm[1], dy) + KR_MUL(nrm[2], dz);
    return ((uint64_t)kr_dfield_float_bits(dist) << 32) | kr_dfield_float_bits(plane);
}

/* The corner's value from its pair: +∞ when no point influenced it. */
static inline KR_HD float kr_dfield_pair_value(uint64_t pair)
{
    return pair == KR_DFIELD_EMPTY_PAIR ? INFINITY : kr_dfield_bits_float((uint32_t)pair);
}

/* PCA over this many nearest neighbours: enough for a stable plane on noisy
 * depth, few enough that a neighbourhood stays smaller than a bump (the
 * neighbours' mean sits off a curved surface by about κr²/4, which differs
 * between views that sample it at different densities). On the 200-view room
 * (2 cm grid): 10 neighbours end at 0.354 mm without noise and 0.929 mm with
 * 2 mm of depth noise, 16 at 0.775 and 0.759 mm, 12 at 0.407 and 0.839 mm. */
#define KR_REFINE_NEIGHBOURS 12

/* The subset threshold of kr_dfield_grid_point: a corner is kept when its hash
 * is at most this (subset ≥ 1 keeps all). */
static inline KR_HD uint32_t kr_dfield_subset_threshold(double subset)
{
    return subset >= 1 ? UINT32_MAX : (uint32_t)(subset * 4294967295.0);
}

/* Corner (x, y, z) of a field's grid as the grid point it gives (core/
 * dfield_kernels.h, "Grid points"): a fixed offset inside the corner's cell,
 * valued by the field's interpolation there. Returns 0 when the corner is
 * not in the subset or the offset point samples outside the field. */
static inline KR_HD int kr_dfield_grid_point(const kr_dfield_lookup *f, int x, int y, int z,
                                             uint32_t threshold, unsigned seed, float q[3],
                                             float *v)
{
    uint64_t key = ((uint64_t)(uint32_t)x << 40) ^ ((uint64_t)(uint32_t)y << 20) ^ (uint32_t)z ^
                   ((uint64_t)seed << 32);
    if (threshold != UINT32_MAX && kr_dfield_hash(key) > threshold) return 0;
    uint32_t r = kr_dfield_hash(key * 31 + 7);
    float h = f->h;
    float p[3] = {KR_MUL(h, (float)x), KR_MUL(h, (float)y), KR_MUL(h, (float)z)};
    float at[3] = {p[0] + KR_MUL(h, (float)(r & 1023)) / 1024.0f,
                   p[1] + KR_MUL(h, (float)((r >> 10) & 1023)) / 1024.0f,
                   p[2] + KR_MUL(h, (float)((r >> 20) & 1023)) / 1024.0f},
          grad[3];
    if (!kr_dfield_sample(f, at, v, grad)) return 0;
    for (int a = 0; a < 3; a++)
        q[a] = at[a];
    return 1;
}

/* Corner coordinates of cell c of brick b (brick_xyz: 3 ints per brick). */
static inline KR_HD void kr_dfield_cell_corner(const int *brick_xyz, int b, int c, int xyz[3])
{
    xyz[0] = brick_xyz[3 * b] * KR_DFIELD_BRICK + (c & (KR_DFIELD_BRICK - 1));
    xyz[1] = brick_xyz[3 * b + 1] * KR_DFIELD_BRICK +
             ((c >> KR_DFIELD_BRICK_LOG) & (KR_DFIELD_BRICK - 1));
    xyz[2] = brick_xyz[3 * b + 2] * KR_DFIELD_BRICK + (c >> (2 * KR_DFIELD_BRICK_LOG));
}

#endif
