// Philox-4x32-10 (Salmon et al., "Parallel random numbers: as easy as 1, 2, 3", SC'11), the
// counter-based generator behind every dropout mask.
//
// A mask element is a pure function of (seed, stream, index): the engine never stores dropout
// masks, it regenerates them in backward. Layout of one draw: counter = {index/8 low, index/8
// high, stream low, stream high}, key = {seed low, seed high}; the four 32-bit outputs are split
// into eight 16-bit uniforms, element `index` takes uniform index%8. An element is kept when its
// uniform u16 >= threshold = round(p * 65536); kept values are scaled by 1/(1-p). Pure functions,
// thread-safe.
#pragma once

#include <cstdint>

// The generator is shared by the CPU kernels and the CUDA kernels (same masks on both).
#if defined(__CUDACC__)
#define SF_HOST_DEVICE __host__ __device__
#else
#define SF_HOST_DEVICE
#endif

namespace sf {

struct DropoutKey {
  uint64_t seed = 0;
  uint64_t stream = 0;  // distinct per (step, micro-batch, dropout site)
};

struct Philox4x32 {
  uint32_t v[4];
};

SF_HOST_DEVICE inline Philox4x32 Philox(uint64_t seed, uint64_t stream, uint64_t block) {
  uint32_t c0 = static_cast<uint32_t>(block), c1 = static_cast<uint32_t>(block >> 32);
  uint32_t c2 = static_cast<uint32_t>(stream), c3 = static_cast<uint32_t>(stream >> 32);
  uint32_t k0 = static_cast<uint32_t>(seed), k1 = static_cast<uint32_t>(seed >> 32);
  for (int r = 0; r < 10; ++r) {
    const uint64_t p0 = static_cast<uint64_t>(0xD2511F53u) * c0;
    const uint64_t p1 = static_cast<uint64_t>(0xCD9E8D57u) * c2;
    const uint32_t n0 = static_cast<uint32_t>(p1 >> 32) ^ c1 ^ k0;
    const uint32_t n1 = static_cast<uint32_t>(p1);
    const uint32_t n2 = static_cast<uint32_t>(p0 >> 32) ^ c3 ^ k1;
    const uint32_t n3 = static_cast<uint32_t>(p0);
    c0 = n0; c1 = n1; c2 = n2; c3 = n3;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  return {{c0, c1, c2, c3}};
}

SF_HOST_DEVICE inline uint32_t DropoutThreshold(float p) {
  const double t = static_cast<double>(p) * 65536.0 + 0.5;
  return t >= 65536.0 ? 65536u : static_cast<uint32_t>(t);
}

// Fills keep[0..8) for elements 8*block .. 8*block+7 (1 = kept).
SF_HOST_DEVICE inline void DropoutKeep8(const DropoutKey& key, uint64_t block, uint32_t threshold,
                         uint8_t keep[8]) {
  const Philox4x32 r = Philox(key.seed, key.stream, block);
  for (int j = 0; j < 4; ++j) {
    keep[2 * j] = (r.v[j] & 0xffffu) >= threshold;
    keep[2 * j + 1] = (r.v[j] >> 16) >= threshold;
  }
}

// Whether element `index` of the mask is kept (the scalar definition; kernels batch it).
SF_HOST_DEVICE inline bool DropoutKept(const DropoutKey& key, uint64_t index, uint32_t threshold) {
  uint8_t keep[8];
  DropoutKeep8(key, index / 8, threshold, keep);
  return keep[index % 8];
}

}  // namespace sf
