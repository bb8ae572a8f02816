// CudaBackend's fused attention (Backend::AttentionForward / AttentionBackward; the semantics are
// AttentionArgs' in backend.h): q, k and v are read in place from the projections' [B*T, H*D]
// layout and the context is written in its merged layout, so no head permutation is ever
// materialised, and the [Tq, Tk] probabilities never reach memory.
//
// The kernels are written here (not cuDNN's SDPA): the op must reproduce the engine's own
// dropout mask (Philox, element ((b*H + h)*Tq + q)*Tk + k, shared with the CPU and the reference)
// and accept fp32 and odd head sizes, which cuDNN's fused graphs do not.
//
// Tiling (flash-attention's scheme): one block of kAttnThreads threads per (query tile, head, batch
// entry) in the forward pass; the tiles of q, k, v live in shared memory, zero-padded to a head
// size Dp that is a multiple of 16. For each key tile: S = Q K^T, then an online softmax update
// per row (running max m, running sum l, the output rows rescaled by exp(m_old - m_new)), then
// O += P' V with P' the unnormalised probabilities times the dropout factor, in the compute
// dtype. At the end O /= l and lse = m + log l. The backward recomputes P from lse in two
// kernels, so every gradient is a plain sum (no atomics, the same bits on every run): one block
// per key tile accumulates dK = dS^T Q and dV = P'^T dO over the query tiles, one block per query
// tile accumulates dQ = dS K over the key tiles, with dS = scale * P * (dP - D_i), dP = dropout
// (dO V^T) and D_i = dO_i . O_i (a small kernel first). The in-projection bias's gradient is the
// column sums of dq | dk | dv, taken in fp32 per tile and summed tile by tile in a last kernel.
//
// The products run on tensor cores (WMMA, bf16 / f16 operands, fp32 accumulation) when the
// compute dtype is bf16 or f16, and as fp32 FMAs when it is fp32. Tiles are 16, 32 or 64 rows,
// the smallest that covers sequences up to 40 tokens, else 64 (ChooseTile); smaller where the
// shared memory would not hold them (large head sizes, fp32).
#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cfloat>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <type_traits>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

constexpr int kAttnThreads = 256;
constexpr int kAttnWarps = kAttnThreads / 32;

template <typename In>
__device__ inline float ToF(In x);
template <>
__device__ inline float ToF<float>(float x) {
  return x;
}
template <>
__device__ inline float ToF<__nv_bfloat16>(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <>
__device__ inline float ToF<__half>(__half x) {
  return __half2float(x);
}

template <typename In>
__device__ inline In FromF(float x);
template <>
__device__ inline float FromF<float>(float x) {
  return x;
}
template <>
__device__ inline __nv_bfloat16 FromF<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ inline __half FromF<__half>(float x) {
  return __float2half_rn(x);
}

template <typename In>
constexpr bool kTensorCores = !std::is_same_v<In, float>;
// 16-bit probability tiles fit in the fp32 score tiles' memory: the backward's P' and dS overlay
// S and dP' (ScoreGradients reads a row's scores before anyone writes), so the dK/dV kernel's
// shared memory allows two blocks per multiprocessor.
template <typename In>
constexpr bool kOverlay = sizeof(In) == 2;

// Shared-memory row strides (elements): operand tiles [tile][Dp] and probability tiles
// [tile][tile] of In are padded by 8 (WMMA wants multiples of 16 bytes; the pad breaks bank
// conflicts), fp32 tiles by 4.
__host__ __device__ inline int OperandLd(int dp) { return dp + 8; }
__host__ __device__ inline int FloatLd(int cols) { return cols + 4; }
__host__ __device__ inline int ProbLd(int tile) { return tile + 8; }
// Every region starts on a 128-byte boundary (WMMA needs 32).
__host__ __device__ inline size_t Align128(size_t bytes) { return (bytes + 127) / 128 * 128; }

// Consecutive 128-byte aligned regions of a kernel's dynamic shared memory.
struct SharedCarver {
  unsigned char* at;
  template <typename X>
  __device__ X* Of(size_t count) {
    X* p = reinterpret_cast<X*>(at);
    at += Align128(sizeof(X) * count);
    return p;
  }
};

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

// C[M x N] (= or += when accumulate) op(A)[M x K] . op(B)[K x N], all in shared memory, by the
// whole block (every thread must call it; the caller synchronises before reading C). op(A)(i, p)
// is A[i*lda + p], or A[p*lda + i] when kAT; op(B)(p, j) is B[p*ldb + j], or B[j*ldb + p] when
// kBT. M, N and K are multiples of 16.
template <typename In, bool kAT, bool kBT>
__device__ void TileMatmul(const In* A, int lda, const In* B, int ldb, float* C, int ldc, int M,
                           int N, int K, bool accumulate) {
  if constexpr (kTensorCores<In>) {
    namespace wmma = nvcuda::wmma;
    using ALayout = std::conditional_t<kAT, wmma::col_major, wmma::row_major>;
    using BLayout = std::conditional_t<kBT, wmma::col_major, wmma::row_major>;
    const int warp = threadIdx.x >> 5;
    const int tiles_n = N / 16, tiles = (M / 16) * tiles_n;
    for (int t = warp; t < tiles; t += kAttnWarps) {
      const int i0 = (t / tiles_n) * 16, j0 = (t % tiles_n) * 16;
      wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
      if (accumulate)
        wmma::load_matrix_sync(acc, C + i0 * ldc + j0, ldc, wmma::mem_row_major);
      else
        wmma::fill_fragment(acc, 0.0f);
      for (int p0 = 0; p0 < K; p0 += 16) {
        wmma::fragment<wmma::matrix_a, 16, 16, 16, In, ALayout> fa;
        wmma::fragment<wmma::matrix_b, 16, 16, 16, In, BLayout> fb;
        wmma::load_matrix_sync(fa, kAT ? A + p0 * lda + i0 : A + i0 * lda + p0, lda);
        wmma::load_matrix_sync(fb, kBT ? B + j0 * ldb + p0 : B + p0 * ldb + j0, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
      }
      wmma::store_matrix_sync(C + i0 * ldc + j0, acc, ldc, wmma::mem_row_major);
    }
  } else {
    for (int e = threadIdx.x; e < M * N; e += kAttnThreads) {
      const int i = e / N, j = e % N;
      float s = accumulate ? C[i * ldc + j] : 0.0f;
      for (int p = 0; p < K; ++p)
        s +=
            ToF(kAT ? A[p * lda + i] : A[i * lda + p]) * ToF(kBT ? B[j * ldb + p] : B[p * ldb + j]);
      C[i * ldc + j] = s;
    }
  }
}

// Rows [t0, t0 + tile) of one head of a [B*T, ld] operand into a [tile][Dp] shared tile (rows
// past `time` and columns past D as zeros). `vec`: 16-byte chunks (the head's columns, the row
// stride and the buffer are 16-byte aligned, KernelArgs::vec), else element by element.
template <typename In>
__device__ void LoadTile(In* dst, const In* src, int64_t ld, int64_t b, int64_t time, int64_t t0,
                         int64_t h, int D, int dp, int tile, bool vec) {
  const int lds = OperandLd(dp);
  if (vec) {
    constexpr int kV = 16 / sizeof(In);
    const int chunks = dp / kV;
    for (int e = threadIdx.x; e < tile * chunks; e += kAttnThreads) {
      const int r = e / chunks, d = (e % chunks) * kV;
      const int64_t t = t0 + r;
      uint4 v = make_uint4(0, 0, 0, 0);
      if (t < time && d < D)
        v = *reinterpret_cast<const uint4*>(src + (b * time + t) * ld + h * D + d);
      *reinterpret_cast<uint4*>(dst + r * lds + d) = v;
    }
    return;
  }
  for (int e = threadIdx.x; e < tile * dp; e += kAttnThreads) {
    const int r = e / dp, d = e % dp;
    const int64_t t = t0 + r;
    dst[r * lds + d] = t < time && d < D ? src[(b * time + t) * ld + h * D + d] : FromF<In>(0.0f);
  }
}

// Whether key k is masked for query q (k and q absolute; k >= tk counts as masked).
__device__ inline bool KeyMasked(const uint8_t* key_padding, int64_t b, int64_t q, int64_t k,
                                 int64_t tk, bool causal) {
  return k >= tk || (key_padding && key_padding[b * tk + k]) || (causal && k > q);
}

// Dropout factors of consecutive elements, drawing each Philox block of 8 once.
struct DropoutStream {
  DropoutKey key;
  uint32_t threshold;
  float keep_scale;
  bool active;
  uint64_t block = ~0ull;
  uint8_t keep[8];
  __device__ float Factor(int64_t index) {
    if (!active) return 1.0f;
    const uint64_t blk = static_cast<uint64_t>(index) >> 3;
    if (blk != block) {
      DropoutKeep8(key, blk, threshold, keep);
      block = blk;
    }
    return keep[index & 7] ? keep_scale : 0.0f;
  }
};

struct KernelArgs {
  int64_t batch, heads, tq, tk, ldq, ldk, ldv, ldo;
  int head_dim, dp;
  bool vec;   // q, k, v, out and dout may be loaded in 16-byte chunks (LoadTile)
  bool gvec;  // the gradients may be stored 4 elements at a time (StoreGradTile)
  const uint8_t* key_padding;
  int causal;
  float scale, dropout;
  uint32_t threshold;
  float keep_scale;
  DropoutKey key;
};

__device__ inline DropoutStream MakeDropout(const KernelArgs& a) {
  DropoutStream s;
  s.key = a.key;
  s.threshold = a.threshold;
  s.keep_scale = a.keep_scale;
  s.active = a.dropout > 0.0f;
  return s;
}

// The rows of a tile are split between kAttnThreads / tile consecutive threads (lanes of one
// warp), each owning a contiguous run of the row's columns; Reduce combines over a row's threads.
template <int kTile>
struct RowSplit {
  static constexpr int kPerRow = kAttnThreads / kTile;
  static constexpr int kCols = kTile / kPerRow;
  __device__ static int Row() { return threadIdx.x / kPerRow; }
  __device__ static int Col0() { return (threadIdx.x % kPerRow) * kCols; }
  __device__ static float Max(float v) {
    for (int o = kPerRow / 2; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
  }
  __device__ static float Sum(float v) {
    for (int o = kPerRow / 2; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
  }
};

template <typename In, int kTile>
size_t ForwardSmem(int dp) {
  return 3 * Align128(sizeof(In) * kTile * OperandLd(dp)) +
         Align128(sizeof(float) * kTile * FloatLd(kTile)) +
         Align128(sizeof(In) * kTile * ProbLd(kTile)) +
         Align128(sizeof(float) * kTile * FloatLd(dp)) + 2 * Align128(sizeof(float) * kTile);
}

template <typename In, int kTile>
__global__ void __launch_bounds__(kAttnThreads)
    FusedAttentionForwardKernel(KernelArgs a, const In* q, const In* k, const In* v, In* out,
                                float* lse) {
  extern __shared__ __align__(128) unsigned char smem[];
  const int dp = a.dp, D = a.head_dim;
  const int ldi = OperandLd(dp), lds = FloatLd(kTile), ldp = ProbLd(kTile), ldo = FloatLd(dp);
  SharedCarver take{smem};
  In* qs = take.Of<In>(kTile * ldi);
  In* ks = take.Of<In>(kTile * ldi);
  In* vs = take.Of<In>(kTile * ldi);
  float* ss = take.Of<float>(kTile * lds);
  In* ps = take.Of<In>(kTile * ldp);
  float* os = take.Of<float>(kTile * ldo);
  float* row_max = take.Of<float>(kTile);
  float* row_sum = take.Of<float>(kTile);

  const int64_t b = blockIdx.z, h = blockIdx.y, q0 = static_cast<int64_t>(blockIdx.x) * kTile;
  LoadTile(qs, q, a.ldq, b, a.tq, q0, h, D, dp, kTile, a.vec);
  for (int e = threadIdx.x; e < kTile * ldo; e += kAttnThreads) os[e] = 0.0f;
  for (int r = threadIdx.x; r < kTile; r += kAttnThreads) row_max[r] = -INFINITY, row_sum[r] = 0.0f;
  using Split = RowSplit<kTile>;
  const int r = Split::Row(), c0 = Split::Col0();
  const int64_t qi = q0 + r;
  DropoutStream drop = MakeDropout(a);
  // With a causal mask no key past the tile's last query is seen.
  const int64_t k_end = a.causal ? min(a.tk, q0 + kTile) : a.tk;
  for (int64_t k0 = 0; k0 < k_end; k0 += kTile) {
    __syncthreads();  // the previous tile's products are done with ks, vs, ps
    LoadTile(ks, k, a.ldk, b, a.tk, k0, h, D, dp, kTile, a.vec);
    LoadTile(vs, v, a.ldv, b, a.tk, k0, h, D, dp, kTile, a.vec);
    __syncthreads();
    TileMatmul<In, false, true>(qs, ldi, ks, ldi, ss, lds, kTile, kTile, dp, false);
    __syncthreads();
    // Online softmax update of row r over columns [c0, c0 + kCols).
    const float m_old = row_max[r];
    float mx = -INFINITY;
    for (int c = c0; c < c0 + Split::kCols; ++c)
      if (!KeyMasked(a.key_padding, b, qi, k0 + c, a.tk, a.causal))
        mx = fmaxf(mx, ss[r * lds + c] * a.scale);
    const float m_new = fmaxf(m_old, Split::Max(mx));
    const float alpha = m_new == -INFINITY ? 1.0f : expf(m_old - m_new);
    float sum = 0.0f;
    const int64_t drop_row = ((b * a.heads + h) * a.tq + qi) * a.tk;
    for (int c = c0; c < c0 + Split::kCols; ++c) {
      const int64_t kk = k0 + c;
      float p = 0.0f;
      if (qi < a.tq && !KeyMasked(a.key_padding, b, qi, kk, a.tk, a.causal))
        p = expf(ss[r * lds + c] * a.scale - m_new);
      sum += p;
      ps[r * ldp + c] = FromF<In>(p == 0.0f ? 0.0f : p * drop.Factor(drop_row + kk));
    }
    sum = Split::Sum(sum);
    for (int d = threadIdx.x % Split::kPerRow; d < dp; d += Split::kPerRow)
      os[r * ldo + d] *= alpha;
    if (threadIdx.x % Split::kPerRow == 0) {
      row_max[r] = m_new;
      row_sum[r] = row_sum[r] * alpha + sum;
    }
    __syncthreads();
    TileMatmul<In, false, false>(ps, ldp, vs, ldi, os, ldo, kTile, dp, kTile, true);
  }
  __syncthreads();
  const int out_dtype = sizeof(In) == 4 ? 0 : std::is_same_v<In, __nv_bfloat16> ? 1 : 2;
  if (a.vec) {
    const int chunks = D / 4;
    for (int e = threadIdx.x; e < kTile * chunks; e += kAttnThreads) {
      const int rr = e / chunks, d = (e % chunks) * 4;
      const int64_t t = q0 + rr;
      if (t >= a.tq) continue;
      const float l = row_sum[rr];
      const float inv = l > 0.0f ? 1.0f / l : 0.0f;
      const float* x = os + rr * ldo + d;
      StoreAs4(out, out_dtype, (b * a.tq + t) * a.ldo + h * D + d, x[0] * inv, x[1] * inv,
               x[2] * inv, x[3] * inv);
    }
  } else {
    for (int e = threadIdx.x; e < kTile * D; e += kAttnThreads) {
      const int rr = e / D, d = e % D;
      const int64_t t = q0 + rr;
      if (t >= a.tq) continue;
      const float l = row_sum[rr];
      out[(b * a.tq + t) * a.ldo + h * D + d] = FromF<In>(l > 0.0f ? os[rr * ldo + d] / l : 0.0f);
    }
  }
  for (int rr = threadIdx.x; rr < kTile; rr += kAttnThreads) {
    const int64_t t = q0 + rr;
    if (t >= a.tq) continue;
    const float l = row_sum[rr];
    lse[(b * a.heads + h) * a.tq + t] = l > 0.0f ? row_max[rr] + logf(l) : -INFINITY;
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

template <typename In, int kTile>
size_t BackwardKvSmem(int dp) {
  return 4 * Align128(sizeof(In) * kTile * OperandLd(dp)) +
         2 * Align128(sizeof(float) * kTile * FloatLd(kTile)) +
         (kOverlay<In> ? 0 : 2 * Align128(sizeof(In) * kTile * ProbLd(kTile))) +
         2 * Align128(sizeof(float) * kTile * FloatLd(dp)) + 2 * Align128(sizeof(float) * kTile);
}

template <typename In, int kTile>
size_t BackwardQSmem(int dp) {
  return 4 * Align128(sizeof(In) * kTile * OperandLd(dp)) +
         2 * Align128(sizeof(float) * kTile * FloatLd(kTile)) +
         Align128(sizeof(In) * kTile * ProbLd(kTile)) +
         Align128(sizeof(float) * kTile * FloatLd(dp)) + 2 * Align128(sizeof(float) * kTile);
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

int MaxSharedPerBlock() {
  static const int bytes = [] {
    int dev = 0, v = 48 << 10;
    if (cudaGetDevice(&dev) == cudaSuccess)
      cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    return v;
  }();
  return bytes;
}

KernelArgs MakeArgs(const AttentionArgs& a) {
  KernelArgs k;
  k.batch = a.batch, k.heads = a.heads, k.tq = a.tq, k.tk = a.tk;
  k.ldq = a.ldq, k.ldk = a.ldk, k.ldv = a.ldv, k.ldo = a.ldo;
  k.head_dim = static_cast<int>(a.head_dim);
  k.dp = static_cast<int>((a.head_dim + 15) / 16 * 16);
  k.key_padding = a.key_padding;
  k.causal = a.causal ? 1 : 0;
  k.scale = a.scale;
  k.dropout = a.dropout;
  k.threshold = DropoutThreshold(a.dropout);
  k.keep_scale = a.dropout > 0.0f ? KeepScale(a.dropout) : 1.0f;
  k.key = a.key;
  k.vec = k.gvec = false;
  return k;
}

// Whether every operand of the kernels can be read in 16-byte chunks: the head's columns, each
// row stride and each buffer 16-byte aligned.
bool Chunked(const KernelArgs& k, size_t elem, std::initializer_list<const void*> buffers) {
  const size_t v = 16;
  if ((k.head_dim * elem) % v || (k.ldq * elem) % v || (k.ldk * elem) % v || (k.ldv * elem) % v ||
      (k.ldo * elem) % v)
    return false;
  for (const void* p : buffers)
    if (reinterpret_cast<uintptr_t>(p) % v) return false;
  return true;
}

// A launch with `smem` bytes of dynamic shared memory (over 48 KiB needs the opt-in); an empty
// grid launches nothing.
template <typename... Params, typename... Args>
void Launch(void (*kernel)(Params...), dim3 grid, size_t smem, cudaStream_t stream, Args... args) {
  if (grid.x == 0 || grid.y == 0 || grid.z == 0) return;
  SF_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                     static_cast<int>(smem)));
  kernel<<<grid, kAttnThreads, smem, stream>>>(args...);
}

// The tile: the smallest of 16, 32 and 64 that covers the longer sequence up to 40 (short
// sentences waste less of a tile), else 64; smaller where the kernels' shared memory would not fit
// the device (large head sizes, fp32).
template <typename In>
int ChooseTile(int dp, int64_t longest) {
  const size_t limit = static_cast<size_t>(MaxSharedPerBlock());
  auto fits = [&](size_t f, size_t kv, size_t q) { return std::max({f, kv, q}) <= limit; };
  const int wanted = longest <= 16 ? 16 : longest <= 40 ? 32 : 64;
  if (wanted >= 64 &&
      fits(ForwardSmem<In, 64>(dp), BackwardKvSmem<In, 64>(dp), BackwardQSmem<In, 64>(dp)))
    return 64;
  if (wanted >= 32 &&
      fits(ForwardSmem<In, 32>(dp), BackwardKvSmem<In, 32>(dp), BackwardQSmem<In, 32>(dp)))
    return 32;
  if (fits(ForwardSmem<In, 16>(dp), BackwardKvSmem<In, 16>(dp), BackwardQSmem<In, 16>(dp)))
    return 16;
  std::fprintf(stderr,
               "fatal: fused attention: head size %d needs more shared memory than the device's "
               "%zu bytes per block\n",
               dp, limit);
  std::abort();
}

template <typename In, int kTile>
void ForwardAt(const KernelArgs& k, const void* q, const void* kk, const void* v, void* out,
               float* lse, cudaStream_t stream) {
  const dim3 grid(static_cast<unsigned>((k.tq + kTile - 1) / kTile), static_cast<unsigned>(k.heads),
                  static_cast<unsigned>(k.batch));
  Launch(FusedAttentionForwardKernel<In, kTile>, grid, ForwardSmem<In, kTile>(k.dp), stream, k,
         static_cast<const In*>(q), static_cast<const In*>(kk), static_cast<const In*>(v),
         static_cast<In*>(out), lse);
}

template <typename In>
void Forward(const KernelArgs& k, const void* q, const void* kk, const void* v, void* out,
             float* lse, cudaStream_t stream) {
  switch (ChooseTile<In>(k.dp, std::max(k.tq, k.tk))) {
    case 64:
      return ForwardAt<In, 64>(k, q, kk, v, out, lse, stream);
    case 32:
      return ForwardAt<In, 32>(k, q, kk, v, out, lse, stream);
    default:
      return ForwardAt<In, 16>(k, q, kk, v, out, lse, stream);
  }
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

void CudaBackend::AttentionForward(const AttentionArgs& a, const void* q, const void* k,
                                   const void* v, void* out, float* lse) {
  if (a.batch * a.heads * a.tq == 0) return;
  KernelArgs ka = MakeArgs(a);
  ka.vec = Chunked(ka, DTypeSize(a.dtype), {q, k, v, out});
  if (a.dtype == DType::kBF16)
    Forward<__nv_bfloat16>(ka, q, k, v, out, lse, stream_);
  else if (a.dtype == DType::kF16)
    Forward<__half>(ka, q, k, v, out, lse, stream_);
  else
    Forward<float>(ka, q, k, v, out, lse, stream_);
}

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
