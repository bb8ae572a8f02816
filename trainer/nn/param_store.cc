#include "trainer/nn/param_store.h"

#include <cstdlib>

namespace sf {

template <typename T>
int ParamStore<T>::Add(std::string name, std::vector<int64_t> shape, bool weight_decay) {
  if (finalized_ || Find(name) >= 0) std::abort();  // programming error
  ParamInfo p;
  p.name = std::move(name);
  p.shape = std::move(shape);
  p.numel = 1;
  for (int64_t d : p.shape) p.numel *= d;
  // Keep every parameter 64-byte aligned (16 floats) for vector loads.
  p.offset = (total_ + 15) / 16 * 16;
  p.weight_decay = weight_decay;
  total_ = p.offset + p.numel;
  params_.push_back(std::move(p));
  return static_cast<int>(params_.size()) - 1;
}

template <typename T>
void ParamStore<T>::Finalize(CachingAllocator& memory) {
  values_ = Tensor::Zeros({total_}, DTypeOf<T>::value, memory);
  grads_ = Tensor::Zeros({total_}, DTypeOf<T>::value, memory);
  if (!values_.host_accessible()) host_copy_.assign(static_cast<size_t>(total_), T(0));
  finalized_ = true;
}

template <typename T>
T* ParamStore<T>::host_values() {
  return values_.host_accessible() ? values_.data<T>() : host_copy_.data();
}

template <typename T>
void ParamStore<T>::PullValues() {
  if (!values_.host_accessible()) values_.CopyToHost(host_copy_.data());
}

template <typename T>
void ParamStore<T>::PushValues() {
  if (!values_.host_accessible()) values_.CopyFromHost(host_copy_.data());
}

template <typename T>
int ParamStore<T>::Find(const std::string& name) const {
  for (size_t i = 0; i < params_.size(); ++i)
    if (params_[i].name == name) return static_cast<int>(i);
  return -1;
}

template <typename T>
void ParamStore<T>::RefreshMirror(Backend<T>& backend, DType dtype) {
  if (dtype == DTypeOf<T>::value) return;
  if (mirror_fresh_ && !mirror_.empty() && mirror_.dtype() == dtype) {
    mirror_fresh_ = false;
    return;
  }
  mirror_fresh_ = false;
  if (mirror_.empty() || mirror_.dtype() != dtype) mirror_ = Tensor({total_}, dtype, values_.allocator());
  backend.Cast(values_.data<T>(), mirror_.raw(), dtype, total_);
}

template class ParamStore<float>;
template class ParamStore<double>;

}  // namespace sf
