// The element access the reference backend (reference.h, reference_attention.h) is written
// with: any dtype read as double and written rounded to nearest even, the dropout factor of a
// flat element index, attention's mask and the rounding a compute dtype applies. Plain, exact,
// slow; thread-safe (pure functions).
#pragma once

#include <cassert>
#include <cstdint>

#include "trainer/core/dtype.h"
#include "trainer/core/philox.h"

namespace sf::reference {

inline double Load(const void* p, DType t, int64_t i) {
  switch (t) {
    case DType::kF32: return static_cast<const float*>(p)[i];
    case DType::kF64: return static_cast<const double*>(p)[i];
    case DType::kBF16: return Bf16ToFloat(static_cast<const uint16_t*>(p)[i]);
    case DType::kF16: return F16ToFloat(static_cast<const uint16_t*>(p)[i]);
    default: assert(false); return 0;
  }
}

inline void Store(void* p, DType t, int64_t i, double v) {
  switch (t) {
    case DType::kF32: static_cast<float*>(p)[i] = static_cast<float>(v); break;
    case DType::kF64: static_cast<double*>(p)[i] = v; break;
    case DType::kBF16: static_cast<uint16_t*>(p)[i] = FloatToBf16(static_cast<float>(v)); break;
    case DType::kF16: static_cast<uint16_t*>(p)[i] = FloatToF16(static_cast<float>(v)); break;
    default: assert(false);
  }
}

// 0 or 1/(1-p) for flat element `index` (philox.h).
template <typename T>
T DropoutFactor(const DropoutKey& key, int64_t index, float p) {
  if (p <= 0) return T(1);
  return DropoutKept(key, static_cast<uint64_t>(index), DropoutThreshold(p))
             ? static_cast<T>(1.0 / (1.0 - static_cast<double>(p)))
             : T(0);
}

// Whether key k is hidden from query q of batch entry b (padding, or causal and k > q).
inline bool Masked(const uint8_t* key_padding, int64_t b, int64_t q, int64_t k, int64_t tk,
                   bool causal) {
  return (key_padding && key_padding[b * tk + k]) || (causal && k > q);
}

// v as a tensor of dtype t holds it.
inline double RoundedTo(DType t, double v) {
  if (t == DType::kBF16) return Bf16ToFloat(FloatToBf16(static_cast<float>(v)));
  if (t == DType::kF16) return F16ToFloat(FloatToF16(static_cast<float>(v)));
  if (t == DType::kF32) return static_cast<float>(v);
  return v;
}

}  // namespace sf::reference
