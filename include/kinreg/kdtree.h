/* kinreg — k-d tree over a model point set whose leaf cells carry the
 * coefficients of a quadratic approximant of the squared distance to the model:
 * d²(q) ≈ qᵀA q − 2bᵀq + c, b = A s*, c = s*ᵀA s* (DESIGN.md §5). */
#ifndef KINREG_KDTREE_H
#define KINREG_KDTREE_H

#include <stddef.h>

#include "kinreg/status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct kr_kdtree kr_kdtree;

/* Builds over n points (3 floats each) with unit normals (3 floats each; a
 * normal with x = NaN marks a point without one: it is far-field only).
 * Copies the data; the tree is immutable afterwards and safe to query from
 * many threads. */
KR_API kr_status kr_kdtree_build(kr_kdtree **out, const float *points, const float *normals, size_t n);
KR_API void kr_kdtree_destroy(kr_kdtree **tree);

KR_API size_t kr_kdtree_size(const kr_kdtree *tree);
/* Point and normal i in the caller's original order. */
KR_API void kr_kdtree_point(const kr_kdtree *tree, size_t i, float p[3], float n[3]);

/* The paper's approximation: descends to the cell containing q without
 * back-tracking; returns the original index of that cell's point. */
KR_API size_t kr_kdtree_descend(const kr_kdtree *tree, const float q[3]);
/* Exact nearest neighbour (with back-tracking), for tests and an exact mode.
 * *dist2 receives the squared distance when not NULL. */
KR_API size_t kr_kdtree_nearest(const kr_kdtree *tree, const float q[3], float *dist2);
/* The nearest point closer than sqrt(max_dist2), or (size_t)-1 with
 * *dist2 = max_dist2 when there is none: far queries then cost a few cells,
 * not a walk over most of the tree. */
KR_API size_t kr_kdtree_nearest_within(const kr_kdtree *tree, const float q[3], float max_dist2,
                                       float *dist2);

#ifdef __cplusplus
}
#endif
#endif
