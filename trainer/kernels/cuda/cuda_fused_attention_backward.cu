// CudaBackend's fused attention, backward pass (the forward pass and the tiling:
// cuda_fused_attention.cu). P is recomputed from the forward's log-sum-exp in two kernels, so
// every gradient is a plain sum in a fixed order: one block per key tile accumulates dK = dS^T Q
// and dV = P'^T dO over the query tiles that see it, one block per query tile accumulates
// dQ = dS K over the key tiles it sees, with dS = scale * P * (dP - D_i), dP = dropout(dO V^T) and
// D_i = dO_i . O_i (a small kernel first). The in-projection bias's gradient is the column sums
// of dq | dk | dv, taken in fp32 per tile and summed tile by tile in a last kernel.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "trainer/kernels/cuda/cuda_attention_tiles.cuh"
#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

using namespace attention;

// The forward's lse and the backward's D_i of query rows [q0, q0 + tile) of (b, h), into shared
// memory (-inf and 0 past the last query).
__device__ inline void LoadRowStats(float* lse_s, float* dot_s, const float* lse, const float* dots,
                                    int64_t tq, int64_t heads, int64_t b, int64_t h, int64_t q0,
                                    int tile) {
  for (int r = threadIdx.x; r < tile; r += blockDim.x) {
    const int64_t t = q0 + r;
    const int64_t row = (b * heads + h) * tq + t;
    lse_s[r] = t < tq ? lse[row] : -INFINITY;
    dot_s[r] = t < tq ? dots[row] : 0.0f;
  }
}

// D_i = dO_i . O_i per (b, h, query): one warp per row.
template <typename In>
__global__ void AttentionRowDotKernel(KernelArgs a, const In* out, const In* dout, float* dots) {
  const int64_t row = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (row >= a.batch * a.heads * a.tq) return;
  const int64_t t = row % a.tq, h = (row / a.tq) % a.heads, b = row / (a.tq * a.heads);
  const int64_t base = (b * a.tq + t) * a.ldo + h * a.head_dim;
  float s = 0.0f;
  for (int d = lane; d < a.head_dim; d += 32) s += ToF(out[base + d]) * ToF(dout[base + d]);
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) dots[row] = s;
}

// For query rows [q0, q0 + kTile) and key columns [k0, k0 + kTile), from S (ss) and dP' (dps):
// P' (the compute dtype) into ps when ps is not null, and dS = scale * P * (dP - D_i) into dss.
template <typename In, int kTile>
__device__ void ScoreGradients(const KernelArgs& a, int64_t b, int64_t h, int64_t q0, int64_t k0,
                               const float* ss, const float* dps, const float* lse_s,
                               const float* dot_s, In* ps, In* dss, DropoutStream& drop) {
  using Split = RowSplit<kTile>;
  const int lds = FloatLd(kTile), ldp = ProbLd(kTile);
  const int r = Split::Row(), c0 = Split::Col0();
  const int64_t qi = q0 + r;
  const float l = lse_s[r], dot = dot_s[r];
  const int64_t drop_row = ((b * a.heads + h) * a.tq + qi) * a.tk;
  // Computed in registers first: ps and dss may overlay ss and dps (kOverlay).
  float pd[Split::kCols], ds[Split::kCols];
  for (int j = 0; j < Split::kCols; ++j) {
    const int c = c0 + j;
    const int64_t kk = k0 + c;
    float p = 0.0f;
    if (qi < a.tq && l != -INFINITY && !KeyMasked(a.key_padding, b, qi, kk, a.tk, a.causal))
      p = expf(ss[r * lds + c] * a.scale - l);
    const float f = p == 0.0f ? 0.0f : drop.Factor(drop_row + kk);
    pd[j] = p * f;
    ds[j] = a.scale * p * (dps[r * lds + c] * f - dot);
  }
  if constexpr (kOverlay<In>) __syncthreads();
  for (int j = 0; j < Split::kCols; ++j) {
    if (ps) ps[r * ldp + c0 + j] = FromF<In>(pd[j]);
    dss[r * ldp + c0 + j] = FromF<In>(ds[j]);
  }
}

// Writes a [tile][Dp] fp32 accumulator's valid rows as one head of a [B*T, ld] gradient (dtype
// code gdt; `vec`: 4 elements per store, KernelArgs::gvec), and its column sums over those rows
// into partial[(b*tiles + tile_index)*H*D + h*D + d].
template <int kTile>
__device__ void StoreGradTile(const float* acc, int dp, void* grad, int gdt, bool vec, int64_t ld,
                              int64_t b, int64_t time, int64_t t0, int64_t h, int D, float* partial,
                              int64_t heads, int64_t tiles) {
  const int lda = FloatLd(dp);
  if (vec) {
    const int chunks = D / 4;
    for (int e = threadIdx.x; e < kTile * chunks; e += kAttnThreads) {
      const int r = e / chunks, d = (e % chunks) * 4;
      const int64_t t = t0 + r;
      const float* x = acc + r * lda + d;
      if (t < time) StoreAs4(grad, gdt, (b * time + t) * ld + h * D + d, x[0], x[1], x[2], x[3]);
    }
  } else {
    for (int e = threadIdx.x; e < kTile * D; e += kAttnThreads) {
      const int r = e / D, d = e % D;
      const int64_t t = t0 + r;
      if (t < time) StoreAs(grad, gdt, (b * time + t) * ld + h * D + d, acc[r * lda + d]);
    }
  }
  if (!partial) return;
  // The column sums over the valid rows: a warp per column, lanes over rows, combined by a fixed
  // shuffle tree (the same bits every run).
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int d = warp; d < D; d += kAttnThreads / 32) {
    float s = 0.0f;
    for (int r = lane; r < kTile; r += 32)
      if (t0 + r < time) s += acc[r * lda + d];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
    if (lane == 0) partial[(b * tiles + t0 / kTile) * heads * D + h * D + d] = s;
  }
}

// dK and dV of one key tile, over every query tile that sees it.
template <typename In, int kTile>
__global__ void __launch_bounds__(kAttnThreads)
    FusedAttentionBackwardKvKernel(KernelArgs a, const In* q, const In* k, const In* v,
                                   const In* dout, const float* lse, const float* dots, void* dk,
                                   void* dv, int gdt, float* partial_k, float* partial_v) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int dp = a.dp, D = a.head_dim;
  const int ldi = OperandLd(dp), lds = FloatLd(kTile), ldp = ProbLd(kTile), ldo = FloatLd(dp);
  SharedCarver take{smem};
  In* ks = take.Of<In>(kTile * ldi);
  In* vs = take.Of<In>(kTile * ldi);
  In* qs = take.Of<In>(kTile * ldi);
  In* dos = take.Of<In>(kTile * ldi);
  float* ss = take.Of<float>(kTile * lds);
  float* dps = take.Of<float>(kTile * lds);
  In* ps = kOverlay<In> ? reinterpret_cast<In*>(ss) : take.Of<In>(kTile * ldp);
  In* dss = kOverlay<In> ? reinterpret_cast<In*>(dps) : take.Of<In>(kTile * ldp);
  float* dks = take.Of<float>(kTile * ldo);
  float* dvs = take.Of<float>(kTile * ldo);
  float* lse_s = take.Of<float>(kTile);
  float* dot_s = take.Of<float>(kTile);

  const int64_t b = blockIdx.z, h = blockIdx.y, k0 = static_cast<int64_t>(blockIdx.x) * kTile;
  LoadTile(ks, k, a.ldk, b, a.tk, k0, h, D, dp, kTile, a.vec);
  LoadTile(vs, v, a.ldv, b, a.tk, k0, h, D, dp, kTile, a.vec);
  for (int e = threadIdx.x; e < kTile * ldo; e += kAttnThreads) dks[e] = 0.0f, dvs[e] = 0.0f;
  DropoutStream drop = MakeDropout(a);
  // With a causal mask, queries before the tile's first key see none of its keys.
  const int64_t q_begin = a.causal ? k0 / kTile * kTile : 0;
  for (int64_t q0 = q_begin; q0 < a.tq; q0 += kTile) {
    __syncthreads();
    LoadTile(qs, q, a.ldq, b, a.tq, q0, h, D, dp, kTile, a.vec);
    LoadTile(dos, dout, a.ldo, b, a.tq, q0, h, D, dp, kTile, a.vec);
    LoadRowStats(lse_s, dot_s, lse, dots, a.tq, a.heads, b, h, q0, kTile);
    __syncthreads();
    TileMatmul<In, false, true>(qs, ldi, ks, ldi, ss, lds, kTile, kTile, dp, false);
    TileMatmul<In, false, true>(dos, ldi, vs, ldi, dps, lds, kTile, kTile, dp, false);
    __syncthreads();
    ScoreGradients<In, kTile>(a, b, h, q0, k0, ss, dps, lse_s, dot_s, ps, dss, drop);
    __syncthreads();
    TileMatmul<In, true, false>(ps, ldp, dos, ldi, dvs, ldo, kTile, dp, kTile, true);
    TileMatmul<In, true, false>(dss, ldp, qs, ldi, dks, ldo, kTile, dp, kTile, true);
  }
  __syncthreads();
  const int64_t tiles = (a.tk + kTile - 1) / kTile;
  StoreGradTile<kTile>(dks, dp, dk, gdt, a.gvec, a.ldk, b, a.tk, k0, h, D, partial_k, a.heads,
                       tiles);
  StoreGradTile<kTile>(dvs, dp, dv, gdt, a.gvec, a.ldv, b, a.tk, k0, h, D, partial_v, a.heads,
                       tiles);
}

// dQ of one query tile, over every key tile it sees.
template <typename In, int kTile>
__global__ void __launch_bounds__(kAttnThreads)
    FusedAttentionBackwardQKernel(KernelArgs a, const In* q, const In* k, const In* v,
                                  const In* dout, const float* lse, const float* dots, void* dq,
                                  int gdt, float* partial_q) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int dp = a.dp, D = a.head_dim;
  const int ldi = OperandLd(dp), lds = FloatLd(kTile), ldp = ProbLd(kTile), ldo = FloatLd(dp);
  SharedCarver take{smem};
  In* qs = take.Of<In>(kTile * ldi);
  In* dos = take.Of<In>(kTile * ldi);
  In* ks = take.Of<In>(kTile * ldi);
  In* vs = take.Of<In>(kTile * ldi);
  float* ss = take.Of<float>(kTile * lds);
  float* dps = take.Of<float>(kTile * lds);
  In* dss = take.Of<In>(kTile * ldp);
  float* dqs = take.Of<float>(kTile * ldo);
  float* lse_s = take.Of<float>(kTile);
  float* dot_s = take.Of<float>(kTile);

  const int64_t b = blockIdx.z, h = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  LoadTile(qs, q, a.ldq, b, a.tq, q0, h, D, dp, kTile, a.vec);
  LoadTile(dos, dout, a.ldo, b, a.tq, q0, h, D, dp, kTile, a.vec);
  LoadRowStats(lse_s, dot_s, lse, dots, a.tq, a.heads, b, h, q0, kTile);
  for (int e = threadIdx.x; e < kTile * ldo; e += kAttnThreads) dqs[e] = 0.0f;
  DropoutStream drop = MakeDropout(a);
  const int64_t k_end = a.causal ? min(a.tk, q0 + kTile) : a.tk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kTile) {
    __syncthreads();
    LoadTile(ks, k, a.ldk, b, a.tk, k0, h, D, dp, kTile, a.vec);
    LoadTile(vs, v, a.ldv, b, a.tk, k0, h, D, dp, kTile, a.vec);
    __syncthreads();
    TileMatmul<In, false, true>(qs, ldi, ks, ldi, ss, lds, kTile, kTile, dp, false);
    TileMatmul<In, false, true>(dos, ldi, vs, ldi, dps, lds, kTile, kTile, dp, false);
    __syncthreads();
    ScoreGradients<In, kTile>(a, b, h, q0, k0, ss, dps, lse_s, dot_s, static_cast<In*>(nullptr),
                              dss, drop);
    __syncthreads();
    TileMatmul<In, false, false>(dss, ldp, ks, ldi, dqs, ldo, kTile, dp, kTile, true);
  }
  __syncthreads();
  const int64_t tiles = (a.tq + kTile - 1) / kTile;
  StoreGradTile<kTile>(dqs, dp, dq, gdt, a.gvec, a.ldq, b, a.tq, q0, h, D, partial_q, a.heads,
                       tiles);
}

// dbias[part*C + c] += the sum over tile rows of partial_part[row*C + c] (q, k, v in turn): one
// warp per column, lanes over rows, combined by a fixed shuffle tree (the same bits every run).
__global__ void AttentionBiasGradKernel(const float* pq, const float* pk, const float* pv,
                                        int64_t q_rows, int64_t k_rows, int64_t C, float* dbias) {
  const int64_t col = (blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x) / 32;
  const int lane = threadIdx.x & 31;
  if (col >= 3 * C) return;
  const int64_t part = col / C, c = col % C;
  const float* src = part == 0 ? pq : part == 1 ? pk : pv;
  const int64_t rows = part == 0 ? q_rows : k_rows;
  float s = 0.0f;
  for (int64_t r = lane; r < rows; r += 32) s += src[r * C + c];
  for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
  if (lane == 0) dbias[col] += s;
}

template <typename In, int kTile>
void BackwardAt(const KernelArgs& k, const void* q, const void* kk, const void* v, const void* out,
                const void* dout, const float* lse, const AttentionGrads<float>& g,
                CachingAllocator& alloc, cudaStream_t stream) {
  const int64_t C = k.heads * k.head_dim;
  const int64_t q_tiles = (k.tq + kTile - 1) / kTile, k_tiles = (k.tk + kTile - 1) / kTile;
  const int64_t rows = k.batch * k.heads * k.tq;
  const int64_t q_part = g.dbias ? k.batch * q_tiles * C : 0;
  const int64_t k_part = g.dbias ? k.batch * k_tiles * C : 0;
  const size_t bytes = sizeof(float) * static_cast<size_t>(rows + q_part + 2 * k_part);
  float* scratch = static_cast<float*>(alloc.Allocate(bytes));
  float* dots = scratch;
  float* pq = g.dbias ? dots + rows : nullptr;
  float* pk = g.dbias ? pq + q_part : nullptr;
  float* pv = g.dbias ? pk + k_part : nullptr;
  if (rows > 0)
    AttentionRowDotKernel<In><<<Blocks(rows * 32), kThreads, 0, stream>>>(
        k, static_cast<const In*>(out), static_cast<const In*>(dout), dots);
  const int gdt = DTypeCode(g.dtype);
  const dim3 kv_grid(static_cast<unsigned>(k_tiles), static_cast<unsigned>(k.heads),
                     static_cast<unsigned>(k.batch));
  Launch(FusedAttentionBackwardKvKernel<In, kTile>, kv_grid, BackwardKvSmem<In, kTile>(k.dp),
         stream, k, static_cast<const In*>(q), static_cast<const In*>(kk),
         static_cast<const In*>(v), static_cast<const In*>(dout), lse,
         static_cast<const float*>(dots), g.dk, g.dv, gdt, pk, pv);
  const dim3 q_grid(static_cast<unsigned>(q_tiles), static_cast<unsigned>(k.heads),
                    static_cast<unsigned>(k.batch));
  Launch(FusedAttentionBackwardQKernel<In, kTile>, q_grid, BackwardQSmem<In, kTile>(k.dp), stream,
         k, static_cast<const In*>(q), static_cast<const In*>(kk), static_cast<const In*>(v),
         static_cast<const In*>(dout), lse, static_cast<const float*>(dots), g.dq, gdt, pq);
  if (g.dbias && C > 0)
    AttentionBiasGradKernel<<<Blocks(3 * C * 32), kThreads, 0, stream>>>(
        pq, pk, pv, k.batch * q_tiles, k.batch * k_tiles, C, g.dbias);
  alloc.Free(scratch);
}

template <typename In>
void Backward(const KernelArgs& k, const void* q, const void* kk, const void* v, const void* out,
              const void* dout, const float* lse, const AttentionGrads<float>& g,
              CachingAllocator& alloc, cudaStream_t stream) {
  switch (ChooseTile<In>(k.dp, std::max(k.tq, k.tk))) {
    case 64:
      return BackwardAt<In, 64>(k, q, kk, v, out, dout, lse, g, alloc, stream);
    case 32:
      return BackwardAt<In, 32>(k, q, kk, v, out, dout, lse, g, alloc, stream);
    default:
      return BackwardAt<In, 16>(k, q, kk, v, out, dout, lse, g, alloc, stream);
  }
}

}  // namespace

void CudaBackend::AttentionBackward(const AttentionArgs& a, const void* q, const void* k,
                                    const void* v, const void* out, const void* dout,
                                    const float* lse, const AttentionGrads<float>& g) {
  if (a.batch * a.heads * (a.tq + a.tk) == 0) return;
  KernelArgs ka = MakeArgs(a);
  ka.vec = Chunked(ka, DTypeSize(a.dtype), {q, k, v, out, dout});
  // Stores of 4 elements: 16 bytes in fp32 (8 in bf16 / f16, within the 16-byte test).
  ka.gvec = ka.head_dim % 4 == 0 && Chunked(ka, 4, {g.dq, g.dk, g.dv});
  if (a.dtype == DType::kBF16)
    Backward<__nv_bfloat16>(ka, q, k, v, out, dout, lse, g, *allocator_, stream_);
  else if (a.dtype == DType::kF16)
    Backward<__half>(ka, q, k, v, out, dout, lse, g, *allocator_, stream_);
  else
    Backward<float>(ka, q, k, v, out, dout, lse, g, *allocator_, stream_);
}

}  // namespace sf::cuda
