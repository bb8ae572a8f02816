// ParamStore<T>: every parameter and gradient of a model in two contiguous buffers.
//
// Layers Add() their parameters (name, shape, weight decay) while the model is being built;
// Finalize() then allocates the value and gradient buffers (gradients zeroed) and values stay
// at fixed addresses for the store's lifetime, which is what optimizers (ParamRef) require. One
// contiguous gradient buffer makes zeroing, scanning and (later) allreduce single passes.
//
// A low-precision mirror of all values (bf16/f16) is refreshed with RefreshMirror() once per
// optimizer step; GEMMs in mixed precision read their weights from it.
// Not thread-safe; owned by one model.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "trainer/core/tensor.h"
#include "trainer/kernels/backend.h"

namespace sf {

struct ParamInfo {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;  // elements from the start of the value / gradient buffers
  int64_t numel = 0;
  bool weight_decay = true;
};

template <typename T>
class ParamStore {
 public:
  ParamStore() = default;
  ParamStore(const ParamStore&) = delete;
  ParamStore& operator=(const ParamStore&) = delete;

  // Declares a parameter; returns its id. Only before Finalize(). Names must be unique.
  int Add(std::string name, std::vector<int64_t> shape, bool weight_decay);
  void Finalize();
  bool finalized() const { return finalized_; }

  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total_numel() const { return total_; }
  T* value(int id) { return values_.data<T>() + params_[id].offset; }
  T* grad(int id) { return grads_.data<T>() + params_[id].offset; }
  T* values() { return values_.data<T>(); }
  T* grads() { return grads_.data<T>(); }
  // The id of `name`, or -1.
  int Find(const std::string& name) const;

  // The mirror of value(id) in `dtype` (T itself when dtype is T's dtype).
  const void* compute_value(int id, DType dtype) {
    if (dtype == DTypeOf<T>::value) return value(id);
    return static_cast<const char*>(mirror_.raw()) + params_[id].offset * DTypeSize(dtype);
  }
  // Re-casts every value into the mirror (no-op for T's own dtype).
  void RefreshMirror(Backend<T>& backend, DType dtype);
  void ZeroGrads() { grads_.ZeroFill(); }

 private:
  std::vector<ParamInfo> params_;
  int64_t total_ = 0;
  bool finalized_ = false;
  Tensor values_, grads_, mirror_;
};

}  // namespace sf
