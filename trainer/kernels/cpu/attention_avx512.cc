// The fused attention kernels with fp32 tile products for AVX-512 (16 lanes); called only after a run-time CPU check:
// see attention_kernels.h and attention_tiles.h.
#define SF_KERNEL_NS avx512
#include "trainer/kernels/cpu/attention_tiles.h"

namespace sf::avx512 {
SF_ATTENTION_ENTRY_POINTS(Fp32Products)
}  // namespace sf::avx512
