// CudaBackend: Backend<float> on an NVIDIA GPU. GEMMs through cuBLASLt (fp32 with fp32 compute;
// bf16/f16 operands on tensor cores with fp32 accumulation and fp32 output), and one .cu kernel
// per elementwise op with exactly the semantics documented in backend.h (same Philox dropout
// masks as the CPU backend, element for element).
//
// All pointers passed to the ops are device pointers (AllocateDevice / CopyToDevice). Ops are
// issued on the backend's own stream; CopyToHost synchronises it. Bias gradients (column sums)
// and fused attention's gradients are summed in a fixed order; the layer norm's, the embedding's
// and the convolution's parameter gradients use atomicAdd, so their summation order (not their
// value beyond rounding) may differ from run to run.
//
// Thread safety: one instance per training loop, whose ops are issued from the thread that
// constructed it (the constructor makes the device current there; ops do not switch devices).
// Construction fails (MakeCudaBackend returns
// nullptr) when no device is usable: cudaGetDeviceCount failing (no driver) counts as zero GPUs.
#pragma once

#include <memory>

#include "trainer/kernels/backend.h"

namespace sf {

// The CUDA backend on device `ordinal`, or nullptr (with no side effects) when there is no such
// usable GPU.
std::unique_ptr<Backend<float>> MakeCudaBackend(int ordinal = 0);

// Number of usable GPUs (0 when the driver or the device is missing).
int CudaDeviceCount();

}  // namespace sf
