/* The synthetic ray caster. Speed matters (it runs beside the tracker on two
 * cores), so:
 *  - every primitive is moved into a frame where its ray test is a handful of
 *    float operations: rays share the camera origin, and a pixel's ray
 *    direction is affine in (u, v); since its camera-z component is 1, the ray
 *    parameter of a hit *is* the camera depth z;
 *  - each primitive's bounding box is projected once per frame to a pixel
 *    rectangle and a minimum depth; the image is cut into 16×16 tiles and a
 *    tile only tests primitives whose rectangle overlaps it, nearest first,
 *    stopping once the closest hit is nearer than the next primitive can be;
 *  - the room (floor, walls, ceiling) is hit only where no primitive is, as
 *    the exit of an axis-aligned box that contains the camera;
 *  - noise comes from a Gaussian table indexed by a per-tile PRNG. */
#include "capture/synthetic_render.h"

#include <math.h>
#include <string.h>

#include "capture/synthetic_rng.h"

#define TILE 16
#define NEAR_Z 0.02 /* bounding corners closer than this make a primitive cover the whole image */
#define FAR_T 1e30f
#define MINF(a, b) ((a) < (b) ? (a) : (b))
#define MAXF(a, b) ((a) > (b) ? (a) : (b))

typedef struct {
    int kind;
    int index;          /* in the scene (its colour) */
    int aligned;        /* box with yaw 0: its local axes are the world's */
    float cs, sn;       /* box yaw: local = Rz(-yaw)·world */
    float o[3];         /* ray origin relative to the centre (box: in local axes) */
    float lo[3], hi[3]; /* box slabs relative to the origin: -h - o, h - o */
    float C;            /* sphere |o|² - r², cylinder ox² + oy² - r² */
    float r, r2, hh;
    float zmin;         /* smallest camera depth of its bounding box */
    int u0, u1, v0, v1; /* pixel rectangle that can see it */
} prim_prep;

typedef struct {
    float base[3], du[3], dv[3]; /* world ray direction of pixel (u, v) = base + u·du + v·dv */
    float rlo[3], rhi[3];        /* room faces relative to the camera */
    int ceiling;
    int width, height;
    int n; /* visible primitives, sorted by zmin */
    prim_prep p[KR_SYNTH_MAX_PRIMS];
} frame_prep;

static void bounding_corners(const kr_synth_prim *q, double corners[8][3])
{
    double ex[3] = {q->half[0], 0, 0}, ey[3] = {0, q->half[1], 0}, ez[3] = {0, 0, q->half[2]};
    if (q->kind == KR_SYNTH_SPHERE) {
        ey[1] = ez[2] = q->half[0];
    } else if (q->kind == KR_SYNTH_CYLINDER) {
        ey[1] = q->half[0];
    } else {
        double c = cos(q->yaw), s = sin(q->yaw);
        ex[0] = c * q->half[0], ex[1] = s * q->half[0];
        ey[0] = -s * q->half[1], ey[1] = c * q->half[1];
    }
    for (int i = 0; i < 8; i++) {
        double sx = (i & 1) ? 1 : -1, sy = (i & 2) ? 1 : -1, sz = (i & 4) ? 1 : -1;
        for (int a = 0; a < 3; a++)
            corners[i][a] = q->c[a] + sx * ex[a] + sy * ey[a] + sz * ez[a];
    }
}

/* Projects the primitive's bounding box; false when nothing of it can be seen. */
static bool project(const kr_synth_prim *q, const kr_pose *T, const kr_intrinsics *K, prim_prep *pp)
{
    double corners[8][3];
    bounding_corners(q, corners);
    double zmin = 1e30, umin = 1e30, umax = -1e30, vmin = 1e30, vmax = -1e30;
    int behind = 0;
    for (int i = 0; i < 8; i++) {
        double d[3] = {corners[i][0] - T->t[0], corners[i][1] - T->t[1], corners[i][2] - T->t[2]};
        /* camera = Rᵀ (world − t) */
        double x = T->R[0] * d[0] + T->R[3] * d[1] + T->R[6] * d[2];
        double y = T->R[1] * d[0] + T->R[4] * d[1] + T->R[7] * d[2];
        double z = T->R[2] * d[0] + T->R[5] * d[1] + T->R[8] * d[2];
        zmin = fmin(zmin, z);
        if (z < NEAR_Z) {
            behind++;
            continue;
        }
        double u = K->fx * x / z + K->cx, v = K->fy * y / z + K->cy;
        umin = fmin(umin, u), umax = fmax(umax, u), vmin = fmin(vmin, v), vmax = fmax(vmax, v);
    }
    if (behind == 8) return false;
    if (behind) {
        /* Straddles the camera plane: its projection is unbounded. */
        pp->u0 = 0, pp->u1 = K->width - 1, pp->v0 = 0, pp->v1 = K->height - 1;
        pp->zmin = 0;
        return true;
    }
    if (umax < 0 || vmax < 0 || umin > K->width - 1 || vmin > K->height - 1) return false;
    pp->u0 = umin < 0 ? 0 : (int)floor(umin);
    pp->v0 = vmin < 0 ? 0 : (int)floor(vmin);
    pp->u1 = umax > K->width - 1 ? K->width - 1 : (int)ceil(umax);
    pp->v1 = vmax > K->height - 1 ? K->height - 1 : (int)ceil(vmax);
    pp->zmin = (float)zmin;
    return true;
}

static void prepare_prim(const kr_synth_prim *q, const kr_pose *T, prim_prep *pp)
{
    double o[3] = {T->t[0] - q->c[0], T->t[1] - q->c[1], T->t[2] - q->c[2]};
    pp->kind = q->kind;
    pp->r = (float)q->half[0];
    pp->r2 = (float)(q->half[0] * q->half[0]);
    pp->hh = (float)q->half[2];
    if (q->kind == KR_SYNTH_BOX) {
        double c = cos(q->yaw), s = sin(q->yaw);
        pp->aligned = q->yaw == 0;
        pp->cs = (float)c, pp->sn = (float)s;
        double l[3] = {c * o[0] + s * o[1], -s * o[0] + c * o[1], o[2]};
        for (int a = 0; a < 3; a++) {
            pp->o[a] = (float)l[a];
            pp->lo[a] = (float)(-q->half[a] - l[a]);
            pp->hi[a] = (float)(q->half[a] - l[a]);
        }
    } else {
        for (int a = 0; a < 3; a++)
            pp->o[a] = (float)o[a];
        double rr = q->half[0] * q->half[0];
        pp->C = (float)(q->kind == KR_SYNTH_SPHERE ? o[0] * o[0] + o[1] * o[1] + o[2] * o[2] - rr
                                                   : o[0] * o[0] + o[1] * o[1] - rr);
    }
}

static void prepare(const kr_synth_scene *s, const kr_pose *T, const kr_intrinsics *K,
                    frame_prep *f)
{
    /* d(u, v) = R·((u − cx)/fx, (v − cy)/fy, 1) */
    for (int a = 0; a < 3; a++) {
        double c0 = T->R[3 * a], c1 = T->R[3 * a + 1], c2 = T->R[3 * a + 2];
        f->du[a] = (float)(c0 / K->fx);
        f->dv[a] = (float)(c1 / K->fy);
        f->base[a] = (float)(c2 - c0 * K->cx / K->fx - c1 * K->cy / K->fy);
        f->rlo[a] = (float)(s->room_min[a] - T->t[a]);
        f->rhi[a] = (float)(s->room_max[a] - T->t[a]);
    }
    f->ceiling = s->ceiling;
    f->width = K->width;
    f->height = K->height;
    f->n = 0;
    for (int i = 0; i < s->count; i++) {
        prim_prep pp;
        if (!project(&s->prims[i], T, K, &pp)) continue;
        prepare_prim(&s->prims[i], T, &pp);
        pp.index = i;
        /* insertion sort by zmin: nearest first for the early exit */
        int j = f->n++;
        while (j > 0 && f->p[j - 1].zmin > pp.zmin) {
            f->p[j] = f->p[j - 1];
            j--;
        }
        f->p[j] = pp;
    }
}

static inline float hit_box(const prim_prep *P, float dx, float dy, float idz)
{
    float lx = P->aligned ? dx : P->cs * dx + P->sn * dy;
    float ly = P->aligned ? dy : P->cs * dy - P->sn * dx;
    float ix = 1.0f / lx, iy = 1.0f / ly;
    float a0 = P->lo[0] * ix, a1 = P->hi[0] * ix;
    float b0 = P->lo[1] * iy, b1 = P->hi[1] * iy;
    float c0 = P->lo[2] * idz, c1 = P->hi[2] * idz;
    float tmin = MAXF(MAXF(MINF(a0, a1), MINF(b0, b1)), MINF(c0, c1));
    float tmax = MINF(MINF(MAXF(a0, a1), MAXF(b0, b1)), MAXF(c0, c1));
    return (tmin <= tmax && tmin > 0) ? tmin : FAR_T;
}

static inline float hit_sphere(const prim_prep *P, float dx, float dy, float dz, float dd)
{
    float b = P->o[0] * dx + P->o[1] * dy + P->o[2] * dz;
    float disc = b * b - dd * P->C;
    if (disc < 0) return FAR_T;
    float t = (-b - sqrtf(disc)) / dd;
    return t > 0 ? t : FAR_T;
}

static inline float hit_cylinder(const prim_prep *P, float dx, float dy, float dz, float idz)
{
    float a2 = dx * dx + dy * dy, b2 = P->o[0] * dx + P->o[1] * dy;
    float disc = b2 * b2 - a2 * P->C;
    if (disc < 0) return FAR_T;
    float t = (-b2 - sqrtf(disc)) / a2;
    float z = P->o[2] + t * dz;
    if (z >= -P->hh && z <= P->hh) return t > 0 ? t : FAR_T;
    /* A cap can only be hit from beyond its plane. */
    float cap;
    if (P->o[2] > P->hh)
        cap = P->hh;
    else if (P->o[2] < -P->hh)
        cap = -P->hh;
    else
        return FAR_T;
    float tc = (cap - P->o[2]) * idz;
    if (!(tc > 0)) return FAR_T;
    float x = P->o[0] + tc * dx, y = P->o[1] + tc * dy;
    return x * x + y * y <= P->r2 ? tc : FAR_T;
}

/* cos² of the incidence angle times |d|², i.e. (n·d)², at the winning hit. */
static float incidence2(const prim_prep *P, float t, float dx, float dy, float dz)
{
    if (P->kind == KR_SYNTH_SPHERE) {
        float nd =
            ((P->o[0] + t * dx) * dx + (P->o[1] + t * dy) * dy + (P->o[2] + t * dz) * dz) / P->r;
        return nd * nd;
    }
    if (P->kind == KR_SYNTH_CYLINDER) {
        float z = P->o[2] + t * dz;
        if (fabsf(z) < P->hh - 1e-4f) {
            float nd = ((P->o[0] + t * dx) * dx + (P->o[1] + t * dy) * dy) / P->r;
            return nd * nd;
        }
        return dz * dz;
    }
    /* Box: the face entered last is the slab with the largest entry time. */
    float l[3] = {P->aligned ? dx : P->cs * dx + P->sn * dy,
                  P->aligned ? dy : P->cs * dy - P->sn * dx, dz};
    int best = 0;
    float tin = -FAR_T;
    for (int a = 0; a < 3; a++) {
        float i = 1.0f / l[a], t0 = P->lo[a] * i, t1 = P->hi[a] * i, e = MINF(t0, t1);
        if (e > tin) tin = e, best = a;
    }
    return l[best] * l[best];
}

static inline uint64_t xorshift(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    *s = x;
    return x * 0x2545f4914f6cdd1dULL;
}

typedef struct {
    float min_z, max_z, min_cos2, sigma, inv_b, a;
    uint32_t drop16; /* dropout threshold on 16 random bits */
} sensor_prep;

static void render_tile(const kr_synth_renderer *r, const frame_prep *f, const sensor_prep *sp,
                        int tx, int ty, uint64_t seed, uint16_t *out, uint8_t *rgb)
{
    int u0 = tx * TILE, v0 = ty * TILE;
    int u1 = MINF(u0 + TILE, f->width), v1 = MINF(v0 + TILE, f->height);
    /* Candidates: primitives whose rectangle overlaps the tile, nearest first. */
    int cand[KR_SYNTH_MAX_PRIMS], nc = 0;
    for (int i = 0; i < f->n; i++) {
        const prim_prep *P = &f->p[i];
        if (P->u1 >= u0 && P->u0 < u1 && P->v1 >= v0 && P->v0 < v1) cand[nc++] = i;
    }
    uint64_t rng = kr_rng_mix(seed, (uint64_t)tx, (uint64_t)ty) | 1;
    for (int v = v0; v < v1; v++) {
        uint16_t *row = out + (size_t)v * f->width;
        for (int u = u0; u < u1; u++) {
            float dx = f->base[0] + u * f->du[0] + v * f->dv[0];
            float dy = f->base[1] + u * f->du[1] + v * f->dv[1];
            float dz = f->base[2] + u * f->du[2] + v * f->dv[2];
            float dd = dx * dx + dy * dy + dz * dz, idz = 1.0f / dz;
            float best = FAR_T;
            int who = -1;
            for (int k = 0; k < nc; k++) {
                const prim_prep *P = &f->p[cand[k]];
                if (best <= P->zmin) break; /* nothing further down the list can be nearer */
                if (u < P->u0 || u > P->u1 || v < P->v0 || v > P->v1) continue;
                float t = P->kind == KR_SYNTH_BOX      ? hit_box(P, dx, dy, idz)
                          : P->kind == KR_SYNTH_SPHERE ? hit_sphere(P, dx, dy, dz, dd)
                                                       : hit_cylinder(P, dx, dy, dz, idz);
                if (t < best) best = t, who = cand[k];
            }
            float nd2;
            bool valid = true;
            int face = -1;
            if (who >= 0) {
                nd2 = incidence2(&f->p[who], best, dx, dy, dz);
            } else {
                /* Inside the room: the ray leaves through the nearest far face. */
                float ix = 1.0f / dx, iy = 1.0f / dy;
                float ex = MAXF(f->rlo[0] * ix, f->rhi[0] * ix);
                float ey = MAXF(f->rlo[1] * iy, f->rhi[1] * iy);
                float ez = MAXF(f->rlo[2] * idz, f->rhi[2] * idz);
                best = ex, nd2 = dx * dx, face = f->rhi[0] * ix > f->rlo[0] * ix;
                if (ey < best)
                    best = ey, nd2 = dy * dy, face = 2 + (f->rhi[1] * iy > f->rlo[1] * iy);
                if (ez < best) {
                    best = ez, nd2 = dz * dz, face = 4 + (f->rhi[2] * idz > f->rlo[2] * idz);
                    if (!f->ceiling && dz > 0) valid = false;
                }
            }
            if (rgb)
                kr_synth_colour(who >= 0 ? f->p[who].index : -1, face,
                                rgb + 3 * ((size_t)v * f->width + u));
            uint64_t rn = xorshift(&rng);
            valid = valid && best >= sp->min_z && best <= sp->max_z && nd2 >= sp->min_cos2 * dd &&
                    (uint32_t)(rn >> 48) >= sp->drop16;
            uint16_t d = KR_DISPARITY_INVALID;
            if (valid) {
                float disp = (1.0f / best - sp->a) * sp->inv_b +
                             sp->sigma * r->gauss[rn & (KR_SYNTH_GAUSS_N - 1)];
                int q = (int)(disp + 0.5f); /* the sensor reports integers */
                d = (uint16_t)(q < 0                          ? 0
                               : q > KR_DISPARITY_INVALID - 1 ? KR_DISPARITY_INVALID - 1
                                                              : q);
            }
            row[u] = d;
        }
    }
}

void kr_synth_render(const kr_synth_renderer *r, const kr_synth_scene *scene, const kr_pose *T_wc,
                     const kr_intrinsics *K, uint64_t noise_seed, uint16_t *out, uint8_t *rgb)
{
    frame_prep f;
    prepare(scene, T_wc, K, &f);
    const kr_synth_sensor *s = &r->sensor;
    sensor_prep sp = {s->min_z,
                      s->max_z,
                      s->min_cos * s->min_cos,
                      s->sigma,
                      (float)(1.0 / KR_DISPARITY_B),
                      (float)KR_DISPARITY_A,
                      (uint32_t)(s->dropout * 65536.0f)};
    int tiles_x = (K->width + TILE - 1) / TILE, tiles_y = (K->height + TILE - 1) / TILE;
    int ntiles = tiles_x * tiles_y, threads = r->threads > 1 ? 2 : 1;
#pragma omp parallel for schedule(dynamic, 8) num_threads(threads) if (threads > 1)
    for (int i = 0; i < ntiles; i++)
        render_tile(r, &f, &sp, i % tiles_x, i / tiles_x, noise_seed, out, rgb);
}

void kr_synth_renderer_init(kr_synth_renderer *r, uint64_t seed)
{
    r->sensor = (kr_synth_sensor){0.5f, 0.5f, 5.0f, 0.15f, 0.003f};
    r->threads = 1;
    /* Box–Muller samples, then shifted and scaled to exact mean 0, variance 1
     * so the table itself adds no bias. */
    uint64_t rng = seed ^ 0x6a055ULL;
    double sum = 0, sum2 = 0;
    for (int i = 0; i < KR_SYNTH_GAUSS_N; i += 2) {
        double u1 = 1.0 - kr_rng_uniform(&rng), u2 = kr_rng_uniform(&rng);
        double m = sqrt(-2.0 * log(u1));
        double g0 = m * cos(2 * M_PI * u2), g1 = m * sin(2 * M_PI * u2);
        r->gauss[i] = (float)g0;
        r->gauss[i + 1] = (float)g1;
        sum += g0 + g1;
        sum2 += g0 * g0 + g1 * g1;
    }
    double mean = sum / KR_SYNTH_GAUSS_N, sd = sqrt(sum2 / KR_SYNTH_GAUSS_N - mean * mean);
    for (int i = 0; i < KR_SYNTH_GAUSS_N; i++)
        r->gauss[i] = (float)((r->gauss[i] - mean) / sd);
}
