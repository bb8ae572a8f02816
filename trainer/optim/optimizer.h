// Optimizers over fp32 master weights: AdamW, RAdam and SGD with momentum, chosen by name.
//
// Semantics follow PyTorch 1.13 exactly (same state, same update formulas, same order of
// operations where it matters for fp32 rounding); docs/optim.md spells them out:
//   adamw  torch.optim.AdamW: decoupled weight decay p *= 1 - lr·wd, bias-corrected moments.
//   radam  torch.optim.RAdam: rectified adaptive step while ρ_t > radam_rho_threshold,
//          un-adapted momentum step p -= lr·m̂ before; weight decay is L2 (grad += wd·p, the
//          torch 1.13 behaviour) unless decoupled_weight_decay is set (p *= 1 - lr·wd).
//   sgd    torch.optim.SGD: momentum buffer b = μ·b + g (dampening 0, first step b = g),
//          optional Nesterov (g + μ·b); weight decay is L2.
// Weight decay applies only to parameters with ParamRef::weight_decay set.
//
// The update is one fused multi-tensor loop: per parameter element, one pass reads the
// gradient and state, does all the math, and writes weight and state back; OpenMP threads split
// the concatenated parameters. State is fp32, allocated once per parameter (in Prepare or on
// the first Step); later steps allocate nothing.
//
// On a device (PlaceOn(backend), e.g. a GPU): the state is one flat buffer per state name in
// the backend's memory, laid out like the parameter store, and Step is one fused
// Backend::ApplyOptimizerUpdate over every parameter. The per-element arithmetic is the same
// function on every device (optim/update_rules.h); State()/LoadState() copy through the host,
// so checkpoints do not depend on where the state lived.
//
// An Optimizer is not thread-safe; use it from the training thread only. It is non-copyable.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "trainer/core/dtype.h"
#include "trainer/optim/param.h"
#include "trainer/optim/update_rules.h"

namespace sf {

template <typename T>
class Backend;

struct OptimizerOptions {
  std::string type;  // "adamw" | "radam" | "sgd"
  double beta1 = 0.9;
  double beta2 = 0.999;
  double eps = 1e-8;
  double weight_decay = 0;
  double momentum = 0.9;  // sgd only; 0 disables the momentum buffer
  bool nesterov = false;  // sgd only; needs momentum > 0
  // radam only: take the rectified adaptive step when ρ_t > this (torch and the author's code:
  // 5; the paper: 4). See docs/optim.md.
  double radam_rho_threshold = 5.0;
  // radam only: false = L2 penalty added to the gradient (torch 1.13), true = decoupled
  // (AdamW-style p *= 1 - lr·wd, torch ≥ 2.0's decoupled_weight_decay=True).
  bool decoupled_weight_decay = false;
};

// What the update pass does besides the update itself (Optimizer::Step): it updates from the
// gradients times grad_factor (each product rounded to fp32, exactly what ScaleGrads would have
// stored; the stored gradients are left as they are). The host pass, after updating a chunk of
// values, calls on_updated(values, n) from the thread that updated them, while the chunk is in
// cache (e.g. to refresh a bf16 copy of the weights). The device pass (PlaceOn) writes
// mirror[i] = the updated value i of the flat value buffer as mirror_dtype (OptimizerUpdate),
// when mirror is not null.
struct StepFusion {
  float grad_factor = 1.0f;
  std::function<void(const float* values, size_t n)> on_updated;
  void* mirror = nullptr;
  DType mirror_dtype = DType::kBF16;
};

class Optimizer {
 public:
  virtual ~Optimizer();
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  // The registry name ("adamw", ...).
  virtual std::string_view type() const = 0;
  const OptimizerOptions& options() const { return options_; }

  // Keeps the state on `backend`'s device and updates through backend->ApplyOptimizerUpdate.
  // Call before anything else. The parameters are then slices of one flat value buffer and one
  // flat gradient buffer (a ParamStore's) at the same offsets, and every Step must pass the
  // same list. nullptr (the default): host state, OpenMP loops, any parameter list.
  void PlaceOn(Backend<float>* backend);

  // Allocates the state for `params` now (zeros), so that the first Step allocates nothing.
  // Fails on duplicate or empty parameter names. Optional: Step prepares lazily.
  Status Prepare(std::span<const ParamRef> params);

  // One update of every parameter with learning rate `lr`, from the gradients as they are now
  // (already normalised, unscaled and clipped by the caller; all finite — skip the call when
  // ScanGrads reported non_finite). Advances step_count() by one. Parameters are matched to
  // their state by name; the list may be reordered between calls, but a parameter whose state
  // exists must keep its size (a size change is a programming error and aborts).
  // `fusion` (host state only; a device optimizer applies none of it) folds the caller's
  // unscale/clip factor and a refresh of weight copies into the same pass.
  virtual void Step(std::span<const ParamRef> params, float lr, const StepFusion& fusion = {});

  // Number of updates applied so far (restored by LoadState).
  virtual int64_t step_count() const { return step_; }

  // Everything needed to continue bit-for-bit: "step" (I64 scalar) and, per parameter, fp32
  // buffers named "<param>.<buffer>" with torch's buffer names (exp_avg, exp_avg_sq,
  // momentum_buffer).
  virtual std::vector<NamedBuffer> State() const;

  // Restores what State() returned, for exactly the parameters `params` (by name). Every
  // parameter must have each of its buffers with its numel, and no buffer may be left over;
  // otherwise nothing changes and the error names the first mismatch.
  virtual Status LoadState(std::span<const NamedBuffer> state, std::span<const ParamRef> params);

 protected:
  Optimizer(OptimizerOptions options, std::vector<std::string> buffer_names);

  // Per-step scalars for update number `step` (1-based, as torch counts) at learning rate lr.
  virtual UpdateScalars ComputeScalars(int64_t step, double lr) const = 0;
  // The element function UpdateSlice applies (for the device path).
  virtual UpdateRule rule() const = 0;
  // Updates elements [begin, end) of `param`; state[k] points at buffer k (whole parameter). The
  // gradient used is grad[i] * grad_factor, rounded to fp32 (what ScaleGrads would have stored;
  // the stored gradients are not changed).
  virtual void UpdateSlice(const ParamRef& param, float* const* state, size_t begin, size_t end,
                           const UpdateScalars& scalars, float grad_factor) const = 0;

  const OptimizerOptions options_;

 private:
  struct Slot;
  struct DeviceState;
  // Maps params to slots (creating zeroed state for new names); fast when nothing changed.
  Status EnsureLayout(std::span<const ParamRef> params);
  // The device path's layout check / first allocation.
  Status EnsureDeviceLayout(std::span<const ParamRef> params);

  std::vector<std::string> buffer_names_;
  int64_t step_ = 0;
  std::vector<std::unique_ptr<Slot>> slots_;
  // Fast path: slot_of_[i] is the slot of params[i] when the parameter list is the one seen
  // last time (same names, value pointers and sizes in the same order).
  std::vector<Slot*> slot_of_;
  std::vector<const float*> last_values_;
  std::unique_ptr<DeviceState> device_;
};

// Names MakeOptimizer knows, in registry order.
std::vector<std::string> OptimizerNames();

// Validates `options` (ranges; errors name the field) and builds the optimizer named by
// options.type.
Result<std::unique_ptr<Optimizer>> MakeOptimizer(const OptimizerOptions& options);

}  // namespace sf
