// Context<T>: what every layer call needs besides its inputs — the backend, the GEMM compute
// dtype, training mode, the dropout key of the current micro-batch, and shared scratch buffers.
//
// Mixed precision: activations, reductions and parameter gradients are T (fp32 in production);
// `compute` is the dtype of GEMM operands (kF32 = T, or kBF16 / kF16 with fp32 accumulation).
// Layers cast each GEMM input once into a buffer of that dtype and keep it for the backward
// (so weights' gradients are computed from the same rounded values the forward used).
//
// Every buffer a layer plans (Plan) or borrows (Scratch) is a block of the backend's allocator,
// so on a GPU backend all activations live on the device.
//
// Scratch slots are shared by all layers for temporaries that do not outlive one layer call;
// they grow on first use of a shape and are reused afterwards (no allocation in steady state).
// A Context is used by one thread (the training loop); it is not copyable.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "trainer/core/dtype.h"
#include "trainer/core/philox.h"
#include "trainer/core/tensor.h"
#include "trainer/kernels/backend.h"

namespace sf {

enum ScratchSlot : int {
  kScratchGemmOut = 0,   // projection outputs before they are split into heads; FFN pre-activation
  kScratchScores,        // attention scores / their gradient
  kScratchDProbs,        // gradient of the (dropped) attention probabilities
  kScratchHeadsGrad,     // gradients in head layout [P, B, H, T, D]
  kScratchMerged,        // gradients merged back to [B, T, P*C]
  kScratchCastA,         // compute-dtype copies of gradients fed to GEMMs
  kScratchCastB,
  kScratchNormed,        // mixed precision: a layer norm's output read only by the forward
  kScratchCount
};

template <typename T>
class Context {
 public:
  Context(Backend<T>* backend, DType compute) : backend_(backend), compute_(compute) {}
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  Backend<T>& backend() const { return *backend_; }
  CachingAllocator& memory() const { return backend_->allocator(); }
  DType compute() const { return compute_; }
  bool low_precision() const { return compute_ != DTypeOf<T>::value; }

  bool training = true;
  uint64_t seed = 0;
  // Distinct for every micro-batch ever run with this seed (the driver increments it).
  uint64_t micro_batch = 0;

  // The dropout key of site `site` (a small id unique within the model) for this micro-batch.
  DropoutKey Key(uint32_t site) const { return {seed, (micro_batch << 16) | site}; }

  // A scratch buffer of at least n elements of dtype `dtype`, valid until the next call with
  // the same slot.
  void* Scratch(ScratchSlot slot, int64_t n, DType dtype) {
    Tensor& t = scratch_[slot];
    if (t.empty() || t.nbytes() < n * DTypeSize(dtype)) t.Resize({n}, dtype, memory());
    return t.raw();
  }
  T* ScratchT(ScratchSlot slot, int64_t n) {
    return static_cast<T*>(Scratch(slot, n, DTypeOf<T>::value));
  }

  // Returns x itself when compute() is T; otherwise casts x into `buf` (resized as needed) and
  // returns it.
  const void* AsCompute(const T* x, int64_t n, Tensor& buf) {
    if (!low_precision()) return x;
    if (buf.empty() || buf.numel() < n || buf.dtype() != compute_) buf.Resize({n}, compute_, memory());
    backend_->Cast(x, buf.raw(), compute_, n);
    return buf.raw();
  }
  // Resizes a planned activation buffer (on the backend's device) when its element count or
  // dtype changes (first step of a batch shape); otherwise leaves it alone.
  void Plan(Tensor& t, std::vector<int64_t> shape, DType dtype) const {
    int64_t n = 1;
    for (int64_t d : shape) n *= d;
    if (t.empty() || t.numel() != n || t.dtype() != dtype || &t.allocator() != &memory())
      t.Resize(std::move(shape), dtype, memory());
  }

  const void* AsComputeScratch(const T* x, int64_t n, ScratchSlot slot) {
    if (!low_precision()) return x;
    void* p = Scratch(slot, n, compute_);
    backend_->Cast(x, p, compute_, n);
    return p;
  }

 private:
  Backend<T>* backend_;
  DType compute_;
  std::array<Tensor, kScratchCount> scratch_;
};

// Dropout off for a scope (validation, beam search): sets ctx.training to false and restores
// what it was when the scope ends.
template <typename T>
class EvalScope {
 public:
  explicit EvalScope(Context<T>& ctx) : ctx_(ctx), was_(ctx.training) { ctx.training = false; }
  ~EvalScope() { ctx_.training = was_; }
  EvalScope(const EvalScope&) = delete;
  EvalScope& operator=(const EvalScope&) = delete;

 private:
  Context<T>& ctx_;
  bool was_;
};

}  // namespace sf
