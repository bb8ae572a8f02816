// Launchers of the CUDA multi-tensor passes (multi_tensor.cu), used by CudaBackend. All
// pointers are device pointers; every launch is asynchronous on `stream`.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "trainer/kernels/backend.h"

namespace sf::cuda {

// Backend::ApplyOptimizerUpdate: one block per chunk of u.chunks.
void LaunchOptimizerUpdate(const OptimizerUpdate& u, cudaStream_t stream);

// Σ x² in double into scratch[0] (a device buffer of SumSquaresScratchBytes()), summed in a
// fixed order (the same result for the same input, run after run).
size_t SumSquaresScratchBytes();
void LaunchSumSquares(const float* x, int64_t n, double* scratch, cudaStream_t stream);

// x[i] *= factor.
void LaunchScale(float* x, int64_t n, float factor, cudaStream_t stream);

}  // namespace sf::cuda
