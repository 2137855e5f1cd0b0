/* The registration's independent measures and verdict (register_verdict.h). */
#include "pipeline/register/register_verdict.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/kdtree_layout.h"

static int cmp_float(const void *a, const void *b)
{
    float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

double kr_register_spacing(const kr_kdtree *tree, const float *p, size_t m)
{
    enum { SAMPLES = 1000 };
    float d[SAMPLES];
    size_t step = m > SAMPLES ? m / SAMPLES : 1, k = 0;
    for (size_t i = 0; i < m && k < SAMPLES; i += step) {
        uint32_t idx[2];
        float d2[2];
        /* duplicated points (0 apart) say nothing of the sampling */
        if (kr_kdtree_knn(tree, p + 3 * i, 2, idx, d2) == 2 && d2[1] > 0) d[k++] = sqrtf(d2[1]);
    }
    if (k == 0) return INFINITY;
    qsort(d, k, sizeof *d, cmp_float);
    return d[k / 2];
}

void kr_register_overlap(const kr_kdtree *tree, const float *src, size_t n, const kr_pose *T,
                         double radius, size_t samples, double *overlap, double *residual)
{
    const size_t step = samples && n > samples ? n / samples : 1;
    const float r2 = (float)(radius * radius);
    size_t used = 0, in = 0;
    double sum = 0;
#pragma omp parallel for schedule(static) reduction(+ : sum, in, used)
    for (size_t i = 0; i < n; i += step) {
        double p[3] = {src[3 * i], src[3 * i + 1], src[3 * i + 2]}, q[3];
        kr_pose_apply(T, p, q);
        float qf[3] = {(float)q[0], (float)q[1], (float)q[2]}, d2;
        used++;
        if (kr_kdtree_nearest_within(tree, qf, r2, &d2) != (size_t)-1 && d2 <= r2) {
            in++;
            sum += d2;
        }
    }
    *overlap = used ? (double)in / (double)used : 0;
    *residual = in ? sqrt(sum / (double)in) : INFINITY;
}

static double clamp01(double x)
{
    return x < 0 ? 0 : x > 1 ? 1 : x;
}

void kr_register_judge(const kr_register_config *cfg, kr_register_result *r)
{
    double min_overlap = cfg->min_overlap > 0 ? cfg->min_overlap : 0.2;
    double ratio = r->spacing > 0 ? r->residual / r->spacing : INFINITY;
    double share = r->overlap > 0 ? r->runner_up / r->overlap : 1;
    r->trusted = r->overlap >= min_overlap && ratio <= KR_REGISTER_RESIDUAL_SPACINGS &&
                 share < KR_REGISTER_AMBIGUOUS_SHARE;
    /* Each factor is 1 well inside its bound and 0 at or past it. */
    double f_overlap = clamp01((r->overlap - 0.5 * min_overlap) / min_overlap);
    double f_residual = clamp01((KR_REGISTER_RESIDUAL_SPACINGS + 1 - ratio) / 2);
    double f_unique = clamp01((KR_REGISTER_AMBIGUOUS_SHARE + 0.1 - share) / 0.4);
    r->confidence = f_overlap * f_residual * f_unique;
}
