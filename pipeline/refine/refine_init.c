/* A wide basin for the refinement: poses from pairwise registration along
 * the views' overlap graph (refine_init.h). */
#include "pipeline/refine/refine_init.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kinreg/register.h"

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

kr_status kr_refine_init_pairwise(kr_device *dev, const kr_refine_view *views, int n,
                                  const kr_pose *poses, int gauge, double extent, kr_pose *out,
                                  int *connected)
{
    int k_nb = n - 1 < INIT_NEIGHBOURS ? n - 1 : INIT_NEIGHBOURS;
    edge *edges = calloc((size_t)n * (size_t)k_nb, sizeof *edges);
    float **pts = calloc((size_t)n, sizeof *pts);
    size_t *cnt = calloc((size_t)n, sizeof *cnt);
    kr_status s = edges && pts && cnt ? KR_OK : kr_error(KR_ERR_NOMEM, "refine: no memory");
    for (int v = 0; v < n && s == KR_OK; v++)
        if (!(pts[v] = strided(&views[v], &cnt[v])))
            s = kr_error(KR_ERR_NOMEM, "refine: no memory for view %d's points", v);

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
            kr_pose inv = kr_pose_inv(&poses[i]), start = kr_pose_mul(&inv, &poses[j]);
            kr_register_result r;
            kr_status rs = kr_register(dev, &rc, pts[j], cnt[j], pts[i], cnt[i], &start, &r);
            if (rs == KR_ERR_NUMERIC || rs == KR_ERR_EMPTY) continue; /* no fit: no edge */
            if (rs != KR_OK) {
                s = rs;
                break;
            }
            edges[n_edges++] = (edge){i, j, r.pose, r.overlap, r.trusted};
        }
    }

    /* 2. A tree from the gauge: each step takes the most overlapping
     * trusted edge to a view not yet placed (Prim's). */
    bool *placed = s == KR_OK ? calloc((size_t)n, sizeof *placed) : NULL;
    if (s == KR_OK && !placed) s = kr_error(KR_ERR_NOMEM, "refine: no memory");
    int n_placed = 0;
    if (s == KR_OK) {
        memcpy(out, poses, sizeof *out * (size_t)n);
        placed[gauge] = true;
        n_placed = 1;
        for (;;) {
            int best = -1;
            for (int e = 0; e < n_edges; e++) {
                if (!edges[e].trusted || placed[edges[e].i] == placed[edges[e].j]) continue;
                if (best < 0 || edges[e].overlap > edges[best].overlap) best = e;
            }
            if (best < 0) break;
            edge *e = &edges[best];
            if (placed[e->i]) {
                out[e->j] = kr_pose_mul(&out[e->i], &e->T);
                placed[e->j] = true;
            } else {
                kr_pose inv = kr_pose_inv(&e->T);
                out[e->i] = kr_pose_mul(&out[e->j], &inv);
                placed[e->i] = true;
            }
            n_placed++;
        }
        /* A view no trusted edge reached keeps its given pose relative to the
         * gauge's. */
        kr_pose inv = kr_pose_inv(&poses[gauge]);
        for (int v = 0; v < n; v++)
            if (!placed[v]) {
                kr_pose rel = kr_pose_mul(&inv, &poses[v]);
                out[v] = kr_pose_mul(&out[gauge], &rel);
            }
    }
    if (connected) *connected = n_placed;
    free(placed);
    for (int v = 0; pts && v < n; v++)
        free(pts[v]);
    free(pts);
    free(cnt);
    free(edges);
    return s;
}
