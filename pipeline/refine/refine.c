/* Multi-view distance-field refinement: levels, pairs and Levenberg–Marquardt
 * (include/kinreg/refine.h). The sums come from an engine (refine_cpu.c, or the
 * CUDA twin through refine_engine.c, over one or several devices), and are
 * added over the processes that share the work (refine_partition.c); the
 * block-sparse solve is refine_solve.c. */
#include "kinreg/refine.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/refine/refine_engine.h"
#include "pipeline/refine/refine_fit.h"
#include "pipeline/refine/refine_init.h"
#include "pipeline/refine/refine_internal.h"
#include "pipeline/refine/refine_partition.h"
#include "pipeline/refine/refine_solve.h"

void kr_refine_config_default(kr_refine_config *cfg)
{
    if (!cfg) return;
    /* Band 2 on the finest grid, a fifth of the grid points, band 2 between
     * (docs/BENCHMARKS.md, "Issue 9, session 4"): on the bunny the band-1
     * finest field left the scans 0.15-0.21 deg from bun.conf wherever the
     * coarse grids put them (a sample needs all 8 corners, and a band-1
     * field has them only in a thin shell, so its objective is flat within
     * about 0.1 deg); band 2 brings every seed within 0.16 deg, and the
     * subset pays for its four times as many grid points. */
    *cfg = (kr_refine_config){.cell = 0.0015,
                              .levels = 3,
                              .band = 2,
                              .coarse_band = 3,
                              .mid_band = 2,
                              .max_points = 0,
                              .max_iterations = 30,
                              .lambda = 0.01,
                              .huber = 0,
                              .cap = 0.3,
                              .subset = 0.2,
                              .seed = 1,
                              .gauge = 0,
                              .star = false,
                              .tolerance = 1e-3,
                              .n_devices = 0,
                              .initialize = KR_REFINE_INIT_AUTO,
                              .keep_if_worse = true};
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + 1e-9 * ts.tv_nsec;
}

static kr_status check_args(const kr_refine_config *cfg, const kr_refine_view *views, int n_views,
                            const void *poses)
{
    if (!cfg || !views || !poses || n_views < 2)
        return kr_error(KR_ERR_INVALID_ARG,
                        "refine: needs a config, at least 2 views and their poses");
    const kr_refine_partition *part = cfg->partition;
    if (part &&
        (part->ranks < 1 || part->rank < 0 || part->rank >= part->ranks || !part->allreduce_sum))
        return kr_error(KR_ERR_INVALID_ARG,
                        "refine: partition rank %d of %d (or its reduction) is not valid",
                        part->rank, part->ranks);
    if (cfg->n_devices < 0 || cfg->n_devices > KR_REFINE_MAX_DEVICES)
        return kr_error(KR_ERR_INVALID_ARG, "refine: %d devices (0 to %d)", cfg->n_devices,
                        KR_REFINE_MAX_DEVICES);
    if (!(cfg->cell > 0) || cfg->levels < 1 || cfg->levels > 12 || cfg->band < 1 ||
        cfg->coarse_band < 1 || cfg->mid_band < 1 || cfg->max_iterations < 0 ||
        !(cfg->lambda > 0) || cfg->huber < 0 || !(cfg->subset > 0) || !(cfg->cap > 0) ||
        cfg->subset > 1 || cfg->gauge < 0 || cfg->gauge >= n_views || cfg->max_points < 0)
        return kr_error(
            KR_ERR_INVALID_ARG,
            "refine: bad settings (cell > 0, 1..12 levels, bands >= 1, 0 < subset <= 1, "
            "gauge %d must name one of the %d views)",
            cfg->gauge, n_views);
    for (int k = 0; k < n_views; k++)
        if (!views[k].xyz || views[k].n < 1)
            return kr_error(KR_ERR_EMPTY, "refine: view %d has no points", k);
    return KR_OK;
}

static kr_refine_posef to_float(const kr_pose *p)
{
    kr_refine_posef f;
    for (int i = 0; i < 9; i++)
        f.R[i] = (float)p->R[i];
    for (int i = 0; i < 3; i++)
        f.t[i] = (float)p->t[i];
    return f;
}

/* One level: fields, pairs and the sums' scratch. */
typedef struct {
    kr_refine_problem pb;
    kr_dfield *fields;
    int *pairs, npairs;
    kr_refine_acc *acc, *trial;
    kr_refine_posef *fposes;
    size_t *all_grid; /* each view's grid points before this process took its share */
} level;

/* What one kr_refine call carries from level to level. */
typedef struct {
    const kr_refine_config *cfg;
    kr_refine_engine *eng;
    double bytes; /* all-reduce payload so far */
    int evaluations;
    double sums_seconds;  /* in the engine's evaluations and their all-reduces */
    double solve_seconds; /* assembling and solving the normal equations */
    const char *solver;   /* the last solve's (refine_solve.h); NULL before any */
} run;

static void level_free(level *L)
{
    if (L->fields)
        for (int k = 0; k < L->pb.views; k++)
            kr_dfield_free(&L->fields[k]);
    free(L->fields);
    free(L->pairs);
    free(L->acc);
    free(L->trial);
    free(L->fposes);
    free(L->all_grid);
    memset(L, 0, sizeof *L);
}

/* The points of view k that a level's field takes: every stride-th, so
 * that level `coarseness` (cells 2^coarseness times the finest) keeps points
 * per cell area alike (the corners a point updates grow with the band, not
 * the cell): a quarter of the points per step. */
static size_t level_stride(const kr_refine_config *cfg, const kr_refine_view *view, int coarseness)
{
    size_t m = view->n;
    if (cfg->max_points > 0 && m > (size_t)cfg->max_points) m = (size_t)cfg->max_points;
    m >>= 2 * coarseness;
    if (m < 2000) m = 2000;
    return view->n > m ? (view->n + m - 1) / m : 1;
}

/* The level's fields on the engine's devices (refine_engine.h): slot 0 for
 * the finest grid, 1 for a coarser one. */
static kr_status level_fields_on_devices(level *L, kr_refine_engine *eng,
                                         const kr_refine_config *cfg, const kr_refine_view *views,
                                         int V, double h, int band, int coarseness)
{
    size_t *stride = malloc(sizeof *stride * (size_t)V);
    if (!stride) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", V);
    for (int k = 0; k < V; k++)
        stride[k] = level_stride(cfg, &views[k], coarseness);
    int parts = cfg->partition && cfg->partition->ranks > 1 ? cfg->partition->ranks : 1;
    int part = parts > 1 ? cfg->partition->rank : 0;
    int slot = coarseness > 0;
    kr_status s = kr_refine_engine_build_level(eng, slot, stride, (float)h, band, cfg->subset,
                                               cfg->seed, part, parts, L->fields);
    free(stride);
    if (s == KR_OK) L->pb.device_level = 1 + slot;
    return s;
}

/* The level's fields on the host (the CPU engine), one thread per view. */
static kr_status level_fields_on_host(level *L, kr_refine_engine *eng, const kr_refine_config *cfg,
                                      const kr_refine_view *views, float **normals, int V, double h,
                                      int band, int coarseness)
{
    /* The views' fields are independent, and building them was most of a
     * refinement's time on the CPU, so one thread per view. A failure's
     * message is thread-local: carried over. */
    kr_status s = KR_OK;
    char why[512] = "";
#pragma omp parallel for schedule(dynamic)
    for (int k = 0; k < V; k++) {
        size_t stride = level_stride(cfg, &views[k], coarseness);
        kr_status sk = kr_refine_engine_field(eng, &L->fields[k], views[k].xyz,
                                              normals ? normals[k] : NULL, views[k].n, stride,
                                              (float)h, band, cfg->subset, cfg->seed + (unsigned)k);
        if (sk != KR_OK)
#pragma omp critical(kr_refine_field_error)
            if (s == KR_OK) {
                s = sk;
                snprintf(why, sizeof why, "%s", kr_last_error());
            }
    }
    if (s != KR_OK) return kr_error(s, "%s", why);
    /* Influence-based partitioning: every process holds every field and
     * evaluates its own share of each view's grid points. */
    for (int k = 0; k < V; k++)
        L->all_grid[k] = L->fields[k].n_grid;
    if (cfg->partition && cfg->partition->ranks > 1)
        kr_refine_keep_share(L->fields, V, cfg->partition->rank, cfg->partition->ranks);
    return KR_OK;
}

static kr_status level_build(level *L, kr_refine_engine *eng, const kr_refine_config *cfg,
                             const kr_refine_view *views, float **normals, int V, double h,
                             int band, double cap, int coarseness)
{
    memset(L, 0, sizeof *L);
    L->fields = calloc((size_t)V, sizeof *L->fields);
    int maxpairs = V * (V - 1);
    L->pairs = malloc(sizeof *L->pairs * 2 * (size_t)maxpairs);
    L->acc = malloc(sizeof *L->acc * (size_t)maxpairs);
    L->trial = malloc(sizeof *L->trial * (size_t)maxpairs);
    L->fposes = malloc(sizeof *L->fposes * (size_t)V);
    L->all_grid = malloc(sizeof *L->all_grid * (size_t)V);
    L->pb.views = V;
    if (!L->fields || !L->pairs || !L->acc || !L->trial || !L->fposes || !L->all_grid) {
        level_free(L);
        return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", V);
    }
    kr_status s = KR_OK;
    if (kr_refine_engine_device_fields(eng)) {
        /* Built where they are sampled; each device keeps this process's
         * share of the grid points of the views it built. */
        s = level_fields_on_devices(L, eng, cfg, views, V, h, band, coarseness);
        if (s != KR_OK) {
            level_free(L);
            return s;
        }
        for (int k = 0; k < V; k++)
            L->all_grid[k] = L->fields[k].n_grid;
    } else {
        s = level_fields_on_host(L, eng, cfg, views, normals, V, h, band, coarseness);
        if (s != KR_OK) {
            level_free(L);
            return s;
        }
    }
    L->pb.fields = L->fields;
    L->pb.star = cfg->star;
    L->pb.gauge = cfg->gauge;
    L->pb.huber = (float)(cfg->huber * h);
    /* Residuals beyond cap cost ρ(cap) and weigh 0. Coarse grids keep the
     * band's whole reach (their basin); the finest grid drops what is far off,
     * mostly grid points near the rim of a partial scan, whose nearest point
     * in the other view is its rim rather than the surface they share. */
    L->pb.cap = (float)(cap * h);
    int r = cfg->gauge;
    for (int i = 0; i < V; i++)
        for (int j = 0; j < V; j++) {
            if (i == j || (cfg->star && i != r)) continue;
            L->pairs[2 * L->npairs] = i;
            L->pairs[2 * L->npairs + 1] = j;
            L->npairs++;
        }
    return KR_OK;
}

/* Does view i's field box, moved into view j's frame, meet j's field box? */
static int boxes_meet(const kr_dfield *fi, size_t fi_grid, const kr_dfield *fj,
                      const kr_refine_posef *Ti, const kr_refine_posef *Tj)
{
    /* fi_grid counts all of i's grid points, not this process's share: every
     * process must choose the same pairs. */
    if (!fi_grid || !(fj->hi[0] >= fj->lo[0])) return 0;
    float lo[3] = {INFINITY, INFINITY, INFINITY}, hi[3] = {-INFINITY, -INFINITY, -INFINITY};
    for (int c = 0; c < 8; c++) {
        float p[3] = {(c & 1) ? fi->hi[0] : fi->lo[0], (c & 2) ? fi->hi[1] : fi->lo[1],
                      (c & 4) ? fi->hi[2] : fi->lo[2]},
              w[3], q[3];
        kr_refine_apply(Ti, p, w);
        kr_refine_apply_inv(Tj, w, q);
        for (int a = 0; a < 3; a++) {
            lo[a] = fminf(lo[a], q[a]);
            hi[a] = fmaxf(hi[a], q[a]);
        }
    }
    for (int a = 0; a < 3; a++)
        if (hi[a] < fj->lo[a] || lo[a] > fj->hi[a]) return 0;
    return 1;
}

typedef struct {
    double cost, sq, count;
} totals;

/* The objective at the given poses; acc[p] receives each pair's sums (pairs
 * whose boxes do not meet are skipped: every one of their points misses). */
static kr_status evaluate(level *L, run *R, const kr_pose *poses, kr_refine_acc *acc, totals *t)
{
    int V = L->pb.views;
    for (int k = 0; k < V; k++)
        L->fposes[k] = to_float(&poses[k]);
    int *active = malloc(sizeof *active * 2 * (size_t)(L->npairs ? L->npairs : 1));
    int *where = malloc(sizeof *where * (size_t)(L->npairs ? L->npairs : 1));
    kr_refine_acc *sums = malloc(sizeof *sums * (size_t)(L->npairs ? L->npairs : 1));
    if (!active || !where || !sums) {
        free(active);
        free(where);
        free(sums);
        return kr_error(KR_ERR_NOMEM, "refine: no memory for %d pairs", L->npairs);
    }
    int n = 0;
    for (int p = 0; p < L->npairs; p++) {
        int i = L->pairs[2 * p], j = L->pairs[2 * p + 1];
        kr_refine_acc_zero(&acc[p]);
        where[p] = -1;
        if (!L->pb.star &&
            !boxes_meet(&L->fields[i], L->all_grid[i], &L->fields[j], &L->fposes[i], &L->fposes[j]))
            continue;
        active[2 * n] = i;
        active[2 * n + 1] = j;
        where[p] = n++;
    }
    double t0 = now_seconds();
    kr_status s = kr_refine_engine_eval(R->eng, &L->pb, L->fposes, active, n, sums);
    if (R->cfg->partition && R->cfg->partition->ranks > 1)
        s = kr_refine_reduce_sums(R->cfg->partition, sums, n, s, &R->bytes);
    R->sums_seconds += now_seconds() - t0;
    R->evaluations++;
    if (s == KR_OK) {
        double landed = 0, cost = 0, sq = 0;
        for (int p = 0; p < L->npairs; p++) {
            if (where[p] < 0) continue;
            acc[p] = sums[where[p]];
            landed += acc[p].count;
            cost += acc[p].cost;
            sq += acc[p].sq;
        }
        t->cost = cost;
        t->sq = sq;
        t->count = landed;
        if (!isfinite(t->cost)) s = kr_error(KR_ERR_NUMERIC, "refine: the objective is not finite");
    }
    free(active);
    free(where);
    free(sums);
    return s;
}

typedef struct {
    int iterations, accepted;
} lm_stats;

/* Levenberg–Marquardt on one level, as the thesis adapts λ: solve
 * (H + λ·diag H) δ = −g, keep the step and divide λ by 10 when the objective
 * falls, else multiply λ by 10 and try again from the same poses. */
static kr_status run_level(level *L, run *R, kr_pose *poses, double h, double radius,
                           const totals *known, totals *out, lm_stats *st)
{
    const kr_refine_config *cfg = R->cfg;
    const kr_refine_partition *part =
        cfg->partition && cfg->partition->ranks > 1 ? cfg->partition : NULL;
    int V = L->pb.views, n = 6 * (V - 1);
    double *x = malloc(sizeof *x * (size_t)n);
    kr_pose *trial = malloc(sizeof *trial * (size_t)V);
    kr_refine_normal *ne = NULL;
    kr_status s = KR_OK;
    if (!x || !trial) s = kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", V);
    if (s == KR_OK) s = kr_refine_normal_create(&ne, V, cfg->gauge);
    totals cur = {0}, next = {0};
    /* known: L->acc already holds the sums at these poses (an evaluation of
     * the finest grid costs as much as an LM iteration). */
    if (s == KR_OK && known)
        cur = *known;
    else if (s == KR_OK)
        s = evaluate(L, R, poses, L->acc, &cur);
    double lambda = cfg->lambda;
    /* H and g change only with the sums: a rejected step (or a matrix that
     * was not positive definite) is retried with more damping on the same
     * assembly. */
    bool sums_changed = true;
    double dmax = 0;
    for (int it = 0; s == KR_OK && it < cfg->max_iterations; it++) {
        if ((s = kr_refine_check_interrupted(cfg)) != KR_OK) break;
        st->iterations++;
        kr_status solved = KR_OK;
        double t_solve = now_seconds();
        /* The sums are the same on every process; only rank 0 solves, and its
         * step reaches the others exactly. */
        if (!part || part->rank == 0) {
            if (it == 0 && kr_refine_normal_device_pays(V))
                kr_refine_normal_use_device(ne, kr_refine_engine_solver(R->eng));
            if (sums_changed)
                solved = kr_refine_normal_assemble(ne, L->pairs, L->acc, L->npairs, &dmax);
            sums_changed = false;
            if (solved == KR_OK && dmax > 0) solved = kr_refine_normal_solve(ne, lambda, x);
            if (solved == KR_OK && !(dmax > 0)) memset(x, 0, sizeof *x * (size_t)n);
        }
        if (ne && strcmp(kr_refine_normal_solver(ne), "none") != 0)
            R->solver = kr_refine_normal_solver(ne);
        if (part) solved = kr_refine_broadcast_step(part, x, n, solved, &R->bytes);
        R->solve_seconds += now_seconds() - t_solve;
        if (solved == KR_ERR_NUMERIC) {
            lambda *= 10;
            if (lambda > 1e12) break;
            continue;
        }
        if (solved != KR_OK) {
            s = solved;
            break;
        }
        double move = 0;
        for (int k = 0, m = 0; k < V; k++) {
            if (k == cfg->gauge) {
                trial[k] = poses[k];
                continue;
            }
            kr_pose step = kr_pose_exp(x + 6 * m);
            trial[k] = kr_pose_mul(&step, &poses[k]);
            kr_pose_orthonormalize(&trial[k]);
            double rot = sqrt(x[6 * m] * x[6 * m] + x[6 * m + 1] * x[6 * m + 1] +
                              x[6 * m + 2] * x[6 * m + 2]);
            double tr = sqrt(x[6 * m + 3] * x[6 * m + 3] + x[6 * m + 4] * x[6 * m + 4] +
                             x[6 * m + 5] * x[6 * m + 5]);
            move = fmax(move, tr + rot * radius);
            m++;
        }
        if (move == 0) break; /* nothing overlaps: nothing to move */
        s = evaluate(L, R, trial, L->trial, &next);
        if (s != KR_OK) break;
        if (cfg->progress)
            cfg->progress(cfg->progress_user, h, st->iterations, fmin(cur.cost, next.cost));
        if (next.cost < cur.cost) {
            double gain = (cur.cost - next.cost) / cur.cost;
            memcpy(poses, trial, sizeof *poses * (size_t)V);
            kr_refine_acc *swap = L->acc;
            L->acc = L->trial;
            L->trial = swap;
            cur = next;
            st->accepted++;
            sums_changed = true;
            lambda = fmax(lambda / 10, 1e-7);
            /* Converged: the step barely moved a view or barely paid. */
            if (move < cfg->tolerance * h || gain < 1e-4) break;
        } else {
            lambda *= 10;
            /* A step that moves nothing yet fails: this is the minimum. */
            if (lambda > 1e12 || move < cfg->tolerance * h) break;
        }
    }
    if (s == KR_OK) *out = cur;
    kr_refine_normal_destroy(&ne);
    free(x);
    free(trial);
    return s;
}

/* Signed fields: the views' normals, and the views with their points moved
 * onto their neighbourhoods' planes (pipeline/refine/refine_normals.c). */
static kr_status signed_views(const kr_refine_view *views, int V, float ***normals, float ***planes,
                              kr_refine_view **on_planes)
{
    kr_status s = kr_refine_normals(views, V, normals, planes);
    if (s != KR_OK) return s;
    *on_planes = malloc(sizeof **on_planes * (size_t)V);
    if (!*on_planes) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d views", V);
    for (int k = 0; k < V; k++)
        (*on_planes)[k] = (kr_refine_view){(*planes)[k], views[k].n};
    return KR_OK;
}

/* Largest distance of a point from its view's origin: turns rotation steps
 * into the motion they cause (for the stopping rule). */
static double views_radius(const kr_refine_view *views, int V, const kr_pose *poses)
{
    double r = 0;
    for (int k = 0; k < V; k++) {
        size_t stride = views[k].n > 1000 ? views[k].n / 1000 : 1;
        for (size_t i = 0; i < views[k].n; i += stride) {
            double p[3] = {views[k].xyz[3 * i], views[k].xyz[3 * i + 1], views[k].xyz[3 * i + 2]},
                   w[3];
            kr_pose_apply(&poses[k], p, w);
            r = fmax(r, sqrt(w[0] * w[0] + w[1] * w[1] + w[2] * w[2]));
        }
    }
    return r;
}

/* Tells the caller a long stage begins (kr_refine_config.stage). */
static void stage(const kr_refine_config *cfg, const char *what, int views, double cell)
{
    if (cfg->stage) cfg->stage(cfg->progress_user, what, views, cell);
}

/* The joint refinement from the poses given (in/out). */
static kr_status refine_joint(const kr_refine_config *cfg, kr_device *dev,
                              const kr_refine_view *views, int n_views, kr_pose *poses,
                              kr_refine_result *result)
{
    kr_status s = KR_OK;
    double t0 = now_seconds();
    kr_refine_engine *eng = NULL;
    s = kr_refine_engine_create(&eng, dev, cfg->devices, cfg->n_devices);
    if (s != KR_OK) return s;
    kr_refine_engine_stage_copies(eng, cfg->staged_copies);
    run R = {.cfg = cfg, .eng = eng};
    kr_pose *work = malloc(sizeof *work * (size_t)n_views);
    if (!work) {
        kr_refine_engine_destroy(&eng);
        return kr_error(KR_ERR_NOMEM, "refine: no memory for %d poses", n_views);
    }
    memcpy(work, poses, sizeof *work * (size_t)n_views);
    kr_refine_result res = {.backend = kr_refine_engine_backend(eng),
                            .devices = kr_refine_engine_devices(eng),
                            .ranks = cfg->partition ? cfg->partition->ranks : 1};
    double radius = views_radius(views, n_views, poses);
    level fine = {0};
    totals before = {0}, after = {0};
    lm_stats st = {0};
    float **normals = NULL, **planes = NULL;
    kr_refine_view *on_planes = NULL;
    double t_fields = now_seconds(), fields_seconds = 0;
    stage(cfg, "fields", n_views, cfg->cell);
    if (kr_refine_engine_device_fields(eng))
        /* Points, normals and planes where the fields are built. */
        s = kr_refine_engine_prepare(eng, views, n_views, cfg->signed_field);
    else if (cfg->signed_field)
        s = signed_views(views, n_views, &normals, &planes, &on_planes);
    if (on_planes) views = on_planes;
    /* The finest grid first, for the "before" figures. */
    if (s == KR_OK)
        s = level_build(&fine, eng, cfg, views, normals, n_views, cfg->cell, cfg->band, cfg->cap,
                        0);
    if (s == KR_OK) s = kr_refine_engine_load(eng, &fine.pb);
    fields_seconds += now_seconds() - t_fields;
    if (s == KR_OK) s = evaluate(&fine, &R, work, fine.acc, &before);
    for (int k = cfg->levels - 1; k >= 1 && s == KR_OK; k--) {
        level L;
        double h = cfg->cell * (double)(1 << k);
        int band = k == cfg->levels - 1 ? cfg->coarse_band : cfg->mid_band;
        if ((s = kr_refine_check_interrupted(cfg)) != KR_OK) break;
        t_fields = now_seconds();
        stage(cfg, "coarse fields", n_views, h);
        s = level_build(&L, eng, cfg, views, normals, n_views, h, band, band, k);
        if (s != KR_OK) break;
        totals t;
        s = kr_refine_engine_load(eng, &L.pb);
        fields_seconds += now_seconds() - t_fields;
        if (s == KR_OK) s = run_level(&L, &R, work, h, radius, NULL, &t, &st);
        level_free(&L);
    }
    /* The devices still hold the finest grid unless a coarser one ran. */
    t_fields = now_seconds();
    if (s == KR_OK && cfg->levels > 1) s = kr_refine_engine_load(eng, &fine.pb);
    fields_seconds += now_seconds() - t_fields;
    /* Without coarser levels the poses are still those of the "before"
     * evaluation, whose sums fine.acc holds. */
    if (s == KR_OK)
        s = run_level(&fine, &R, work, cfg->cell, radius, cfg->levels > 1 ? NULL : &before, &after,
                      &st);
    level_free(&fine);
    kr_refine_normals_free(normals, n_views);
    kr_refine_normals_free(planes, n_views);
    free(on_planes);
    kr_refine_engine_destroy(&eng);
    if (s == KR_OK) {
        res.cost_before = before.cost;
        res.cost_after = after.cost;
        res.rms_before = before.count > 0 ? sqrt(before.sq / before.count) : 0;
        res.rms_after = after.count > 0 ? sqrt(after.sq / after.count) : 0;
        res.residuals_before = (size_t)before.count;
        res.residuals_after = (size_t)after.count;
        res.iterations = st.iterations;
        res.accepted = st.accepted;
        res.seconds = now_seconds() - t0;
        res.reduced_bytes = R.bytes;
        res.evaluations = R.evaluations;
        res.sums_seconds = R.sums_seconds;
        res.solve_seconds = R.solve_seconds;
        res.solver = R.solver ? R.solver : kr_refine_solver_name();
        res.fields_seconds = fields_seconds;
        memcpy(poses, work, sizeof *poses * (size_t)n_views);
        if (result) *result = res;
    }
    free(work);
    return s;
}

/* Under a partition every process must take the same decisions and poses:
 * process 0's `data` reaches all (the others add zeros). */
static kr_status agree(const kr_refine_config *cfg, double *data, size_t n)
{
    const kr_refine_partition *part = cfg->partition;
    if (!part || part->ranks <= 1) return KR_OK;
    if (part->rank != 0) memset(data, 0, n * sizeof *data);
    return part->allreduce_sum(part->user, data, n);
}

static kr_status agree_poses(const kr_refine_config *cfg, kr_pose *poses, int n)
{
    if (!cfg->partition || cfg->partition->ranks <= 1) return KR_OK;
    double *d = malloc(sizeof *d * 12 * (size_t)n);
    if (!d) return kr_error(KR_ERR_NOMEM, "refine: no memory for %d poses", n);
    for (int k = 0; k < n; k++) {
        memcpy(d + 12 * k, poses[k].R, 9 * sizeof *d);
        memcpy(d + 12 * k + 9, poses[k].t, 3 * sizeof *d);
    }
    kr_status s = agree(cfg, d, 12 * (size_t)n);
    if (s == KR_OK)
        for (int k = 0; k < n; k++) {
            memcpy(poses[k].R, d + 12 * k, 9 * sizeof *d);
            memcpy(poses[k].t, d + 12 * k + 9, 3 * sizeof *d);
        }
    free(d);
    return s;
}

/* The independent measure's overlap (the share of samples with a partner
 * within three point spacings) says how far the fields can pull: aligned
 * scans of a set made for registration pair up almost everywhere (the
 * Stanford dragon's 15 turntable scans: 99 %), scans turned by 1° and moved
 * by 2 mm still 93 %, by 2° and 5 mm 70 %, by 5° and 2 cm only 30 %, where
 * the coarsest field (a few cells wide) no longer reaches. Below
 * PLACE_FIRST the views are placed pairwise before the joint refinement;
 * below CONVERGED after it, the pairwise placement is tried as well and the
 * better fit kept. */
#define PLACE_FIRST 0.5
#define CONVERGED 0.85
/* A view with less overlap than this overlaps no other. */
#define DISCONNECTED_OVERLAP 0.01

/* When the pairwise placement is believed. The independent measure's score
 * can be faked where the scene repeats itself: on a synthetic room of 12
 * views 30 deg apart (60 deg field of view) the scans overlap little when
 * aligned (39 % paired), and the placement stacked the planar walls onto
 * each other, pairing 85 % at a lower score (19.5 -> 12.4 mm) with views
 * turned up to 100 deg and moved up to 2.8 m from poses that were within
 * 0.2 deg and 6 mm. Two things a stacking cannot fake:
 *
 * - PLACED_MAX_MOVE: the placement starts from the given poses because they
 *   are rough, not arbitrary (refine_init.c registers each view with its
 *   nearest views by those poses and refuses turns beyond 60 deg). A
 *   candidate that moves a view's points (RMS) farther than the views' own
 *   size (the median radius, kr_refine_fitter_extent) from where the given
 *   poses put them answers another problem. Measured: the right placements of
 *   the bunny from 10-20 deg / 5 cm moved a view by at most 0.41-0.44 of that
 *   size; the stackings and slides of the rooms (12-40 views, perturbations
 *   of 0.2 to 10 deg) 2.4-4.7.
 * - PLACED_RESIDUAL_SLACK: a right placement pairs the scans it adds as
 *   closely as the joint refinement from the given poses pairs its own (the
 *   same surfaces, sampled alike); stacked walls pair points of different
 *   surfaces, whose bumps disagree. So the placement's paired residual may
 *   not exceed that of the alternative (the joint refinement from the given
 *   poses, else the given poses) by more than the measure's scatter: the
 *   room stackings were 21-70 % above it, right bunny placements 64 % below
 *   the given poses'. */
#define PLACED_MAX_MOVE 1.0
#define PLACED_RESIDUAL_SLACK 1.1

/* The largest RMS displacement of a view's points between two sets of poses
 * (about a thousand points a view), in metres. */
static double largest_move(const kr_refine_view *views, int V, const kr_pose *from,
                           const kr_pose *to)
{
    double worst = 0;
    for (int k = 0; k < V; k++) {
        size_t stride = views[k].n > 1000 ? views[k].n / 1000 : 1, m = 0;
        double sq = 0;
        for (size_t i = 0; i < views[k].n; i += stride, m++) {
            double p[3] = {views[k].xyz[3 * i], views[k].xyz[3 * i + 1], views[k].xyz[3 * i + 2]},
                   u[3], w[3];
            kr_pose_apply(&from[k], p, u);
            kr_pose_apply(&to[k], p, w);
            sq += (u[0] - w[0]) * (u[0] - w[0]) + (u[1] - w[1]) * (u[1] - w[1]) +
                  (u[2] - w[2]) * (u[2] - w[2]);
        }
        if (m) worst = fmax(worst, sqrt(sq / (double)m));
    }
    return worst;
}

/* Is a placement candidate believed (PLACED_MAX_MOVE, PLACED_RESIDUAL_SLACK)?
 * `ref` is the fit it must not pair worse than; a reference without pairs
 * has no residual to compare with. */
static bool placement_credible(const kr_refine_view *views, int V, const kr_pose *given,
                               const kr_pose *placed, double extent, const kr_refine_fit *fit,
                               const kr_refine_fit *ref)
{
    if (largest_move(views, V, given, placed) > PLACED_MAX_MOVE * extent) return false;
    return !(ref->overlap > 0) || fit->residual <= PLACED_RESIDUAL_SLACK * ref->residual;
}

/* Candidate a: the joint refinement from the given poses into `a`, then
 * its measure (each view's overlap in ov); the measure's time is added to
 * *fit_seconds. */
static kr_status refine_from_given(const kr_refine_config *cfg, kr_device *dev,
                                   const kr_refine_view *views, int n_views, const kr_pose *poses,
                                   kr_refine_fitter *fitter, kr_pose *a, kr_refine_result *ra,
                                   double *ov, kr_refine_fit *fit_a, double *fit_seconds)
{
    memcpy(a, poses, sizeof *a * (size_t)n_views);
    kr_status s = refine_joint(cfg, dev, views, n_views, a, ra);
    if (s != KR_OK) return s;
    double t_fit = now_seconds();
    s = kr_refine_fitter_eval(fitter, a, 0, ov, fit_a);
    *fit_seconds += now_seconds() - t_fit;
    return s;
}

kr_status kr_refine(const kr_refine_config *cfg, kr_device *dev, const kr_refine_view *views,
                    int n_views, kr_pose *poses, kr_refine_result *result)
{
    kr_status s = check_args(cfg, views, n_views, poses);
    if (s != KR_OK) return s;
    if (cfg->initialize == KR_REFINE_INIT_OFF && !cfg->keep_if_worse)
        return refine_joint(cfg, dev, views, n_views, poses, result);
    double t0 = now_seconds();
    kr_refine_fitter *fitter = NULL;
    if ((s = kr_refine_fitter_create(views, n_views, &fitter)) != KR_OK) return s;
    /* Measured where the refinement runs: on a 200-view room the measure was
     * a third of a GPU refinement on the host's 32 cores. */
    if ((s = kr_refine_fitter_use_devices(fitter, dev, cfg->devices, cfg->n_devices)) != KR_OK) {
        kr_refine_fitter_destroy(&fitter);
        return s;
    }
    size_t V = (size_t)n_views;
    kr_pose *a = malloc(sizeof *a * V), *b = malloc(sizeof *b * V), *b0 = malloc(sizeof *b0 * V);
    double *ov = malloc(sizeof *ov * V);
    kr_refine_result ra = {0}, rb = {0}, res;
    kr_refine_fit fit_in, fit_a = {0}, fit_b = {0}, fit_b0 = {0};
    bool have_a = false, have_b = false;
    int placed = 0;
    if (!a || !b || !b0 || !ov)
        s = kr_error(KR_ERR_NOMEM, "refine: no memory for %d poses", n_views);
    double t_fit = now_seconds(), fit_seconds = 0, init_seconds = 0;
    stage(cfg, "measure", n_views, 0);
    if (s == KR_OK) s = kr_refine_fitter_eval(fitter, poses, 0, ov, &fit_in);
    fit_seconds += now_seconds() - t_fit;
    /* Far from aligned, the views are placed pairwise first; otherwise the
     * joint refinement starts from the given poses, and the pairwise
     * placement is tried too if it did not converge. */
    bool init = cfg->initialize == KR_REFINE_INIT_ON ||
                (cfg->initialize == KR_REFINE_INIT_AUTO && fit_in.overlap < PLACE_FIRST);
    double decision = init;
    if (s == KR_OK) s = agree(cfg, &decision, 1);
    init = decision != 0;
    if (s == KR_OK && !init) {
        s = refine_from_given(cfg, dev, views, n_views, poses, fitter, a, &ra, ov, &fit_a,
                              &fit_seconds);
        have_a = s == KR_OK;
        decision = cfg->initialize == KR_REFINE_INIT_AUTO && fit_a.overlap < CONVERGED;
        if (s == KR_OK) s = agree(cfg, &decision, 1);
        init = decision != 0;
    }
    bool ok_b = false, ok_b0 = false;
    double extent = kr_refine_fitter_extent(fitter);
    if (s == KR_OK && init) {
        double t_init = now_seconds();
        stage(cfg, "placement", n_views, 0);
        s = kr_refine_init_pairwise(cfg, dev, views, n_views, poses, extent, b0, &placed);
        init_seconds = now_seconds() - t_init;
        if (s == KR_OK) s = agree_poses(cfg, b0, n_views);
        if (s == KR_OK) s = kr_refine_fitter_eval(fitter, b0, 0, NULL, &fit_b0);
        memcpy(b, b0, sizeof *b * V);
        if (s == KR_OK && (s = refine_joint(cfg, dev, views, n_views, b, &rb)) == KR_OK)
            s = kr_refine_fitter_eval(fitter, b, 0, NULL, &fit_b);
        have_b = s == KR_OK;
        /* The placement competes only where it is believed; every process
         * takes rank 0's verdicts. */
        const kr_refine_fit *ref = have_a ? &fit_a : &fit_in;
        double ok[2] = {0, 0};
        if (have_b) {
            ok[0] = placement_credible(views, n_views, poses, b, extent, &fit_b, ref);
            ok[1] = placement_credible(views, n_views, poses, b0, extent, &fit_b0, ref);
        }
        if (s == KR_OK) s = agree(cfg, ok, 2);
        ok_b = ok[0] != 0;
        ok_b0 = ok[1] != 0;
        /* Placed first (the given poses overlapped little, or initialize
         * ON) and the placement is not believed: the joint refinement from
         * the given poses after all (a room's aligned views may overlap
         * little). */
        if (s == KR_OK && !have_a && !ok_b && !ok_b0) {
            s = refine_from_given(cfg, dev, views, n_views, poses, fitter, a, &ra, ov, &fit_a,
                                  &fit_seconds);
            have_a = s == KR_OK;
        }
    }
    if (s == KR_OK) {
        /* The best fit of the candidates — the joint refinement from the
         * given poses (a), from the pairwise placement (b), or the placement
         * alone (b0: the fields may pull a tight pairwise fit off by their
         * interpolation bias), the placements only where believed — and
         * never worse than the start. There is always one: a runs wherever
         * neither placement is believed. */
        int take = have_a ? 0 : -1;
        double low = have_a ? fit_a.score : INFINITY;
        if (ok_b && (take < 0 || fit_b.score < low)) {
            take = 1;
            low = fit_b.score;
        }
        if (ok_b0 && (take < 0 || fit_b0.score < low)) take = 2;
        res = take == 0 ? ra : rb;
        const kr_pose *best = take == 0 ? a : take == 1 ? b : b0;
        kr_refine_fit fit_best = take == 0 ? fit_a : take == 1 ? fit_b : fit_b0;
        res.placement_only = take == 2;
        res.fit_before = fit_in;
        res.initialized = take != 0;
        res.placed = take != 0 ? placed : 0;
        if (cfg->keep_if_worse && !(fit_best.score < fit_in.score)) {
            res.kept_input = true;
            res.fit_after = fit_in;
        } else {
            memcpy(poses, best, sizeof *poses * V);
            res.fit_after = fit_best;
        }
        /* The overlaps for the disconnected count: those of the last
         * evaluation with them, unless it measured other poses. */
        bool ov_of_result = res.kept_input ? !have_a : take == 0;
        if (!ov_of_result) {
            t_fit = now_seconds();
            s = kr_refine_fitter_eval(fitter, poses, 0, ov, &res.fit_after);
            fit_seconds += now_seconds() - t_fit;
        }
        res.fit_seconds = fit_seconds;
        res.init_seconds = init_seconds;
        res.disconnected = 0;
        for (size_t k = 0; k < V; k++)
            res.disconnected += ov[k] < DISCONNECTED_OVERLAP;
        res.seconds = now_seconds() - t0;
        if (s == KR_OK && result) *result = res;
    }
    kr_refine_fitter_destroy(&fitter);
    free(a);
    free(b);
    free(b0);
    free(ov);
    return s;
}

kr_status kr_refine_residual(const kr_refine_config *cfg, const kr_refine_view *views, int n_views,
                             const kr_pose *poses, double *rms, size_t *count)
{
    kr_status s = check_args(cfg, views, n_views, poses);
    if (s != KR_OK) return s;
    kr_refine_engine *eng = NULL;
    s = kr_refine_engine_create(&eng, NULL, NULL, 0);
    if (s != KR_OK) return s;
    /* The residual of the whole problem, in this process alone. */
    kr_refine_config one = *cfg;
    one.partition = NULL;
    cfg = &one;
    run R = {.cfg = cfg, .eng = eng};
    level L;
    totals t = {0};
    float **normals = NULL, **planes = NULL;
    kr_refine_view *on_planes = NULL;
    if (cfg->signed_field) s = signed_views(views, n_views, &normals, &planes, &on_planes);
    if (on_planes) views = on_planes;
    if (s == KR_OK)
        s = level_build(&L, eng, cfg, views, normals, n_views, cfg->cell, cfg->band, cfg->cap, 0);
    if (s == KR_OK) {
        s = kr_refine_engine_load(eng, &L.pb);
        if (s == KR_OK) s = evaluate(&L, &R, poses, L.acc, &t);
        level_free(&L);
    }
    kr_refine_normals_free(normals, n_views);
    kr_refine_normals_free(planes, n_views);
    free(on_planes);
    kr_refine_engine_destroy(&eng);
    if (s != KR_OK) return s;
    if (rms) *rms = t.count > 0 ? sqrt(t.sq / t.count) : 0;
    if (count) *count = (size_t)t.count;
    return KR_OK;
}
