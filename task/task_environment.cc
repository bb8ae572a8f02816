#include "task/task_environment.h"

#include <google/protobuf/util/json_util.h>

#include <cstdint>
#include <cstdlib>

#include "common/value.h"

namespace sf::task {
namespace v1 = steadfast::v1;

namespace {

std::string JoinIds(const google::protobuf::RepeatedPtrField<std::string>& ids) {
  std::string out;
  for (const std::string& id : ids) out += (out.empty() ? "" : ",") + id;
  return out;
}

}  // namespace

int CudaOrdinalOfSlot(const std::string& slot_id) {
  if (slot_id.rfind("cuda", 0) != 0 || slot_id.size() == 4) {
    return -1;
  }
  char* end = nullptr;
  int64_t n = std::strtoll(slot_id.c_str() + 4, &end, 10);
  if (*end != '\0' || n < 0) {
    return -1;
  }
  return static_cast<int>(n);
}

std::map<std::string, std::string> TaskEnvironment(const v1::StartTask& task,
                                                   const std::string& config_file,
                                                   const std::string& task_dir,
                                                   const std::string& agent_id,
                                                   const std::string& default_master,
                                                   int cpu_threads_per_slot,
                                                   const std::vector<v1::Slot>& agent_slots) {
  std::map<std::string, std::string> env(task.env().begin(), task.env().end());
  std::string hparams_json = "{}";
  if (task.has_hparams()) {
    google::protobuf::util::JsonPrintOptions json_options;
    json_options.preserve_proto_field_names = true;
    std::string json;
    if (google::protobuf::util::MessageToJsonString(task.hparams(), &json, json_options).ok()) {
      hparams_json = json;
    }
  }
  env["SF_MASTER_ADDRESS"] = task.master_address().empty() ? default_master : task.master_address();
  env["SF_TASK_ID"] = task.task_id();
  // A task that is not a trial's (a command, a server: master/tasks) has no trial: its program,
  // if it uses the Core API, runs it unmanaged or local, not as a trial (SF_TASK_KIND says which).
  if (task.trial_id() != 0) {
    env["SF_TRIAL_ID"] = std::to_string(task.trial_id());
    env["SF_EXPERIMENT_ID"] = std::to_string(task.experiment_id());
  }
  env["SF_RANK"] = std::to_string(task.rank());
  env["SF_WORLD_SIZE"] = std::to_string(task.world_size());
  env["SF_RESTART"] = std::to_string(task.restart());
  env["SF_CHECKPOINT_DIR"] = task.checkpoint_dir();
  env["SF_RESTORE_CHECKPOINT"] = task.restore_checkpoint();
  env["SF_LATEST_CHECKPOINT"] = task.restore_checkpoint_uuid();
  if (task.restore_fallbacks_size() > 0) {
    Value::List fallbacks;
    for (const auto& f : task.restore_fallbacks()) {
      fallbacks.push_back(Value(Value::Map{{"uuid", f.uuid()}, {"path", f.path()}}));
    }
    env["SF_RESTORE_FALLBACKS"] = Value(std::move(fallbacks)).ToJson();
  }
  env["SF_CONFIG_FILE"] = config_file;
  env["SF_HPARAMS"] = hparams_json;
  env["SF_SLOT_IDS"] = JoinIds(task.slot_ids());
  env["SF_AGENT_ID"] = agent_id;
  env["SF_TASK_DIR"] = task_dir;
  // The task's TrialLink credential: in the environment only (never argv, never a log line).
  if (!task.task_token().empty()) env["SF_TASK_TOKEN"] = task.task_token();
  std::map<std::string, std::string> uuid_of_slot;
  for (const auto& slot : agent_slots) {
    if (!slot.uuid().empty()) uuid_of_slot[slot.id()] = slot.uuid();
  }
  std::string ordinals, uuids;
  bool every_uuid = true;
  int cpu_slots = 0;
  for (const auto& slot : task.slot_ids()) {
    int ordinal = CudaOrdinalOfSlot(slot);
    if (ordinal < 0) {
      ++cpu_slots;
      continue;
    }
    const std::string separator = ordinals.empty() ? "" : ",";
    ordinals += separator + std::to_string(ordinal);
    auto uuid = uuid_of_slot.find(slot);
    every_uuid = every_uuid && uuid != uuid_of_slot.end();
    if (every_uuid) uuids += separator + uuid->second;
  }
  if (!ordinals.empty() && every_uuid) {
    env["CUDA_VISIBLE_DEVICES"] = uuids;
  } else if (!ordinals.empty()) {
    env["CUDA_VISIBLE_DEVICES"] = ordinals;
    env["CUDA_DEVICE_ORDER"] = "PCI_BUS_ID";
  }
  if (cpu_threads_per_slot > 0 && cpu_slots > 0 && env.count("OMP_NUM_THREADS") == 0) {
    env["OMP_NUM_THREADS"] = std::to_string(cpu_threads_per_slot * cpu_slots);
  }
  return env;
}

}  // namespace sf::task
