// The device backends a parameterised engine test runs on, by name: "guarded" (the CPU kernels
// on memory the host may not touch: the device path, bit for bit the CPU's results) and "cuda"
// (the first GPU, where one is present and the test target is built with SF_TEST_CUDA). Null,
// with why, when there is none here; the caller skips.
#pragma once

#include <memory>
#include <string>

#include "tests/trainer/guarded_backend.h"
#include "trainer/kernels/backend.h"
#if defined(SF_TEST_CUDA)
#include "trainer/kernels/cuda/cuda_backend.h"
#endif

namespace sf::testing {

inline std::unique_ptr<Backend<float>> MakeTestBackend(const std::string& name, std::string* why) {
  if (name == "guarded") return std::make_unique<GuardedBackend>();
#if defined(SF_TEST_CUDA)
  auto cuda = MakeCudaBackend();
  if (!cuda) *why = "no usable GPU (cudaGetDeviceCount reports none)";
  return cuda;
#else
  *why = "built without the CUDA backend (SF_CUDA=OFF)";
  return nullptr;
#endif
}

}  // namespace sf::testing
