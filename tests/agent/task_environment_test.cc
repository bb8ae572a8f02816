#include <gtest/gtest.h>

#include <initializer_list>

#include "agent/agent.h"
#include "task/task_environment.h"
#include "agent/slot_detector.h"

namespace sf::agent {
namespace {

TEST(TaskEnvironmentTest, CarriesTheTrialSpecAndWinsOverStartTaskEnv) {
  steadfast::v1::StartTask task;
  task.set_task_id("t-1");
  task.set_trial_id(12);
  task.set_experiment_id(4);
  task.set_rank(1);
  task.set_world_size(2);
  task.set_restart(3);
  task.set_checkpoint_dir("/ckpt/12");
  task.set_restore_checkpoint("/ckpt/12/abc");
  task.set_restore_checkpoint_uuid("abc");
  for (const char* uuid : {"9f", "7e"}) {
    steadfast::v1::RestoreFallback* f = task.add_restore_fallbacks();
    f->set_uuid(uuid);
    f->set_path(std::string("/ckpt/12/") + uuid + " \"x\"");
  }
  task.add_slot_ids("cuda1");
  task.add_slot_ids("cuda3");
  (*task.mutable_env())["NCCL_DEBUG"] = "INFO";
  (*task.mutable_env())["SF_RANK"] = "99";  // the spec wins
  (*task.mutable_hparams()->mutable_fields())["heads"].set_number_value(4);
  auto env = task::TaskEnvironment(task, "/w/tasks/t-1/experiment.yaml", "/w/tasks/t-1", "a1", "m:8090");
  EXPECT_EQ(env["SF_MASTER_ADDRESS"], "m:8090");  // StartTask.master_address was empty
  EXPECT_EQ(env["SF_TASK_ID"], "t-1");
  EXPECT_EQ(env["SF_TRIAL_ID"], "12");
  EXPECT_EQ(env["SF_EXPERIMENT_ID"], "4");
  EXPECT_EQ(env["SF_RANK"], "1");
  EXPECT_EQ(env["SF_WORLD_SIZE"], "2");
  EXPECT_EQ(env["SF_RESTART"], "3");
  EXPECT_EQ(env["SF_CHECKPOINT_DIR"], "/ckpt/12");
  EXPECT_EQ(env["SF_RESTORE_CHECKPOINT"], "/ckpt/12/abc");
  // Every trainer gets its uuid and the older intact ones, newest first (paths quoted as JSON).
  EXPECT_EQ(env["SF_LATEST_CHECKPOINT"], "abc");
  EXPECT_EQ(env["SF_RESTORE_FALLBACKS"],
            "[{\"path\":\"/ckpt/12/9f \\\"x\\\"\",\"uuid\":\"9f\"},"
            "{\"path\":\"/ckpt/12/7e \\\"x\\\"\",\"uuid\":\"7e\"}]");
  EXPECT_EQ(env["SF_CONFIG_FILE"], "/w/tasks/t-1/experiment.yaml");
  EXPECT_EQ(env["SF_HPARAMS"], "{\"heads\":4}");
  EXPECT_EQ(env["SF_SLOT_IDS"], "cuda1,cuda3");
  EXPECT_EQ(env["SF_AGENT_ID"], "a1");
  EXPECT_EQ(env["SF_TASK_DIR"], "/w/tasks/t-1");
  // No UUIDs known (no agent slots given): ordinals, in the PCI bus order NVML numbers them in.
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "1,3");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
  EXPECT_EQ(env["NCCL_DEBUG"], "INFO");
}

// A task "t" holding `slot_ids`.
steadfast::v1::StartTask TaskOn(std::initializer_list<const char*> slot_ids) {
  steadfast::v1::StartTask task;
  task.set_task_id("t");
  for (const char* id : slot_ids) task.add_slot_ids(id);
  return task;
}

// The agent's cuda slots as NVML found them: slot "cudaK" for NVML index K, with its UUID.
std::vector<steadfast::v1::Slot> GpuSlots(int n) {
  std::vector<steadfast::v1::Slot> slots;
  for (int i = 0; i < n; ++i) {
    steadfast::v1::Slot slot;
    slot.set_id("cuda" + std::to_string(i));
    slot.set_type(steadfast::v1::SLOT_TYPE_CUDA);
    slot.set_uuid("GPU-uuid-" + std::to_string(i));
    slots.push_back(slot);
  }
  return slots;
}

TEST(TaskEnvironmentTest, CudaSlotsAreNamedByGpuUuid) {
  steadfast::v1::StartTask task = TaskOn({"cuda3", "cuda1"});
  auto env = task::TaskEnvironment(task, "/c", "/d", "a", "m:8090", 0, GpuSlots(4));
  // In the task's slot order; UUIDs cannot be renumbered, so no device order is needed.
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "GPU-uuid-3,GPU-uuid-1");
  EXPECT_EQ(env.count("CUDA_DEVICE_ORDER"), 0u);
  EXPECT_EQ(env["SF_SLOT_IDS"], "cuda3,cuda1");
}

TEST(TaskEnvironmentTest, ACudaSlotWithoutUuidMakesEveryOneAnOrdinal) {
  steadfast::v1::StartTask task = TaskOn({"cuda0", "cuda2"});
  auto slots = GpuSlots(3);
  slots[2].clear_uuid();  // found by the CUDA runtime alone
  auto env = task::TaskEnvironment(task, "/c", "/d", "a", "m:8090", 0, slots);
  EXPECT_EQ(env["CUDA_VISIBLE_DEVICES"], "0,2");
  EXPECT_EQ(env["CUDA_DEVICE_ORDER"], "PCI_BUS_ID");
}

TEST(TaskEnvironmentTest, CpuSlotsLeaveCudaVisibleDevicesAlone) {
  steadfast::v1::StartTask task = TaskOn({"cpu0"});
  task.set_master_address("master:1");
  auto env = task::TaskEnvironment(task, "/c", "/d", "a", "m:8090", 0, GpuSlots(2));
  EXPECT_EQ(env.count("CUDA_VISIBLE_DEVICES"), 0u);
  EXPECT_EQ(env.count("CUDA_DEVICE_ORDER"), 0u);
  EXPECT_EQ(env["SF_MASTER_ADDRESS"], "master:1");
  EXPECT_EQ(env["SF_HPARAMS"], "{}");
  EXPECT_EQ(env["SF_RESTORE_CHECKPOINT"], "");
  EXPECT_EQ(env.count("SF_RESTORE_FALLBACKS"), 0u);
}

TEST(TaskEnvironmentTest, CpuSlotsGetTheirShareOfThreads) {
  steadfast::v1::StartTask task = TaskOn({"cpu0", "cpu1"});
  // Two CPU slots at 3 threads each.
  EXPECT_EQ(task::TaskEnvironment(task, "/c", "/d", "a", "m:8090", 3)["OMP_NUM_THREADS"], "6");
  // Unset when no budget is given.
  EXPECT_EQ(task::TaskEnvironment(task, "/c", "/d", "a", "m:8090", 0).count("OMP_NUM_THREADS"), 0u);
  // The experiment's own setting wins.
  (*task.mutable_env())["OMP_NUM_THREADS"] = "1";
  EXPECT_EQ(task::TaskEnvironment(task, "/c", "/d", "a", "m:8090", 3)["OMP_NUM_THREADS"], "1");
  // A task on CUDA slots only is left alone.
  steadfast::v1::StartTask gpu;
  gpu.set_task_id("g");
  gpu.add_slot_ids("cuda0");
  EXPECT_EQ(task::TaskEnvironment(gpu, "/c", "/d", "a", "m:8090", 3).count("OMP_NUM_THREADS"), 0u);
}

TEST(TaskEnvironmentTest, ThreadsPerSlotDefaultsToCoresOverSlots) {
  EXPECT_EQ(CpuThreadsPerSlot(0, 16, 4), 4);
  EXPECT_EQ(CpuThreadsPerSlot(0, 2, 4), 1);  // never 0
  EXPECT_EQ(CpuThreadsPerSlot(0, 8, 0), 8);
  EXPECT_EQ(CpuThreadsPerSlot(5, 16, 4), 5);  // configured wins
}

TEST(SlotDetectorTest, CpuSlotsByHand) {
  SlotSpec spec;
  spec.auto_detect = false;
  spec.cpu_slots = 3;
  auto slots = DetectSlots(spec);
  ASSERT_EQ(slots.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(slots[i].id(), "cpu" + std::to_string(i));
    EXPECT_EQ(slots[i].type(), steadfast::v1::SLOT_TYPE_CPU);
    EXPECT_TRUE(slots[i].enabled());
  }
}

TEST(SlotDetectorTest, AutoFindsCudaDevicesOrFallsBackToOneCpuSlot) {
  std::string why;
  auto devices = FindCudaDevices(&why);
  auto slots = DetectSlots(SlotSpec{});
  if (devices.empty()) {
    // No runtime, no driver or no GPU here (the usual build machine).
    EXPECT_FALSE(why.empty());
    ASSERT_EQ(slots.size(), 1u);
    EXPECT_EQ(slots[0].id(), "cpu0");
  } else {
    ASSERT_EQ(slots.size(), devices.size());
    for (size_t i = 0; i < slots.size(); ++i) {
      EXPECT_EQ(slots[i].id(), "cuda" + std::to_string(i));
      EXPECT_EQ(slots[i].type(), steadfast::v1::SLOT_TYPE_CUDA);
      EXPECT_FALSE(slots[i].device().empty());
    }
  }
}

TEST(SlotIdTest, CudaOrdinalOfSlot) {
  EXPECT_EQ(task::CudaOrdinalOfSlot("cuda0"), 0);
  EXPECT_EQ(task::CudaOrdinalOfSlot("cuda12"), 12);
  EXPECT_EQ(task::CudaOrdinalOfSlot("cpu0"), -1);
  EXPECT_EQ(task::CudaOrdinalOfSlot("cuda"), -1);
  EXPECT_EQ(task::CudaOrdinalOfSlot("cudax"), -1);
}

}  // namespace
}  // namespace sf::agent
