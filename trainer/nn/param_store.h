// ParamStore<T>: every parameter and gradient of a model in two contiguous buffers.
//
// Layers Add() their parameters (name, shape, weight decay) while the model is being built;
// Finalize() then allocates the value and gradient buffers (gradients zeroed) and values stay
// at fixed addresses for the store's lifetime, which is what optimizers (ParamRef) require. One
// contiguous gradient buffer makes zeroing, scanning and (later) allreduce single passes.
//
// The buffers live in the memory Finalize() is given (the backend's: on a GPU, the device).
// Host code that reads or writes values (initialisation, checkpoints, translation) goes through
// host_values(): the values themselves on host memory, else a host copy that PullValues()
// refreshes from the device and PushValues() writes back.
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
  // Allocates values (zeros), gradients (zeros) and later the mirror from `memory`.
  void Finalize(CachingAllocator& memory = CachingAllocator::Cpu());
  bool finalized() const { return finalized_; }

  const std::vector<ParamInfo>& params() const { return params_; }
  int64_t total_numel() const { return total_; }
  T* value(int id) { return values_.data<T>() + params_[id].offset; }
  T* grad(int id) { return grads_.data<T>() + params_[id].offset; }
  T* values() { return values_.data<T>(); }
  T* grads() { return grads_.data<T>(); }
  bool host_accessible() const { return values_.host_accessible(); }
  // Host view of every value (see the header comment), and of parameter `id`.
  T* host_values();
  T* host_value(int id) { return host_values() + params_[id].offset; }
  // Device -> host copy of the values / host copy -> device (both no-ops on host memory).
  void PullValues();
  void PushValues();
  // The gradients copied to `out` (total_numel() elements) / written from `in`.
  void CopyGradsToHost(T* out) const { grads_.CopyToHost(out); }
  void CopyGradsFromHost(const T* in) { grads_.CopyFromHost(in); }

  // The id of `name`, or -1.
  int Find(const std::string& name) const;

  // The mirror of value(id) in `dtype` (T itself when dtype is T's dtype).
  const void* compute_value(int id, DType dtype) {
    if (dtype == DTypeOf<T>::value) return value(id);
    return static_cast<const char*>(mirror_.raw()) + params_[id].offset * DTypeSize(dtype);
  }
  // Re-casts every value into the mirror (no-op for T's own dtype). Skipped, once, after
  // MirrorRefreshed(): someone wrote the mirror as the values changed (the fused optimizer step).
  void RefreshMirror(Backend<T>& backend, DType dtype);
  // The mirror's dtype (T's until a low-precision RefreshMirror) and its copy of element i of
  // the values: what a fused update writes, element for element, as it changes the values.
  DType mirror_dtype() const { return mirror_.empty() ? DTypeOf<T>::value : mirror_.dtype(); }
  void* mirror_at(int64_t i) { return static_cast<char*>(mirror_.raw()) + i * DTypeSize(mirror_.dtype()); }
  void MirrorRefreshed() { mirror_fresh_ = true; }
  void ZeroGrads() { grads_.ZeroFill(); }

 private:
  std::vector<ParamInfo> params_;
  int64_t total_ = 0;
  bool finalized_ = false;
  Tensor values_, grads_, mirror_;
  bool mirror_fresh_ = false;
  std::vector<T> host_copy_;  // device values' host view
};

}  // namespace sf
