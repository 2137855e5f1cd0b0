/* Pairwise registration with the k-d tree Newton method (seed 004): the
 * tracker's point-to-plane Newton loop on two unorganised point sets, for
 * kr_register's method KR_REG_NEWTON. A narrow basin: it refines a pose
 * that is already close (EM-ICP's, or --init), where the soft methods stop
 * at their last σ. */
#ifndef KINREG_PIPELINE_REGISTER_REGISTER_NEWTON_H
#define KINREG_PIPELINE_REGISTER_REGISTER_NEWTON_H

#include <stddef.h>

#include "kinreg/device.h"
#include "kinreg/kdtree.h"
#include "kinreg/pose.h"
#include "kinreg/track.h"

/* Two sets made ready for the Newton method, for several runs from several
 * poses: dst's model tree (points with normals), src's points with normals
 * as a pyramid of every 4^l-th point. */
typedef struct {
    kr_kdtree *tree;  /* dst's points that have a normal, with it */
    kr_pyramid src;   /* src's points that have a normal, levels of every 4^l-th */
    kr_pyramid probe; /* at most 800 of them, evenly strided, levels alike */
    const float *src_points, *src_normals; /* level 0's n points and normals */
    size_t n;
    double spacing; /* dst's median point spacing, metres */
    double extent;  /* the problem's size, metres */
    double gate;    /* the finest level's gate */
    float *block;   /* owns src_points and src_normals */
} kr_register_pair;

kr_status kr_register_pair_prepare(const float *src, size_t n, const float *dst, size_t m,
                                   double extent, kr_register_pair *pair);
void kr_register_pair_free(kr_register_pair *pair);
/* The search's probes: Newton with a wide gate from each of count seeds on
 * the probe points, out[k] from seeds[k] (on a CUDA device in one launch). */
kr_status kr_register_pair_probe(kr_device *dev, const kr_register_pair *pair, const kr_pose *seeds,
                                 int count, kr_track_result *out);
/* Newton from *pose (replaced); result (may be NULL) gets the tracking's figures. */
kr_status kr_register_pair_newton(kr_device *dev, const kr_register_pair *pair, kr_pose *pose,
                                  kr_track_result *result);

/* Registers src (n points) onto dst (m points) from *pose (src into dst's
 * frame), which it replaces. Normals come from 12 nearest neighbours (PCA)
 * of each set; dst's k-d tree is the model. The finest level's gate is a
 * tenth of `extent` (metres) or eight times dst's median point spacing,
 * whichever is less, doubling per level of a source pyramid of every 4^l-th
 * point. dev NULL or a CPU device: the
 * OpenMP engine; a CUDA device: the GPU tracker. KR_ERR_EMPTY when either
 * set has fewer than 6 points with a normal. */
kr_status kr_register_newton(kr_device *dev, const float *src, size_t n, const float *dst, size_t m,
                             double extent, kr_pose *pose, int *iterations);

#endif
