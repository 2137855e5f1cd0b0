/* kinreg — weighted absolute orientation (Horn 1987, quaternion method): the
 * rigid motion that best maps one set of points onto another. Used by
 * trajectory evaluation, and by the registration steps that re-estimate a
 * pose from weighted correspondences. */
#ifndef KINREG_HORN_H
#define KINREG_HORN_H

#include <stddef.h>

#include "kinreg/pose.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The pose T that minimises Σ w_i ‖dst_i − T src_i‖² over n point pairs
 * (3 doubles each). w may be NULL (all ones). */
KR_API kr_status kr_horn(const double *src, const double *dst, const double *w, size_t n,
                         kr_pose *out);

#ifdef __cplusplus
}
#endif
#endif
