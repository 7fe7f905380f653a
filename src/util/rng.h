/* rng — splitmix64, the one small seeded generator the project uses for
 * dummy weights, datasets, the offline sampler and the random schedule
 * policy.  Deterministic for a seed; not for anything cryptographic. */
#ifndef SGLC_UTIL_RNG_H
#define SGLC_UTIL_RNG_H
#include <stdint.h>

/* Advance *s and return the next 64 random bits. */
static inline uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform integer in [lo, hi] (lo when hi <= lo). */
static inline int64_t rng_range(uint64_t *s, int64_t lo, int64_t hi)
{
    if (hi <= lo) return lo;
    return lo + (int64_t)(rng_next(s) % (uint64_t)(hi - lo + 1));
}
#endif
