// OneDnnConv: CpuBackend's 2-D convolutions (Backend::Conv2dForward / Conv2dBackward) on oneDNN's
// convolution primitives (forward, backward data, backward weights), one cached set per distinct
// Conv2dShape (precision included).
//
// The caller's tensors are plain fp32 NCHW / OIHW; the primitives get the layouts oneDNN picks
// for the CPU (`format_tag::any`: channel blocks of 16 on AVX-512, 8 on AVX2), which its direct
// JIT kernels need — on plain layouts it falls back to an im2col GEMM, several times slower at
// the speech front end's shapes. The caller's tensors are reordered into those layouts and the
// results back (each reorder one pass; weights are small). With Conv2dShape::compute = kBF16 on a
// CPU with bf16 products (AVX512_BF16 or AMX), the same reorders round x, w and dy to bf16 and
// the products run on bf16 with fp32 sums and results; elsewhere (no bf16 products: oneDNN offers
// only its reference kernel) the convolution runs in fp32.
//
// The weights' and bias' gradients come out of oneDNN overwritten and are added into the
// caller's (the backend's accumulate contract); with bf16 products the bias' gradient is summed
// from the fp32 dy here (oneDNN's would sum the rounded one). Internal to CpuBackend; not thread-safe (one per
// CpuBackend).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
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
  // The implementation oneDNN chose for this shape's forward ("brg:avx512_core", "jit:avx2", ...)
  // and whether its products run on bf16: for tests and benches.
  std::string ForwardImplementation(const Conv2dShape& s);
  bool RunsInBf16(const Conv2dShape& s);

 private:
  struct Entry;
  Entry& Get(const Conv2dShape& s);
  // Staged operands live in one scratch arena shared by every shape (one call's operands at a
  // time), each in its slot of the call's phase: an input image or its gradient, an output or
  // its gradient (twice: dy in two layouts), weights or their gradient. The arena grows, when a
  // new shape needs more, to the largest phase of any shape.
  enum Phase { kForward, kBackward };
  enum Slot { kImage, kOutput, kOutput2, kWeights, kSlots };
  dnnl::memory Scratch(const Entry& e, Phase phase, Slot slot, const dnnl::memory::desc& d);
  // `user` as `want`: itself when the layouts and types agree, else reordered into its slot by
  // the cached `reorder`.
  dnnl::memory Stage(const Entry& e, Phase phase, const dnnl::memory& user, const dnnl::memory::desc& want,
                     Slot slot, std::unique_ptr<dnnl::reorder>& reorder);

  dnnl::engine engine_;
  dnnl::stream stream_;
  std::map<std::tuple<int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t,
                      bool>,
           std::unique_ptr<Entry>>
      cache_;
  std::vector<float> dw_, dbias_;  // oneDNN's overwritten gradients, added into the caller's
  struct Free {
    void operator()(char* p) const { std::free(p); }
  };
  std::unique_ptr<char, Free> arena_;
  size_t arena_bytes_ = 0;
};

}  // namespace sf
