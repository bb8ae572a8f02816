// CudaBackend's layer normalisation: the forward pass (one block per row, saving mean and
// 1/std), and the backward pass as a parameter-gradient kernel over columns followed by a dx
// kernel over rows.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

// One block per row.
__global__ void LayerNormForwardKernel(const float* x, const float* gamma, const float* beta,
                                       float* y, float* mean, float* rstd, int64_t cols,
                                       float eps) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  float s = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) s += xr[c];
  const float mu = BlockSum(s) / cols;
  float v = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) v += (xr[c] - mu) * (xr[c] - mu);
  const float rs = rsqrtf(BlockSum(v) / cols + eps);
  if (threadIdx.x == 0) {
    mean[r] = mu;
    rstd[r] = rs;
  }
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x)
    y[r * cols + c] = (xr[c] - mu) * rs * gamma[c] + beta[c];
}

// dgamma[c] += sum_r dy[r,c] * xhat[r,c], dbeta[c] += sum_r dy[r,c]: one thread per column,
// rows split over blockIdx.y (as ColumnSumKernel), so each column takes one atomic per split
// instead of one per row.
__global__ void LayerNormParamGradKernel(const float* dy, const float* x, const float* mean,
                                         const float* rstd, float* dgamma, float* dbeta,
                                         int64_t rows, int64_t cols) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t per = (rows + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float sg = 0, sb = 0;
  for (int64_t r = r0; r < r1; ++r) {
    const float d = dy[r * cols + c];
    sg += d * ((x[r * cols + c] - mean[r]) * rstd[r]);
    sb += d;
  }
  if (r0 < r1) {
    atomicAdd(dgamma + c, sg);
    atomicAdd(dbeta + c, sb);
  }
}

// dx of one row per block (the parameter gradients are LayerNormParamGradKernel's).
__global__ void LayerNormBackwardKernel(const float* dy, const float* x, const float* gamma,
                                        const float* mean, const float* rstd, float* dx,
                                        int64_t cols, int accumulate) {
  const int64_t r = blockIdx.x;
  const float* xr = x + r * cols;
  const float* d = dy + r * cols;
  const float mu = mean[r], rs = rstd[r];
  float mg = 0, mgx = 0;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float xh = (xr[c] - mu) * rs;
    const float g = d[c] * gamma[c];
    mg += g;
    mgx += g * xh;
  }
  mg = BlockSum(mg) / cols;
  mgx = BlockSum(mgx) / cols;
  for (int64_t c = threadIdx.x; c < cols; c += blockDim.x) {
    const float v = rs * (d[c] * gamma[c] - mg - (xr[c] - mu) * rs * mgx);
    if (accumulate) dx[r * cols + c] += v;
    else dx[r * cols + c] = v;
  }
}

}  // namespace

void CudaBackend::LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                                   float* mean, float* rstd, int64_t rows, int64_t cols,
                                   float eps) {
  if (rows > 0)
    LayerNormForwardKernel<<<static_cast<unsigned>(rows), 128, 0, stream_>>>(x, gamma, beta, y, mean, rstd, cols, eps);
}

void CudaBackend::LayerNormBackward(const float* dy, const float* x, const float* gamma,
                                    const float* mean, const float* rstd, float* dx, float* dgamma,
                                    float* dbeta, int64_t rows, int64_t cols, bool accumulate_dx) {
  if (rows <= 0 || cols <= 0) return;
  // The parameter gradients first: dx may alias dy.
  const unsigned splits = static_cast<unsigned>(std::min<int64_t>(rows, 64));
  dim3 grid(static_cast<unsigned>(Blocks(cols)), splits);
  LayerNormParamGradKernel<<<grid, kThreads, 0, stream_>>>(dy, x, mean, rstd, dgamma, dbeta,
                                                           rows, cols);
  LayerNormBackwardKernel<<<static_cast<unsigned>(rows), 128, 0, stream_>>>(
      dy, x, gamma, mean, rstd, dx, cols, accumulate_dx);
}

}  // namespace sf::cuda
