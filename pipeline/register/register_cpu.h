/* The OpenMP registration engine (pipeline/register/register_cpu.c), called by
 * kr_register (pipeline/register/register.c) with validated, centred inputs. */
#ifndef KINREG_PIPELINE_REGISTER_REGISTER_CPU_H
#define KINREG_PIPELINE_REGISTER_REGISTER_CPU_H

#include <stddef.h>

#include "pipeline/register/softreg_kernels.h"
#include "kinreg/status.h"

/* Runs the schedule of p from the pose (R, t) (in/out) on src (n points) and
 * dst (m points), 3 floats each; st receives the schedule's final state.
 * KR_ERR_NOMEM, or KR_ERR_NUMERIC when every weight vanished. */
kr_status kr_register_cpu(const kr_register_params *p, int threads, const float *src, size_t n,
                          const float *dst, size_t m, double R[9], double t[3],
                          kr_register_state *st);

#endif
