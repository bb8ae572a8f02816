// The CPU's fused attention (Backend::AttentionForward / AttentionBackward, semantics in
// backend.h at AttentionArgs), written once in attention_impl.h and compiled twice:
// sf::portable (x86-64-v3: AVX2 + FMA) and sf::avx512 (AVX-512; call only when
// cpu::HasAvx512()) with fp32 tile products, and for bf16 sf::amx (AMX tiles) and
// sf::avx512_bf16 (vdpbf16ps) with bf16 products (attention_word_products.h). CpuBackend picks
// one.
//
// How it runs. Work is split by (batch entry, head); each thread packs that head's keys and
// values once into fp32 tiles in its own scratch (k transposed, v by rows; bf16 / f16 widened
// exactly), then walks the queries in blocks of kQueryBlock rows and the keys in blocks of at
// most kKeyBlock:
//   forward:  S = Q K^T on the block, scale and masks, an online softmax (running row max and
//             sum; earlier blocks' partial outputs rescaled when the max grows), dropout factors
//             from the same Philox elements SoftmaxForward uses, P' rounded to the compute dtype,
//             O += P' V; at the end O / l is stored and lse = max + log l.
//   backward: recomputes S and P = exp(S - lse) per block, dP' = dO V^T, then
//             dS = scale P (mask dP' / (1-p) - D_i), and accumulates dV += P'^T dO,
//             dQ += dS K, dK += dS^T Q in fp32 scratch; stores them once per head.
//             D_i = sum_j P_ij dP_ij, exactly as SoftmaxBackward, when a row's keys fit one block
//             (tk <= kKeyBlock: every translation batch); otherwise D_i = dO_i . O_i (the
//             identity flash attention uses; O as stored, so rounded in bf16).
// Nothing of size [tq, tk] ever leaves a thread's cache. The tile products are register-blocked
// fp32 FMA kernels (simd.h). Single call, multi-threaded inside (OpenMP); no allocation once
// each thread's scratch has grown to the shape.
#pragma once

#include <cstdint>

#include "trainer/kernels/backend.h"

namespace sf {

inline constexpr int64_t kAttentionQueryBlock = 32;
inline constexpr int64_t kAttentionKeyBlock = 256;

#define SF_DECLARE_ATTENTION_KERNELS                                                          \
  void FusedAttentionForward(const AttentionArgs& a, const void* q, const void* k,             \
                             const void* v, void* out, float* lse);                            \
  void FusedAttentionBackward(const AttentionArgs& a, const void* q, const void* k,            \
                              const void* v, const void* out, const void* dout,                \
                              const float* lse, const AttentionGrads<float>& g);
namespace portable {
SF_DECLARE_ATTENTION_KERNELS
}
namespace avx512 {
SF_DECLARE_ATTENTION_KERNELS
}
// AMX tile products (attention_amx.cc): bf16 inputs only, on a CPU with AMX-BF16 after
// cpu::EnableAmx() succeeded.
namespace amx {
SF_DECLARE_ATTENTION_KERNELS
}
// vdpbf16ps products on bf16 operands (attention_avx512_bf16.cc): bf16 inputs only, on a CPU
// with AVX512_BF16.
namespace avx512_bf16 {
SF_DECLARE_ATTENTION_KERNELS
}
#undef SF_DECLARE_ATTENTION_KERNELS

}  // namespace sf
