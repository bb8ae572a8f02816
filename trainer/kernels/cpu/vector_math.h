// Vectorisable float math shared by the CPU kernels (compiled for AVX2 in cpu_backend.cc and
// for AVX-512 in hot_kernels_avx512.cc). Pure functions.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace sf::vmath {

// exp(x) = 2^n * e^r with n = round(x / ln 2), r = x - n ln 2 in [-ln2/2, ln2/2] (Cody-Waite
// split of ln 2), e^r by its degree-6 Taylor polynomial (truncation < 1.2e-7 relative).
// Vectorises (floor -> vroundps). Inputs are clamped to [-87.3, 88.7] (no denormals).
inline float FastExp(float x) {
  x = std::min(std::max(x, -87.3f), 88.7f);
  const float n = std::floor(x * 1.44269504088896341f + 0.5f);
  const float r = (x - n * 0.693145751953125f) - n * 1.428606765330187e-06f;
  float p = 1.0f / 720;
  p = p * r + 1.0f / 120;
  p = p * r + 1.0f / 24;
  p = p * r + 1.0f / 6;
  p = p * r + 0.5f;
  p = p * r + 1.0f;
  p = p * r + 1.0f;
  const int32_t bits = (static_cast<int32_t>(n) + 127) << 23;
  float scale;
  std::memcpy(&scale, &bits, 4);
  return p * scale;
}

// erf(x) (Abramowitz & Stegun 7.1.26, |error| < 1.5e-7), vectorisable.
inline float FastErf(float x) {
  const float s = x < 0 ? -1.0f : 1.0f;
  const float a = std::fabs(x);
  const float t = 1.0f / (1.0f + 0.3275911f * a);
  const float y = 1.0f - (((((1.061405429f * t - 1.453152027f) * t) + 1.421413741f) * t -
                            0.284496736f) * t + 0.254829592f) * t * FastExp(-a * a);
  return s * y;
}

}  // namespace sf::vmath
