/* The OpenMP registration engine (pipeline/register_cpu.c), called by
 * kr_register (pipeline/register.c) with validated, centred inputs. */
#ifndef KR_REGISTER_CPU_H
#define KR_REGISTER_CPU_H

#include <stddef.h>

#include "core/softreg_kernels.h"
#include "kinreg/status.h"

/* Runs the schedule of p from the pose (R, t) (in/out) on src (n points) and
 * dst (m points), 3 floats each; st receives the schedule's final state.
 * KR_ERR_NOMEM, or KR_ERR_NUMERIC when every weight vanished. */
kr_status kr_register_cpu(const kr_hd_reg_params *p, int threads, const float *src, size_t n,
                          const float *dst, size_t m, double R[9], double t[3],
                          kr_hd_reg_state *st);

#endif
