// Finding this machine's slots.
//
// `auto` looks for CUDA devices through the CUDA runtime loaded at run time (dlopen of
// libcudart.so, then cudaGetDeviceCount / cudaGetDeviceProperties), so sf-agent needs no CUDA
// at build time. No runtime, an error (no driver) or zero devices mean "no GPUs"; the agent
// then offers one CPU slot. `cpu:N` offers N CPU slots and never touches CUDA.
//
// Slot ids are agent-local and stable: "cpu0".."cpuN-1", "cuda0".. (the CUDA ordinal).
// Thread-safe (no shared state).
#pragma once

#include <string>
#include <vector>

#include "agent/agent_config.h"
#include "steadfast/v1/common.pb.h"

namespace sf::agent {

struct CudaDevice {
  int ordinal = 0;
  std::string name;
};

// The CUDA devices the runtime reports; empty when there is no runtime, no driver or no GPU.
// `why_none` (optional) says why the list is empty.
std::vector<CudaDevice> FindCudaDevices(std::string* why_none = nullptr);

// The slots for `spec` (enabled, free).
std::vector<steadfast::v1::Slot> DetectSlots(const SlotSpec& spec);

// The CUDA ordinal of a slot id "cudaK", or -1 for any other id.
int CudaOrdinalOfSlot(const std::string& slot_id);

}  // namespace sf::agent
