#include "trainer/run/device_select.h"

#include <cstdlib>
#include <sstream>

#include "trainer/kernels/cpu/cpu_backend.h"
#if defined(SF_HAVE_CUDA)
#include "trainer/kernels/cuda/cuda_backend.h"
#endif

namespace sf {

int VisibleGpuCount() {
#if defined(SF_HAVE_CUDA)
  return CudaDeviceCount();
#else
  return 0;
#endif
}

Result<DeviceChoice> ParseDevice(const std::string& flag) {
  DeviceChoice c;
  if (flag.empty() || flag == "cpu") {
    c.description = "cpu";
    return c;
  }
  if (flag == "auto") {
    if (VisibleGpuCount() > 0) return ParseDevice("cuda:0");
    c.description = "cpu";
    return c;
  }
  if (flag == "cuda" || flag.rfind("cuda:", 0) == 0) {
    c.device = Device::kCuda;
    if (flag.size() > 5) {
      char* end = nullptr;
      const long n = std::strtol(flag.c_str() + 5, &end, 10);
      if (*end != '\0' || n < 0 || n > 1024)
        return InvalidArgument("--device " + flag + ": the GPU ordinal is not a number");
      c.ordinal = static_cast<int>(n);
    }
    c.description = "cuda:" + std::to_string(c.ordinal);
    return c;
  }
  return InvalidArgument("--device " + flag + ": expected cpu, cuda, cuda:N or auto");
}

DeviceChoice DeviceFromSlots(const std::string& slot_ids) {
  DeviceChoice c;
  c.description = "cpu";
  std::stringstream ss(slot_ids);
  std::string id;
  while (std::getline(ss, id, ',')) {
    if (id.rfind("cuda", 0) == 0) {
      c.device = Device::kCuda;
      c.ordinal = 0;  // CUDA_VISIBLE_DEVICES holds exactly the task's GPUs
      c.description = "cuda:0";
      break;
    }
  }
  return c;
}

Result<std::unique_ptr<Backend<float>>> MakeTrainingBackend(const DeviceChoice& choice) {
  if (choice.device == Device::kCpu) return std::unique_ptr<Backend<float>>(std::make_unique<CpuBackend>());
#if defined(SF_HAVE_CUDA)
  const int gpus = CudaDeviceCount();
  if (gpus == 0) {
    return FailedPrecondition("device " + choice.description +
                              ": no GPU is visible (no driver, or CUDA_VISIBLE_DEVICES is empty)");
  }
  if (choice.ordinal >= gpus) {
    return FailedPrecondition("device " + choice.description + ": only " + std::to_string(gpus) +
                              " GPU(s) are visible");
  }
  std::unique_ptr<Backend<float>> be = MakeCudaBackend(choice.ordinal);
  if (!be) return FailedPrecondition("device " + choice.description + ": the GPU is not usable");
  return be;
#else
  return FailedPrecondition("device " + choice.description +
                            ": this sf-trainer was built without the CUDA backend (SF_CUDA=OFF)");
#endif
}

}  // namespace sf
