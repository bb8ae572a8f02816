#include "agent/gpu_monitor.h"

#include <dlfcn.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "agent/logger.h"

namespace sf::agent {
namespace {

// The few NVML declarations used, as nvml.h has them (no header needed at build time).
// nvmlReturn_t is an int-sized enum; 0 is NVML_SUCCESS.
using NvmlReturn = int;
using NvmlDevice = void*;  // nvmlDevice_t: a pointer to an opaque struct
struct NvmlMemory {        // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};
struct NvmlUtilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};
constexpr NvmlReturn kNvmlSuccess = 0;
// NVML_DEVICE_UUID_V2_BUFFER_SIZE and NVML_DEVICE_NAME_V2_BUFFER_SIZE.
constexpr unsigned int kUuidBufferSize = 96;
constexpr unsigned int kNameBufferSize = 96;

// A C string from a fixed buffer NVML filled, cut at its first NUL or at its size.
std::string FromBuffer(const char* buffer, size_t size) {
  return std::string(buffer, strnlen(buffer, size));
}

}  // namespace

struct GpuMonitor::Nvml {
  void* library = nullptr;
  bool initialised = false;
  NvmlReturn (*init)() = nullptr;
  NvmlReturn (*shutdown)() = nullptr;
  NvmlReturn (*get_count)(unsigned int*) = nullptr;
  NvmlReturn (*get_handle)(unsigned int, NvmlDevice*) = nullptr;
  NvmlReturn (*get_uuid)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*get_name)(NvmlDevice, char*, unsigned int) = nullptr;
  NvmlReturn (*get_memory)(NvmlDevice, NvmlMemory*) = nullptr;
  NvmlReturn (*get_utilization)(NvmlDevice, NvmlUtilization*) = nullptr;
  const char* (*error_string)(NvmlReturn) = nullptr;
};

GpuMonitor::GpuMonitor() : nvml_(std::make_unique<Nvml>()) {}

GpuMonitor::~GpuMonitor() {
  if (nvml_->initialised) nvml_->shutdown();
  if (nvml_->library) dlclose(nvml_->library);
}

std::string GpuMonitor::ErrorText(int code) const {
  const char* text = nvml_->error_string ? nvml_->error_string(code) : nullptr;
  std::string out = text && *text ? text : "NVML error";
  return out + " (" + std::to_string(code) + ")";
}

std::unique_ptr<GpuMonitor> GpuMonitor::Open(const std::string& library) {
  std::unique_ptr<GpuMonitor> monitor(new GpuMonitor());
  Nvml& nvml = *monitor->nvml_;
  auto unavailable = [&](const std::string& why) {
    monitor->why_unavailable_ = why;
    if (nvml.initialised) nvml.shutdown();
    nvml.initialised = false;
    if (nvml.library) dlclose(nvml.library);
    nvml.library = nullptr;
    return std::move(monitor);
  };
  nvml.library = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!nvml.library) {
    const char* error = dlerror();
    return unavailable("cannot load " + library + ": " + (error ? error : "dlopen failed"));
  }
  bool complete = true;
  std::string missing;
  auto bind = [&](auto& function, const char* name) {
    function =
        reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(nvml.library, name));
    if (!function && complete) {
      complete = false;
      missing = name;
    }
  };
  bind(nvml.init, "nvmlInit_v2");
  bind(nvml.shutdown, "nvmlShutdown");
  bind(nvml.get_count, "nvmlDeviceGetCount_v2");
  bind(nvml.get_handle, "nvmlDeviceGetHandleByIndex_v2");
  bind(nvml.get_uuid, "nvmlDeviceGetUUID");
  bind(nvml.get_name, "nvmlDeviceGetName");
  bind(nvml.get_memory, "nvmlDeviceGetMemoryInfo");
  bind(nvml.get_utilization, "nvmlDeviceGetUtilizationRates");
  if (!complete) return unavailable(library + " has no " + missing + " (not NVML, or too old)");
  nvml.error_string =
      reinterpret_cast<const char* (*)(NvmlReturn)>(dlsym(nvml.library, "nvmlErrorString"));

  if (NvmlReturn rc = nvml.init(); rc != kNvmlSuccess) {
    return unavailable("nvmlInit_v2 failed: " + monitor->ErrorText(rc));
  }
  nvml.initialised = true;
  unsigned int count = 0;
  if (NvmlReturn rc = nvml.get_count(&count); rc != kNvmlSuccess) {
    return unavailable("nvmlDeviceGetCount_v2 failed: " + monitor->ErrorText(rc));
  }
  // NVML never reports more than a few dozen; a larger count is a broken library.
  constexpr unsigned int kMaxGpus = 1024;
  if (count > kMaxGpus) {
    return unavailable("nvmlDeviceGetCount_v2 reports " + std::to_string(count) + " GPUs");
  }
  for (unsigned int i = 0; i < count; ++i) {
    NvmlDevice handle = nullptr;
    if (NvmlReturn rc = nvml.get_handle(i, &handle); rc != kNvmlSuccess || !handle) {
      LogEvent(LogLevel::kWarn, "gpu", "gpu_skipped",
               {{"index", std::to_string(i)},
                {"reason", "nvmlDeviceGetHandleByIndex_v2 failed: " + monitor->ErrorText(rc)}});
      continue;
    }
    GpuInfo gpu;
    gpu.index = static_cast<int>(i);
    char uuid[kUuidBufferSize] = {0};
    if (nvml.get_uuid(handle, uuid, sizeof(uuid)) == kNvmlSuccess)
      gpu.uuid = FromBuffer(uuid, sizeof(uuid));
    char name[kNameBufferSize] = {0};
    if (nvml.get_name(handle, name, sizeof(name)) == kNvmlSuccess)
      gpu.name = FromBuffer(name, sizeof(name));
    NvmlMemory memory{};
    if (nvml.get_memory(handle, &memory) == kNvmlSuccess && memory.total <= INT64_MAX) {
      gpu.memory_total_bytes = static_cast<int64_t>(memory.total);
    }
    monitor->gpus_.push_back(std::move(gpu));
    monitor->handles_.push_back(handle);
  }
  monitor->available_ = true;
  return monitor;
}

std::vector<GpuReading> GpuMonitor::Sample() {
  std::vector<GpuReading> out;
  if (!available_) return out;
  std::lock_guard<std::mutex> lock(sample_mu_);
  for (size_t i = 0; i < gpus_.size(); ++i) {
    const GpuInfo& gpu = gpus_[i];
    NvmlUtilization utilization{};
    NvmlMemory memory{};
    const char* failed_call = nullptr;
    NvmlReturn rc = nvml_->get_utilization(handles_[i], &utilization);
    if (rc != kNvmlSuccess) {
      failed_call = "nvmlDeviceGetUtilizationRates";
    } else if (rc = nvml_->get_memory(handles_[i], &memory); rc != kNvmlSuccess) {
      failed_call = "nvmlDeviceGetMemoryInfo";
    }
    bool& failing = failing_[gpu.index];
    if (failed_call) {
      if (!failing) {
        LogEvent(
            LogLevel::kWarn, "gpu", "sample_failed",
            {{"index", std::to_string(gpu.index)},
             {"uuid", gpu.uuid},
             {"call", failed_call},
             {"error", ErrorText(rc)},
             {"effect", "no utilisation or memory reported for this GPU until it answers again"}});
      }
      failing = true;
      continue;
    }
    if (failing) {
      LogEvent(LogLevel::kInfo, "gpu", "sample_recovered",
               {{"index", std::to_string(gpu.index)}, {"uuid", gpu.uuid}});
      failing = false;
    }
    GpuReading reading;
    reading.index = gpu.index;
    reading.utilization_percent = static_cast<int>(std::min(utilization.gpu, 100u));
    reading.memory_used_bytes =
        static_cast<int64_t>(std::min<unsigned long long>(memory.used, INT64_MAX));
    out.push_back(reading);
  }
  return out;
}

// The sampler's state, shared with its thread (which may outlive the GpuSampler, see the header).
struct GpuSampler::State {
  std::shared_ptr<GpuMonitor> monitor;
  std::chrono::milliseconds interval;
  mutable std::mutex mu;
  std::condition_variable cv;
  bool stop = false;
  bool finished = false;
  std::vector<GpuReading> latest;
  std::chrono::steady_clock::time_point latest_time;
  bool have_latest = false;
};

GpuSampler::GpuSampler(std::shared_ptr<GpuMonitor> monitor, std::chrono::milliseconds interval)
    : state_(std::make_shared<State>()) {
  state_->monitor = std::move(monitor);
  state_->interval = std::max(interval, std::chrono::milliseconds(10));
  thread_ = std::thread([state = state_] {
    std::unique_lock<std::mutex> lock(state->mu);
    while (!state->stop) {
      lock.unlock();
      std::vector<GpuReading> readings = state->monitor->Sample();
      auto now = std::chrono::steady_clock::now();
      lock.lock();
      state->latest = std::move(readings);
      state->latest_time = now;
      state->have_latest = true;
      state->cv.wait_for(lock, state->interval, [&] { return state->stop; });
    }
    state->finished = true;
    state->cv.notify_all();
  });
}

GpuSampler::~GpuSampler() {
  bool finished = false;
  {
    std::unique_lock<std::mutex> lock(state_->mu);
    state_->stop = true;
    state_->cv.notify_all();
    // Normally the thread is waiting and finishes at once; one stuck in NVML is left behind.
    finished = state_->cv.wait_for(lock, std::chrono::seconds(1), [&] { return state_->finished; });
  }
  if (finished) {
    thread_.join();
  } else {
    LogEvent(LogLevel::kWarn, "gpu", "sampler_stuck",
             {{"effect", "an NVML call did not return; left running"}});
    thread_.detach();
  }
}

std::vector<GpuReading> GpuSampler::Latest(std::chrono::milliseconds max_age) const {
  std::lock_guard<std::mutex> lock(state_->mu);
  if (!state_->have_latest || std::chrono::steady_clock::now() - state_->latest_time > max_age)
    return {};
  return state_->latest;
}

}  // namespace sf::agent
