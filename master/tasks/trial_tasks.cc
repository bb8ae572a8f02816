// Trials as task-list rows (master/tasks/trial_tasks.h).
#include "master/tasks/trial_tasks.h"

#include <map>
#include <string>

#include "common/config/experiment_config.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

std::string TrialTaskState(const std::string& state, bool stop_requested) {
  if (state == "RUNNING") return stop_requested ? "STOPPING" : "RUNNING";
  if (state == "CANCELED") return "STOPPED";
  if (state == "ERROR") return "FAILED";
  return state;  // QUEUED, PAUSED, COMPLETED
}

Result<std::vector<v1::Task>> TrialTasks(Database* db, bool include_ended) {
  std::vector<v1::Task> out;
  std::map<int64_t, std::string> configs;  // experiment id -> its YAML
  SF_RETURN_IF_ERROR(db->Transact("read trials as tasks", [&](pqxx::work& tx) {
    out.clear();
    configs.clear();
    const std::string ended = "tr.state IN ('COMPLETED', 'CANCELED', 'ERROR')";
    const std::string which =
        include_ended ? "NOT " + ended + " OR tr.id IN (SELECT tr.id FROM trials tr WHERE " +
                            ended + " ORDER BY tr.id DESC LIMIT 100)"
                      : "NOT " + ended;
    const pqxx::result rows = tx.exec(
        "SELECT tr.id, tr.experiment_id, tr.state, tr.stop_requested, e.owner, w.name, e.priority, "
        "EXTRACT(EPOCH FROM tr.start_time), EXTRACT(EPOCH FROM tr.end_time), tr.error, "
        "tr.restarts, "
        "a.id, a.state, a.slots->0->>'agent_id' "
        "FROM trials tr JOIN experiments e ON e.id = tr.experiment_id JOIN workspaces w ON w.id = "
        "e.workspace_id "
        "LEFT JOIN LATERAL (SELECT id, state, slots FROM allocations WHERE trial_id = tr.id "
        "  ORDER BY start_time DESC, id DESC LIMIT 1) a ON true "
        "WHERE " +
        which + " ORDER BY tr.id");
    std::string experiment_ids;
    for (const auto& row : rows) {
      v1::Task t;
      t.set_id(row[0].as<int64_t>());
      t.set_kind(kTrialTaskKind);
      t.set_experiment_id(row[1].as<int64_t>());
      t.set_state(TrialTaskState(row[2].as<std::string>(), row[3].as<std::string>() == "kill"));
      t.set_owner(row[4].as<std::string>());
      t.set_workspace(row[5].as<std::string>());
      t.set_priority(row[6].as<int32_t>());
      *t.mutable_created_at() = SecondsToTimestamp(row[7].as<double>());
      if (!row[8].is_null()) *t.mutable_ended_at() = SecondsToTimestamp(row[8].as<double>());
      t.set_error(row[9].as<std::string>());
      t.set_restarts(row[10].as<int32_t>());
      if (!row[11].is_null()) {
        t.set_allocation_id(row[11].as<std::string>());
        if (row[12].as<std::string>() != "TERMINATED" && !row[13].is_null())
          t.set_agent_id(row[13].as<std::string>());
      }
      if (configs.emplace(t.experiment_id(), "").second) {
        experiment_ids += (experiment_ids.empty() ? "" : ",") + std::to_string(t.experiment_id());
      }
      out.push_back(std::move(t));
    }
    if (experiment_ids.empty()) return Status::Ok();
    for (const auto& row :
         tx.exec("SELECT id, config_yaml FROM experiments WHERE id IN (" + experiment_ids + ")")) {
      configs[row[0].as<int64_t>()] = row[1].as<std::string>();
    }
    return Status::Ok();
  }));
  // Each experiment's resources and entrypoint, parsed once (stored configurations are valid:
  // one that no longer parses leaves those fields empty rather than failing the list).
  std::map<int64_t, std::optional<config::ExperimentConfig>> parsed;
  for (const auto& [id, yaml] : configs) parsed[id] = config::ParseExperimentConfig(yaml).config;
  for (v1::Task& t : out) {
    const std::optional<config::ExperimentConfig>& c = parsed[t.experiment_id()];
    if (!c) continue;
    t.set_slots(static_cast<int32_t>(c->resources.slots_per_trial));
    t.set_resource_pool(c->resources.resource_pool);
    if (c->has_entrypoint()) {
      for (const std::string& part : c->entrypoint) t.add_entrypoint(part);
    } else {
      t.add_entrypoint("sf-trainer");
    }
  }
  return out;
}

}  // namespace sf::master
