// splitmix64 (Steele, Lea and Flood; Vigna's constants): a small, portable 64-bit generator,
// so data plans and per-rank seeds are identical across standard libraries and machines.
// Plain value type; not thread-safe (one per consumer).
#pragma once

#include <cstdint>

namespace sf {

struct SplitMix64 {
  uint64_t state;
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Uniform in [0, n) (rejection sampling: no modulo bias).
  uint64_t Below(uint64_t n) {
    uint64_t limit = UINT64_MAX - UINT64_MAX % n;
    uint64_t x;
    do x = Next();
    while (x >= limit);
    return x % n;
  }
};

}  // namespace sf
