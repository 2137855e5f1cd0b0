/* The latency histogram (pipeline/latency_hist.c) against exact quantiles
 * of the sorted samples. */
#include "kr_test.h"

#include <stdlib.h>

#include "pipeline/latency_hist.h"

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

KR_TEST(latency_hist, latency_histogram_matches_sorted_quantiles)
{
    static kr_latency_hist h;
    kr_latency_hist_reset(&h);
    CHECK_EQ(kr_latency_hist_quantile(&h, 0.5), 0);
    enum { N = 20001 };
    static double v[N];
    srand(7);
    for (int i = 0; i < N; i++) {
        /* Log-uniform from 0.05 ms to 500 ms, plus a few outliers. */
        double u = rand() / (double)RAND_MAX;
        v[i] = i % 1000 == 0 ? 5e6 : 0.05 * pow(1e4, u);
        kr_latency_hist_add(&h, v[i]);
    }
    qsort(v, N, sizeof *v, cmp_double);
    const double qs[] = {0.01, 0.5, 0.9, 0.99, 0.999};
    for (size_t k = 0; k < sizeof qs / sizeof *qs; k++) {
        size_t rank = (size_t)ceil(qs[k] * N);
        double exact = v[rank - 1], got = kr_latency_hist_quantile(&h, qs[k]);
        /* Half a bin (0.25 %) in the histogram's range; the outliers beyond
         * 1000 s share the last bin, clamped to the exact maximum. */
        if (exact < 1e6)
            CHECK_NEAR(got / exact, 1.0, 0.0026);
        else
            CHECK_LE(got, v[N - 1]);
    }
    CHECK_EQ(kr_latency_hist_quantile(&h, 0.0), v[0]);
    CHECK_EQ(kr_latency_hist_quantile(&h, 1.0), v[N - 1]);
}
