// This machine's NVIDIA GPUs as NVML (the NVIDIA Management Library) sees them: what they are
// (UUID, name, memory) and, sampled while the agent runs, how busy they are.
//
// NVML ships with the driver as libnvidia-ml.so.1. It is loaded at run time (dlopen), so sf-agent
// has no link-time dependency on it and runs on machines without a driver. Open() never fails:
// when the library cannot be loaded, lacks one of the functions used, or nvmlInit_v2 fails (e.g.
// "Driver Not Loaded"), the monitor is unavailable and why_unavailable() says why in one line;
// it logs nothing itself (the slot detector says it once, docs/agent.md "GPU slots").
//
// An available monitor lists the GPUs NVML enumerates, in NVML's index order (PCI bus order).
// A GPU whose handle cannot be had (lost, no permission) is left out; one whose UUID, name or
// memory cannot be read is listed with what could be read (empty, 0).
//
// Sample() reads each listed GPU's utilisation and memory in use. A GPU whose reading fails
// (an NVML error at any point in the agent's life: a lost GPU, a driver reset) is left out of
// that sample. Its first failure is logged as one warning (component `gpu`, event
// `sample_failed`, naming the GPU, the call and NVML's error), its recovery as one info line;
// a GPU that fails every second logs those two lines, not one a second.
//
// Functions used: nvmlInit_v2, nvmlShutdown, nvmlDeviceGetCount_v2,
// nvmlDeviceGetHandleByIndex_v2, nvmlDeviceGetUUID, nvmlDeviceGetName, nvmlDeviceGetMemoryInfo,
// nvmlDeviceGetUtilizationRates (all required), nvmlErrorString (optional, for messages).
//
// Thread-safe: every method may be called from any thread; Sample() calls are serialised. The
// destructor calls nvmlShutdown and unloads the library; no Sample() may be running then.
#pragma once

#include <chrono>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace sf::agent {

// One GPU as NVML enumerates it.
struct GpuInfo {
  int index = 0;                   // NVML's index; the agent's slot for it is "cuda<index>"
  std::string uuid;                // "GPU-5a8f2c1e-..."; empty when NVML could not read it
  std::string name;                // "NVIDIA H100 80GB HBM3"; empty when unknown
  int64_t memory_total_bytes = 0;  // 0 when unknown
};

// One reading of one GPU.
struct GpuReading {
  int index = 0;                  // GpuInfo::index
  int utilization_percent = 0;    // 0..100: share of the driver's last sample period a kernel ran
  int64_t memory_used_bytes = 0;  // device memory allocated, by any process
};

class GpuMonitor {
 public:
  // The library's name in the driver package, found by the dynamic loader.
  static constexpr const char* kDefaultLibrary = "libnvidia-ml.so.1";

  // Loads NVML from `library` (a name for the loader's search, or a path: for non-standard
  // installs and tests, sf-agent --nvml-library / SF_NVML_LIBRARY) and enumerates the GPUs.
  static std::unique_ptr<GpuMonitor> Open(const std::string& library = kDefaultLibrary);

  ~GpuMonitor();
  GpuMonitor(const GpuMonitor&) = delete;
  GpuMonitor& operator=(const GpuMonitor&) = delete;

  // NVML is loaded and initialised (it may still list no GPU).
  bool available() const { return available_; }
  // Why NVML is unavailable, e.g. "cannot load libnvidia-ml.so.1: libnvidia-ml.so.1: cannot
  // open shared object file: No such file or directory"; empty when available.
  const std::string& why_unavailable() const { return why_unavailable_; }
  // The GPUs found at Open(), by index; empty when unavailable.
  const std::vector<GpuInfo>& gpus() const { return gpus_; }

  // One reading per listed GPU that answered, in index order (see above for failures).
  std::vector<GpuReading> Sample();

 private:
  struct Nvml;  // the loaded library's entry points
  GpuMonitor();
  std::string ErrorText(int code) const;

  std::unique_ptr<Nvml> nvml_;
  bool available_ = false;
  std::string why_unavailable_;
  std::vector<GpuInfo> gpus_;
  std::vector<void*> handles_;   // nvmlDevice_t of gpus_[i]
  std::mutex sample_mu_;         // serialises Sample(); guards failing_
  std::map<int, bool> failing_;  // by index: the last reading failed (its warning is logged)
};

// Samples a GpuMonitor on a thread of its own every `interval` and keeps the latest readings, so
// that a slow or hung NVML call never delays the one asking (the agent's heartbeat).
//
// Thread-safe. The destructor stops the thread; if an NVML call hangs, it waits at most a
// second for it and then leaves the thread behind (it holds its own reference to the monitor).
class GpuSampler {
 public:
  GpuSampler(std::shared_ptr<GpuMonitor> monitor, std::chrono::milliseconds interval);
  ~GpuSampler();
  GpuSampler(const GpuSampler&) = delete;
  GpuSampler& operator=(const GpuSampler&) = delete;

  // The latest sample's readings when it was taken within `max_age`; empty otherwise (none
  // taken yet, or the sampling thread is stuck).
  std::vector<GpuReading> Latest(std::chrono::milliseconds max_age) const;

 private:
  struct State;
  std::shared_ptr<State> state_;
  std::thread thread_;
};

}  // namespace sf::agent
