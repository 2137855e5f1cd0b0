/* How well a registration fits, measured independently of the method that
 * found it: dst's point spacing, the share of source points that end within
 * three spacings of a destination point (the overlap) and their RMS distance
 * (the residual), and the verdict drawn from them (kinreg/register.h,
 * kr_register_result). */
#ifndef KINREG_PIPELINE_REGISTER_REGISTER_VERDICT_H
#define KINREG_PIPELINE_REGISTER_REGISTER_VERDICT_H

#include <stddef.h>

#include "kinreg/kdtree.h"
#include "kinreg/register.h"

/* A source point counts as overlapping within this many of dst's spacings. */
#define KR_REGISTER_OVERLAP_SPACINGS 3.0
/* A trusted result's residual is at most this many spacings. */
#define KR_REGISTER_RESIDUAL_SPACINGS 2.5
/* ... and no distinct pose reaches this share of its overlap. */
#define KR_REGISTER_AMBIGUOUS_SHARE 0.8

/* Median distance from a point of the tree to its nearest other point, on up
 * to 1000 evenly spread points of p (the tree's own points): the sampling
 * density. INFINITY when no two points are apart. */
double kr_register_spacing(const kr_kdtree *tree, const float *p, size_t m);

/* The overlap and residual of src (n points) moved by T against the tree,
 * within `radius`, on at most `samples` evenly spread source points. */
void kr_register_overlap(const kr_kdtree *tree, const float *src, size_t n, const kr_pose *T,
                         double radius, size_t samples, double *overlap, double *residual);

/* trusted and confidence from r's spacing, overlap, residual and runner_up. */
void kr_register_judge(const kr_register_config *cfg, kr_register_result *r);

#endif
