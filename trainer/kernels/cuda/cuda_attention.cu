// CudaBackend's attention ops: splitting the fused projections into heads and merging them
// back ([B,T,P,H,D] <-> [P,B,H,T,D]), and the scaled, masked (key padding, causal) softmax
// over each row of scores with attention dropout, forward and backward.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

__device__ float DropoutFactor(DropoutKey key, int64_t index, float p, uint32_t threshold,
                               float keep_scale) {
  if (p <= 0.0f) return 1.0f;
  uint8_t keep[8];
  DropoutKeep8(key, static_cast<uint64_t>(index) / 8, threshold, keep);
  return keep[index % 8] ? keep_scale : 0.0f;
}

// One warp per row of Tk scores.
__global__ void SoftmaxForwardKernel(const float* scores, float* probs, void* dropped,
                                     int dropped_dtype, const uint8_t* key_padding, int64_t rows, int64_t heads,
                                     int64_t tq, int64_t tk, float scale, int causal, float p,
                                     uint32_t threshold, float keep_scale, DropoutKey key) {
  const int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const int64_t b = r / (heads * tq), q = r % tq;
  const float* s = scores + r * tk;
  float* pr = probs + r * tk;
  const uint8_t* kp = key_padding ? key_padding + b * tk : nullptr;
  auto masked = [&](int64_t k) { return (kp && kp[k]) || (causal && k > q); };
  float mx = -FLT_MAX;
  for (int64_t k = lane; k < tk; k += 32)
    if (!masked(k)) mx = fmaxf(mx, s[k] * scale);
  for (int o = 16; o > 0; o >>= 1) mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, o));
  float sum = 0;
  for (int64_t k = lane; k < tk; k += 32) {
    const float e = masked(k) ? 0.0f : expf(s[k] * scale - mx);
    pr[k] = e;
    sum += e;
  }
  for (int o = 16; o > 0; o >>= 1) sum += __shfl_xor_sync(0xffffffffu, sum, o);
  const float inv = sum > 0 ? 1.0f / sum : 0.0f;
  for (int64_t k = lane; k < tk; k += 32) {
    pr[k] *= inv;
    if (dropped)
      StoreAs(dropped, dropped_dtype, r * tk + k,
              pr[k] * DropoutFactor(key, r * tk + k, p, threshold, keep_scale));
  }
}

__global__ void SoftmaxBackwardKernel(const float* d_dropped, const float* probs, void* dscores,
                                      int dscores_dtype, int64_t rows, int64_t tk, float scale, float p,
                                      uint32_t threshold, float keep_scale, DropoutKey key) {
  const int64_t r = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (r >= rows) return;
  const int64_t row = r * tk;
  float dot = 0;
  for (int64_t k = lane; k < tk; k += 32)
    dot += probs[row + k] * d_dropped[row + k] * DropoutFactor(key, row + k, p, threshold, keep_scale);
  for (int o = 16; o > 0; o >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, o);
  for (int64_t k = lane; k < tk; k += 32) {
    const float dp = d_dropped[row + k] * DropoutFactor(key, row + k, p, threshold, keep_scale);
    StoreAs(dscores, dscores_dtype, row + k, scale * probs[row + k] * (dp - dot));
  }
}

// x [B,T,P,H,D] (+bias [P,H,D]) <-> out [P,B,H,T,D]; `merge` runs the inverse direction.
__global__ void PermuteHeadsKernel(const float* src, const float* bias, void* dst, int dst_dtype,
                                   int64_t batch, int64_t time, int64_t parts, int64_t heads,
                                   int64_t head_dim, int merge) {
  const int64_t n = batch * time * parts * heads * head_dim;
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  // i indexes x's layout [B,T,P,H,D].
  int64_t rest = i;
  const int64_t d = rest % head_dim; rest /= head_dim;
  const int64_t h = rest % heads; rest /= heads;
  const int64_t p = rest % parts; rest /= parts;
  const int64_t t = rest % time;
  const int64_t b = rest / time;
  const int64_t j = (((p * batch + b) * heads + h) * time + t) * head_dim + d;
  if (merge) StoreAs(dst, dst_dtype, i, src[j]);
  else StoreAs(dst, dst_dtype, j, src[i] + (bias ? bias[(p * heads + h) * head_dim + d] : 0.0f));
}

}  // namespace

void CudaBackend::SoftmaxForward(const float* scores, float* probs, void* dropped,
                                 DType dropped_dtype, const uint8_t* key_padding, int64_t batch,
                                 int64_t heads, int64_t tq, int64_t tk, float scale, bool causal,
                                 float p, DropoutKey key) {
  const int64_t rows = batch * heads * tq;
  if (rows > 0)
    SoftmaxForwardKernel<<<Blocks(rows * 32), kThreads, 0, stream_>>>(
        scores, probs, dropped, DTypeCode(dropped_dtype), key_padding, rows, heads, tq, tk, scale, causal, p,
        DropoutThreshold(p), KeepScale(p), key);
}

void CudaBackend::SoftmaxBackward(const float* d_dropped, const float* probs, void* dscores,
                                  DType dscores_dtype, int64_t batch, int64_t heads, int64_t tq,
                                  int64_t tk, float scale, float p, DropoutKey key) {
  const int64_t rows = batch * heads * tq;
  if (rows > 0)
    SoftmaxBackwardKernel<<<Blocks(rows * 32), kThreads, 0, stream_>>>(
        d_dropped, probs, dscores, DTypeCode(dscores_dtype), rows, tk, scale, p,
        DropoutThreshold(p), KeepScale(p), key);
}

void CudaBackend::SplitHeads(const float* x, const float* bias, void* out, DType out_dtype,
                             int64_t batch, int64_t time, int64_t parts, int64_t heads,
                             int64_t head_dim) {
  const int64_t n = batch * time * parts * heads * head_dim;
  if (n > 0)
    PermuteHeadsKernel<<<Blocks(n), kThreads, 0, stream_>>>(
        x, bias, out, DTypeCode(out_dtype), batch, time, parts, heads, head_dim, 0);
}

void CudaBackend::MergeHeads(const float* in, void* x, DType x_dtype, int64_t batch, int64_t time,
                             int64_t parts, int64_t heads, int64_t head_dim) {
  const int64_t n = batch * time * parts * heads * head_dim;
  if (n > 0)
    PermuteHeadsKernel<<<Blocks(n), kThreads, 0, stream_>>>(
        in, nullptr, x, DTypeCode(x_dtype), batch, time, parts, heads, head_dim, 1);
}

}  // namespace sf::cuda
