/* Logarithmic latency histogram (pipeline/latency_hist.h). */
#include "pipeline/latency_hist.h"

#include <math.h>
#include <string.h>

#define LOWEST_MS 1e-3 /* 1 µs */
#define BIN_RATIO 1.005

void kr_latency_hist_reset(kr_latency_hist *h)
{
    memset(h, 0, sizeof *h);
}

static int bin_of(double ms)
{
    if (!(ms > LOWEST_MS)) return 0; /* also NaN */
    double b = floor(log(ms / LOWEST_MS) / log(BIN_RATIO));
    return b >= KR_LATENCY_BINS - 1 ? KR_LATENCY_BINS - 1 : (int)b;
}

void kr_latency_hist_add(kr_latency_hist *h, double ms)
{
    if (h->count == 0 || ms < h->min_ms) h->min_ms = ms;
    if (h->count == 0 || ms > h->max_ms) h->max_ms = ms;
    h->count++;
    h->bins[bin_of(ms)]++;
}

double kr_latency_hist_quantile(const kr_latency_hist *h, double q)
{
    if (h->count == 0) return 0;
    double r = ceil(q * (double)h->count);
    uint64_t rank = r < 1 ? 1 : (r > (double)h->count ? h->count : (uint64_t)r);
    if (rank == 1) return h->min_ms;
    if (rank == h->count) return h->max_ms;
    uint64_t seen = 0;
    int b = 0;
    for (; b < KR_LATENCY_BINS - 1; b++) {
        seen += h->bins[b];
        if (seen >= rank) break;
    }
    /* Geometric centre of bin b: [LOWEST·R^b, LOWEST·R^(b+1)). */
    double v = LOWEST_MS * pow(BIN_RATIO, b + 0.5);
    return v < h->min_ms ? h->min_ms : (v > h->max_ms ? h->max_ms : v);
}
