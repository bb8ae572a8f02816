// AVX-512 build of the hot loops (see hot_kernels_impl.h); called only after a run-time check.
#define SF_KERNEL_NS avx512
#include "trainer/kernels/cpu/hot_kernels_impl.h"
