// A stand-in for NVML (libnvidia-ml.so.1) for tests on machines without a GPU: a shared library
// exporting the functions sf-agent's GpuMonitor loads, with the same C signatures, answering
// with fixed figures. sf-agent loads it with --nvml-library / SF_NVML_LIBRARY.
//
// Configured by the environment, read at every call (so a test may change it mid-run):
//   SF_FAKE_NVML_GPUS=N          how many GPUs (default 2, at most 16)
//   SF_FAKE_NVML_INIT_ERROR=RC   nvmlInit_v2 returns RC (e.g. 9, NVML_ERROR_DRIVER_NOT_LOADED)
//   SF_FAKE_NVML_LOST=I,J        GPUs whose utilisation and memory calls fail with
//                                NVML_ERROR_GPU_IS_LOST (15)
// GPU i (0-based) is
//   uuid  GPU-00000000-0000-4000-8000-00000000000i  (i as 12 decimal digits)
//   name  "Steadfast Fake GPU i"
//   memory total 80 GiB, used (i + 1) GiB; utilisation 40 + 10 i %
// Calls before nvmlInit_v2 (or after the matching nvmlShutdown) return NVML_ERROR_UNINITIALIZED.
// sf_fake_nvml_init_count() (not NVML) says how many nvmlInit_v2 calls are not yet shut down.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace {

constexpr int kSuccess = 0;
constexpr int kUninitialized = 1;
constexpr int kInvalidArgument = 2;
constexpr int kInsufficientSize = 7;
constexpr int kGpuIsLost = 15;
constexpr int kMaxGpus = 16;
constexpr unsigned long long kGiB = 1024ULL * 1024ULL * 1024ULL;

struct FakeDevice {
  int index;
};
FakeDevice devices[kMaxGpus] = {{0}, {1}, {2},  {3},  {4},  {5},  {6},  {7},
                                {8}, {9}, {10}, {11}, {12}, {13}, {14}, {15}};
int init_count = 0;

int GpuCount() {
  const char* text = std::getenv("SF_FAKE_NVML_GPUS");
  if (!text || !*text) return 2;
  int n = std::atoi(text);
  return n < 0 ? 0 : n > kMaxGpus ? kMaxGpus : n;
}

// The device a handle names, or null for a handle this library did not give out.
FakeDevice* Device(void* handle) {
  for (FakeDevice& d : devices) {
    if (&d == handle) return d.index < GpuCount() ? &d : nullptr;
  }
  return nullptr;
}

bool Lost(int index) {
  const char* text = std::getenv("SF_FAKE_NVML_LOST");
  while (text && *text) {
    char* end = nullptr;
    long n = std::strtol(text, &end, 10);
    if (end == text) return false;
    if (n == index) return true;
    text = *end == ',' ? end + 1 : end;
  }
  return false;
}

int CopyOut(const char* text, char* out, unsigned int length) {
  if (!out) return kInvalidArgument;
  if (std::strlen(text) + 1 > length) return kInsufficientSize;
  std::memcpy(out, text, std::strlen(text) + 1);
  return kSuccess;
}

}  // namespace

extern "C" {

struct FakeMemory {
  unsigned long long total, free, used;
};
struct FakeUtilization {
  unsigned int gpu, memory;
};

int nvmlInit_v2() {
  if (const char* rc = std::getenv("SF_FAKE_NVML_INIT_ERROR"); rc && *rc) return std::atoi(rc);
  ++init_count;
  return kSuccess;
}

int nvmlShutdown() {
  if (init_count == 0) return kUninitialized;
  --init_count;
  return kSuccess;
}

const char* nvmlErrorString(int rc) {
  switch (rc) {
    case kSuccess:
      return "Success";
    case kUninitialized:
      return "Uninitialized";
    case kInvalidArgument:
      return "Invalid Argument";
    case kInsufficientSize:
      return "Insufficient Size";
    case 9:
      return "Driver Not Loaded";
    case kGpuIsLost:
      return "GPU is lost";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  if (init_count == 0) return kUninitialized;
  if (!count) return kInvalidArgument;
  *count = static_cast<unsigned int>(GpuCount());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (init_count == 0) return kUninitialized;
  if (!device || index >= static_cast<unsigned int>(GpuCount())) return kInvalidArgument;
  *device = &devices[index];
  return kSuccess;
}

int nvmlDeviceGetUUID(void* handle, char* uuid, unsigned int length) {
  if (init_count == 0) return kUninitialized;
  FakeDevice* d = Device(handle);
  if (!d) return kInvalidArgument;
  char text[96];
  std::snprintf(text, sizeof(text), "GPU-00000000-0000-4000-8000-%012d", d->index);
  return CopyOut(text, uuid, length);
}

int nvmlDeviceGetName(void* handle, char* name, unsigned int length) {
  if (init_count == 0) return kUninitialized;
  FakeDevice* d = Device(handle);
  if (!d) return kInvalidArgument;
  char text[96];
  std::snprintf(text, sizeof(text), "Steadfast Fake GPU %d", d->index);
  return CopyOut(text, name, length);
}

int nvmlDeviceGetMemoryInfo(void* handle, FakeMemory* memory) {
  if (init_count == 0) return kUninitialized;
  FakeDevice* d = Device(handle);
  if (!d || !memory) return kInvalidArgument;
  if (Lost(d->index)) return kGpuIsLost;
  memory->total = 80 * kGiB;
  memory->used = static_cast<unsigned long long>(d->index + 1) * kGiB;
  memory->free = memory->total - memory->used;
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* handle, FakeUtilization* utilization) {
  if (init_count == 0) return kUninitialized;
  FakeDevice* d = Device(handle);
  if (!d || !utilization) return kInvalidArgument;
  if (Lost(d->index)) return kGpuIsLost;
  utilization->gpu = static_cast<unsigned int>(40 + 10 * d->index);
  utilization->memory = 5;
  return kSuccess;
}

int sf_fake_nvml_init_count() { return init_count; }

}  // extern "C"
