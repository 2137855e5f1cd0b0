/* Softassign coarse to fine: the split of the schedule
 * (pipeline/register/coarse_to_fine.h explains why it keeps the result). */
#include <stdlib.h>
#include <string.h>

#include "pipeline/register/coarse_to_fine.h"

/* The first temperature J with T = t0·t_factor^J below stop_scale² (the
 * stop rule's scale, whether or not the rule is on), or jmax. */
static int temperatures_above_stop_scale(const kr_register_params *p)
{
    const double scale2 = p->stop_scale * p->stop_scale;
    double T = p->t0;
    for (int j = 0; j < p->jmax; j++, T *= p->t_factor)
        if (T < scale2) return j;
    return p->jmax;
}

kr_register_levels kr_register_levels_plan(const kr_register_params *p, size_t n, size_t m,
                                           int coarse_points, int fine_temperatures)
{
    kr_register_levels lv = {0, 1, 1};
    if (p->method != KR_REGISTER_METHOD_SOFTASSIGN || coarse_points <= 0) return lv;
    size_t cp = (size_t)coarse_points;
    size_t ks = n / cp > 1 ? n / cp : 1, kd = m / cp > 1 ? m / cp : 1;
    int coarse = temperatures_above_stop_scale(p) - fine_temperatures;
    if (coarse <= 0 || (ks == 1 && kd == 1)) return lv;
    lv.coarse_temperatures = coarse;
    lv.src_stride = ks;
    lv.dst_stride = kd;
    return lv;
}

void kr_register_params_after(kr_register_params *p, int done)
{
    for (int j = 0; j < done; j++)
        p->t0 *= p->t_factor;
    p->jmax -= done;
}

float *kr_register_thin(const float *p, size_t n, size_t stride, size_t *out_n)
{
    size_t k = (n + stride - 1) / stride;
    float *q = malloc((k ? k : 1) * 3 * sizeof *q);
    if (!q) return NULL;
    for (size_t i = 0; i < k; i++)
        memcpy(q + 3 * i, p + 3 * i * stride, 3 * sizeof *q);
    *out_n = k;
    return q;
}
