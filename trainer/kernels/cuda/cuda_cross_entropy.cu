// CudaBackend's label-smoothed cross-entropy over rows of logits: per-row log-sum-exp, loss and
// nll (and the gradient in the same launch when asked), their totals summed in a fixed order on
// the device, and the separate backward kernel.
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

// Online max / sum of exp over a row, combined across a block: each thread keeps (max, sum of
// exp(z - max)); two pairs merge by rescaling the smaller max's sum.
struct MaxSum {
  float m;
  float s;
};

__device__ MaxSum Merge(MaxSum a, MaxSum b) {
  const float m = fmaxf(a.m, b.m);
  const float s = (a.m == -FLT_MAX ? 0.0f : a.s * expf(a.m - m)) +
                  (b.m == -FLT_MAX ? 0.0f : b.s * expf(b.m - m));
  return {m, s};
}

__device__ MaxSum BlockMaxSum(MaxSum v) {
  __shared__ MaxSum warp_vals[32];
  for (int o = 16; o > 0; o >>= 1) {
    MaxSum other{__shfl_xor_sync(0xffffffffu, v.m, o), __shfl_xor_sync(0xffffffffu, v.s, o)};
    v = Merge(v, other);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_vals[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  MaxSum t = lane < warps ? warp_vals[lane] : MaxSum{-FLT_MAX, 0.0f};
  if (warp == 0) {
    for (int o = 16; o > 0; o >>= 1) {
      MaxSum other{__shfl_xor_sync(0xffffffffu, t.m, o), __shfl_xor_sync(0xffffffffu, t.s, o)};
      t = Merge(t, other);
    }
  }
  __shared__ MaxSum total;
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  return total;
}

// The loss gradient of logit v of a row with target t, log-sum-exp lse (backend.h's
// CrossEntropyBackward): 0 for a padding target.
// eps_i = eps / (V-1), on_target = 1 - eps - eps_i.
__device__ float LossGradient(float z, float lse, int64_t v, int32_t t, int32_t pad, float eps_i,
                              float on_target, float grad_scale) {
  if (t == pad) return 0.0f;
  return grad_scale * (expf(z - lse) - eps_i - (v == t ? on_target : 0.0f));
}

// One block per row: lse[r], and the row's (loss, nll) in row_stats (0 for padding). When
// dlogits is not null, also the loss gradient of the row (CrossEntropyBackward's formula) in
// the same launch, while the row is in L2: the row is read twice in all.
__global__ void CrossEntropyKernel(const float* logits, const int32_t* targets, float* lse,
                                   double* row_stats, void* dlogits, int dtype, int64_t vocab,
                                   float eps, int32_t pad, float grad_scale) {
  const int64_t r = blockIdx.x;
  const float* z = logits + r * vocab;
  const int32_t t = targets[r];
  // Read before the block reductions' barriers: with dlogits == logits the gradient loop below
  // overwrites the row.
  const float zt = t == pad ? 0.0f : z[t];
  // One exp per logit: a thread rescales its running sum only when its maximum grows.
  float m = -FLT_MAX, sum = 0.0f, zsum = 0.0f;
  auto add = [&](float x) {
    if (x > m) {
      sum = (m == -FLT_MAX ? 0.0f : sum * expf(m - x)) + 1.0f;
      m = x;
    } else {
      sum += expf(x - m);
    }
    zsum += x;
  };
  const bool vec = vocab % 4 == 0 && (reinterpret_cast<uintptr_t>(z) & 15) == 0;
  if (vec) {
    const float4* z4 = reinterpret_cast<const float4*>(z);
    for (int64_t i = threadIdx.x; i < vocab / 4; i += blockDim.x) {
      const float4 x = z4[i];
      add(x.x), add(x.y), add(x.z), add(x.w);
    }
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) add(z[v]);
  }
  MaxSum ms{m, sum};
  ms = BlockMaxSum(ms);
  zsum = BlockSum(zsum);
  const double l = static_cast<double>(ms.m) + log(static_cast<double>(ms.s));
  const double eps_i = static_cast<double>(eps) / static_cast<double>(vocab - 1);
  if (threadIdx.x == 0) {
    lse[r] = static_cast<float>(l);
    if (t == pad) {
      row_stats[2 * r] = row_stats[2 * r + 1] = 0;
    } else {
      const double nll = l - zt;
      row_stats[2 * r] = (1.0 - eps - eps_i) * nll + eps_i * (static_cast<double>(vocab) * l - zsum);
      row_stats[2 * r + 1] = nll;
    }
  }
  if (dlogits == nullptr) return;
  const float lf = static_cast<float>(l);
  const float eps_f = eps / static_cast<float>(vocab - 1);
  const float on_target = 1.0f - eps - eps_f;
  if (vec && (reinterpret_cast<uintptr_t>(dlogits) & 15) == 0) {
    const float4* z4 = reinterpret_cast<const float4*>(z);
    for (int64_t i = threadIdx.x; i < vocab / 4; i += blockDim.x) {
      const float4 x = z4[i];
      const int64_t v = 4 * i;
      StoreAs4(dlogits, dtype, r * vocab + v,
               LossGradient(x.x, lf, v, t, pad, eps_f, on_target, grad_scale),
               LossGradient(x.y, lf, v + 1, t, pad, eps_f, on_target, grad_scale),
               LossGradient(x.z, lf, v + 2, t, pad, eps_f, on_target, grad_scale),
               LossGradient(x.w, lf, v + 3, t, pad, eps_f, on_target, grad_scale));
    }
  } else {
    for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
      StoreAs(dlogits, dtype, r * vocab + v,
              LossGradient(z[v], lf, v, t, pad, eps_f, on_target, grad_scale));
  }
}

constexpr int kTotalsThreads = 256;

// stats[0..2] = (Σ loss, Σ nll, non-pad count) over the rows, in a fixed order (one block of
// kTotalsThreads).
__global__ void CrossEntropyTotalsKernel(const double* row_stats, const int32_t* targets,
                                         int64_t rows, int32_t pad, double* stats) {
  double loss = 0, nll = 0, count = 0;
  for (int64_t r = threadIdx.x; r < rows; r += blockDim.x) {
    if (targets[r] == pad) continue;
    loss += row_stats[2 * r];
    nll += row_stats[2 * r + 1];
    count += 1;
  }
  __shared__ double part[3][kTotalsThreads];
  part[0][threadIdx.x] = loss;
  part[1][threadIdx.x] = nll;
  part[2][threadIdx.x] = count;
  __syncthreads();
  if (threadIdx.x != 0) return;
  double a = 0, b = 0, c = 0;
  for (unsigned i = 0; i < blockDim.x; ++i) {
    a += part[0][i];
    b += part[1][i];
    c += part[2][i];
  }
  stats[0] = a;
  stats[1] = b;
  stats[2] = c;
}

__global__ void CrossEntropyBackwardKernel(const float* logits, const float* lse,
                                           const int32_t* targets, void* dlogits, int dtype,
                                           int64_t vocab, float eps, int32_t pad,
                                           float grad_scale) {
  const int64_t r = blockIdx.x;
  const float eps_i = eps / static_cast<float>(vocab - 1);
  const float on_target = 1.0f - eps - eps_i;
  const int32_t t = targets[r];
  const float l = lse[r];
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    StoreAs(dlogits, dtype, r * vocab + v,
            LossGradient(logits[r * vocab + v], l, v, t, pad, eps_i, on_target, grad_scale));
}

}  // namespace

CrossEntropyStats CudaBackend::CrossEntropyForward(const float* logits, const int32_t* targets,
                                                   float* lse, int64_t rows, int64_t vocab,
                                                   float eps, int32_t pad) {
  return CrossEntropy(logits, targets, lse, nullptr, DType::kF32, rows, vocab, eps, pad, 1.0f);
}

CrossEntropyStats CudaBackend::CrossEntropyForwardBackward(const float* logits,
                                                           const int32_t* targets, float* lse,
                                                           void* dlogits, DType dlogits_dtype,
                                                           int64_t rows, int64_t vocab, float eps,
                                                           int32_t pad, float grad_scale) {
  return CrossEntropy(logits, targets, lse, dlogits, dlogits_dtype, rows, vocab, eps, pad,
                      grad_scale);
}

void CudaBackend::CrossEntropyBackward(const float* logits, const float* lse,
                                       const int32_t* targets, void* dlogits, DType dlogits_dtype,
                                       int64_t rows, int64_t vocab, float eps, int32_t pad,
                                       float grad_scale) {
  if (rows > 0)
    CrossEntropyBackwardKernel<<<static_cast<unsigned>(rows), 256, 0, stream_>>>(
        logits, lse, targets, dlogits, DTypeCode(dlogits_dtype), vocab, eps, pad, grad_scale);
}

// The loss of every row, its totals (and the gradient when dlogits is set) on the device; the
// three totals are the only copy to the host.
CrossEntropyStats CudaBackend::CrossEntropy(const float* logits, const int32_t* targets, float* lse,
                                            void* dlogits, DType dlogits_dtype, int64_t rows,
                                            int64_t vocab, float eps, int32_t pad,
                                            float grad_scale) {
  CrossEntropyStats s;
  if (rows <= 0) return s;
  if (row_stats_rows_ < rows) {
    cudaFree(row_stats_);
    SF_CUDA_CHECK(cudaMalloc(&row_stats_, static_cast<size_t>(rows) * 2 * sizeof(double)));
    row_stats_rows_ = rows;
  }
  CrossEntropyKernel<<<static_cast<unsigned>(rows), 512, 0, stream_>>>(
      logits, targets, lse, row_stats_, dlogits, DTypeCode(dlogits_dtype), vocab, eps, pad,
      grad_scale);
  CrossEntropyTotalsKernel<<<1, kTotalsThreads, 0, stream_>>>(row_stats_, targets, rows, pad, ce_totals_);
  double totals[3];
  SF_CUDA_CHECK(cudaMemcpyAsync(totals, ce_totals_, sizeof(totals), cudaMemcpyDeviceToHost, stream_));
  SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
  s.loss = totals[0];
  s.nll = totals[1];
  s.tokens = static_cast<int64_t>(totals[2]);
  return s;
}

}  // namespace sf::cuda
