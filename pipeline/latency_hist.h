/* Latency statistics in constant memory over a session of any length: a
 * histogram with logarithmic bins (each 0.5 % wide) from 1 µs to 1000 s,
 * plus the exact minimum and maximum. A list of every latency (what the
 * pipeline kept before) grows by 8 bytes per frame without end. Quantiles
 * come back as the geometric centre of their bin, so within 0.25 % of the
 * exact nearest-rank value. */
#ifndef KINREG_PIPELINE_LATENCY_HIST_H
#define KINREG_PIPELINE_LATENCY_HIST_H

#include <stddef.h>
#include <stdint.h>

#define KR_LATENCY_BINS 4200 /* ln(1e9) / ln(1.005) ≈ 4155 */

typedef struct {
    uint64_t count;
    double min_ms, max_ms;
    uint32_t bins[KR_LATENCY_BINS];
} kr_latency_hist;

void kr_latency_hist_reset(kr_latency_hist *h);
void kr_latency_hist_add(kr_latency_hist *h, double ms);
/* Nearest-rank quantile q in [0, 1] (the sample of rank ceil(q·n), at least
 * 1); 0 when empty. Values outside [1 µs, 1000 s] count in the end bins,
 * and the result is clamped to [min, max], so it is exact for the lowest
 * and highest ranks. */
double kr_latency_hist_quantile(const kr_latency_hist *h, double q);

#endif
