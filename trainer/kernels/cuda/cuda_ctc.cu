// CudaBackend's CTC loss (Backend::CtcLoss, backend.h): the log-softmax of every frame, the
// log-space forward-backward of each utterance in one block (threads over its 2L+1 states, one
// frame after another), and the gradient of every frame row in one block (threads over the
// classes). The same recurrences as the host's (kernels/cpu/ctc_host.h), in fp32.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

__device__ inline float LogAdd(float a, float b) {
  if (a == -INFINITY) return b;
  if (b == -INFINITY) return a;
  const float m = fmaxf(a, b);
  return m + log1pf(expf(-fabsf(a - b)));
}

// lp[row, c] = z[row, c] - logsumexp(z[row, :]) for every frame row (one block per row).
__global__ void LogSoftmaxRowsKernel(const float* z, float* lp, int64_t classes) {
  const int64_t row = blockIdx.x;
  const float* zr = z + row * classes;
  float m = -INFINITY;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) m = fmaxf(m, zr[c]);
  __shared__ float shared_max[32];
  for (int o = 16; o > 0; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  if (lane == 0) shared_max[warp] = m;
  __syncthreads();
  if (threadIdx.x == 0) {
    float all = -INFINITY;
    for (int w = 0; w < static_cast<int>(blockDim.x >> 5); ++w) all = fmaxf(all, shared_max[w]);
    shared_max[0] = all;
  }
  __syncthreads();
  m = shared_max[0];
  float s = 0;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) s += expf(zr[c] - m);
  s = BlockSum(s);
  const float lse = m + logf(s);
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) lp[row * classes + c] = zr[c] - lse;
}

__device__ inline int32_t Label(const int32_t* labels, int64_t s, int32_t blank) {
  return s % 2 == 0 ? blank : labels[s / 2];
}

// alpha and beta of utterance b (one block), [frames, S_max] each; log_p[b] and losses[b].
__global__ void CtcForwardBackwardKernel(const float* lp, const int32_t* input_lengths, const int32_t* targets,
                                         const int32_t* target_lengths, int64_t batch, int64_t classes,
                                         int64_t max_target, int64_t frames, int32_t blank, bool zero_infinity,
                                         float* alpha_all, float* beta_all, float* log_p_out, float* losses) {
  const int64_t b = blockIdx.x, s_max = 2 * max_target + 1;
  const int64_t Tb = input_lengths[b], S = 2 * static_cast<int64_t>(target_lengths[b]) + 1;
  const int32_t* labels = targets + b * max_target;
  float* alpha = alpha_all + b * frames * s_max;
  float* beta = beta_all + b * frames * s_max;
  auto lpf = [&](int64_t t, int64_t s) { return lp[(b * frames + t) * classes + Label(labels, s, blank)]; };
  auto skip = [&](int64_t s) {
    return s >= 2 && s % 2 == 1 && Label(labels, s, blank) != Label(labels, s - 2, blank);
  };
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) alpha[s] = s < 2 ? lpf(0, s) : -INFINITY;
  __syncthreads();
  for (int64_t t = 1; t < Tb; ++t) {
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      float a = alpha[(t - 1) * s_max + s];
      if (s >= 1) a = LogAdd(a, alpha[(t - 1) * s_max + s - 1]);
      if (skip(s)) a = LogAdd(a, alpha[(t - 1) * s_max + s - 2]);
      alpha[t * s_max + s] = a == -INFINITY ? -INFINITY : a + lpf(t, s);
    }
    __syncthreads();
  }
  for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
    beta[(Tb - 1) * s_max + s] = s >= S - 2 ? lpf(Tb - 1, s) : -INFINITY;
  }
  __syncthreads();
  for (int64_t t = Tb - 2; t >= 0; --t) {
    for (int64_t s = threadIdx.x; s < S; s += blockDim.x) {
      float v = beta[(t + 1) * s_max + s];
      if (s + 1 < S) v = LogAdd(v, beta[(t + 1) * s_max + s + 1]);
      if (s + 2 < S && skip(s + 2)) v = LogAdd(v, beta[(t + 1) * s_max + s + 2]);
      beta[t * s_max + s] = v == -INFINITY ? -INFINITY : v + lpf(t, s);
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    float log_p = alpha[(Tb - 1) * s_max + S - 1];
    if (S > 1) log_p = LogAdd(log_p, alpha[(Tb - 1) * s_max + S - 2]);
    log_p_out[b] = log_p;
    losses[b] = log_p == -INFINITY ? (zero_infinity ? 0.0f : INFINITY) : -log_p;
  }
}

// The gradient of frame row b*frames + t (one block; threads over the classes).
__global__ void CtcGradientKernel(const float* lp, const int32_t* input_lengths, const int32_t* targets,
                                  const int32_t* target_lengths, int64_t batch, int64_t classes, int64_t max_target,
                                  int64_t frames, int32_t blank, bool zero_infinity, float grad_scale,
                                  const float* alpha_all, const float* beta_all, const float* log_p_all,
                                  float* dlogits) {
  const int64_t row = blockIdx.x, b = row / frames, t = row % frames, s_max = 2 * max_target + 1;
  const int64_t Tb = input_lengths[b], S = 2 * static_cast<int64_t>(target_lengths[b]) + 1;
  const float log_p = log_p_all[b];
  const bool infinite = log_p == -INFINITY;
  float* g = dlogits + row * classes;
  if (t >= Tb || (infinite && zero_infinity)) {
    for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) g[c] = 0.0f;
    return;
  }
  const int32_t* labels = targets + b * max_target;
  const float* alpha = alpha_all + (b * frames + t) * s_max;
  const float* beta = beta_all + (b * frames + t) * s_max;
  for (int64_t c = threadIdx.x; c < classes; c += blockDim.x) {
    float gamma = -INFINITY;
    if (c == blank) {
      for (int64_t s = 0; s < S; s += 2) gamma = LogAdd(gamma, alpha[s] + beta[s]);
    } else {
      for (int64_t s = 1; s < S; s += 2) {
        if (labels[s / 2] == c) gamma = LogAdd(gamma, alpha[s] + beta[s]);
      }
    }
    const float l = lp[row * classes + c];
    const float posterior = infinite ? NAN : expf(gamma - l - log_p);
    g[c] = grad_scale * (expf(l) - posterior);
  }
}

}  // namespace

void CudaBackend::CtcLoss(const float* logits, const int32_t* input_lengths, const int32_t* targets,
                          const int32_t* target_lengths, int64_t frames, int64_t batch, int64_t classes,
                          int64_t max_target, int32_t blank, bool zero_infinity, float grad_scale, float* losses,
                          float* dlogits) {
  if (frames <= 0 || batch <= 0) return;
  const int64_t rows = frames * batch, s_max = 2 * max_target + 1;
  const size_t lp_bytes = static_cast<size_t>(rows * classes) * sizeof(float);
  const size_t ab_bytes = static_cast<size_t>(batch * frames * s_max) * sizeof(float);
  float* lp = static_cast<float*>(allocator_->Allocate(lp_bytes));
  float* alpha = static_cast<float*>(allocator_->Allocate(ab_bytes));
  float* beta = static_cast<float*>(allocator_->Allocate(ab_bytes));
  float* log_p = static_cast<float*>(allocator_->Allocate(static_cast<size_t>(batch) * sizeof(float)));
  const int row_threads = classes >= 256 ? 256 : 64;
  LogSoftmaxRowsKernel<<<static_cast<unsigned>(rows), row_threads, 0, stream_>>>(logits, lp, classes);
  SF_CUDA_CHECK(cudaGetLastError());
  CtcForwardBackwardKernel<<<static_cast<unsigned>(batch), kThreads, 0, stream_>>>(
      lp, input_lengths, targets, target_lengths, batch, classes, max_target, frames, blank, zero_infinity, alpha, beta,
      log_p, losses);
  SF_CUDA_CHECK(cudaGetLastError());
  if (dlogits) {
    CtcGradientKernel<<<static_cast<unsigned>(rows), row_threads, 0, stream_>>>(
        lp, input_lengths, targets, target_lengths, batch, classes, max_target, frames, blank, zero_infinity,
        grad_scale, alpha, beta, log_p, dlogits);
    SF_CUDA_CHECK(cudaGetLastError());
  }
  // The caching allocator hands these blocks out again only to later work on this stream.
  allocator_->Free(lp);
  allocator_->Free(alpha);
  allocator_->Free(beta);
  allocator_->Free(log_p);
}

}  // namespace sf::cuda
