// The CUDA multi-tensor passes of CudaBackend: the fused optimizer update (one launch over
// every parameter, one block per ParamChunk, the gradient's scale and the weights' bf16/f16
// mirror folded in), the gradient sum of squares and scaling.
//
// This file is compiled with --fmad=false (trainer/CMakeLists.txt): the optimizer's element
// functions (optim/update_rules.h) place their own fused multiply-adds, exactly where the CPU
// loops (bit-exact against torch.optim) have them, and sqrtf / division are IEEE-rounded
// (nvcc's defaults -prec-sqrt=true -prec-div=true), so a GPU step equals the CPU step bit for bit.
#include "trainer/kernels/cuda/multi_tensor.h"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>

namespace sf::cuda {
namespace {

constexpr int kUpdateThreads = 512;
constexpr int kSumThreads = 256;
constexpr int kSumBlocks = 1024;  // partial sums; the second pass adds them in a fixed order

template <UpdateRule R>
__global__ void OptimizerUpdateKernel(OptimizerUpdate u) {
  const ParamChunk c = u.chunks[blockIdx.x];
  const bool decay = c.decay != 0;
  const bool half_mirror = u.mirror_dtype == DType::kF16;
  for (int64_t i = c.begin + threadIdx.x; i < c.end; i += blockDim.x) {
    float p = u.values[i];
    const float g = u.grads[i] * u.grad_factor;  // x * 1.0f is x
    if constexpr (R == UpdateRule::kAdamW) {
      float m = u.state[0][i], v = u.state[1][i];
      AdamWElement(u.scalars, decay, p, g, m, v);
      u.state[0][i] = m;
      u.state[1][i] = v;
    } else if constexpr (R == UpdateRule::kRAdam) {
      float m = u.state[0][i], v = u.state[1][i];
      RAdamElement(u.scalars, decay, p, g, m, v);
      u.state[0][i] = m;
      u.state[1][i] = v;
    } else {
      float b = u.state[0] ? u.state[0][i] : 0.0f;
      SgdElement(u.scalars, decay, p, g, b);
      if (u.state[0]) u.state[0][i] = b;
    }
    u.values[i] = p;
    if (u.mirror) {
      if (half_mirror) static_cast<__half*>(u.mirror)[i] = __float2half_rn(p);
      else static_cast<__nv_bfloat16*>(u.mirror)[i] = __float2bfloat16_rn(p);
    }
  }
}

__device__ double WarpSum(double v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// Block-wide sum of doubles (blockDim.x a multiple of 32); the result is valid in thread 0.
__device__ double BlockSumDouble(double v) {
  __shared__ double warp_sums[32];
  v = WarpSum(v);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  double t = threadIdx.x < warps ? warp_sums[threadIdx.x] : 0.0;
  if (warp == 0) t = WarpSum(t);
  return t;
}

__global__ void SumSquaresPartialKernel(const float* x, int64_t n, double* partial) {
  double acc = 0;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const double v = x[i];
    acc += v * v;
  }
  acc = BlockSumDouble(acc);
  if (threadIdx.x == 0) partial[blockIdx.x] = acc;
}

__global__ void SumPartialsKernel(const double* partial, int count, double* out) {
  double acc = 0;
  for (int i = threadIdx.x; i < count; i += blockDim.x) acc += partial[i];
  acc = BlockSumDouble(acc);
  if (threadIdx.x == 0) *out = acc;
}

__global__ void ScaleKernel(float* x, int64_t n, float factor) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    x[i] *= factor;
}

}  // namespace

void LaunchOptimizerUpdate(const OptimizerUpdate& u, cudaStream_t stream) {
  if (u.num_chunks <= 0) return;
  const unsigned blocks = static_cast<unsigned>(u.num_chunks);
  switch (u.rule) {
    case UpdateRule::kAdamW:
      OptimizerUpdateKernel<UpdateRule::kAdamW><<<blocks, kUpdateThreads, 0, stream>>>(u);
      break;
    case UpdateRule::kRAdam:
      OptimizerUpdateKernel<UpdateRule::kRAdam><<<blocks, kUpdateThreads, 0, stream>>>(u);
      break;
    case UpdateRule::kSgd:
      OptimizerUpdateKernel<UpdateRule::kSgd><<<blocks, kUpdateThreads, 0, stream>>>(u);
      break;
  }
}

size_t SumSquaresScratchBytes() { return (kSumBlocks + 1) * sizeof(double); }

void LaunchSumSquares(const float* x, int64_t n, double* scratch, cudaStream_t stream) {
  const int64_t want = (n + kSumThreads - 1) / kSumThreads;
  const int blocks = static_cast<int>(want < kSumBlocks ? (want > 0 ? want : 1) : kSumBlocks);
  SumSquaresPartialKernel<<<blocks, kSumThreads, 0, stream>>>(x, n, scratch + 1);
  SumPartialsKernel<<<1, kSumThreads, 0, stream>>>(scratch + 1, blocks, scratch);
}

void LaunchScale(float* x, int64_t n, float factor, cudaStream_t stream) {
  if (n <= 0) return;
  const int64_t want = (n + 255) / 256;
  const unsigned blocks = static_cast<unsigned>(want < 65535 ? want : 65535);
  ScaleKernel<<<blocks, 256, 0, stream>>>(x, n, factor);
}

}  // namespace sf::cuda
