// OneDnnConv: CpuBackend's 2-D convolutions (Backend::Conv2dForward / Conv2dBackward) on oneDNN's
// convolution primitives (forward, backward data, backward weights), fp32, plain NCHW / OIHW
// layouts, one cached set of primitives per distinct Conv2dShape. The weights' and bias'
// gradients come out of oneDNN overwritten and are added into the caller's (the backend's
// accumulate contract). Internal to CpuBackend; not thread-safe (one per CpuBackend).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "trainer/kernels/backend.h"

namespace sf {

class OneDnnConv {
 public:
  OneDnnConv();
  ~OneDnnConv();
  void Forward(const float* x, const float* w, const float* bias, float* y, const Conv2dShape& s);
  void Backward(const float* x, const float* w, const float* dy, float* dx, float* dw, float* dbias,
                const Conv2dShape& s);

 private:
  struct Entry;
  Entry& Get(const Conv2dShape& s);

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t>,
           std::unique_ptr<Entry>>
      cache_;
  std::vector<float> dw_, dbias_;  // oneDNN's overwritten gradients, added into the caller's
};

}  // namespace sf
