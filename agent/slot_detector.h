// Finding this machine's slots.
//
// `auto` offers one CUDA slot per GPU. NVML is asked first (agent/gpu_monitor.h: UUID, name,
// memory; slot "cudaK" for NVML index K). When NVML is unavailable or lists no GPU, the CUDA
// runtime is the fallback: it is loaded at run time (dlopen of libcudart.so, then
// cudaGetDeviceCount / cudaGetDeviceProperties with CUDA_DEVICE_ORDER=PCI_BUS_ID, the order
// NVML uses), giving slots "cudaK" for CUDA ordinal K, with names but no UUID or memory. So
// sf-agent needs no CUDA at build time. When neither finds a GPU (no driver, no runtime, no
// GPU), the agent offers one CPU slot and logs one line saying why (event no_cuda_devices,
// with both reasons). `cpu:N` offers N CPU slots and never touches NVML or CUDA.
//
// Slot ids are agent-local and stable: "cpu0".."cpuN-1", "cuda0"...
// Thread-safe (no shared state; the caller's GpuMonitor is thread-safe).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "agent/gpu_monitor.h"
#include "steadfast/v1/common.pb.h"

namespace sf::agent {

struct CudaDevice {
  int ordinal = 0;
  std::string name;
};

// The CUDA devices the runtime reports, in PCI bus order; empty when there is no runtime, no
// driver or no GPU. `why_none` (optional) says why the list is empty. Sets CUDA_DEVICE_ORDER to
// PCI_BUS_ID in this process's environment first (the order of NVML and of the agent's tasks),
// so call it before other threads start.
std::vector<CudaDevice> FindCudaDevices(std::string* why_none = nullptr);

// Where `auto` looks for GPUs.
struct GpuSources {
  // NVML, asked first; null (or unavailable, or no GPU) moves on to the CUDA runtime.
  const GpuMonitor* nvml = nullptr;
  // The fallback; FindCudaDevices unless a test replaces it.
  std::function<std::vector<CudaDevice>(std::string* why_none)> cuda_runtime = FindCudaDevices;
};

// The slots for `spec` (enabled, free).
std::vector<steadfast::v1::Slot> DetectSlots(const SlotSpec& spec, const GpuSources& gpus = {});

}  // namespace sf::agent
