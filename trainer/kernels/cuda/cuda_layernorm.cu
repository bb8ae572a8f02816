// CudaBackend's layer normalisation and the residual block's fused tail (Backend::
// ResidualLayerNormForward / Backward): one warp per row, the row held in registers, so a row is
// read once and written once with no block-wide barriers.
//
// Rows up to kMaxWarpCols long take the warp kernels: a lane holds kPer elements of its row,
// as float4s (elements 4*(32j + lane) .. +3) when the row length is a multiple of 4 and the
// buffers are 16-byte aligned, else one by one (elements 32j + lane). The forward pass computes
// h = residual + dropout(x + bias) (or reads h as given), the mean and 1/std from the registers
// (two passes over them, no E[x^2] cancellation), and writes h, y and the compute-dtype copy of
// y in the same pass. The backward pass computes dx (or dh) of each row, the branch's gradient
// through the dropout mask in its dtype, and accumulates dgamma, dbeta and dbias in registers
// (a lane's columns are the same in every row), then per block in shared memory, then once per
// column per block into the parameter gradients. Longer rows take the block-per-row kernels at the
// end of the file.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

constexpr int kMaxWarpCols = 1024;
constexpr int kRowsPerBlock = 8;  // warps per block
constexpr int kBackwardBlocks = 264;

struct NormForwardArgs {
  const float* x;         // the branch (null: the row is `in` as given)
  const float* bias;      // may be null
  const float* residual;  // may be null
  const float* in;        // the row when x is null
  float* h;               // h written here when x is not null
  const float* gamma;
  const float* beta;
  float* y;
  void* y_low;  // may be null
  int low_dtype;
  float* mean;
  float* rstd;
  int64_t rows;
  int cols;
  float eps, p;
  uint32_t threshold;
  float keep_scale;
  DropoutKey key;
};

struct NormBackwardArgs {
  const float* dy;
  const float* x;  // the layer norm's input (h)
  const float* gamma;
  const float* mean;
  const float* rstd;
  float* dx;  // dh; may alias dy
  int accumulate;
  void* d_branch;  // may be null: a plain layer norm
  int branch_dtype;
  float* dbias;  // may be null
  float* dgamma;
  float* dbeta;
  int64_t rows;
  int cols;
  float p;
  uint32_t threshold;
  float keep_scale;
  DropoutKey key;
};

__device__ inline float WarpSum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}

// The dropout factors of elements index .. index+3 (index a multiple of 4: one Philox group).
__device__ inline void Factors4(const DropoutKey& key, int64_t index, uint32_t threshold,
                                float keep_scale, float p, float f[4]) {
  if (p <= 0.0f) {
    f[0] = f[1] = f[2] = f[3] = 1.0f;
    return;
  }
  uint8_t keep[8];
  DropoutKeep8(key, static_cast<uint64_t>(index) >> 3, threshold, keep);
  const int o = static_cast<int>(index & 7);
  for (int j = 0; j < 4; ++j) f[j] = keep[o + j] ? keep_scale : 0.0f;
}

__device__ inline float Factor1(const DropoutKey& key, int64_t index, uint32_t threshold,
                                float keep_scale, float p) {
  if (p <= 0.0f) return 1.0f;
  return DropoutKept(key, static_cast<uint64_t>(index), threshold) ? keep_scale : 0.0f;
}

// Element slots of a lane: with kVec, slot s = 4*j + e is column 4*(32*j + lane) + e; else slot
// j is column 32*j + lane.
template <int kPer, bool kVec>
__device__ inline int Column(int slot, int lane) {
  if constexpr (kVec)
    return 4 * (32 * (slot / 4) + lane) + slot % 4;
  else
    return 32 * slot + lane;
}

template <int kPer, bool kVec>
__global__ void __launch_bounds__(32 * kRowsPerBlock) NormForwardKernel(NormForwardArgs a) {
  const int lane = threadIdx.x & 31;
  const int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + (threadIdx.x >> 5);
  if (r >= a.rows) return;
  const int64_t base = r * a.cols;
  float v[kPer];
  float s = 0.0f;
  if constexpr (kVec) {
    for (int j = 0; j < kPer / 4; ++j) {
      const int c = 4 * (32 * j + lane);
      if (c >= a.cols) {
        v[4 * j] = v[4 * j + 1] = v[4 * j + 2] = v[4 * j + 3] = 0.0f;
        continue;
      }
      float4 t;
      if (a.x) {
        const float4 xv = *reinterpret_cast<const float4*>(a.x + base + c);
        const float4 bv =
            a.bias ? *reinterpret_cast<const float4*>(a.bias + c) : make_float4(0, 0, 0, 0);
        const float4 rv = a.residual ? *reinterpret_cast<const float4*>(a.residual + base + c)
                                     : make_float4(0, 0, 0, 0);
        float f[4];
        Factors4(a.key, base + c, a.threshold, a.keep_scale, a.p, f);
        t = make_float4(rv.x + (xv.x + bv.x) * f[0], rv.y + (xv.y + bv.y) * f[1],
                        rv.z + (xv.z + bv.z) * f[2], rv.w + (xv.w + bv.w) * f[3]);
      } else {
        t = *reinterpret_cast<const float4*>(a.in + base + c);
      }
      v[4 * j] = t.x, v[4 * j + 1] = t.y, v[4 * j + 2] = t.z, v[4 * j + 3] = t.w;
      s += (t.x + t.y) + (t.z + t.w);
    }
  } else {
    for (int j = 0; j < kPer; ++j) {
      const int c = 32 * j + lane;
      float t = 0.0f;
      if (c < a.cols) {
        if (a.x) {
          const float f = Factor1(a.key, base + c, a.threshold, a.keep_scale, a.p);
          t = (a.residual ? a.residual[base + c] : 0.0f) +
              (a.x[base + c] + (a.bias ? a.bias[c] : 0.0f)) * f;
        } else {
          t = a.in[base + c];
        }
      }
      v[j] = t;
      s += t;
    }
  }
  const float mu = WarpSum(s) / a.cols;
  float var = 0.0f;
  for (int j = 0; j < kPer; ++j) {
    const int c = Column<kPer, kVec>(j, lane);
    if (c < a.cols) var += (v[j] - mu) * (v[j] - mu);
  }
  const float rs = rsqrtf(WarpSum(var) / a.cols + a.eps);
  if (lane == 0) {
    a.mean[r] = mu;
    a.rstd[r] = rs;
  }
  // Every read of the row (x, residual, in) is done: h, y may alias them.
  if constexpr (kVec) {
    for (int j = 0; j < kPer / 4; ++j) {
      const int c = 4 * (32 * j + lane);
      if (c >= a.cols) continue;
      if (a.x && a.h)
        *reinterpret_cast<float4*>(a.h + base + c) =
            make_float4(v[4 * j], v[4 * j + 1], v[4 * j + 2], v[4 * j + 3]);
      const float4 g = *reinterpret_cast<const float4*>(a.gamma + c);
      const float4 b = *reinterpret_cast<const float4*>(a.beta + c);
      const float4 y =
          make_float4((v[4 * j] - mu) * rs * g.x + b.x, (v[4 * j + 1] - mu) * rs * g.y + b.y,
                      (v[4 * j + 2] - mu) * rs * g.z + b.z, (v[4 * j + 3] - mu) * rs * g.w + b.w);
      *reinterpret_cast<float4*>(a.y + base + c) = y;
      if (a.y_low) {
        StoreAs(a.y_low, a.low_dtype, base + c, y.x);
        StoreAs(a.y_low, a.low_dtype, base + c + 1, y.y);
        StoreAs(a.y_low, a.low_dtype, base + c + 2, y.z);
        StoreAs(a.y_low, a.low_dtype, base + c + 3, y.w);
      }
    }
  } else {
    for (int j = 0; j < kPer; ++j) {
      const int c = 32 * j + lane;
      if (c >= a.cols) continue;
      if (a.x && a.h) a.h[base + c] = v[j];
      const float y = (v[j] - mu) * rs * a.gamma[c] + a.beta[c];
      a.y[base + c] = y;
      if (a.y_low) StoreAs(a.y_low, a.low_dtype, base + c, y);
    }
  }
}

// Grid-stride over rows, one warp per row; the block's column sums in shared memory
// (3 * cols floats: dgamma, dbeta, dbias), added to the parameter gradients at the end.
template <int kPer, bool kVec>
__global__ void __launch_bounds__(32 * kRowsPerBlock) NormBackwardKernel(NormBackwardArgs a) {
  extern __shared__ float sums[];  // [3][cols]
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int c = threadIdx.x; c < 3 * a.cols; c += blockDim.x) sums[c] = 0.0f;
  __syncthreads();
  float* sg = sums;
  float* sb = sums + a.cols;
  float* sbias = sums + 2 * a.cols;
  // A lane's columns are the same in every row: its share of the column sums stays in registers
  // until the warp's rows are done.
  float pg[kPer], pb[kPer], pbias[kPer];
  for (int j = 0; j < kPer; ++j) pg[j] = pb[j] = pbias[j] = 0.0f;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * kRowsPerBlock + warp; r < a.rows;
       r += static_cast<int64_t>(gridDim.x) * kRowsPerBlock) {
    const int64_t base = r * a.cols;
    const float mu = a.mean[r], rs = a.rstd[r];
    float dy[kPer], xh[kPer];
    float mg = 0.0f, mgx = 0.0f;
    for (int j = 0; j < kPer; ++j) dy[j] = xh[j] = 0.0f;
    if constexpr (kVec) {
      for (int j = 0; j < kPer / 4; ++j) {
        const int c = 4 * (32 * j + lane);
        if (c >= a.cols) continue;
        const float4 d = *reinterpret_cast<const float4*>(a.dy + base + c);
        const float4 x = *reinterpret_cast<const float4*>(a.x + base + c);
        dy[4 * j] = d.x, dy[4 * j + 1] = d.y, dy[4 * j + 2] = d.z, dy[4 * j + 3] = d.w;
        xh[4 * j] = (x.x - mu) * rs, xh[4 * j + 1] = (x.y - mu) * rs;
        xh[4 * j + 2] = (x.z - mu) * rs, xh[4 * j + 3] = (x.w - mu) * rs;
      }
    } else {
      for (int j = 0; j < kPer; ++j) {
        const int c = 32 * j + lane;
        if (c >= a.cols) continue;
        dy[j] = a.dy[base + c];
        xh[j] = (a.x[base + c] - mu) * rs;
      }
    }
    for (int j = 0; j < kPer; ++j) {
      const int c = Column<kPer, kVec>(j, lane);
      if (c >= a.cols) continue;
      const float g = dy[j] * a.gamma[c];
      mg += g;
      mgx += g * xh[j];
      pg[j] += dy[j] * xh[j];
      pb[j] += dy[j];
    }
    mg = WarpSum(mg) / a.cols;
    mgx = WarpSum(mgx) / a.cols;
    // The row is in registers: dx may alias dy.
    if constexpr (kVec) {
      for (int j = 0; j < kPer / 4; ++j) {
        const int c = 4 * (32 * j + lane);
        if (c >= a.cols) continue;
        float d[4];
        for (int e = 0; e < 4; ++e)
          d[e] = rs * (dy[4 * j + e] * a.gamma[c + e] - mg - xh[4 * j + e] * mgx);
        float4* dx4 = reinterpret_cast<float4*>(a.dx + base + c);
        if (a.accumulate) {
          const float4 old = *dx4;
          d[0] += old.x, d[1] += old.y, d[2] += old.z, d[3] += old.w;
        }
        *dx4 = make_float4(d[0], d[1], d[2], d[3]);
        if (!a.d_branch) continue;
        float f[4];
        Factors4(a.key, base + c, a.threshold, a.keep_scale, a.p, f);
        for (int e = 0; e < 4; ++e) {
          const float db = d[e] * f[e];
          StoreAs(a.d_branch, a.branch_dtype, base + c + e, db);
          pbias[4 * j + e] += db;
        }
      }
    } else {
      for (int j = 0; j < kPer; ++j) {
        const int c = 32 * j + lane;
        if (c >= a.cols) continue;
        float d = rs * (dy[j] * a.gamma[c] - mg - xh[j] * mgx);
        if (a.accumulate) d += a.dx[base + c];
        a.dx[base + c] = d;
        if (!a.d_branch) continue;
        const float db = d * Factor1(a.key, base + c, a.threshold, a.keep_scale, a.p);
        StoreAs(a.d_branch, a.branch_dtype, base + c, db);
        pbias[j] += db;
      }
    }
  }
  for (int j = 0; j < kPer; ++j) {
    const int c = Column<kPer, kVec>(j, lane);
    if (c >= a.cols) continue;
    atomicAdd(sg + c, pg[j]);
    atomicAdd(sb + c, pb[j]);
    if (a.d_branch && a.dbias) atomicAdd(sbias + c, pbias[j]);
  }
  __syncthreads();
  for (int c = threadIdx.x; c < a.cols; c += blockDim.x) {
    atomicAdd(a.dgamma + c, sg[c]);
    atomicAdd(a.dbeta + c, sb[c]);
    if (a.dbias && a.d_branch) atomicAdd(a.dbias + c, sbias[c]);
  }
}

bool Aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15) == 0; }

template <bool kVec>
void LaunchForward(const NormForwardArgs& a, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((a.rows + kRowsPerBlock - 1) / kRowsPerBlock);
  const int threads = 32 * kRowsPerBlock;
  if (a.cols <= 128)
    NormForwardKernel<4, kVec><<<blocks, threads, 0, stream>>>(a);
  else if (a.cols <= 256)
    NormForwardKernel<8, kVec><<<blocks, threads, 0, stream>>>(a);
  else if (a.cols <= 512)
    NormForwardKernel<16, kVec><<<blocks, threads, 0, stream>>>(a);
  else
    NormForwardKernel<32, kVec><<<blocks, threads, 0, stream>>>(a);
}

template <bool kVec>
void LaunchBackward(const NormBackwardArgs& a, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>(
      std::min<int64_t>(kBackwardBlocks, (a.rows + kRowsPerBlock - 1) / kRowsPerBlock));
  const int threads = 32 * kRowsPerBlock;
  const size_t smem = 3 * sizeof(float) * static_cast<size_t>(a.cols);
  if (a.cols <= 128)
    NormBackwardKernel<4, kVec><<<blocks, threads, smem, stream>>>(a);
  else if (a.cols <= 256)
    NormBackwardKernel<8, kVec><<<blocks, threads, smem, stream>>>(a);
  else if (a.cols <= 512)
    NormBackwardKernel<16, kVec><<<blocks, threads, smem, stream>>>(a);
  else
    NormBackwardKernel<32, kVec><<<blocks, threads, smem, stream>>>(a);
}

// Rows longer than kMaxWarpCols: one block per row.
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
// rows split over blockIdx.y, one atomic per column per split.
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
    if (accumulate)
      dx[r * cols + c] += v;
    else
      dx[r * cols + c] = v;
  }
}

}  // namespace

void CudaBackend::LayerNormForward(const float* x, const float* gamma, const float* beta, float* y,
                                   float* mean, float* rstd, int64_t rows, int64_t cols,
                                   float eps) {
  if (rows <= 0) return;
  if (cols > kMaxWarpCols) {
    LayerNormForwardKernel<<<static_cast<unsigned>(rows), 128, 0, stream_>>>(x, gamma, beta, y,
                                                                             mean, rstd, cols, eps);
    return;
  }
  ResidualLayerNormForward(nullptr, nullptr, nullptr, 0.0f, DropoutKey{}, const_cast<float*>(x),
                           gamma, beta, y, nullptr, DType::kF32, mean, rstd, rows, cols, eps);
}

void CudaBackend::LayerNormBackward(const float* dy, const float* x, const float* gamma,
                                    const float* mean, const float* rstd, float* dx, float* dgamma,
                                    float* dbeta, int64_t rows, int64_t cols, bool accumulate_dx) {
  if (rows <= 0 || cols <= 0) return;
  if (cols <= kMaxWarpCols) {
    NormBackwardArgs a{dy,      x,  gamma,   mean,        rstd,  dx,   accumulate_dx ? 1 : 0,
                       nullptr, 0,  nullptr, dgamma,      dbeta, rows, static_cast<int>(cols),
                       0.0f,    0u, 1.0f,    DropoutKey{}};
    const bool vec = cols % 4 == 0 && Aligned16(dy) && Aligned16(x) && Aligned16(dx);
    if (vec)
      LaunchBackward<true>(a, stream_);
    else
      LaunchBackward<false>(a, stream_);
    return;
  }
  // The parameter gradients first: dx may alias dy.
  const unsigned splits = static_cast<unsigned>(std::min<int64_t>(rows, 64));
  dim3 grid(static_cast<unsigned>(Blocks(cols)), splits);
  LayerNormParamGradKernel<<<grid, kThreads, 0, stream_>>>(dy, x, mean, rstd, dgamma, dbeta, rows,
                                                           cols);
  LayerNormBackwardKernel<<<static_cast<unsigned>(rows), 128, 0, stream_>>>(
      dy, x, gamma, mean, rstd, dx, cols, accumulate_dx);
}

void CudaBackend::ResidualLayerNormForward(const float* x, const float* bias, const float* residual,
                                           float p, DropoutKey key, float* h, const float* gamma,
                                           const float* beta, float* y, void* y_low,
                                           DType low_dtype, float* mean, float* rstd, int64_t rows,
                                           int64_t cols, float eps) {
  if (rows <= 0) return;
  if (cols > kMaxWarpCols)
    return Backend<float>::ResidualLayerNormForward(x, bias, residual, p, key, h, gamma, beta, y,
                                                    y_low, low_dtype, mean, rstd, rows, cols, eps);
  NormForwardArgs a{x,
                    bias,
                    residual,
                    h,
                    h,
                    gamma,
                    beta,
                    y,
                    y_low,
                    DTypeCode(low_dtype),
                    mean,
                    rstd,
                    rows,
                    static_cast<int>(cols),
                    eps,
                    x ? p : 0.0f,
                    DropoutThreshold(p),
                    p > 0.0f ? KeepScale(p) : 1.0f,
                    key};
  const bool vec = cols % 4 == 0 && Aligned16(x) && Aligned16(bias) && Aligned16(residual) &&
                   Aligned16(h) && Aligned16(gamma) && Aligned16(beta) && Aligned16(y);
  if (vec)
    LaunchForward<true>(a, stream_);
  else
    LaunchForward<false>(a, stream_);
}

void CudaBackend::ResidualLayerNormBackward(const float* dy, const float* h, const float* gamma,
                                            const float* mean, const float* rstd, float* dh,
                                            void* d_branch, DType branch_dtype, float* dbias,
                                            float* dgamma, float* dbeta, float p, DropoutKey key,
                                            int64_t rows, int64_t cols) {
  if (rows <= 0 || cols <= 0) return;
  if (cols > kMaxWarpCols)
    return Backend<float>::ResidualLayerNormBackward(dy, h, gamma, mean, rstd, dh, d_branch,
                                                     branch_dtype, dbias, dgamma, dbeta, p, key,
                                                     rows, cols);
  NormBackwardArgs a{dy,
                     h,
                     gamma,
                     mean,
                     rstd,
                     dh,
                     0,
                     d_branch,
                     DTypeCode(branch_dtype),
                     dbias,
                     dgamma,
                     dbeta,
                     rows,
                     static_cast<int>(cols),
                     p,
                     DropoutThreshold(p),
                     p > 0.0f ? KeepScale(p) : 1.0f,
                     key};
  const bool vec = cols % 4 == 0 && Aligned16(dy) && Aligned16(h) && Aligned16(dh);
  if (vec)
    LaunchBackward<true>(a, stream_);
  else
    LaunchBackward<false>(a, stream_);
}

}  // namespace sf::cuda
