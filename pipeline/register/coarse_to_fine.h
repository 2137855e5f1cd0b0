/* Softassign coarse to fine: the schedule's warm temperatures on thinned
 * sets, its cold ones on the whole sets.
 *
 * Softassign's cost is N·M pairs, seven passes over them per Horn step (three
 * Sinkhorn rounds of a row and a column pass, then the M-step), for every step
 * of the seed's schedule: 100 temperatures × 5 steps. With 5000 points a side
 * that is 8·10^10 exponentials, 42-50 s on two cores.
 *
 * Most of them are spent where they change nothing. At temperature T the
 * weights exp(−(d² − α)/T) are a Gaussian of width √T over the points: from
 * 10 cm down to 1 cm on a 10 cm object under the seed's constants, while a
 * 5000-point scan's spacing is 2–3 mm. A sum over a kernel many spacings
 * wide is nearly the same sum over a thinned sample, so the thinned sets
 * follow the whole ones' path down the schedule. And the pose a temperature
 * ends at is that temperature's fixed point, not a memory of the path there:
 * started a fraction of a degree away, a few temperatures on every point
 * pull the pose onto the whole schedule's answer. Measured on the synthetic
 * 2000-point pair (the pose at each step against the last): a whole-set run
 * still moves 0.05° over its last five temperatures; thinned to a quarter
 * until the last 12 (or 6) temperatures, the result is the whole run's to
 * 0.002° (0.003°); thinned until the last 2, 0.2° off.
 *
 * But the thinned sets must not go on into the cold end, where √T nears
 * their own spacing: there their fixed point parts from the whole sets', and
 * a few temperatures on every point no longer pull it back (measured on real
 * scans: a coarse run to the schedule's end, then its last 6 temperatures
 * again on every point, ended up to 0.28° from the seed's form; 12, 0.11°).
 * So the thinned sets (every k-th point of each set, k such that about
 * `coarse_points` remain; the strided subset of a scan-ordered or randomly
 * subsampled set is an even thinning) run the temperatures down to
 * `fine_temperatures` before the stop rule's scale, T = stop_scale², about
 * where √T meets the thinned sets' spacing (at 512 points, 0.15 of the
 * extent; the stop scale is 0.1 of it); every later temperature runs on
 * every point, from the pose the thinned sets reached, stop rule included.
 * The run therefore ends where the seed's form ends. The engines are
 * unchanged: each part is an ordinary schedule, the second starting where
 * the first left off. docs/BENCHMARKS.md has the measurements on real scans. */
#ifndef KINREG_PIPELINE_REGISTER_COARSE_TO_FINE_H
#define KINREG_PIPELINE_REGISTER_COARSE_TO_FINE_H

#include <stddef.h>

#include "pipeline/register/softreg_kernels.h"

typedef struct {
    int coarse_temperatures; /* the first ones, run on the thinned sets; 0 = none */
    size_t src_stride, dst_stride;
} kr_register_levels;

/* The split of Softassign's schedule p for n source and m destination
 * points; coarse_points 0 (or EM-ICP) gives no split. */
kr_register_levels kr_register_levels_plan(const kr_register_params *p, size_t n, size_t m,
                                           int coarse_points, int fine_temperatures);

/* The schedule of the temperatures after the first `done` of p. */
void kr_register_params_after(kr_register_params *p, int done);

/* Every stride-th of the n points p (3 floats each), into a new array of
 * *out_n points; NULL when out of memory. */
float *kr_register_thin(const float *p, size_t n, size_t stride, size_t *out_n);

#endif
