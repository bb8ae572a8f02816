#include "agent/slot_detector.h"

#include <dlfcn.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "agent/logger.h"

namespace sf::agent {
namespace {

// cudaError_t is an int-sized enum; 0 is cudaSuccess.
using GetDeviceCountFn = int (*)(int*);
using GetDevicePropertiesFn = int (*)(void*, int);

}  // namespace

std::vector<CudaDevice> FindCudaDevices(std::string* why_none) {
  std::vector<CudaDevice> devices;
  auto none = [&](const std::string& why) {
    if (why_none) {
      *why_none = why;
    }
    return std::vector<CudaDevice>{};
  };
  // Ordinals in PCI bus order, as NVML numbers GPUs and as tasks see them (task::TaskEnvironment).
  setenv("CUDA_DEVICE_ORDER", "PCI_BUS_ID", 1);
  void* lib = nullptr;
  for (const char* name :
       {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"}) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      break;
    }
  }
  if (!lib) {
    return none("no CUDA runtime (dlopen libcudart.so failed)");
  }
  // The library stays loaded: unloading the CUDA runtime at run time is not supported well.
  auto get_count = reinterpret_cast<GetDeviceCountFn>(dlsym(lib, "cudaGetDeviceCount"));
  // CUDA 12+ exports the current struct layout as cudaGetDeviceProperties_v2.
  auto get_props =
      reinterpret_cast<GetDevicePropertiesFn>(dlsym(lib, "cudaGetDeviceProperties_v2"));
  if (!get_props) {
    get_props = reinterpret_cast<GetDevicePropertiesFn>(dlsym(lib, "cudaGetDeviceProperties"));
  }
  if (!get_count) {
    return none("libcudart has no cudaGetDeviceCount");
  }
  int count = 0;
  int err = get_count(&count);
  if (err != 0) {
    return none("cudaGetDeviceCount failed with error " + std::to_string(err));
  }
  if (count <= 0) {
    return none("cudaGetDeviceCount reports no devices");
  }
  for (int i = 0; i < count; ++i) {
    CudaDevice device;
    device.ordinal = i;
    device.name = "CUDA device";
    if (get_props) {
      // cudaDeviceProp starts with `char name[256]`; the rest of its layout changes between
      // releases, so read only the name out of a buffer larger than any version of the struct.
      auto props = std::make_unique<unsigned char[]>(16384);
      std::memset(props.get(), 0, 16384);
      if (get_props(props.get(), i) == 0) {
        const char* name = reinterpret_cast<const char*>(props.get());
        device.name.assign(name, strnlen(name, 256));
      }
    }
    devices.push_back(std::move(device));
  }
  return devices;
}

std::vector<steadfast::v1::Slot> DetectSlots(const SlotSpec& spec, const GpuSources& gpus) {
  std::vector<steadfast::v1::Slot> slots;
  auto add_cpu = [&](int n) {
    for (int i = 0; i < n; ++i) {
      steadfast::v1::Slot slot;
      slot.set_id("cpu" + std::to_string(i));
      slot.set_type(steadfast::v1::SLOT_TYPE_CPU);
      slot.set_device("CPU");
      slot.set_enabled(true);
      slots.push_back(std::move(slot));
    }
  };
  auto add_cuda = [&](int index, const std::string& name, const std::string& uuid, int64_t memory_total_bytes,
                      const char* source) {
    steadfast::v1::Slot slot;
    slot.set_id("cuda" + std::to_string(index));
    slot.set_type(steadfast::v1::SLOT_TYPE_CUDA);
    slot.set_device(name.empty() ? "CUDA device" : name);
    slot.set_enabled(true);
    slot.set_uuid(uuid);
    slot.set_memory_total_bytes(memory_total_bytes);
    LogEvent(LogLevel::kInfo, "slots", "cuda_device",
             {{"slot", slot.id()},
              {"device", slot.device()},
              {"uuid", uuid},
              {"memory_total_bytes", std::to_string(memory_total_bytes)},
              {"source", source}});
    slots.push_back(std::move(slot));
  };
  if (!spec.auto_detect) {
    add_cpu(spec.cpu_slots);
    return slots;
  }
  std::string nvml_why;
  if (!gpus.nvml) {
    nvml_why = "not asked";
  } else if (!gpus.nvml->available()) {
    nvml_why = gpus.nvml->why_unavailable();
  } else if (gpus.nvml->gpus().empty()) {
    nvml_why = "NVML lists no GPU";
  } else {
    for (const GpuInfo& gpu : gpus.nvml->gpus()) {
      add_cuda(gpu.index, gpu.name, gpu.uuid, gpu.memory_total_bytes, "nvml");
    }
    return slots;
  }
  std::string runtime_why;
  std::vector<CudaDevice> devices;
  if (gpus.cuda_runtime) devices = gpus.cuda_runtime(&runtime_why);
  if (devices.empty()) {
    // The one line that says why a machine has no GPU slot.
    LogEvent(LogLevel::kInfo, "slots", "no_cuda_devices",
             {{"reason", "NVML: " + nvml_why + "; CUDA runtime: " + runtime_why}, {"cpu_slots", "1"}});
    add_cpu(1);
    return slots;
  }
  LogEvent(LogLevel::kInfo, "slots", "nvml_unavailable",
           {{"reason", nvml_why}, {"fallback", "CUDA runtime (no GPU UUIDs, memory or utilisation)"}});
  for (const CudaDevice& d : devices) add_cuda(d.ordinal, d.name, "", 0, "cuda_runtime");
  return slots;
}

}  // namespace sf::agent
