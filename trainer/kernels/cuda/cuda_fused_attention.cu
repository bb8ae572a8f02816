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
//
// This file: the forward pass; the backward pass is cuda_fused_attention_backward.cu, their
// shared building blocks cuda_attention_tiles.cuh.
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "trainer/kernels/cuda/cuda_attention_tiles.cuh"
#include "trainer/kernels/cuda/cuda_internal.cuh"

namespace sf::cuda {
namespace {

using namespace attention;

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

}  // namespace sf::cuda
