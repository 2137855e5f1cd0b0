/* The default registration: search, soft method, Newton, verdict
 * (register_search.h). */
#include "pipeline/register/register_search.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pipeline/register/register_newton.h"
#include "pipeline/register/register_verdict.h"
#include "pipeline/register/subsample.h"

/* The turns tried about each axis. A probe's basin is about 30-45° wide:
 * three shells cover starts up to 180° off. */
static const double turn_deg[] = {45, 90, 135};
#define TURNS ((int)(sizeof turn_deg / sizeof turn_deg[0]))
/* Source points the overlap of a refined candidate is measured on. */
#define VERDICT_SAMPLES 5000
#define MAX_CANDIDATES 8

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Axis k of `axes` spread evenly over the sphere (a Fibonacci lattice). */
static void axis_of(int k, int axes, double a[3])
{
    double z = 1 - (2.0 * k + 1) / axes, r = sqrt(fmax(0, 1 - z * z));
    double phi = k * M_PI * (3 - sqrt(5.0));
    a[0] = r * cos(phi);
    a[1] = r * sin(phi);
    a[2] = z;
}

/* The start turned by `deg` about `axis` through the source's centroid c
 * (source frame): T0 · [R | c − R c]. */
static kr_pose turned(const kr_pose *T0, const double axis[3], double deg, const double c[3])
{
    double x[6] = {0, 0, 0, 0, 0, 0};
    for (int k = 0; k < 3; k++)
        x[k] = axis[k] * deg * M_PI / 180;
    kr_pose R = kr_pose_exp(x);
    double Rc[3];
    kr_pose_rotate(&R, c, Rc);
    for (int k = 0; k < 3; k++)
        R.t[k] = c[k] - Rc[k];
    return kr_pose_mul(T0, &R);
}

/* Two poses this close (at the source's extent) are one candidate. */
static bool same_pose(const kr_pose *a, const kr_pose *b, double extent)
{
    kr_pose inv = kr_pose_inv(a), d = kr_pose_mul(&inv, b);
    return kr_pose_translation_norm(&d) + kr_pose_angle(&d) * extent < 0.05 * extent;
}

typedef struct {
    kr_pose pose;
    double score; /* probes: the share of the probe within the gate, less for a poor RMS */
    int index;    /* seed order: the start first among equals */
} candidate;

static int by_score(const void *a, const void *b)
{
    const candidate *x = a, *y = b;
    if (x->score != y->score) return (x->score < y->score) - (x->score > y->score);
    return (x->index > y->index) - (x->index < y->index);
}

typedef struct {
    kr_pose pose;
    double overlap, residual;
    int iterations;
    bool ok;
} refined;

/* Newton on the whole sets from `start`, then the independent measures. */
static kr_status refine(kr_device *dev, const kr_register_pair *pair, const kr_pose *start,
                        refined *out)
{
    memset(out, 0, sizeof *out);
    out->pose = *start;
    kr_track_result r;
    kr_status s = kr_register_pair_newton(dev, pair, &out->pose, &r);
    if (s == KR_ERR_NUMERIC) return KR_OK; /* out of its basin: not a candidate */
    if (s != KR_OK) return s;
    out->iterations = r.iterations;
    kr_register_overlap(pair->tree, pair->src_points, pair->n, &out->pose,
                        KR_REGISTER_OVERLAP_SPACINGS * pair->spacing, VERDICT_SAMPLES,
                        &out->overlap, &out->residual);
    out->ok = true;
    return KR_OK;
}

/* Better: more overlap; at equal overlap (within a hundredth), the smaller
 * residual. */
static bool better(const refined *a, const refined *b)
{
    if (!b->ok) return a->ok;
    if (!a->ok) return false;
    if (fabs(a->overlap - b->overlap) > 0.01) return a->overlap > b->overlap;
    return a->residual < b->residual;
}

/* The soft method's run on at most soft_points voxel-subsampled points of
 * each set, from `start`. */
static kr_status soft_stage(kr_device *dev, const kr_register_config *cfg, kr_reg_engine engine,
                            const float *src, size_t n, const float *dst, size_t m,
                            const kr_pose *start, double extent, kr_register_soft_fn soft,
                            kr_pose *out, int *steps)
{
    size_t keep = cfg->soft_points > 0 ? (size_t)cfg->soft_points : 600;
    float *a = malloc(3 * (n + m) * sizeof *a);
    if (!a) return kr_error(KR_ERR_NOMEM, "register: no memory for %zu points", n + m);
    float *b = a + 3 * n;
    memcpy(a, src, 3 * n * sizeof *a);
    memcpy(b, dst, 3 * m * sizeof *b);
    size_t na = n, nb = m;
    kr_status s = KR_OK;
    /* Voxels from a thousandth of the object up, grown until few enough. */
    if (n > keep) s = kr_voxel_subsample(a, n, 1e-3 * extent, keep, &na, NULL);
    if (s == KR_OK && m > keep) s = kr_voxel_subsample(b, m, 1e-3 * extent, keep, &nb, NULL);
    if (s == KR_OK) {
        kr_register_config sc = *cfg;
        sc.method = cfg->soft_method == KR_REG_EMICP ? KR_REG_EMICP : KR_REG_SOFTASSIGN;
        sc.engine = engine;
        sc.extent = extent;
        sc.pose_only = true;
        s = soft(dev, &sc, a, na, b, nb, start, out, steps);
    }
    free(a);
    return s;
}

kr_status kr_register_search(kr_device *dev, const kr_register_config *cfg, kr_reg_engine engine,
                             const float *src, size_t n, const float *dst, size_t m,
                             const kr_pose *init, double extent, kr_register_soft_fn soft,
                             kr_register_result *out)
{
    double t0 = now_seconds();
    kr_device *ndev = engine == KR_REG_ENGINE_CPU ? NULL : dev;
    kr_register_pair pair;
    kr_status s = kr_register_pair_prepare(src, n, dst, m, extent, &pair);
    if (s != KR_OK) return s;

    /* 1. Start poses: the start, then three turns about each axis. */
    int axes = cfg->hypotheses > 0 ? cfg->hypotheses : 0;
    int count = 1 + axes * TURNS;
    kr_pose T0 = init ? *init : kr_pose_identity();
    candidate *cand = calloc((size_t)count, sizeof *cand);
    kr_pose *seeds = malloc((size_t)count * sizeof *seeds);
    kr_track_result *probes = malloc((size_t)count * sizeof *probes);
    if (!cand || !seeds || !probes) {
        s = kr_error(KR_ERR_NOMEM, "register: no memory for %d start poses", count);
        goto done;
    }
    double c[3] = {0, 0, 0};
    for (size_t i = 0; i < n; i++)
        for (int k = 0; k < 3; k++)
            c[k] += src[3 * i + k] / (double)n;
    seeds[0] = T0;
    for (int a = 0; a < axes; a++) {
        double ax[3];
        axis_of(a, axes, ax);
        for (int t = 0; t < TURNS; t++)
            seeds[1 + a * TURNS + t] = turned(&T0, ax, turn_deg[t], c);
    }

    /* 2. Probes, scored by how much of the probe ends on the destination. */
    if ((s = kr_register_pair_probe(ndev, &pair, seeds, count, probes)) != KR_OK) goto done;
    for (int h = 0; h < count; h++) {
        cand[h].pose = probes[h].pose;
        cand[h].index = h;
        cand[h].score = probes[h].inliers >= 6
                            ? probes[h].inlier_fraction / (1.0 + probes[h].rms / (4 * pair.spacing))
                            : -1;
    }
    qsort(cand, (size_t)count, sizeof *cand, by_score);

    /* 3. The best distinct probes, refined by Newton. */
    int want = cfg->candidates > 0 ? cfg->candidates : 3;
    if (want > MAX_CANDIDATES) want = MAX_CANDIDATES;
    refined best = {0}, found[MAX_CANDIDATES + 1];
    int nfound = 0;
    for (int h = 0; h < count && nfound < want && s == KR_OK; h++) {
        if (cand[h].score < 0) break;
        bool dup = false;
        for (int k = 0; k < nfound && !dup; k++)
            dup = same_pose(&found[k].pose, &cand[h].pose, extent);
        if (dup) continue;
        s = refine(ndev, &pair, &cand[h].pose, &found[nfound]);
        if (s == KR_OK && found[nfound].ok) nfound++;
    }
    if (s != KR_OK) goto done;
    for (int k = 0; k < nfound; k++)
        if (better(&found[k], &best)) best = found[k];

    /* 4. The soft method from the best probe (or the start), then Newton. */
    int soft_steps = 0;
    if (soft && cfg->soft_method != KR_REG_NEWTON) {
        /* From the start: a path of its own, independent of the probes (its
         * annealing widens the basin anyway). */
        kr_pose soft_pose;
        s = soft_stage(dev, cfg, engine, src, n, dst, m, &T0, extent, soft, &soft_pose,
                       &soft_steps);
        if (s == KR_ERR_NUMERIC) {
            s = KR_OK; /* the weights vanished: no candidate from it */
        } else if (s == KR_OK) {
            refined r;
            if ((s = refine(ndev, &pair, &soft_pose, &r)) != KR_OK) goto done;
            if (r.ok && nfound < MAX_CANDIDATES + 1) found[nfound++] = r;
            if (better(&r, &best)) best = r;
        }
    }
    if (s != KR_OK) goto done;
    if (!best.ok) {
        s = kr_error(KR_ERR_NUMERIC,
                     "register: no start pose of %d led to a fit (the sets share too little, "
                     "or one of them is mostly noise)",
                     count);
        goto done;
    }

    /* 5. The runner-up: the best distinct other fit. */
    double runner_up = 0;
    for (int k = 0; k < nfound; k++)
        if (!same_pose(&found[k].pose, &best.pose, extent) && found[k].overlap > runner_up)
            runner_up = found[k].overlap;

    kr_register_result r;
    memset(&r, 0, sizeof r);
    r.pose = best.pose;
    r.iterations = best.iterations + soft_steps;
    r.extent = extent;
    r.inlier_distance = cfg->inlier_ratio * extent;
    r.engine = engine;
    r.spacing = pair.spacing;
    r.overlap = best.overlap;
    r.residual = best.residual;
    r.runner_up = runner_up;
    r.hypotheses = count;
    kr_register_judge(cfg, &r);
    r.seconds = now_seconds() - t0;
    *out = r;
done:
    free(cand);
    free(seeds);
    free(probes);
    kr_register_pair_free(&pair);
    return s;
}
