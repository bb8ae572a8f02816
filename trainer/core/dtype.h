// Element types and devices of engine tensors, and scalar conversions between them.
//
// bf16 is the upper half of an IEEE binary32 (8-bit exponent, 7-bit mantissa); f16 is IEEE
// binary16. Conversions from f32 round to nearest even. All functions are pure and thread-safe.
#pragma once

#include <cstdint>
#include <cstring>
#include <immintrin.h>

namespace sf {

enum class DType : uint8_t { kF32, kBF16, kF16, kF64, kI32, kU8 };
enum class Device : uint8_t { kCpu, kCuda };

constexpr int64_t DTypeSize(DType t) {
  switch (t) {
    case DType::kF32: return 4;
    case DType::kBF16: return 2;
    case DType::kF16: return 2;
    case DType::kF64: return 8;
    case DType::kI32: return 4;
    case DType::kU8: return 1;
  }
  return 0;
}

constexpr const char* DTypeName(DType t) {
  switch (t) {
    case DType::kF32: return "f32";
    case DType::kBF16: return "bf16";
    case DType::kF16: return "f16";
    case DType::kF64: return "f64";
    case DType::kI32: return "i32";
    case DType::kU8: return "u8";
  }
  return "?";
}

// Maps a C++ scalar type to its DType.
template <typename T> struct DTypeOf;
template <> struct DTypeOf<float> { static constexpr DType value = DType::kF32; };
template <> struct DTypeOf<double> { static constexpr DType value = DType::kF64; };

inline uint16_t FloatToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);  // NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

inline float Bf16ToFloat(uint16_t h) {
  uint32_t u = static_cast<uint32_t>(h) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// F16C is part of the x86-64-v3 baseline the project compiles for.
inline uint16_t FloatToF16(float f) { return _cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT); }
inline float F16ToFloat(uint16_t h) { return _cvtsh_ss(h); }

}  // namespace sf
