/* Markers for per-element math that both engines compile (DESIGN.md §4).
 *
 * A `static inline KR_HD` function is written once and called from the
 * OpenMP loop and from the CUDA kernel, so the two engines cannot drift apart. */
#ifndef KINREG_CORE_KR_HD_H
#define KINREG_CORE_KR_HD_H

#ifdef __CUDACC__
#define KR_HD __host__ __device__
#else
#define KR_HD
#endif

/* A product that the compiler may not fuse with a neighbouring add into an
 * FMA. nvcc fuses by default while the C build does not (-std=c11 implies
 * -ffp-contract=off), so sums of products written with KR_MUL round alike on
 * both engines and parity holds bit for bit rather than within rounding. */
#if defined(__CUDA_ARCH__)
#define KR_MUL(a, b) __fmul_rn((a), (b))
#define KR_DMUL(a, b) __dmul_rn((a), (b))
#else
#define KR_MUL(a, b) ((a) * (b))
#define KR_DMUL(a, b) ((a) * (b))
#endif

#endif
