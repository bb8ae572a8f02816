#include "trainer/kernels/backend.h"

#include "trainer/kernels/cpu/cpu_backend.h"

#if defined(SF_HAVE_CUDA)
#include "trainer/kernels/cuda/cuda_backend.h"
#endif

namespace sf {

std::unique_ptr<Backend<float>> MakeBackend(Device device) {
  if (device == Device::kCpu) return std::make_unique<CpuBackend>();
  return nullptr;  // the CUDA backend is created through MakeCudaBackend() (cuda_backend.h)
}

}  // namespace sf
