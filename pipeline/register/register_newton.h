/* Pairwise registration with the k-d tree Newton method (seed 004): the
 * tracker's point-to-plane Newton loop on two unorganised point sets, for
 * kr_register's method KR_REG_NEWTON. A narrow basin: it refines a pose
 * that is already close (EM-ICP's, or --init), where the soft methods stop
 * at their last σ. */
#ifndef KINREG_PIPELINE_REGISTER_REGISTER_NEWTON_H
#define KINREG_PIPELINE_REGISTER_REGISTER_NEWTON_H

#include <stddef.h>

#include "kinreg/device.h"
#include "kinreg/pose.h"

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
