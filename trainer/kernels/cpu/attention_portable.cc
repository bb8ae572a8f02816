// The fused attention kernels with fp32 tile products for any x86-64-v3 CPU (AVX2 + FMA, 8 lanes):
// see attention_kernels.h and attention_tiles.h.
#define SF_KERNEL_NS portable
#include "trainer/kernels/cpu/attention_tiles.h"

namespace sf::portable {
SF_ATTENTION_ENTRY_POINTS(Fp32Products)
}  // namespace sf::portable
