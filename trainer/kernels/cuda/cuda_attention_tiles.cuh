// Internal to sf_engine_cuda: the building blocks of the fused attention kernels
// (cuda_fused_attention.cu, the forward pass and the op's contract;
// cuda_fused_attention_backward.cu, the backward pass): the kernels' arguments, shared-memory
// layout and tile products, the tile loads, key masks and dropout factors, and the host side's
// choice of tile and launch.
#pragma once

#include <cuda_runtime.h>
#include <mma.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <initializer_list>
#include <type_traits>

#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda::attention {

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

inline int MaxSharedPerBlock() {
  static const int bytes = [] {
    int dev = 0, v = 48 << 10;
    if (cudaGetDevice(&dev) == cudaSuccess)
      cudaDeviceGetAttribute(&v, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev);
    return v;
  }();
  return bytes;
}

inline KernelArgs MakeArgs(const AttentionArgs& a) {
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
inline bool Chunked(const KernelArgs& k, size_t elem, std::initializer_list<const void*> buffers) {
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

}  // namespace sf::cuda::attention
