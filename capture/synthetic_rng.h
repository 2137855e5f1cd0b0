/* Small deterministic PRNGs for the synthetic source (never rand(): the
 * sequence must be the same on every libc and thread count). */
#ifndef KINREG_CAPTURE_SYNTHETIC_RNG_H
#define KINREG_CAPTURE_SYNTHETIC_RNG_H

#include <stdint.h>

/* splitmix64: turns any seed (also 0 and neighbouring seeds) into well-mixed
 * 64-bit values; used to seed streams and for scene layout. */
static inline uint64_t kr_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double kr_rng_uniform(uint64_t *state)
{
    return (double)(kr_rng_next(state) >> 11) * (1.0 / 9007199254740992.0);
}

/* Uniform in [lo, hi). */
static inline double kr_rng_range(uint64_t *state, double lo, double hi)
{
    return lo + (hi - lo) * kr_rng_uniform(state);
}

/* A seed for sub-stream `a`,`b` of `seed` (per frame, per tile). */
static inline uint64_t kr_rng_mix(uint64_t seed, uint64_t a, uint64_t b)
{
    uint64_t s = seed ^ (a * 0xd1b54a32d192ed03ULL) ^ (b * 0x8cb92ba72f3d8dd7ULL);
    kr_rng_next(&s);
    return s;
}

#endif
