// CudaBackend's elementwise ops and their kernels, one thread per element: cast, add,
// bias + dropout + residual (Philox masks as on the CPU), bias + activation (GELU / ReLU),
// column sums (the bias gradients), the embedding lookup with its scattered gradient, and the
// LSTM cell's pointwise step (one thread per hidden unit of a row).
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

// DropoutFactor's factor (cuda_attention.cu) for elementwise kernels with one thread per
// element (index = blockIdx.x * blockDim.x + threadIdx.x, blockDim.x a multiple of 32): lanes
// 8k..8k+7 of a warp hold the 8 indices of one Philox group, so the group's first lane draws it
// once and shares the mask (DropoutFactor draws a whole group per element). Every lane of the
// warp must call it, in range or not.
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

// The vectorised forms of the kernels above and below: one thread per 8 consecutive elements
// (one Philox group: the mask drawn once for them), 16-byte loads and stores. The launches use
// them when the element count (and the row length, where a bias is added) is a multiple of 8
// and every pointer is 16-byte aligned (Vectorisable).
__device__ inline void Load8(const void* p, int dtype, int64_t i, float v[8]) {
  if (dtype == 0) {
    const float4 a = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i);
    const float4 b = *reinterpret_cast<const float4*>(static_cast<const float*>(p) + i + 4);
    v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w, v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
    return;
  }
  const uint4 u = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(p) + i);
  const uint32_t w[4] = {u.x, u.y, u.z, u.w};
  for (int j = 0; j < 4; ++j) {
    if (dtype == 1) {
      const float2 f = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&w[j]));
      v[2 * j] = f.x, v[2 * j + 1] = f.y;
    } else {
      const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&w[j]));
      v[2 * j] = f.x, v[2 * j + 1] = f.y;
    }
  }
}

__device__ inline void Store8(void* p, int dtype, int64_t i, const float v[8]) {
  StoreAs4(p, dtype, i, v[0], v[1], v[2], v[3]);
  StoreAs4(p, dtype, i + 4, v[4], v[5], v[6], v[7]);
}

// The kept bits of Philox group `group` (bit j: element 8*group + j).
__device__ inline uint32_t KeepBits8(DropoutKey key, int64_t group, float p, uint32_t threshold) {
  if (p <= 0.0f) return 0xffu;
  uint8_t keep[8];
  DropoutKeep8(key, static_cast<uint64_t>(group), threshold, keep);
  uint32_t bits = 0;
  for (int j = 0; j < 8; ++j) bits |= keep[j] ? (1u << j) : 0u;
  return bits;
}

__global__ void Cast8Kernel(const float* x, void* y, int to, int64_t groups) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= groups) return;
  float v[8];
  Load8(x, 0, 8 * g, v);
  Store8(y, to, 8 * g, v);
}

__global__ void BdrForward8Kernel(const float* x, const float* bias, const float* residual,
                                  float* out, int64_t groups, int64_t cols, float p,
                                  uint32_t threshold, float keep_scale, DropoutKey key) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= groups) return;
  const int64_t i = 8 * g;
  const uint32_t bits = KeepBits8(key, g, p, threshold);
  const float scale = p > 0.0f ? keep_scale : 1.0f;
  float v[8], b[8], r[8];
  Load8(x, 0, i, v);
  if (bias) Load8(bias, 0, i % cols, b);
  if (residual) Load8(residual, 0, i, r);
  for (int j = 0; j < 8; ++j) {
    const float f = (bits >> j) & 1u ? scale : 0.0f;
    v[j] = (v[j] + (bias ? b[j] : 0.0f)) * f + (residual ? r[j] : 0.0f);
  }
  Store8(out, 0, i, v);
}

__global__ void DropoutBackward8Kernel(const float* dout, float* dx, int64_t groups, float p,
                                       uint32_t threshold, float keep_scale, DropoutKey key) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= groups) return;
  const uint32_t bits = KeepBits8(key, g, p, threshold);
  const float scale = p > 0.0f ? keep_scale : 1.0f;
  float v[8];
  Load8(dout, 0, 8 * g, v);
  for (int j = 0; j < 8; ++j) v[j] *= (bits >> j) & 1u ? scale : 0.0f;
  Store8(dx, 0, 8 * g, v);
}

// act: Activation's value (0 ReLU, 1 GELU, 2 tanh).
__device__ inline float Activate(float h, int act) {
  return act == 1   ? 0.5f * h * (1.0f + erff(h * 0.70710678118654752f))
         : act == 2 ? tanhf(h)
                    : fmaxf(h, 0.0f);
}

__device__ inline float ActivationGrad(float d, float h, int act) {
  if (act == 1) {
    const float cdf = 0.5f * (1.0f + erff(h * 0.70710678118654752f));
    const float pdf = 0.3989422804014327f * expf(-0.5f * h * h);
    return d * (cdf + h * pdf);
  }
  if (act == 2) {
    const float t = tanhf(h);
    return d * (1.0f - t * t);
  }
  return h > 0 ? d : 0.0f;
}

__global__ void BiasActForward8Kernel(const float* x, const float* bias, float* pre, void* out,
                                      int out_dtype, int64_t groups, int64_t cols, int act) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= groups) return;
  const int64_t i = 8 * g;
  float v[8], b[8];
  Load8(x, 0, i, v);
  if (bias) {
    Load8(bias, 0, i % cols, b);
    for (int j = 0; j < 8; ++j) v[j] += b[j];
  }
  Store8(pre, 0, i, v);
  for (int j = 0; j < 8; ++j) v[j] = Activate(v[j], act);
  Store8(out, out_dtype, i, v);
}

__global__ void BiasActBackward8Kernel(const void* dout, int dout_dtype, const void* saved,
                                       int saved_dtype, void* dpre, int dpre_dtype, float* dpre32,
                                       int64_t groups, int act) {
  const int64_t g = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (g >= groups) return;
  const int64_t i = 8 * g;
  float d[8], h[8];
  Load8(dout, dout_dtype, i, d);
  Load8(saved, saved_dtype, i, h);
  for (int j = 0; j < 8; ++j) d[j] = ActivationGrad(d[j], h[j], act);
  if (dpre32) Store8(dpre32, 0, i, d);
  Store8(dpre, dpre_dtype, i, d);
}

bool Vectorisable(int64_t n, int64_t cols, std::initializer_list<const void*> pointers) {
  if (n % 8 != 0 || cols % 8 != 0) return false;
  for (const void* p : pointers)
    if (reinterpret_cast<uintptr_t>(p) & 15) return false;
  return true;
}

// sum[c] += sum_r x[r, c] in a fixed order (the same bits on every run): one thread per
// column and row split (blockIdx.y) writes the split's sum, then one thread per column adds the
// splits in order.
__global__ void ColumnPartialKernel(const float* x, float* partial, int64_t rows, int64_t cols) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  const int64_t per = (rows + gridDim.y - 1) / gridDim.y;
  const int64_t r0 = blockIdx.y * per, r1 = min(rows, r0 + per);
  float s = 0;
  for (int64_t r = r0; r < r1; ++r) s += x[r * cols + c];
  partial[blockIdx.y * cols + c] = s;
}

__global__ void ColumnTotalKernel(const float* partial, float* sum, int64_t splits, int64_t cols) {
  const int64_t c = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (c >= cols) return;
  float s = 0;
  for (int64_t k = 0; k < splits; ++k) s += partial[k * cols + c];
  sum[c] += s;
}

__device__ float Erf(float x) { return erff(x); }

// act: Activation's value (0 ReLU, 1 GELU, 2 tanh).
__global__ void BiasActForwardKernel(const float* x, const float* bias, float* pre, void* out,
                                     int out_dtype, int64_t n, int64_t cols, int act) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float h = x[i] + (bias ? bias[i % cols] : 0.0f);
  pre[i] = h;
  StoreAs(out, out_dtype, i,
          act == 1   ? 0.5f * h * (1.0f + Erf(h * 0.70710678118654752f))
          : act == 2 ? tanhf(h)
                     : fmaxf(h, 0.0f));
}

// Element i of a buffer of dtype code 0 (f32), 1 (bf16) or 2 (f16), as float.
__device__ inline float LoadAs(const void* p, int dtype, int64_t i) {
  return dtype == 1   ? __bfloat162float(static_cast<const __nv_bfloat16*>(p)[i])
         : dtype == 2 ? __half2float(static_cast<const __half*>(p)[i])
                      : static_cast<const float*>(p)[i];
}

// saved: pre (or ReLU's out) as float (dtype 0), bf16 (1) or f16 (2).
__global__ void BiasActBackwardKernel(const float* dout, const void* saved, int dtype, float* dpre,
                                      int64_t n, int act) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float h = LoadAs(saved, dtype, i);
  if (act == 1) {
    const float cdf = 0.5f * (1.0f + Erf(h * 0.70710678118654752f));
    const float pdf = 0.3989422804014327f * expf(-0.5f * h * h);
    dpre[i] = dout[i] * (cdf + h * pdf);
  } else if (act == 2) {
    const float t = tanhf(h);
    dpre[i] = dout[i] * (1.0f - t * t);
  } else {
    dpre[i] = h > 0 ? dout[i] : 0.0f;
  }
}

// The same with dout and dpre of any dtype code; dpre32 (may be null) also gets the fp32 value
// (the bias gradient's column sums read it).
__global__ void BiasActBackwardAnyKernel(const void* dout, int dout_dtype, const void* saved,
                                         int saved_dtype, void* dpre, int dpre_dtype,
                                         float* dpre32, int64_t n, int act) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  const float h = LoadAs(saved, saved_dtype, i), d = LoadAs(dout, dout_dtype, i);
  float g;
  if (act == 1) {
    const float cdf = 0.5f * (1.0f + Erf(h * 0.70710678118654752f));
    const float pdf = 0.3989422804014327f * expf(-0.5f * h * h);
    g = d * (cdf + h * pdf);
  } else if (act == 2) {
    const float t = tanhf(h);
    g = d * (1.0f - t * t);
  } else {
    g = h > 0 ? d : 0.0f;
  }
  if (dpre32) dpre32[i] = g;
  StoreAs(dpre, dpre_dtype, i, g);
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

__device__ inline float Sigmoid(float x) { return 1.0f / (1.0f + expf(-x)); }

__global__ void LstmCellForwardKernel(float* gates, const float* bias, const float* c_prev, float* c,
                                      float* h, int64_t n, int64_t hidden) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  const int64_t r = e / hidden, j = e % hidden;
  float* z = gates + r * 4 * hidden;
  const float i = Sigmoid(z[j] + (bias ? bias[j] : 0.0f));
  const float f = Sigmoid(z[hidden + j] + (bias ? bias[hidden + j] : 0.0f));
  const float g = tanhf(z[2 * hidden + j] + (bias ? bias[2 * hidden + j] : 0.0f));
  const float o = Sigmoid(z[3 * hidden + j] + (bias ? bias[3 * hidden + j] : 0.0f));
  z[j] = i;
  z[hidden + j] = f;
  z[2 * hidden + j] = g;
  z[3 * hidden + j] = o;
  const float cn = f * (c_prev ? c_prev[e] : 0.0f) + i * g;
  c[e] = cn;
  h[e] = o * tanhf(cn);
}

__global__ void LstmCellBackwardKernel(const float* gates, const float* c_prev, const float* c,
                                       const float* dh, const float* dc, float* dgates,
                                       float* dc_prev, int64_t n, int64_t hidden) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  const int64_t r = e / hidden, j = e % hidden;
  const float* a = gates + r * 4 * hidden;
  float* dz = dgates + r * 4 * hidden;
  const float i = a[j], f = a[hidden + j], g = a[2 * hidden + j], o = a[3 * hidden + j];
  const float tc = tanhf(c[e]);
  const float cp = c_prev ? c_prev[e] : 0.0f;
  const float dct = (dc ? dc[e] : 0.0f) + dh[e] * o * (1.0f - tc * tc);
  dz[j] = dct * g * i * (1.0f - i);
  dz[hidden + j] = dct * cp * f * (1.0f - f);
  dz[2 * hidden + j] = dct * i * (1.0f - g * g);
  dz[3 * hidden + j] = dh[e] * tc * o * (1.0f - o);
  if (dc_prev) dc_prev[e] = dct * f;
}

__global__ void GluForwardKernel(const float* x, float* y, int64_t n, int64_t cols) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  const int64_t r = e / cols, c = e % cols;
  const float* a = x + r * 2 * cols;
  y[e] = a[c] * Sigmoid(a[cols + c]);
}

__global__ void GluBackwardKernel(const float* x, const float* dy, float* dx, int64_t n, int64_t cols) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e >= n) return;
  const int64_t r = e / cols, c = e % cols;
  const float av = x[r * 2 * cols + c], s = Sigmoid(x[r * 2 * cols + cols + c]);
  dx[r * 2 * cols + c] = dy[e] * s;
  dx[r * 2 * cols + cols + c] = dy[e] * av * s * (1.0f - s);
}

__global__ void ScaleRowGroupsKernel(float* x, const float* factors, int64_t n, int64_t group_size) {
  const int64_t e = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (e < n) x[e] *= factors[e / group_size];
}

// One block per vector i: element j at i*sd + j*sn. The block's sum in double, in shared memory.
__device__ double BlockSum(double x) {
  __shared__ double part[kThreads];
  part[threadIdx.x] = x;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (static_cast<int>(threadIdx.x) < s) part[threadIdx.x] += part[threadIdx.x + s];
    __syncthreads();
  }
  const double total = part[0];
  __syncthreads();
  return total;
}

__global__ void WeightNormForwardKernel(const float* v, const float* g, float* w, float* norms, int64_t d,
                                        int64_t sn, int64_t sd) {
  const int64_t i = blockIdx.x;
  double ss = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    const double x = v[i * sd + j * sn];
    ss += x * x;
  }
  const double nrm = sqrt(BlockSum(ss));
  if (threadIdx.x == 0) norms[i] = static_cast<float>(nrm);
  const float k = g[i] / static_cast<float>(nrm);
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) w[i * sd + j * sn] = k * v[i * sd + j * sn];
}

__global__ void WeightNormBackwardKernel(const float* dw, const float* v, const float* g, const float* norms,
                                         float* dv, float* dg, int64_t d, int64_t sn, int64_t sd) {
  const int64_t i = blockIdx.x;
  double s = 0;
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    s += static_cast<double>(dw[i * sd + j * sn]) * v[i * sd + j * sn];
  }
  s = BlockSum(s);
  const double nrm = norms[i];
  if (threadIdx.x == 0) dg[i] += static_cast<float>(s / nrm);
  const float a = static_cast<float>(g[i] / nrm), b = static_cast<float>(s / (nrm * nrm));
  for (int64_t j = threadIdx.x; j < d; j += blockDim.x) {
    dv[i * sd + j * sn] += a * (dw[i * sd + j * sn] - b * v[i * sd + j * sn]);
  }
}

}  // namespace

void CudaBackend::GluForward(const float* x, float* y, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (n > 0) GluForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, y, n, cols);
}

void CudaBackend::GluBackward(const float* x, const float* dy, float* dx, int64_t rows, int64_t cols) {
  const int64_t n = rows * cols;
  if (n > 0) GluBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, dy, dx, n, cols);
}

void CudaBackend::ScaleRowGroups(float* x, const float* factors, int64_t groups, int64_t rows_per_group,
                                 int64_t cols) {
  const int64_t n = groups * rows_per_group * cols;
  if (n > 0) ScaleRowGroupsKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, factors, n, rows_per_group * cols);
}

void CudaBackend::WeightNormForward(const float* v, const float* g, float* w, float* norms, int64_t n, int64_t d,
                                    bool columns) {
  if (n <= 0) return;
  WeightNormForwardKernel<<<static_cast<unsigned>(n), kThreads, 0, stream_>>>(v, g, w, norms, d, columns ? n : 1,
                                                                              columns ? 1 : d);
}

void CudaBackend::WeightNormBackward(const float* dw, const float* v, const float* g, const float* norms,
                                     float* dv, float* dg, int64_t n, int64_t d, bool columns) {
  if (n <= 0) return;
  WeightNormBackwardKernel<<<static_cast<unsigned>(n), kThreads, 0, stream_>>>(dw, v, g, norms, dv, dg, d,
                                                                               columns ? n : 1, columns ? 1 : d);
}

void CudaBackend::Cast(const float* x, void* y, DType to, int64_t n) {
  if (n <= 0) return;
  if (Vectorisable(n, 8, {x, y})) Cast8Kernel<<<Blocks(n / 8), kThreads, 0, stream_>>>(x, y, DTypeCode(to), n / 8);
  else CastKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, y, DTypeCode(to), n);
}

void CudaBackend::Add(const float* x, float* y, int64_t n) {
  if (n > 0) AddKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, y, n);
}

void CudaBackend::BiasDropoutResidualForward(const float* x, const float* bias,
                                             const float* residual, float* out, int64_t rows,
                                             int64_t cols, float p, DropoutKey key) {
  const int64_t n = rows * cols;
  if (n <= 0) return;
  if (Vectorisable(n, cols, {x, bias, residual, out}))
    BdrForward8Kernel<<<Blocks(n / 8), kThreads, 0, stream_>>>(x, bias, residual, out, n / 8, cols, p,
                                                               DropoutThreshold(p), KeepScale(p), key);
  else
    BdrForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(x, bias, residual, out, n, cols, p,
                                                          DropoutThreshold(p), KeepScale(p), key);
}

void CudaBackend::BiasDropoutResidualBackward(const float* dout, float* dx, float* dbias,
                                              int64_t rows, int64_t cols, float p, DropoutKey key) {
  const int64_t n = rows * cols;
  if (n > 0 && Vectorisable(n, 8, {dout, dx}))
    DropoutBackward8Kernel<<<Blocks(n / 8), kThreads, 0, stream_>>>(dout, dx, n / 8, p,
                                                                    DropoutThreshold(p), KeepScale(p), key);
  else if (n > 0)
    DropoutBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(dout, dx, n, p,
                                                               DropoutThreshold(p), KeepScale(p), key);
  if (dbias) ColumnSum(dx, dbias, rows, cols);
}

void CudaBackend::BiasActivationForward(const float* x, const float* bias, float* pre, void* out,
                                        DType out_dtype, int64_t rows, int64_t cols,
                                        Activation act) {
  const int64_t n = rows * cols;
  if (n > 0 && Vectorisable(n, cols, {x, bias, pre, out}))
    BiasActForward8Kernel<<<Blocks(n / 8), kThreads, 0, stream_>>>(
        x, bias, pre, out, DTypeCode(out_dtype), n / 8, cols, static_cast<int>(act));
  else if (n > 0)
    BiasActForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(
        x, bias, pre, out, DTypeCode(out_dtype), n, cols, static_cast<int>(act));
}

void CudaBackend::BiasActivationBackward(const float* dout, const void* saved, DType saved_dtype,
                                         float* dpre, float* dbias, int64_t rows, int64_t cols,
                                         Activation act) {
  const int64_t n = rows * cols;
  const int dtype = DTypeCode(saved_dtype);
  if (n > 0 && Vectorisable(n, 8, {dout, saved, dpre}))
    BiasActBackward8Kernel<<<Blocks(n / 8), kThreads, 0, stream_>>>(
        dout, 0, saved, dtype, dpre, 0, nullptr, n / 8, static_cast<int>(act));
  else if (n > 0)
    BiasActBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(dout, saved, dtype, dpre, n,
                                                               static_cast<int>(act));
  if (dbias) ColumnSum(dpre, dbias, rows, cols);
}

void CudaBackend::BiasActivationBackwardTo(const void* dout, DType dout_dtype, const void* saved,
                                           DType saved_dtype, void* dpre, DType dpre_dtype,
                                           float* dbias, int64_t rows, int64_t cols,
                                           Activation act) {
  const int64_t n = rows * cols;
  if (n == 0) return;
  // The bias gradient sums the fp32 values: through an fp32 copy when dpre is rounded.
  float* dpre32 = nullptr;
  if (dbias) {
    dpre32 = dpre_dtype == DType::kF32
                 ? static_cast<float*>(dpre)
                 : static_cast<float*>(allocator().Allocate(static_cast<size_t>(n) * sizeof(float)));
  }
  float* extra32 = dpre_dtype == DType::kF32 ? nullptr : dpre32;
  if (Vectorisable(n, 8, {dout, saved, dpre, extra32}))
    BiasActBackward8Kernel<<<Blocks(n / 8), kThreads, 0, stream_>>>(
        dout, DTypeCode(dout_dtype), saved, DTypeCode(saved_dtype), dpre, DTypeCode(dpre_dtype),
        extra32, n / 8, static_cast<int>(act));
  else
    BiasActBackwardAnyKernel<<<Blocks(n), kThreads, 0, stream_>>>(
        dout, DTypeCode(dout_dtype), saved, DTypeCode(saved_dtype), dpre, DTypeCode(dpre_dtype),
        extra32, n, static_cast<int>(act));
  if (dbias) {
    ColumnSum(dpre32, dbias, rows, cols);
    if (dpre32 != dpre) allocator().Free(dpre32);
  }
}

void CudaBackend::EmbeddingForward(const int32_t* tokens, const float* table,
                                   const float* pos_table, const int32_t* pos_ids, float* out,
                                   int64_t rows, int64_t cols, float scale) {
  const int64_t n = rows * cols;
  if (n > 0)
    EmbeddingForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(tokens, table, pos_table,
                                                                pos_ids, out, n, cols, scale);
}

void CudaBackend::EmbeddingBackward(const int32_t* tokens, const float* dout, float* dtable,
                                    int64_t rows, int64_t cols, float scale, int32_t pad) {
  const int64_t n = rows * cols;
  if (n > 0)
    EmbeddingBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(tokens, dout, dtable, n, cols,
                                                                 scale, pad);
}

void CudaBackend::ColumnSum(const float* x, float* sum, int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  const int64_t splits = std::min<int64_t>(rows, 64);
  float* partial = static_cast<float*>(allocator().Allocate(static_cast<size_t>(splits * cols) * sizeof(float)));
  dim3 grid(static_cast<unsigned>(Blocks(cols)), static_cast<unsigned>(splits));
  ColumnPartialKernel<<<grid, kThreads, 0, stream_>>>(x, partial, rows, cols);
  ColumnTotalKernel<<<Blocks(cols), kThreads, 0, stream_>>>(partial, sum, splits, cols);
  allocator().Free(partial);
}

void CudaBackend::LstmCellForward(float* gates, const float* bias, const float* c_prev, float* c,
                                  float* h, int64_t rows, int64_t hidden) {
  const int64_t n = rows * hidden;
  if (n > 0)
    LstmCellForwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(gates, bias, c_prev, c, h, n, hidden);
}

void CudaBackend::LstmCellBackward(const float* gates, const float* c_prev, const float* c,
                                   const float* dh, const float* dc, float* dgates, float* dc_prev,
                                   float* dbias, int64_t rows, int64_t hidden) {
  const int64_t n = rows * hidden;
  if (n > 0)
    LstmCellBackwardKernel<<<Blocks(n), kThreads, 0, stream_>>>(gates, c_prev, c, dh, dc, dgates,
                                                                dc_prev, n, hidden);
  if (dbias) ColumnSum(dgates, dbias, rows, 4 * hidden);
}

}  // namespace sf::cuda
