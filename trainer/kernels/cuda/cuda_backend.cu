// CUDA implementation of Backend<float>; see cuda_backend.h and, for each op's definition,
// backend.h and kernels/cpu/reference.h.
#include "trainer/kernels/cuda/cuda_backend.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cfloat>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <tuple>

#include "trainer/kernels/cuda/multi_tensor.h"

namespace sf {
namespace {

#define SF_CUDA_CHECK(expr)                                                          \
  do {                                                                               \
    cudaError_t e_ = (expr);                                                         \
    if (e_ != cudaSuccess) {                                                         \
      std::fprintf(stderr, "CUDA error %s at %s:%d\n", cudaGetErrorString(e_), __FILE__, \
                   __LINE__);                                                        \
      std::abort();                                                                  \
    }                                                                                \
  } while (0)

#define SF_CUBLAS_CHECK(expr)                                                            \
  do {                                                                                   \
    cublasStatus_t s_ = (expr);                                                          \
    if (s_ != CUBLAS_STATUS_SUCCESS) {                                                   \
      std::fprintf(stderr, "cuBLASLt error %d at %s:%d\n", static_cast<int>(s_), __FILE__, \
                   __LINE__);                                                            \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

constexpr int kThreads = 256;

int Blocks(int64_t n) { return static_cast<int>((n + kThreads - 1) / kThreads); }

__device__ float DropoutFactor(DropoutKey key, int64_t index, float p, uint32_t threshold,
                               float keep_scale) {
  if (p <= 0.0f) return 1.0f;
  uint8_t keep[8];
  DropoutKeep8(key, static_cast<uint64_t>(index) / 8, threshold, keep);
  return keep[index % 8] ? keep_scale : 0.0f;
}

// The same factor for elementwise kernels with one thread per element (index = blockIdx.x *
// blockDim.x + threadIdx.x, blockDim.x a multiple of 32): lanes 8k..8k+7 of a warp hold the 8
// indices of one Philox group, so the group's first lane draws it once and shares the mask
// (DropoutFactor draws a whole group per element). Every lane of the warp must call it, in range
// or not.
__device__ float DropoutFactorOfWarp(DropoutKey key, int64_t index, float p, uint32_t threshold,
                                     float keep_scale) {
  if (p <= 0.0f) return 1.0f;
  const int lane = threadIdx.x & 31;
  uint32_t bits = 0;
  if ((lane & 7) == 0) {
    uint8_t keep[8];
    DropoutKeep8(key, static_cast<uint64_t>(index) / 8, threshold, keep);
    for (int j = 0; j < 8; ++j) bits |= keep[j] ? (1u << j) : 0u;
  }
  bits = __shfl_sync(0xffffffffu, bits, lane & ~7);
  return (bits >> (index & 7)) & 1u ? keep_scale : 0.0f;
}

float KeepScale(float p) { return static_cast<float>(1.0 / (1.0 - static_cast<double>(p))); }

// Block-wide sum (blockDim.x a multiple of 32, at most 1024).
__device__ float BlockSum(float v) {
  __shared__ float warp_sums[32];
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  __syncthreads();
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  const int warps = blockDim.x >> 5;
  float t = lane < warps ? warp_sums[lane] : 0.0f;
  if (warp == 0)
    for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
  __shared__ float total;
  if (threadIdx.x == 0) total = t;
  __syncthreads();
  return total;
}

// Element i of an output of dtype code 0 (float), 1 (bf16) or 2 (f16).
__device__ void StoreAs(void* out, int dtype, int64_t i, float v) {
  if (dtype == 1) static_cast<__nv_bfloat16*>(out)[i] = __float2bfloat16_rn(v);
  else if (dtype == 2) static_cast<__half*>(out)[i] = __float2half_rn(v);
  else static_cast<float*>(out)[i] = v;
}

int DTypeCode(DType t) { return t == DType::kBF16 ? 1 : t == DType::kF16 ? 2 : 0; }

__global__ void CastKernel(const float* x, void* y, int to, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  StoreAs(y, to, i, x[i]);
}

__global__ void AddKernel(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] += x[i];
}

__global__ void BdrForwardKernel(const float* x, const float* bias, const float* residual,
                                 float* out, int64_t n, int64_t cols, float p, uint32_t threshold,
                                 float keep_scale, DropoutKey key) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const float f = DropoutFactorOfWarp(key, i, p, threshold, keep_scale);
  if (i >= n) return;
  const float v = (x[i] + (bias ? bias[i % cols] : 0.0f)) * f;
  out[i] = v + (residual ? residual[i] : 0.0f);
}

__global__ void DropoutBackwardKernel(const float* dout, float* dx, int64_t n, float p,
                                      uint32_t threshold, float keep_scale, DropoutKey key) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  const float f = DropoutFactorOfWarp(key, i, p, threshold, keep_scale);
  if (i < n) dx[i] = dout[i] * f;
}

// sum[c] += sum_r x[r, c]: one thread per column, rows split over blockIdx.y.
__global__ void ColumnSumKernel(const float* x, float* sum, int64_t rows, int64_t cols) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t per = (rows + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float s = 0;
  for (int64_t r = r0; r < r1; ++r) s += x[r * cols + c];
  atomicAdd(sum + c, s);
}

__device__ float Erf(float x) { return erff(x); }

__global__ void BiasActForwardKernel(const float* x, const float* bias, float* pre, void* out,
                                     int out_dtype, int64_t n, int64_t cols, int gelu) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float h = x[i] + (bias ? bias[i % cols] : 0.0f);
  pre[i] = h;
  StoreAs(out, out_dtype, i,
          gelu ? 0.5f * h * (1.0f + Erf(h * 0.70710678118654752f)) : fmaxf(h, 0.0f));
}

// saved: pre (or ReLU's out) as float (dtype 0), bf16 (1) or f16 (2).
__global__ void BiasActBackwardKernel(const float* dout, const void* saved, int dtype, float* dpre,
                                      int64_t n, int gelu) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float h = dtype == 1   ? __bfloat162float(static_cast<const __nv_bfloat16*>(saved)[i])
                  : dtype == 2 ? __half2float(static_cast<const __half*>(saved)[i])
                               : static_cast<const float*>(saved)[i];
  if (gelu) {
    const float cdf = 0.5f * (1.0f + Erf(h * 0.70710678118654752f));
    const float pdf = 0.3989422804014327f * expf(-0.5f * h * h);
    dpre[i] = dout[i] * (cdf + h * pdf);
  } else {
    dpre[i] = h > 0 ? dout[i] : 0.0f;
  }
}

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

__global__ void EmbeddingForwardKernel(const int32_t* tokens, const float* table,
                                       const float* pos_table, const int32_t* pos_ids, float* out,
                                       int64_t n, int64_t cols, float scale) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / cols, c = i % cols;
  float v = scale * table[static_cast<int64_t>(tokens[r]) * cols + c];
  if (pos_ids) v += pos_table[static_cast<int64_t>(pos_ids[r]) * cols + c];
  out[i] = v;
}

__global__ void EmbeddingBackwardKernel(const int32_t* tokens, const float* dout, float* dtable,
                                        int64_t n, int64_t cols, float scale, int32_t pad) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const int64_t r = i / cols, c = i % cols;
  if (tokens[r] == pad) return;
  atomicAdd(dtable + static_cast<int64_t>(tokens[r]) * cols + c, scale * dout[i]);
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

// Backend::BeamScores: one block of kThreads per row. lse as BeamScoresOnHost computes it (max,
// then Σ exp in double, tree-reduced in a fixed order), then k rounds of a block-wide arg-max,
// each over the candidates that rank after the previous round's pick (score descending, token
// ascending), so ties resolve as on the host.
__global__ void BeamScoresKernel(const float* logits, const float* base, int64_t vocab, int64_t k,
                                 int32_t ban0, int32_t ban1, int32_t eos, float* top_scores,
                                 int32_t* top_tokens, float* eos_scores) {
  __shared__ double dred[kThreads];
  __shared__ float fred[kThreads];
  __shared__ int32_t tred[kThreads];
  const int64_t r = blockIdx.x;
  const int tid = threadIdx.x;
  const float* z = logits + r * vocab;
  const float neg_inf = -INFINITY;
  float mx = neg_inf;
  for (int64_t v = tid; v < vocab; v += kThreads) mx = fmaxf(mx, z[v]);
  fred[tid] = mx;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) fred[tid] = fmaxf(fred[tid], fred[tid + s]);
    __syncthreads();
  }
  mx = fred[0];
  double sum = 0;
  for (int64_t v = tid; v < vocab; v += kThreads) sum += exp(static_cast<double>(z[v] - mx));
  dred[tid] = sum;
  __syncthreads();
  for (int s = kThreads / 2; s > 0; s >>= 1) {
    if (tid < s) dred[tid] += dred[tid + s];
    __syncthreads();
  }
  const float lse = mx + static_cast<float>(log(dred[0]));
  const float b = base[r];
  float prev_score = INFINITY;
  int32_t prev_token = -1;
  for (int64_t i = 0; i < k; ++i) {
    __syncthreads();  // the previous round's readers of fred/tred are done
    float best = neg_inf;
    int32_t best_token = -1;
    if (prev_token >= 0 || i == 0) {
      for (int64_t v = tid; v < vocab; v += kThreads) {
        if (v == ban0 || v == ban1) continue;
        const float sc = b + (z[v] - lse);
        if (!(sc > neg_inf)) continue;  // -inf, and NaN (as BeamScoresOnHost)
        const int32_t tv = static_cast<int32_t>(v);
        if (!(sc < prev_score || (sc == prev_score && tv > prev_token))) continue;
        if (best_token < 0 || sc > best || (sc == best && tv < best_token)) {
          best = sc;
          best_token = tv;
        }
      }
    }
    fred[tid] = best;
    tred[tid] = best_token;
    __syncthreads();
    for (int s = kThreads / 2; s > 0; s >>= 1) {
      if (tid < s) {
        const float os = fred[tid + s];
        const int32_t ot = tred[tid + s];
        if (ot >= 0 && (tred[tid] < 0 || os > fred[tid] || (os == fred[tid] && ot < tred[tid]))) {
          fred[tid] = os;
          tred[tid] = ot;
        }
      }
      __syncthreads();
    }
    prev_score = fred[0];
    prev_token = tred[0];
    if (tid == 0) {
      top_scores[r * k + i] = prev_token >= 0 ? prev_score : neg_inf;
      top_tokens[r * k + i] = prev_token;
    }
  }
  if (tid == 0) eos_scores[r] = b + (z[eos] - lse);
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
  MaxSum ms{-FLT_MAX, 0.0f};
  float zsum = 0;
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x) {
    ms = Merge(ms, MaxSum{z[v], 1.0f});
    zsum += z[v];
  }
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
  for (int64_t v = threadIdx.x; v < vocab; v += blockDim.x)
    StoreAs(dlogits, dtype, r * vocab + v,
            LossGradient(z[v], lf, v, t, pad, eps_f, on_target, grad_scale));
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

// Device memory of one GPU for CachingAllocator: cudaMalloc blocks; zeroing and copies are
// ordered on the backend's stream.
class CudaMemory final : public MemoryResource {
 public:
  CudaMemory(int ordinal, cudaStream_t stream) : ordinal_(ordinal), stream_(stream) {}
  void* Allocate(size_t bytes) override {
    cudaSetDevice(ordinal_);
    void* p = nullptr;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess) {
      cudaGetLastError();  // clear the sticky out-of-memory error
      return nullptr;
    }
    return p;
  }
  void Free(void* ptr) override { cudaFree(ptr); }
  void Zero(void* ptr, size_t bytes) override {
    SF_CUDA_CHECK(cudaMemsetAsync(ptr, 0, bytes, stream_));
  }
  void CopyFromHost(void* dst, const void* src, size_t bytes) override {
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_));
    SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }
  bool host_accessible() const override { return false; }

 private:
  int ordinal_;
  cudaStream_t stream_;
};

// The cuBLASLt objects of one GEMM shape, built (with its heuristic algorithm) on first use.
struct GemmKey {
  int64_t batch, m, n, k, lda, ldb, ldc, sa, sb, sc;
  int dtype, ta, tb;
  // The alignment (bytes, a power of two up to 256) every matrix of each operand is known to
  // have: cuBLASLt's heuristic assumes 256 unless told, and an algorithm chosen for aligned
  // pointers may refuse or fault on less aligned ones (per-head attention slices, odd strides).
  uint32_t align_a, align_b, align_c;
  bool operator<(const GemmKey& o) const {
    return std::tie(batch, m, n, k, lda, ldb, ldc, sa, sb, sc, dtype, ta, tb, align_a, align_b,
                    align_c) <
           std::tie(o.batch, o.m, o.n, o.k, o.lda, o.ldb, o.ldc, o.sa, o.sb, o.sc, o.dtype, o.ta,
                    o.tb, o.align_a, o.align_b, o.align_c);
  }
};

// The largest power of two up to 256 dividing the address and, in bytes, every leading
// dimension and batch stride: the alignment of every row start of every batch entry.
uint32_t Alignment(const void* p, int64_t elem_bytes, int64_t ld, int64_t stride) {
  uint64_t bits = reinterpret_cast<uintptr_t>(p) | 256u;
  bits |= static_cast<uint64_t>(ld * elem_bytes);
  if (stride != 0) bits |= static_cast<uint64_t>(stride * elem_bytes);
  return static_cast<uint32_t>(bits & (~bits + 1));  // lowest set bit
}

struct GemmPlan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr;
  cublasLtMatmulAlgo_t algo;
};

cudaDataType_t CudaType(DType t) {
  return t == DType::kBF16 ? CUDA_R_16BF : t == DType::kF16 ? CUDA_R_16F : CUDA_R_32F;
}

class CudaBackend final : public Backend<float> {
 public:
  explicit CudaBackend(int ordinal) : ordinal_(ordinal) {
    SF_CUDA_CHECK(cudaSetDevice(ordinal));
    SF_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking));
    SF_CUBLAS_CHECK(cublasLtCreate(&lt_));
    SF_CUDA_CHECK(cudaMalloc(&workspace_, kWorkspace));
    SF_CUDA_CHECK(cudaMalloc(&sum_scratch_, cuda::SumSquaresScratchBytes()));
    SF_CUDA_CHECK(cudaMalloc(&ce_totals_, 3 * sizeof(double)));
    for (Staging& st : staging_) SF_CUDA_CHECK(cudaEventCreateWithFlags(&st.done, cudaEventDisableTiming));
    memory_ = std::make_unique<CudaMemory>(ordinal, stream_);
    allocator_ = std::make_unique<CachingAllocator>(memory_.get());
  }
  ~CudaBackend() override {
    cudaStreamSynchronize(stream_);
    DropGemmPlans();
    for (Staging& st : staging_) {
      cudaFreeHost(st.host);
      cudaEventDestroy(st.done);
    }
    allocator_.reset();  // frees every block before the stream goes
    cudaFree(workspace_);
    cudaFree(row_stats_);
    cudaFree(sum_scratch_);
    cudaFree(ce_totals_);
    cublasLtDestroy(lt_);
    cudaStreamDestroy(stream_);
  }
  const char* name() const override { return "cuda"; }
  Device device() const override { return Device::kCuda; }
  std::string description() const override {
    cudaDeviceProp p{};
    if (cudaGetDeviceProperties(&p, ordinal_) != cudaSuccess) return "cuda";
    char buf[384];
    std::snprintf(buf, sizeof(buf), "%s (sm_%d%d, %.1f GiB)", p.name, p.major, p.minor,
                  static_cast<double>(p.totalGlobalMem) / (1ull << 30));
    return buf;
  }
  void Synchronize() override { SF_CUDA_CHECK(cudaStreamSynchronize(stream_)); }
  CachingAllocator& allocator() const override { return *allocator_; }

  void* AllocateDevice(size_t bytes) override {
    void* p = allocator_->Allocate(bytes ? bytes : 1);
    if (p == nullptr) throw std::bad_alloc();
    return p;
  }
  void FreeDevice(void* p) override { allocator_->Free(p); }
  // Through pinned memory, two buffers in turn: returns once `src` is copied into one (after
  // the copy that last used it finished), without waiting for the device.
  void CopyToDevice(void* dst, const void* src, size_t bytes) override {
    if (bytes == 0) return;
    Staging& st = staging_[next_staging_];
    next_staging_ ^= 1;
    if (st.pending) SF_CUDA_CHECK(cudaEventSynchronize(st.done));
    if (st.capacity < bytes) {
      cudaFreeHost(st.host);
      st.capacity = bytes + bytes / 4;
      SF_CUDA_CHECK(cudaMallocHost(&st.host, st.capacity));
    }
    std::memcpy(st.host, src, bytes);
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, st.host, bytes, cudaMemcpyHostToDevice, stream_));
    SF_CUDA_CHECK(cudaEventRecord(st.done, stream_));
    st.pending = true;
  }
  void CopyToHost(void* dst, const void* src, size_t bytes) override {
    SF_CUDA_CHECK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_));
    SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is
  // our B, its second our A, and a row-major stored matrix is the column-major transpose.
  void Gemm(int64_t batch, int64_t m, int64_t n, int64_t k, const GemmOperand& a,
            const GemmOperand& b, float* c, int64_t ldc, int64_t stride_c, float alpha,
            float beta) override {
    const int64_t in_bytes = DTypeSize(a.dtype);
    const int64_t sa = batch > 1 ? a.batch_stride : 0, sb = batch > 1 ? b.batch_stride : 0;
    const int64_t sc = batch > 1 ? stride_c : 0;
    const GemmKey key{batch, m, n, k, a.ld, b.ld, ldc, sa, sb, sc, static_cast<int>(a.dtype),
                      a.transposed ? 1 : 0, b.transposed ? 1 : 0,
                      Alignment(a.data, in_bytes, a.ld, sa), Alignment(b.data, in_bytes, b.ld, sb),
                      Alignment(c, sizeof(float), ldc, sc)};
    auto it = gemm_plans_.find(key);
    if (it == gemm_plans_.end()) {
      // Beam search meets a new shape at each decoding length and batch size: keep the cache
      // bounded (a training step uses a few dozen shapes, re-planned after a clear).
      if (gemm_plans_.size() >= kMaxGemmPlans) DropGemmPlans();
      it = gemm_plans_.emplace(key, PlanGemm(key, a.dtype)).first;
    }
    const GemmPlan& plan = it->second;
    SF_CUBLAS_CHECK(cublasLtMatmul(lt_, plan.op, &alpha, b.data, plan.la, a.data, plan.lb, &beta,
                                   c, plan.lc, c, plan.lc, &plan.algo, workspace_, kWorkspace,
                                   stream_));
  }

  void DropGemmPlans() {
    for (auto& [key, plan] : gemm_plans_) {
      cublasLtMatrixLayoutDestroy(plan.la);
      cublasLtMatrixLayoutDestroy(plan.lb);
      cublasLtMatrixLayoutDestroy(plan.lc);
      cublasLtMatmulDescDestroy(plan.op);
    }
    gemm_plans_.clear();
  }

  // Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLASLt's first operand is
  // our B, its second our A, and a row-major stored matrix is the column-major transpose.
  // bf16/f16 operands run on tensor cores with fp32 accumulation (CUBLAS_COMPUTE_32F); fp32
  // operands are computed in full fp32 (no TF32), so fp32 runs match the CPU closely.
  GemmPlan PlanGemm(const GemmKey& key, DType dtype) {
    GemmPlan plan;
    const cudaDataType_t dt = CudaType(dtype);
    const bool ta = key.ta != 0, tb = key.tb != 0;
    SF_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    const cublasOperation_t opa = tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    const cublasOperation_t opb = ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    SF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa, sizeof(opa)));
    SF_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(plan.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb, sizeof(opb)));
    // Stored column-major shapes: our B is (n x k) unless transposed (k x n); our A is (k x m)
    // unless transposed (m x k); C^T is n x m.
    SF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.la, dt, tb ? key.k : key.n, tb ? key.n : key.k, key.ldb));
    SF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.lb, dt, ta ? key.m : key.k, ta ? key.k : key.m, key.lda));
    SF_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.lc, CUDA_R_32F, key.n, key.m, key.ldc));
    if (key.batch > 1) {
      const int32_t count = static_cast<int32_t>(key.batch);
      for (auto [layout, stride] : {std::pair{plan.la, key.sb}, std::pair{plan.lb, key.sa},
                                    std::pair{plan.lc, key.sc}}) {
        SF_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_BATCH_COUNT, &count, sizeof(count)));
        SF_CUBLAS_CHECK(cublasLtMatrixLayoutSetAttribute(layout, CUBLASLT_MATRIX_LAYOUT_STRIDED_BATCH_OFFSET, &stride, sizeof(stride)));
      }
    }
    cublasLtMatmulPreference_t pref;
    SF_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&pref));
    SF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &kWorkspace, sizeof(kWorkspace)));
    // cuBLASLt's A is our B and its B our A; C and D are our c.
    const std::pair<cublasLtMatmulPreferenceAttributes_t, uint32_t> aligns[] = {
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.align_b},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.align_a},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.align_c},
        {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.align_c}};
    for (const auto& [attr, bytes] : aligns) {
      SF_CUBLAS_CHECK(cublasLtMatmulPreferenceSetAttribute(pref, attr, &bytes, sizeof(bytes)));
    }
    cublasLtMatmulHeuristicResult_t heuristic;
    int found = 0;
    const cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(lt_, plan.op, plan.la, plan.lb, plan.lc, plan.lc,
                                                             pref, 1, &heuristic, &found);
    cublasLtMatmulPreferenceDestroy(pref);
    if (hs != CUBLAS_STATUS_SUCCESS || found == 0) {
      // What the caller asked for, so the bad call can be found (a kernel cannot fail otherwise).
      std::fprintf(stderr,
                   "cuBLASLt has no algorithm (status %d) for batch %lld of %lldx%lldx%lld, "
                   "transposed %d/%d, ld %lld/%lld/%lld, strides %lld/%lld/%lld, alignment %u/%u/%u\n",
                   static_cast<int>(hs), static_cast<long long>(key.batch), static_cast<long long>(key.m),
                   static_cast<long long>(key.n), static_cast<long long>(key.k), key.ta, key.tb,
                   static_cast<long long>(key.lda), static_cast<long long>(key.ldb), static_cast<long long>(key.ldc),
                   static_cast<long long>(key.sa), static_cast<long long>(key.sb), static_cast<long long>(key.sc),
                   key.align_a, key.align_b, key.align_c);
      std::abort();
    }
    plan.algo = heuristic.algo;
    return plan;
  }

  void BeamScores(const float* logits, const float* base, const BeamScoresArgs& args,
                  float* top_scores, int32_t* top_tokens, float* eos_scores) override {
    if (args.rows > 0)
      BeamScoresKernel<<<static_cast<unsigned>(args.rows), kThreads, 0, stream_>>>(
          logits, base, args.vocab, args.k, args.banned[0], args.banned[1], args.eos, top_scores,
          top_tokens, eos_scores);
  }

  void Cast(const float* x, void* y, DType to, int64_t n) override {
    if (n > 0) CastKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, y, DTypeCode(to), n);
  }
  void Add(const float* x, float* y, int64_t n) override {
    if (n > 0) AddKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, y, n);
  }
  void BiasDropoutResidualForward(const float* x, const float* bias, const float* residual,
                                  float* out, int64_t rows, int64_t cols, float p,
                                  DropoutKey key) override {
    const int64_t n = rows * cols;
    if (n > 0)
      BdrForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, bias, residual, out, n, cols, p,
                                                            DropoutThreshold(p), KeepScale(p), key);
  }
  void BiasDropoutResidualBackward(const float* dout, float* dx, float* dbias, int64_t rows,
                                   int64_t cols, float p, DropoutKey key) override {
    const int64_t n = rows * cols;
    if (n > 0)
      DropoutBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(dout, dx, n, p,
                                                                 DropoutThreshold(p), KeepScale(p), key);
    if (dbias) ColumnSum(dx, dbias, rows, cols);
  }
  void BiasActivationForward(const float* x, const float* bias, float* pre, void* out,
                             DType out_dtype, int64_t rows, int64_t cols,
                             Activation act) override {
    const int64_t n = rows * cols;
    if (n > 0)
      BiasActForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(
          x, bias, pre, out, DTypeCode(out_dtype), n, cols, act == Activation::kGelu);
  }
  void BiasActivationBackward(const float* dout, const void* saved, DType saved_dtype,
                              float* dpre, float* dbias, int64_t rows, int64_t cols,
                              Activation act) override {
    const int64_t n = rows * cols;
    const int dtype = DTypeCode(saved_dtype);
    if (n > 0)
      BiasActBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(dout, saved, dtype, dpre, n,
                                                                 act == Activation::kGelu);
    if (dbias) ColumnSum(dpre, dbias, rows, cols);
  }
  void LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                        float* mean, float* rstd, int64_t rows, int64_t cols,
                        float eps) override {
    if (rows > 0)
      LayerNormForwardKernel<<<static_cast<unsigned>(rows), 128, 0, stream_>>>(x, gamma, beta, y, mean, rstd, cols, eps);
  }
  void LayerNormBackward(const float* dy, const float* x, const float* gamma, const float* mean,
                         const float* rstd, float* dx, float* dgamma, float* dbeta, int64_t rows,
                         int64_t cols, bool accumulate_dx) override {
    if (rows <= 0 || cols <= 0) return;
    // The parameter gradients first: dx may alias dy.
    const unsigned splits = static_cast<unsigned>(std::min<int64_t>(rows, 64));
    dim3 grid(static_cast<unsigned>(Blocks(cols)), splits);
    LayerNormParamGradKernel<<<grid, kThreads, 0, stream_>>>(dy, x, mean, rstd, dgamma, dbeta,
                                                             rows, cols);
    LayerNormBackwardKernel<<<static_cast<unsigned>(rows), 128, 0, stream_>>>(
        dy, x, gamma, mean, rstd, dx, cols, accumulate_dx);
  }
  void SoftmaxForward(const float* scores, float* probs, void* dropped, DType dropped_dtype,
                      const uint8_t* key_padding, int64_t batch, int64_t heads, int64_t tq,
                      int64_t tk, float scale, bool causal, float p, DropoutKey key) override {
    const int64_t rows = batch * heads * tq;
    if (rows > 0)
      SoftmaxForwardKernel<<<Blocks(rows * 32), kThreads, 0, stream_>>>(
          scores, probs, dropped, DTypeCode(dropped_dtype), key_padding, rows, heads, tq, tk, scale, causal, p,
          DropoutThreshold(p), KeepScale(p), key);
  }
  void SoftmaxBackward(const float* d_dropped, const float* probs, void* dscores,
                       DType dscores_dtype, int64_t batch, int64_t heads, int64_t tq, int64_t tk,
                       float scale, float p, DropoutKey key) override {
    const int64_t rows = batch * heads * tq;
    if (rows > 0)
      SoftmaxBackwardKernel<<<Blocks(rows * 32), kThreads, 0, stream_>>>(
          d_dropped, probs, dscores, DTypeCode(dscores_dtype), rows, tk, scale, p,
          DropoutThreshold(p), KeepScale(p), key);
  }
  void EmbeddingForward(const int32_t* tokens, const float* table, const float* pos_table,
                        const int32_t* pos_ids, float* out, int64_t rows, int64_t cols,
                        float scale) override {
    const int64_t n = rows * cols;
    if (n > 0)
      EmbeddingForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(tokens, table, pos_table,
                                                                  pos_ids, out, n, cols, scale);
  }
  void EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable, int64_t rows,
                         int64_t cols, float scale, int32_t pad) override {
    const int64_t n = rows * cols;
    if (n > 0)
      EmbeddingBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(tokens, dout, dtable, n, cols,
                                                                   scale, pad);
  }
  void SplitHeads(const float* x, const float* bias, void* out, DType out_dtype, int64_t batch,
                  int64_t time, int64_t parts, int64_t heads, int64_t head_dim) override {
    const int64_t n = batch * time * parts * heads * head_dim;
    if (n > 0)
      PermuteHeadsKernel<<<Blocks(n), kThreads, 0, stream_>>>(
          x, bias, out, DTypeCode(out_dtype), batch, time, parts, heads, head_dim, 0);
  }
  void MergeHeads(const float* in, void* x, DType x_dtype, int64_t batch, int64_t time,
                  int64_t parts, int64_t heads, int64_t head_dim) override {
    const int64_t n = batch * time * parts * heads * head_dim;
    if (n > 0)
      PermuteHeadsKernel<<<Blocks(n), kThreads, 0, stream_>>>(
          in, nullptr, x, DTypeCode(x_dtype), batch, time, parts, heads, head_dim, 1);
  }
  void ColumnSum(const float* x, float* sum, int64_t rows, int64_t cols) override {
    if (rows <= 0 || cols <= 0) return;
    const unsigned splits = static_cast<unsigned>(std::min<int64_t>(rows, 64));
    dim3 grid(static_cast<unsigned>(Blocks(cols)), splits);
    ColumnSumKernel<<<grid, kThreads, 0, stream_>>>(x, sum, rows, cols);
  }
  CrossEntropyStats CrossEntropyForward(const float* logits, const int32_t* targets, float* lse,
                                        int64_t rows, int64_t vocab, float eps,
                                        int32_t pad) override {
    return CrossEntropy(logits, targets, lse, nullptr, DType::kF32, rows, vocab, eps, pad, 1.0f);
  }
  CrossEntropyStats CrossEntropyForwardBackward(const float* logits, const int32_t* targets,
                                                float* lse, void* dlogits, DType dlogits_dtype,
                                                int64_t rows, int64_t vocab, float eps,
                                                int32_t pad, float grad_scale) override {
    return CrossEntropy(logits, targets, lse, dlogits, dlogits_dtype, rows, vocab, eps, pad,
                        grad_scale);
  }
  void CrossEntropyBackward(const float* logits, const float* lse, const int32_t* targets,
                            void* dlogits, DType dlogits_dtype, int64_t rows, int64_t vocab,
                            float eps, int32_t pad, float grad_scale) override {
    if (rows > 0)
      CrossEntropyBackwardKernel<<<static_cast<unsigned>(rows), 256, 0, stream_>>>(
          logits, lse, targets, dlogits, DTypeCode(dlogits_dtype), vocab, eps, pad, grad_scale);
  }

  VectorStats SumSquares(const float* x, int64_t n) override {
    VectorStats s;
    if (n <= 0) return s;
    cuda::LaunchSumSquares(x, n, sum_scratch_, stream_);
    SF_CUDA_CHECK(cudaMemcpyAsync(&s.sum_squares, sum_scratch_, sizeof(double),
                                  cudaMemcpyDeviceToHost, stream_));
    SF_CUDA_CHECK(cudaStreamSynchronize(stream_));
    s.non_finite = !std::isfinite(s.sum_squares);
    return s;
  }
  void Scale(float* x, int64_t n, float factor) override {
    cuda::LaunchScale(x, n, factor, stream_);
  }
  void ApplyOptimizerUpdate(const OptimizerUpdate& u) override {
    cuda::LaunchOptimizerUpdate(u, stream_);
  }

 private:
  // The loss of every row, its totals (and the gradient when dlogits is set) on the device; the
  // three totals are the only copy to the host.
  CrossEntropyStats CrossEntropy(const float* logits, const int32_t* targets, float* lse,
                                 void* dlogits, DType dlogits_dtype, int64_t rows, int64_t vocab,
                                 float eps, int32_t pad, float grad_scale) {
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

  struct Staging {
    void* host = nullptr;  // pinned
    size_t capacity = 0;
    cudaEvent_t done = nullptr;
    bool pending = false;
  };

  static constexpr size_t kWorkspace = 32u << 20;
  static constexpr size_t kMaxGemmPlans = 4096;
  int ordinal_;
  cudaStream_t stream_ = nullptr;
  cublasLtHandle_t lt_ = nullptr;
  void* workspace_ = nullptr;
  std::unique_ptr<CudaMemory> memory_;
  std::unique_ptr<CachingAllocator> allocator_;
  std::map<GemmKey, GemmPlan> gemm_plans_;
  Staging staging_[2];
  int next_staging_ = 0;
  double* row_stats_ = nullptr;
  int64_t row_stats_rows_ = 0;
  double* ce_totals_ = nullptr;
  double* sum_scratch_ = nullptr;
};

}  // namespace

int CudaDeviceCount() {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess) return 0;  // no driver: zero GPUs
  return n;
}

std::unique_ptr<Backend<float>> MakeCudaBackend(int ordinal) {
  if (ordinal < 0 || ordinal >= CudaDeviceCount()) return nullptr;
  return std::make_unique<CudaBackend>(ordinal);
}

}  // namespace sf
