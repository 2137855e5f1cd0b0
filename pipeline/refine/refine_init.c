/* A wide basin for the refinement: poses from pairwise registration along
 * the views' overlap graph (refine_init.h). */
#include "pipeline/refine/refine_init.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/register.h"
#include "pipeline/refine/refine_internal.h"

/* Points of each view the pairwise registration takes (evenly strided):
 * enough for its normals and overlap, few enough for 15 views in a second. */
#define INIT_POINTS 4000
/* Each view is registered to this many of its nearest views. */
#define INIT_NEIGHBOURS 3

/* How far apart two views' poses are: the angle between them plus their
 * distance in units of the object's size. */
static double pose_distance(const kr_pose *a, const kr_pose *b, double extent)
{
    kr_pose inv = kr_pose_inv(a), d = kr_pose_mul(&inv, b);
    return kr_pose_angle(&d) + kr_pose_translation_norm(&d) / extent;
}

typedef struct {
    int i, j;       /* j registered onto i */
    kr_pose T;      /* maps j's points into i's frame */
    double overlap; /* share of j's points on i */
    bool trusted;
} edge;

static float *strided(const kr_refine_view *v, size_t *n)
{
    size_t step = v->n > INIT_POINTS ? v->n / INIT_POINTS : 1, m = (v->n + step - 1) / step;
    float *p = malloc(3 * (m ? m : 1) * sizeof *p);
    if (!p) return NULL;
    for (size_t k = 0; k < m; k++)
        memcpy(p + 3 * k, v->xyz + 3 * k * step, 3 * sizeof *p);
    *n = m;
    return p;
}

/* The given poses are rough, not arbitrary: a registration that turns a
 * view by more than this from where they put it is not trusted. The wrong
 * answers the search finds on partial scans of a curved object are mostly
 * near-flips (140-175 deg in the sweeps of docs/BENCHMARKS.md, issue 29);
 * starts of 20 deg per view leave pairs up to 40 deg apart. */
#define MAX_TURN_DEG 60.0

/* Is `pose` within MAX_TURN_DEG of `given`? Placements chain pairwise
 * results, so a view can end far from its given pose although no single
 * registration turned it that far: on the Stanford bunny's 10 scans from
 * 5-20 deg, the top view top2 was placed 60-144 deg off by two wrong pairings
 * (31 and 76 deg) and a check onto its neighbours that preferred the more
 * overlapping of them. */
static bool near_given(const kr_pose *given, const kr_pose *pose)
{
    kr_pose inv = kr_pose_inv(given), turn = kr_pose_mul(&inv, pose);
    return kr_pose_angle(&turn) <= MAX_TURN_DEG * M_PI / 180;
}

/* kr_register from the start alone, then, when that is not trusted, with
 * the search's turns: a rough start is usually near the answer, and on
 * partial scans of a curved object a turn of 45 deg or more often overlaps
 * as much as the truth (bunny pairs registered with the turns from 10 deg
 * starts: a third of the trusted ones 30-150 deg wrong). */
static kr_status register_near_first(kr_device *dev, const kr_register_config *rc, const float *src,
                                     size_t ns, const float *dst, size_t nd, const kr_pose *start,
                                     kr_register_result *r)
{
    kr_register_config near = *rc;
    near.hypotheses = 0;
    kr_status s = kr_register(dev, &near, src, ns, dst, nd, start, r);
    if (s != KR_OK || r->trusted || rc->hypotheses == 0) return s;
    if ((s = kr_register(dev, rc, src, ns, dst, nd, start, r)) != KR_OK) return s;
    if (!near_given(start, &r->pose)) r->trusted = false;
    return KR_OK;
}

/* The centroid of a view's strided points, in its own frame. */
static void centroid(const float *p, size_t n, double c[3])
{
    c[0] = c[1] = c[2] = 0;
    for (size_t k = 0; k < n; k++)
        for (int a = 0; a < 3; a++)
            c[a] += p[3 * k + a] / (double)n;
}

/* Registers view j (points pj, centroid cj) onto view i from their given
 * relative pose `start`, and from the same turn with the centroids laid on
 * each other; the trusted result that overlaps more wins. The search's
 * hypotheses are turns about the start's translation, and their probes do
 * not slide far: a given pose 5 cm off on an object of 15-20 cm (a rough
 * hand placement) left adjacent views of the Stanford turntable sets 50-90 mm
 * apart after registration, trusted at 20-45 % overlap, and the placement
 * built on them ended scans 50-107 deg off (happy_stand and dragon_stand at
 * 10 deg / 5 cm: 24 and 16 of 56 scans worse than their start). Two partial
 * views of one object turned by a neighbour's step have their centroids a
 * few centimetres apart, so the centred start is near where the given one is
 * far; where the given translation is good, its result overlaps as much or
 * more and is kept. */
static kr_status register_pair(kr_device *dev, const kr_register_config *rc, const float *pj,
                               size_t nj, const double cj[3], const float *pi, size_t ni,
                               const double ci[3], const kr_pose *start, kr_register_result *r)
{
    kr_status s = register_near_first(dev, rc, pj, nj, pi, ni, start, r);
    if (s != KR_OK && s != KR_ERR_NUMERIC && s != KR_ERR_EMPTY) return s;
    kr_pose centred = *start;
    double Rc[3];
    kr_pose_rotate(start, cj, Rc);
    for (int a = 0; a < 3; a++)
        centred.t[a] = ci[a] - Rc[a];
    kr_register_result rc2;
    kr_status s2 = register_near_first(dev, rc, pj, nj, pi, ni, &centred, &rc2);
    if (s2 == KR_ERR_NUMERIC || s2 == KR_ERR_EMPTY) return s;
    if (s2 != KR_OK) return s2;
    if (s != KR_OK || (rc2.trusted && (!r->trusted || rc2.overlap > r->overlap))) *r = rc2;
    return KR_OK;
}

/* The view edge e joins to v, or -1 when it does not touch v. */
static int other_end(const edge *e, int v)
{
    return e->i == v ? e->j : e->j == v ? e->i : -1;
}

/* Placing the views, one at a time, from the gauge. */
typedef struct {
    const kr_refine_config *cfg; /* the gauge, the interruption */
    kr_device *dev;
    const kr_register_config *rc;
    const edge *edges;
    int n_edges, n;
    float **pts; /* each view's strided points */
    const size_t *cnt;
    double extent;
    const kr_pose *given; /* the given poses (the gauge's is kept) */
    kr_pose *out;
    bool *placed, *left; /* left: its placements disagreed and none verified */
} placer;

/* At most this many placements of one view are compared: its own 3 edges
 * and the few views that chose it as a neighbour. */
#define MAX_CANDIDATES 64

/* Where the trusted edges between v and placed views put v, within
 * MAX_TURN_DEG of its given pose: at[], and the edges in cand[]; returns how
 * many. */
static int candidates(const placer *pl, int v, int *cand, kr_pose *at)
{
    int nc = 0;
    for (int e = 0; e < pl->n_edges && nc < MAX_CANDIDATES; e++) {
        const edge *E = &pl->edges[e];
        int o = other_end(E, v);
        if (!E->trusted || o < 0 || !pl->placed[o]) continue;
        if (o == E->i) {
            at[nc] = kr_pose_mul(&pl->out[o], &E->T);
        } else {
            kr_pose inv = kr_pose_inv(&E->T);
            at[nc] = kr_pose_mul(&pl->out[o], &inv);
        }
        if (near_given(&pl->given[v], &at[nc])) cand[nc++] = e;
    }
    return nc;
}

/* Two placements agree within AGREE (pose_distance: about 6 deg, or 10 % of
 * the object's size); wrong registrations are off by tens of degrees. */
#define AGREE 0.1

/* The candidate most others agree with (then the most overlapping edge);
 * returns how many agree with it, itself included. */
static int best_supported(const placer *pl, const int *cand, const kr_pose *at, int nc, int *pick)
{
    int support = 0;
    *pick = -1;
    for (int c = 0; c < nc; c++) {
        int agree = 1;
        for (int d = 0; d < nc; d++)
            agree += d != c && pose_distance(&at[c], &at[d], pl->extent) < AGREE;
        if (agree > support ||
            (agree == support && pl->edges[cand[c]].overlap > pl->edges[cand[*pick]].overlap)) {
            support = agree;
            *pick = c;
        }
    }
    return support;
}

/* Registers view v onto the union of its placed neighbours (views an edge
 * joins it to, trusted or not), each moved by its placed pose, from `start`
 * (the start alone when near_only, else near_first's search too). r->trusted
 * false when there is nothing to register onto or no fit. */
static kr_status register_onto_neighbours(const placer *pl, int v, const kr_pose *start,
                                          bool near_only, kr_register_result *r)
{
    r->trusted = false;
    kr_status s = kr_refine_check_interrupted(pl->cfg);
    if (s != KR_OK) return s;
    size_t total = 0;
    for (int e = 0; e < pl->n_edges; e++) {
        int o = other_end(&pl->edges[e], v);
        if (o >= 0 && pl->placed[o]) total += pl->cnt[o];
    }
    if (!total) return KR_OK;
    float *dst = malloc(3 * total * sizeof *dst);
    if (!dst) return kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's neighbours", v);
    size_t m = 0;
    for (int e = 0; e < pl->n_edges; e++) {
        int o = other_end(&pl->edges[e], v);
        if (o < 0 || !pl->placed[o]) continue;
        for (size_t k = 0; k < pl->cnt[o]; k++, m++) {
            const float *q = pl->pts[o] + 3 * k;
            double p[3] = {q[0], q[1], q[2]}, w[3];
            kr_pose_apply(&pl->out[o], p, w);
            for (int a = 0; a < 3; a++)
                dst[3 * m + a] = (float)w[a];
        }
    }
    kr_register_config rc = *pl->rc;
    if (near_only) rc.hypotheses = 0;
    s = register_near_first(pl->dev, &rc, pl->pts[v], pl->cnt[v], dst, total, start, r);
    free(dst);
    if (s == KR_ERR_NUMERIC || s == KR_ERR_EMPTY) {
        r->trusted = false;
        return KR_OK;
    }
    return s;
}

/* A view with one placement, or with placements that disagree, is checked
 * against all its placed neighbours at once: registered onto their union
 * from each placement and from its given pose, the trusted result that
 * overlaps most wins (*found false when none is trusted). */
static kr_status verify(const placer *pl, int v, const kr_pose *at, int nc, kr_pose *pose,
                        bool *found)
{
    double best = -1;
    *found = false;
    for (int c = 0; c <= nc; c++) {
        kr_register_result r;
        kr_status s = register_onto_neighbours(pl, v, c < nc ? &at[c] : &pl->given[v], true, &r);
        if (s != KR_OK) return s;
        if (r.trusted && r.overlap > best && near_given(&pl->given[v], &r.pose)) {
            best = r.overlap;
            *pose = r.pose;
            *found = true;
        }
    }
    return KR_OK;
}

/* Places one more view (*progress true) or finds none to place.
 *
 * A pairwise registration can be trusted (a clear fit, one clear best
 * hypothesis) and still wrong: on a bunny perturbed by 10 deg / 5 cm,
 * bun270 fit bun000 144 deg and bun315 72 deg away from the truth, both
 * trusted, and a tree of the most overlapping edges placed it there. Two
 * wrong registrations rarely agree, so a view that two placed views put in
 * the same place is placed there; these go first, so that by the time a
 * view with a single placement (or disagreeing ones) comes, more of its
 * neighbours are placed, and it is verified against all of them together
 * (verify). A view that no check confirms, even one with a single placement
 * and nothing against it, is left to the last pass (registered from its
 * given pose onto its placed neighbours): the bunny's top views pair with a
 * single neighbour 30 deg wrong and trusted (10 scans from 5 deg / 2 cm, 10
 * seeds: scans ending worse than they started 2 -> 1, the worst 31 -> 10
 * deg). Among equals, the most overlapping edge first (Prim's). */
static kr_status place_next(placer *pl, bool *progress)
{
    int best_v = -1, best_support = 0, best_nc = 0;
    double best_overlap = -1;
    kr_pose best_at[MAX_CANDIDATES];
    *progress = false;
    for (int v = 0; v < pl->n; v++) {
        if (pl->placed[v] || pl->left[v]) continue;
        int cand[MAX_CANDIDATES], pick;
        kr_pose at[MAX_CANDIDATES];
        int nc = candidates(pl, v, cand, at);
        if (!nc) continue;
        int support = best_supported(pl, cand, at, nc, &pick);
        double overlap = pl->edges[cand[pick]].overlap;
        if (support > best_support || (support == best_support && overlap > best_overlap)) {
            best_v = v;
            best_support = support;
            best_overlap = overlap;
            /* the supported placement first: with support >= 2 it is used */
            best_at[0] = at[pick];
            best_nc = 1;
            for (int c = 0; c < nc; c++)
                if (c != pick) best_at[best_nc++] = at[c];
        }
    }
    if (best_v < 0) return KR_OK;
    kr_pose pose = best_at[0];
    bool found = best_support >= 2;
    if (!found) {
        kr_status s = verify(pl, best_v, best_at, best_nc, &pose, &found);
        if (s != KR_OK) return s;
    }
    if (found) {
        pl->out[best_v] = pose;
        pl->placed[best_v] = true;
    } else {
        pl->left[best_v] = true;
    }
    *progress = true;
    return KR_OK;
}

kr_status kr_refine_init_pairwise(const kr_refine_config *cfg, kr_device *dev,
                                  const kr_refine_view *views, int n, const kr_pose *poses,
                                  double extent, kr_pose *out, int *connected)
{
    int gauge = cfg->gauge;
    int k_nb = n - 1 < INIT_NEIGHBOURS ? n - 1 : INIT_NEIGHBOURS;
    edge *edges = calloc((size_t)n * (size_t)k_nb, sizeof *edges);
    float **pts = calloc((size_t)n, sizeof *pts);
    size_t *cnt = calloc((size_t)n, sizeof *cnt);
    double *mid = calloc(3 * (size_t)n, sizeof *mid); /* each view's centroid */
    kr_status s = edges && pts && cnt && mid ? KR_OK : kr_error(KR_ERR_NOMEM, "refine: no memory");
    for (int v = 0; v < n && s == KR_OK; v++) {
        if (!(pts[v] = strided(&views[v], &cnt[v])))
            s = kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's points", v);
        else
            centroid(pts[v], cnt[v], &mid[3 * v]);
    }

    /* 1. Each view onto its nearest views (by the given poses), once a pair. */
    int n_edges = 0;
    kr_register_config rc;
    kr_register_config_default(&rc);
    rc.method = KR_REG_AUTO;
    rc.hypotheses = 6;              /* the start is rough, not arbitrary: a few turns */
    rc.soft_method = KR_REG_NEWTON; /* no soft stage: the probes suffice here */
    rc.pose_only = true;
    for (int j = 0; j < n && s == KR_OK; j++) {
        /* Its k nearest views: selection by repeated minimum (k is 3). */
        int nb[INIT_NEIGHBOURS], have = 0;
        for (; have < k_nb; have++) {
            int pick = -1;
            double pd = INFINITY;
            for (int i = 0; i < n; i++) {
                bool taken = i == j;
                for (int q = 0; q < have && !taken; q++)
                    taken = nb[q] == i;
                double d = taken ? INFINITY : pose_distance(&poses[j], &poses[i], extent);
                if (d < pd) {
                    pd = d;
                    pick = i;
                }
            }
            if (pick < 0) break;
            nb[have] = pick;
        }
        for (int q = 0; q < have && s == KR_OK; q++) {
            int i = nb[q];
            bool done = false;
            for (int e = 0; e < n_edges && !done; e++)
                done = (edges[e].i == i && edges[e].j == j) || (edges[e].i == j && edges[e].j == i);
            if (done) continue;
            if ((s = kr_refine_check_interrupted(cfg)) != KR_OK) break;
            kr_pose inv = kr_pose_inv(&poses[i]), start = kr_pose_mul(&inv, &poses[j]);
            kr_register_result r;
            kr_status rs = register_pair(dev, &rc, pts[j], cnt[j], &mid[3 * j], pts[i], cnt[i],
                                         &mid[3 * i], &start, &r);
            if (rs == KR_ERR_NUMERIC || rs == KR_ERR_EMPTY) continue; /* no fit: no edge */
            if (rs != KR_OK) {
                s = rs;
                break;
            }
            edges[n_edges++] = (edge){i, j, r.pose, r.overlap, r.trusted};
        }
    }

    /* 2. A tree from the gauge (place_next), then the views it could not
     * place: registered once more, from the given pose with the search's
     * turns, onto their placed neighbours together. */
    bool *flags = s == KR_OK ? calloc(2 * (size_t)n, sizeof *flags) : NULL;
    if (s == KR_OK && !flags) s = kr_error(KR_ERR_NOMEM, "refine: no memory");
    int n_placed = 0;
    if (s == KR_OK) {
        memcpy(out, poses, sizeof *out * (size_t)n);
        placer pl = {cfg, dev,    &rc,   edges, n_edges, n,        pts,
                     cnt, extent, poses, out,   flags,   flags + n};
        pl.placed[gauge] = true;
        for (bool more = true; more && s == KR_OK;)
            s = place_next(&pl, &more);
        for (int v = 0; v < n && s == KR_OK; v++) {
            if (pl.placed[v]) continue;
            kr_register_result r;
            s = register_onto_neighbours(&pl, v, &poses[v], false, &r);
            if (s == KR_OK && r.trusted && near_given(&poses[v], &r.pose)) {
                out[v] = r.pose;
                pl.placed[v] = true;
            }
        }
        for (int v = 0; v < n; v++)
            n_placed += pl.placed[v];
    }
    free(flags);
    if (connected) *connected = n_placed;
    for (int v = 0; pts && v < n; v++)
        free(pts[v]);
    free(pts);
    free(cnt);
    free(mid);
    free(edges);
    return s;
}
