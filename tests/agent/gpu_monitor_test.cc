// GPU detection and sampling through NVML, against the fake NVML library (tests/agent/
// fake_nvml.cc: 2 GPUs by default, fixed figures), so it runs on machines without a GPU; and
// the fallbacks when NVML is missing.
#include "agent/gpu_monitor.h"

#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <thread>

#include "agent/slot_detector.h"
#include "tests/agent/process_helpers.h"

namespace sf::agent {
namespace {

using namespace std::chrono_literals;
using agent::testing::LinesWith;
constexpr int64_t kGiB = 1024LL * 1024 * 1024;
constexpr const char* kMissingLibrary = "/nonexistent/libnvidia-ml.so.1";

// The fake reads its settings from the environment at every call; each test starts clean.
class GpuMonitorTest : public ::testing::Test {
 protected:
  void SetUp() override { Clear(); }
  void TearDown() override { Clear(); }
  static void Clear() {
    unsetenv("SF_FAKE_NVML_GPUS");
    unsetenv("SF_FAKE_NVML_INIT_ERROR");
    unsetenv("SF_FAKE_NVML_LOST");
  }
  // A CUDA runtime that must not be asked (NVML found the GPUs).
  static GpuSources NvmlOnly(const GpuMonitor* monitor) {
    GpuSources sources;
    sources.nvml = monitor;
    sources.cuda_runtime = [](std::string*) {
      ADD_FAILURE() << "the CUDA runtime was asked although NVML listed GPUs";
      return std::vector<CudaDevice>{};
    };
    return sources;
  }
};

TEST_F(GpuMonitorTest, NvmlListsEveryGpuWithItsUuidNameAndMemory) {
  auto monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
  ASSERT_TRUE(monitor->available()) << monitor->why_unavailable();
  EXPECT_EQ(monitor->why_unavailable(), "");
  ASSERT_EQ(monitor->gpus().size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const GpuInfo& gpu = monitor->gpus()[static_cast<size_t>(i)];
    EXPECT_EQ(gpu.index, i);
    EXPECT_EQ(gpu.uuid, "GPU-00000000-0000-4000-8000-00000000000" + std::to_string(i));
    EXPECT_EQ(gpu.name, "Steadfast Fake GPU " + std::to_string(i));
    EXPECT_EQ(gpu.memory_total_bytes, 80 * kGiB);
  }
}

TEST_F(GpuMonitorTest, AutoMakesOneCudaSlotPerNvmlGpu) {
  setenv("SF_FAKE_NVML_GPUS", "3", 1);
  auto monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
  auto slots = DetectSlots(SlotSpec{}, NvmlOnly(monitor.get()));
  ASSERT_EQ(slots.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const auto& slot = slots[static_cast<size_t>(i)];
    EXPECT_EQ(slot.id(), "cuda" + std::to_string(i));
    EXPECT_EQ(slot.type(), steadfast::v1::SLOT_TYPE_CUDA);
    EXPECT_EQ(slot.device(), "Steadfast Fake GPU " + std::to_string(i));
    EXPECT_EQ(slot.uuid(), "GPU-00000000-0000-4000-8000-00000000000" + std::to_string(i));
    EXPECT_EQ(slot.memory_total_bytes(), 80 * kGiB);
    EXPECT_TRUE(slot.enabled());
    EXPECT_FALSE(slot.has_usage());
  }
}

TEST_F(GpuMonitorTest, WithoutNvmlOrRuntimeNoGpuSlotAndOneLogLineSayingWhy) {
  auto monitor = GpuMonitor::Open(kMissingLibrary);
  EXPECT_FALSE(monitor->available());
  EXPECT_TRUE(monitor->gpus().empty());
  EXPECT_TRUE(monitor->Sample().empty());
  EXPECT_NE(monitor->why_unavailable().find(std::string("cannot load ") + kMissingLibrary),
            std::string::npos)
      << monitor->why_unavailable();
  GpuSources sources;
  sources.nvml = monitor.get();
  sources.cuda_runtime = [](std::string* why) {
    *why = "no CUDA runtime (dlopen libcudart.so failed)";
    return std::vector<CudaDevice>{};
  };
  ::testing::internal::CaptureStderr();
  auto slots = DetectSlots(SlotSpec{}, sources);
  std::string log = ::testing::internal::GetCapturedStderr();
  ASSERT_EQ(slots.size(), 1u);  // `auto` keeps one CPU slot
  EXPECT_EQ(slots[0].id(), "cpu0");
  EXPECT_EQ(LinesWith(log, "event=no_cuda_devices"), 1) << log;
  EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
  EXPECT_NE(log.find(kMissingLibrary), std::string::npos) << log;
  EXPECT_NE(log.find("no CUDA runtime"), std::string::npos) << log;
}

TEST_F(GpuMonitorTest, DriverNotLoadedMakesNvmlUnavailable) {
  setenv("SF_FAKE_NVML_INIT_ERROR", "9", 1);
  auto monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
  EXPECT_FALSE(monitor->available());
  EXPECT_EQ(monitor->why_unavailable(), "nvmlInit_v2 failed: Driver Not Loaded (9)");
  EXPECT_TRUE(monitor->gpus().empty());
}

TEST_F(GpuMonitorTest, FallsBackToTheCudaRuntimeWhenNvmlIsMissing) {
  auto monitor = GpuMonitor::Open(kMissingLibrary);
  GpuSources sources;
  sources.nvml = monitor.get();
  sources.cuda_runtime = [](std::string*) {
    return std::vector<CudaDevice>{{0, "Runtime GPU A"}, {1, "Runtime GPU B"}};
  };
  auto slots = DetectSlots(SlotSpec{}, sources);
  ASSERT_EQ(slots.size(), 2u);
  EXPECT_EQ(slots[1].id(), "cuda1");
  EXPECT_EQ(slots[1].device(), "Runtime GPU B");
  EXPECT_EQ(slots[1].uuid(), "");  // the runtime gives no UUID: tasks get ordinals
  EXPECT_EQ(slots[1].memory_total_bytes(), 0);
}

TEST_F(GpuMonitorTest, CpuSlotsNeverAskForGpus) {
  SlotSpec spec;
  spec.auto_detect = false;
  spec.cpu_slots = 2;
  GpuSources sources;
  sources.cuda_runtime = [](std::string*) {
    ADD_FAILURE() << "cpu:N asked the CUDA runtime";
    return std::vector<CudaDevice>{};
  };
  EXPECT_EQ(DetectSlots(spec, sources).size(), 2u);
}

TEST_F(GpuMonitorTest, SampleReadsEachGpusUtilisationAndMemory) {
  auto monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
  auto readings = monitor->Sample();
  ASSERT_EQ(readings.size(), 2u);
  EXPECT_EQ(readings[0].index, 0);
  EXPECT_EQ(readings[0].utilization_percent, 40);
  EXPECT_EQ(readings[0].memory_used_bytes, 1 * kGiB);
  EXPECT_EQ(readings[1].index, 1);
  EXPECT_EQ(readings[1].utilization_percent, 50);
  EXPECT_EQ(readings[1].memory_used_bytes, 2 * kGiB);
}

TEST_F(GpuMonitorTest, AGpuFailingMidRunIsLeftOutAndLoggedOnceUntilItRecovers) {
  auto monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
  ASSERT_EQ(monitor->Sample().size(), 2u);
  setenv("SF_FAKE_NVML_LOST", "1", 1);
  ::testing::internal::CaptureStderr();
  for (int i = 0; i < 5; ++i) {
    auto readings = monitor->Sample();
    ASSERT_EQ(readings.size(), 1u);
    EXPECT_EQ(readings[0].index, 0);
  }
  unsetenv("SF_FAKE_NVML_LOST");
  EXPECT_EQ(monitor->Sample().size(), 2u);
  EXPECT_EQ(monitor->Sample().size(), 2u);
  std::string log = ::testing::internal::GetCapturedStderr();
  EXPECT_EQ(LinesWith(log, "event=sample_failed"), 1) << log;
  EXPECT_NE(log.find("GPU is lost (15)"), std::string::npos) << log;
  EXPECT_NE(log.find("uuid=GPU-00000000-0000-4000-8000-000000000001"), std::string::npos) << log;
  EXPECT_EQ(LinesWith(log, "event=sample_recovered"), 1) << log;
}

TEST_F(GpuMonitorTest, ClosingShutsNvmlDown) {
  // The same library, loaded by us too: its counter of initialisations not yet shut down.
  void* fake = dlopen(SF_FAKE_NVML_PATH, RTLD_NOW | RTLD_LOCAL);
  ASSERT_NE(fake, nullptr) << dlerror();
  auto init_count = reinterpret_cast<int (*)()>(dlsym(fake, "sf_fake_nvml_init_count"));
  ASSERT_NE(init_count, nullptr);
  {
    auto monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
    EXPECT_EQ(init_count(), 1);
  }
  EXPECT_EQ(init_count(), 0);
  setenv("SF_FAKE_NVML_GPUS", "1000000", 1);  // clamped by the fake; never a crash
  {
    auto monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
    EXPECT_TRUE(monitor->available());
  }
  EXPECT_EQ(init_count(), 0);
  dlclose(fake);
}

TEST_F(GpuMonitorTest, SamplerKeepsTheLatestReadings) {
  // Set before the sampling thread reads it, so that changing it below replaces a value
  // (glibc swaps one pointer) instead of growing the environment under a reader.
  setenv("SF_FAKE_NVML_LOST", "", 1);
  std::shared_ptr<GpuMonitor> monitor = GpuMonitor::Open(SF_FAKE_NVML_PATH);
  GpuSampler sampler(monitor, 20ms);
  std::vector<GpuReading> latest;
  for (int i = 0; i < 200 && latest.empty(); ++i) {
    std::this_thread::sleep_for(10ms);
    latest = sampler.Latest(1s);
  }
  ASSERT_EQ(latest.size(), 2u);
  EXPECT_EQ(latest[1].utilization_percent, 50);
  // A GPU that starts failing drops out of the latest sample.
  setenv("SF_FAKE_NVML_LOST", "0", 1);
  for (int i = 0; i < 200 && latest.size() != 1; ++i) {
    std::this_thread::sleep_for(10ms);
    latest = sampler.Latest(1s);
  }
  ASSERT_EQ(latest.size(), 1u);
  EXPECT_EQ(latest[0].index, 1);
}

}  // namespace
}  // namespace sf::agent
