// The fused attention kernels with fp32 tile products for AVX-512 (16 lanes); called only after a run-time CPU check:
// see attention_kernels.h and attention_tiles.h.
#define SF_KERNEL_NS avx512
#include "trainer/kernels/cpu/attention_tiles.h"

namespace sf::avx512 {

void FusedAttentionForward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                           void* out, float* lse) {
  AttentionForwardImpl<Fp32Products>(a, q, k, v, out, lse);
}

void FusedAttentionBackward(const AttentionArgs& a, const void* q, const void* k, const void* v,
                            const void* out, const void* dout, const float* lse,
                            const AttentionGrads<float>& g) {
  AttentionBackwardImpl<Fp32Products>(a, q, k, v, out, dout, lse, g);
}

}  // namespace sf::avx512
