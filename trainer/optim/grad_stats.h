// Passes over all gradients at once: overflow check + squared norm, scaling, and global-norm
// clipping (torch.nn.utils.clip_grad_norm_ semantics).
//
// Each function makes one fused, vectorized, OpenMP-parallel pass over the gradients of
// `params` (see multi_tensor.h) and allocates nothing. They are not safe to call concurrently
// on the same parameters.
#pragma once

#include <span>

#include "trainer/optim/param.h"

namespace sf {

struct GradStats {
  // Σ g² over every gradient element, accumulated in double. +inf or NaN when any element is
  // inf/NaN (the square of a non-finite value is non-finite and stays so through the sum, and the
  // square of the largest finite float fits a double, so this cannot overflow by itself).
  double sum_squares = 0;
  // True when any gradient element is inf or NaN (fp16 overflow): the step must be skipped.
  bool non_finite = false;

  // The L2 norm sqrt(sum_squares).
  double norm() const;
};

// One pass: the squared global L2 norm and whether any element is non-finite.
GradStats ScanGrads(std::span<const ParamRef> params);

// g *= factor for every gradient element (e.g. 1 / (loss_scale * target_tokens)).
void ScaleGrads(std::span<const ParamRef> params, float factor);

// Global-norm clipping: when ‖g‖ > max_norm, g *= max_norm / (‖g‖ + 1e-6) (the torch
// clip_grad_norm_ coefficient). `stats` must come from ScanGrads over the same gradients as they
// are now. max_norm <= 0 disables clipping. Non-finite norms leave the gradients untouched.
// Returns the total norm before clipping (what fairseq logs as gnorm).
float ClipGradNorm(std::span<const ParamRef> params, double max_norm, const GradStats& stats);

// What UnscaleAndClipGrads does, without touching gradients (the device path applies `factor`
// with Backend::Scale): norm is the unscaled norm before clipping; scale is false when the norm
// is not finite (the gradients are then left alone) or the factor is exactly 1.
struct UnscaleClip {
  float factor = 1;
  float norm = 0;
  bool scale = false;
};
UnscaleClip UnscaleAndClipFactor(float unscale, double max_norm, const GradStats& stats);

// Unscale and clip fused into one pass: afterwards g == clip(g * unscale) where the norm of the
// unscaled gradient is stats.norm() * |unscale|. Returns that unscaled norm (before clipping).
float UnscaleAndClipGrads(std::span<const ParamRef> params, float unscale, double max_norm,
                          const GradStats& stats);

}  // namespace sf
