// Which device a trainer computes on, and its backend.
//
// `--device` (sf-trainer train / translate / bench) is "cpu", "cuda" (the first visible GPU),
// "cuda:N", or "auto". In a cluster trial the device comes from the task's slots instead: the
// agent hands a task its GPU slots as CUDA_VISIBLE_DEVICES and its slot ids ("cuda0", "cpu0")
// as SF_SLOT_IDS, so a task holding CUDA slots trains on (its first) visible GPU and a task
// holding CPU slots on the CPU; hyperparameters never name a device.
//
// Errors are the user's: a GPU asked for where this sf-trainer has no CUDA backend (built with
// SF_CUDA=OFF) or no GPU is visible; they say which.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"
#include "trainer/kernels/backend.h"

namespace sf {

struct DeviceChoice {
  Device device = Device::kCpu;
  int ordinal = 0;          // CUDA ordinal among the visible devices
  std::string description;  // "cpu", "cuda:0"
};

// Parses a --device value ("" means "cpu").
Result<DeviceChoice> ParseDevice(const std::string& flag);
// The device of a cluster task from SF_SLOT_IDS: cuda when any slot id is "cudaK".
DeviceChoice DeviceFromSlots(const std::string& slot_ids);
// The backend of `choice` (CpuBackend or CudaBackend). Errors: no CUDA backend compiled in, no
// such visible GPU.
Result<std::unique_ptr<Backend<float>>> MakeTrainingBackend(const DeviceChoice& choice);
// Number of GPUs this process can use (0 without the CUDA backend or a driver).
int VisibleGpuCount();

}  // namespace sf
