/* The default registration (KR_REG_AUTO, kinreg/register.h): a search over
 * start poses, the soft method, the Newton method, and a verdict.
 *
 * Users bring pairs with a rough start (a turntable's nominal angle, a hand
 * placed guess) and partial overlap. Neither seed method holds alone there:
 * EM-ICP pulls a part of a scan towards the whole's centroid (half of a
 * bunny scan against the whole ends 17° off from every start), Newton has a
 * narrow basin. So:
 *
 *  1. hypotheses: the start, and the start turned about the source's centroid
 *     by 45°, 90° and 135° about axes spread over the sphere;
 *  2. each is probed by the Newton method with a wide gate (far pairs pull
 *     point to point, normals not required to agree) on a few hundred source
 *     points — on a CUDA device all in one launch — and scored by the share
 *     of the probe that ends on the destination;
 *  3. the best few are refined by Newton on the whole sets, the best one also
 *     by the soft method (Softassign: its slack rows and columns let points
 *     without a partner go) then Newton;
 *  4. every refined pose is measured independently — the share of source
 *     points with a destination point within three point spacings (the
 *     overlap) and their RMS distance — and the best kept;
 *  5. the verdict: trusted when the overlap is large enough, the residual
 *     near the sets' sampling, and no other distinct pose fits about as well
 *     (a symmetric or featureless pair is ambiguous, not right). */
#ifndef KINREG_PIPELINE_REGISTER_REGISTER_SEARCH_H
#define KINREG_PIPELINE_REGISTER_REGISTER_SEARCH_H

#include <stddef.h>

#include "kinreg/register.h"

/* The soft method's run from `init` on src/dst (the registration kr_register
 * does for KR_REG_EMICP and KR_REG_SOFTASSIGN), for the search to call. */
typedef kr_status (*kr_register_soft_fn)(kr_device *dev, const kr_register_config *cfg,
                                         const float *src, size_t n, const float *dst, size_t m,
                                         const kr_pose *init, kr_pose *out, int *steps);

kr_status kr_register_search(kr_device *dev, const kr_register_config *cfg, kr_reg_engine engine,
                             const float *src, size_t n, const float *dst, size_t m,
                             const kr_pose *init, double extent, kr_register_soft_fn soft,
                             kr_register_result *out);

#endif
