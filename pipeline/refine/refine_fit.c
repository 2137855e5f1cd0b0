/* The independent measure of a multi-view alignment (kinreg/refine.h,
 * kr_refine_fit): exact nearest neighbours between the views' points, not
 * the distance fields the refinement minimises, so that "the refinement made
 * it better" is judged by something it did not optimise.
 *
 * Every view gets a k-d tree of (at most FIT_TREE_POINTS of) its points in
 * its own frame. A sample point of view i is moved into each other view j
 * (T_j⁻¹ T_i p) whose bounding sphere it can reach, and its distance to the
 * nearest point of all of them, capped at `radius`, is kept. The score is the
 * RMS of the capped distances over all samples: a point without a partner
 * costs the cap, so sliding scans apart until few points pair up does not
 * pay, and a misaligned view raises it.
 *
 * The per-sample step is pipeline/refine/refine_fit_kernels.h, run here on
 * OpenMP threads or on CUDA devices (refine_fit_cuda.cu) once
 * kr_refine_fitter_use_devices gave some: the distances are the same bit for
 * bit, and they are added here, per view in sample order, either way. */
#include "pipeline/refine/refine_fit.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/kdtree_layout.h"
#include "gpu/engine.h"
#include "pipeline/refine/refine_fit_cuda.h"
#include "pipeline/refine/refine_fit_kernels.h"

/* Points per view in its tree and samples per view (evenly strided). */
#define FIT_TREE_POINTS 30000
#define FIT_SAMPLES 2000
/* A point counts as paired within this many median point spacings. */
#define FIT_SPACINGS 3.0
/* Points per view whose nearest-neighbour distance gives the spacing. */
#define SPACING_SAMPLES 200
#define SPACING_SLOTS (2 * SPACING_SAMPLES)

/* Which cells of a coarse grid in a view's frame lie within a radius of one
 * of its points: a sample that falls in no such cell has no partner in the
 * view, and the view's tree is not searched. Most of a scan set's views
 * reach any one sample's bounding-sphere test (a room's views all surround
 * it) while few see the place it lies on; the check is exact, so the fit's
 * figures do not change. */
#define OCCUPANCY_CELLS 64 /* cells along a view's longest side, at most */

static size_t occupancy_index(const kr_fit_occupancy *g, const int c[3])
{
    return ((size_t)c[2] * (size_t)g->dim[1] + (size_t)c[1]) * (size_t)g->dim[0] + (size_t)c[0];
}

/* Marks the cells of the m points and then their 26 neighbours: with cells
 * larger than the radius, a point within it of q lies in q's cell or a
 * neighbour. The grid has a cell of margin on every side, so every such q
 * is on it. Without memory the view is left unpruned (bits NULL). */
static void occupancy_build(kr_fit_occupancy *g, const float *p, size_t m, double radius)
{
    double lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (size_t i = 0; i < m; i++)
        for (int a = 0; a < 3; a++) {
            lo[a] = fmin(lo[a], p[3 * i + a]);
            hi[a] = fmax(hi[a], p[3 * i + a]);
        }
    double side = fmax(hi[0] - lo[0], fmax(hi[1] - lo[1], hi[2] - lo[2]));
    /* 1 % over the radius: no float rounding of a point or a sample can put
     * a partner two cells away. */
    g->cell = fmax(1.01 * radius, side / OCCUPANCY_CELLS);
    size_t cells = 1;
    for (int a = 0; a < 3; a++) {
        g->lo[a] = lo[a] - g->cell;
        g->dim[a] = (int)((hi[a] - lo[a]) / g->cell) + 3;
        cells *= (size_t)g->dim[a];
    }
    size_t words = (cells + 63) / 64;
    uint64_t *seen = calloc(words, sizeof *seen), *bits = calloc(words, sizeof *bits);
    g->bits = NULL;
    if (!seen || !bits) {
        free(seen);
        free(bits);
        return;
    }
    for (size_t i = 0; i < m; i++) {
        int c[3];
        for (int a = 0; a < 3; a++)
            c[a] = (int)floor((p[3 * i + a] - g->lo[a]) / g->cell);
        size_t k = occupancy_index(g, c);
        seen[k / 64] |= (uint64_t)1 << (k % 64);
    }
    int c[3];
    for (c[2] = 1; c[2] < g->dim[2] - 1; c[2]++)
        for (c[1] = 1; c[1] < g->dim[1] - 1; c[1]++)
            for (c[0] = 1; c[0] < g->dim[0] - 1; c[0]++) {
                size_t k = occupancy_index(g, c);
                if (!((seen[k / 64] >> (k % 64)) & 1)) continue;
                int d[3];
                for (d[2] = c[2] - 1; d[2] <= c[2] + 1; d[2]++)
                    for (d[1] = c[1] - 1; d[1] <= c[1] + 1; d[1]++)
                        for (d[0] = c[0] - 1; d[0] <= c[0] + 1; d[0]++) {
                            size_t j = occupancy_index(g, d);
                            bits[j / 64] |= (uint64_t)1 << (j % 64);
                        }
            }
    free(seen);
    g->bits = bits;
}

struct kr_refine_fitter {
    int n;
    kr_kdtree **trees;
    float **points; /* the tree's points (strided copies) */
    size_t *count;
    const kr_refine_view *views;
    double spacing;
    /* What the per-sample step reads: each view's tree, sphere and
     * occupancy (exact for radii up to occupied_radius). */
    kr_fit_view *fit;
    double occupied_radius;
    /* The samples: view k's at sample_start[k] … sample_start[k + 1]. */
    float *samples;
    size_t *sample_start;
    kr_refine_fit_cuda *gpu; /* NULL: the OpenMP loop */
};

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

void kr_refine_fitter_destroy(kr_refine_fitter **pf)
{
    if (!pf || !*pf) return;
    kr_refine_fitter *f = *pf;
    for (int k = 0; k < f->n; k++) {
        if (f->trees) kr_kdtree_destroy(&f->trees[k]);
        if (f->points) free(f->points[k]);
        if (f->fit) free((void *)f->fit[k].occupied.bits);
    }
    kr_refine_fit_cuda_destroy(&f->gpu);
    free(f->fit);
    free(f->samples);
    free(f->sample_start);
    free(f->trees);
    free(f->points);
    free(f->count);
    free(f);
    *pf = NULL;
}

/* View k's strided points, bounding sphere, tree and the nearest-neighbour
 * spacings of about SPACING_SAMPLES evenly strided points (*n_spacing of
 * them, fewer than SPACING_SLOTS: m / (m / 200) < 400). */
static kr_status fit_view(kr_refine_fitter *f, const kr_refine_view *view, int k, float *spacing,
                          int *n_spacing)
{
    size_t total = view->n, step = total > FIT_TREE_POINTS ? total / FIT_TREE_POINTS : 1;
    size_t m = total ? (total + step - 1) / step : 0;
    float *p = malloc(3 * (m ? m : 1) * sizeof *p);
    if (!p) return kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's points", k);
    double c[3] = {0, 0, 0};
    for (size_t i = 0; i < m; i++)
        for (int a = 0; a < 3; a++) {
            p[3 * i + a] = view->xyz[3 * i * step + a];
            c[a] += p[3 * i + a] / (double)m;
        }
    double r2 = 0;
    for (size_t i = 0; i < m; i++) {
        double d[3] = {p[3 * i] - c[0], p[3 * i + 1] - c[1], p[3 * i + 2] - c[2]};
        r2 = fmax(r2, d[0] * d[0] + d[1] * d[1] + d[2] * d[2]);
    }
    f->points[k] = p;
    f->count[k] = m;
    kr_fit_view *fv = &f->fit[k];
    memcpy(fv->sphere, c, sizeof c);
    fv->sphere[3] = sqrt(r2);
    if (m < 2) return KR_OK; /* a view too small to pair with: no tree */
    kr_status s = kr_kdtree_build(&f->trees[k], p, NULL, m);
    if (s != KR_OK) return s;
    fv->nodes = f->trees[k]->nodes;
    fv->cells = f->trees[k]->cells;
    fv->n_internal = f->trees[k]->n_internal;
    size_t sstep = m > SPACING_SAMPLES ? m / SPACING_SAMPLES : 1;
    for (size_t i = 0; i < m && *n_spacing < SPACING_SLOTS; i += sstep) {
        uint32_t idx[2];
        float d2[2];
        if (kr_kdtree_knn(f->trees[k], p + 3 * i, 2, idx, d2) == 2 && d2[1] > 0)
            spacing[(*n_spacing)++] = sqrtf(d2[1]);
    }
    return KR_OK;
}

/* Every view's samples, evenly strided over its tree's points, in one array. */
static kr_status take_samples(kr_refine_fitter *f)
{
    for (int k = 0; k < f->n; k++) {
        size_t m = f->count[k], step = m > FIT_SAMPLES ? m / FIT_SAMPLES : 1;
        f->sample_start[k + 1] = f->sample_start[k] + (m + step - 1) / step;
    }
    size_t total = f->sample_start[f->n];
    f->samples = malloc(sizeof *f->samples * 3 * (total ? total : 1));
    if (!f->samples) return kr_error(KR_ERR_NOMEM, "refine: no memory for %zu samples", total);
    for (int k = 0; k < f->n; k++) {
        size_t m = f->count[k], step = m > FIT_SAMPLES ? m / FIT_SAMPLES : 1,
               at = f->sample_start[k];
        for (size_t i = 0; i < m; i += step, at++)
            memcpy(f->samples + 3 * at, f->points[k] + 3 * i, sizeof *f->samples * 3);
    }
    return KR_OK;
}

kr_status kr_refine_fitter_create(const kr_refine_view *views, int n, kr_refine_fitter **out)
{
    kr_refine_fitter *f = calloc(1, sizeof *f);
    if (!f) return kr_error(KR_ERR_NOMEM, "refine: no memory to measure %d views", n);
    f->n = n;
    f->views = views;
    f->trees = calloc((size_t)n, sizeof *f->trees);
    f->points = calloc((size_t)n, sizeof *f->points);
    f->count = calloc((size_t)n, sizeof *f->count);
    f->fit = calloc((size_t)n, sizeof *f->fit);
    f->sample_start = calloc((size_t)n + 1, sizeof *f->sample_start);
    kr_status s = f->trees && f->points && f->count && f->fit && f->sample_start
                      ? KR_OK
                      : kr_error(KR_ERR_NOMEM, "refine: no memory to measure %d views", n);
    /* Each view's spacings go to its own slots, and are then taken in view
     * order up to SPACING_SAMPLES a view on average: the median is the same
     * on any number of threads. */
    float *spacings = s == KR_OK ? malloc(sizeof *spacings * (size_t)n * SPACING_SLOTS) : NULL;
    int *n_spacing = s == KR_OK ? calloc((size_t)n, sizeof *n_spacing) : NULL;
    if (s == KR_OK && (!spacings || !n_spacing)) s = kr_error(KR_ERR_NOMEM, "refine: no memory");
    /* One view per thread: building 200 views' trees one after the other
     * was a tenth of a GPU refinement. A failure's message is thread-local:
     * carried over. */
    char why[512] = "";
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < (s == KR_OK ? n : 0); k++) {
        kr_status sk =
            fit_view(f, &views[k], k, spacings + (size_t)k * SPACING_SLOTS, &n_spacing[k]);
        if (sk != KR_OK)
#pragma omp critical(kr_refine_fit_error)
            if (s == KR_OK) {
                s = sk;
                snprintf(why, sizeof why, "%s", kr_last_error());
            }
    }
    if (s != KR_OK && why[0]) s = kr_error(s, "%s", why);
    size_t n_spacings = 0;
    for (int k = 0; k < n && s == KR_OK; k++)
        for (int i = 0; i < n_spacing[k] && n_spacings < (size_t)n * SPACING_SAMPLES; i++)
            spacings[n_spacings++] = spacings[(size_t)k * SPACING_SLOTS + i];
    if (s == KR_OK && n_spacings == 0)
        s = kr_error(KR_ERR_EMPTY, "refine: the views' points are all at one place");
    if (s == KR_OK) {
        qsort(spacings, n_spacings, sizeof *spacings, cmp_float);
        f->spacing = spacings[n_spacings / 2];
        /* For the default radius, the one the refinement measures with. */
        f->occupied_radius = FIT_SPACINGS * f->spacing;
#pragma omp parallel for schedule(dynamic)
        for (int k = 0; k < n; k++)
            if (f->trees[k])
                occupancy_build(&f->fit[k].occupied, f->points[k], f->count[k], f->occupied_radius);
    }
    if (s == KR_OK) s = take_samples(f);
    free(spacings);
    free(n_spacing);
    if (s != KR_OK) {
        kr_refine_fitter_destroy(&f);
        return s;
    }
    *out = f;
    return KR_OK;
}

double kr_refine_fitter_spacing(const kr_refine_fitter *f)
{
    return f->spacing;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

double kr_refine_fitter_extent(const kr_refine_fitter *f)
{
    double *r = malloc(sizeof *r * (size_t)f->n);
    if (!r) return f->fit[0].sphere[3];
    for (int k = 0; k < f->n; k++)
        r[k] = f->fit[k].sphere[3];
    qsort(r, (size_t)f->n, sizeof *r, cmp_double);
    double e = r[f->n / 2];
    free(r);
    return e;
}

kr_status kr_refine_fitter_use_devices(kr_refine_fitter *f, kr_device *dev, const int *devices,
                                       int n_devices)
{
    kr_refine_fit_cuda_destroy(&f->gpu);
    if (!dev || kr_device_backend(dev) != KR_BACKEND_CUDA) return KR_OK;
    return kr_refine_fit_cuda_create(&f->gpu, kr_device_gpu(dev), devices, n_devices, f->fit, f->n,
                                     f->samples, f->sample_start);
}

kr_status kr_refine_fitter_eval(const kr_refine_fitter *f, const kr_pose *poses, double radius,
                                double *view_overlap, kr_refine_fit *out)
{
    const int n = f->n;
    if (!(radius > 0)) radius = FIT_SPACINGS * f->spacing;
    const double cap2 = radius * radius;
    const int prune = radius <= f->occupied_radius;
    size_t total = f->sample_start[n];
    kr_pose *inv = malloc(sizeof *inv * (size_t)n);
    double *best = malloc(sizeof *best * (total ? total : 1));
    if (!inv || !best) {
        free(inv);
        free(best);
        return kr_error(KR_ERR_NOMEM, "refine: no memory to measure %d views", n);
    }
    for (int k = 0; k < n; k++)
        inv[k] = kr_pose_inv(&poses[k]);
    kr_status s = KR_OK;
    if (f->gpu) {
        s = kr_refine_fit_cuda_eval(f->gpu, poses, inv, cap2, prune, best);
    } else {
        /* One view's samples per iteration. */
#pragma omp parallel for schedule(dynamic)
        for (int i = 0; i < n; i++)
            for (size_t a = f->sample_start[i]; a < f->sample_start[i + 1]; a++)
                best[a] =
                    kr_fit_sample(f->fit, n, i, &poses[i], inv, f->samples + 3 * a, cap2, prune);
    }
    /* Added per view in sample order, whichever engine measured. */
    double total_sum = 0, total_sq = 0;
    size_t n_used = 0, n_paired = 0;
    for (int i = 0; i < n && s == KR_OK; i++) {
        double sum = 0, paired_sq = 0;
        size_t used = 0, paired = 0;
        for (size_t a = f->sample_start[i]; a < f->sample_start[i + 1]; a++) {
            used++;
            sum += best[a];
            if (best[a] < cap2) {
                paired++;
                paired_sq += best[a];
            }
        }
        total_sum += sum;
        total_sq += paired_sq;
        n_used += used;
        n_paired += paired;
        if (view_overlap) view_overlap[i] = used ? (double)paired / (double)used : 0;
    }
    free(inv);
    free(best);
    if (s != KR_OK) return s;
    out->spacing = f->spacing;
    out->radius = radius;
    out->score = n_used ? sqrt(total_sum / (double)n_used) : radius;
    out->overlap = n_used ? (double)n_paired / (double)n_used : 0;
    out->residual = n_paired ? sqrt(total_sq / (double)n_paired) : 0;
    return KR_OK;
}

kr_status kr_refine_fit_of(const kr_refine_view *views, int n_views, const kr_pose *poses,
                           double radius, double *view_overlap, kr_refine_fit *out)
{
    if (!views || !poses || !out || n_views < 2)
        return kr_error(KR_ERR_INVALID_ARG, "kr_refine_fit_of: needs 2 or more views and poses");
    kr_refine_fitter *f = NULL;
    kr_status s = kr_refine_fitter_create(views, n_views, &f);
    if (s == KR_OK) s = kr_refine_fitter_eval(f, poses, radius, view_overlap, out);
    kr_refine_fitter_destroy(&f);
    return s;
}
