// Servers scheduled on the cluster: their experiment's config and their rows
// (master/serving/serving.h).
#include "master/serving/serving.h"

#include <yaml-cpp/yaml.h>

#include <cctype>

#include <pqxx/pqxx>

#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

Status CheckEndpointUrl(const std::string& url) {
  if (url.size() > 512) return InvalidArgument("url: longer than 512 bytes");
  for (char c : url) {
    if (c <= ' ' || c > '~') return InvalidArgument("url: \"" + url.substr(0, 80) + "\" is not printable ASCII");
  }
  for (const char* scheme : {"http://", "https://"}) {
    const std::string s(scheme);
    if (url.compare(0, s.size(), s) == 0 && url.size() > s.size()) return Status::Ok();
  }
  return InvalidArgument("url: \"" + url.substr(0, 80) + "\" must be http://HOST:PORT or https://HOST:PORT");
}

Result<std::string> ServingConfigYaml(const v1::StartServingRequest& r, const ServingLaunch& launch) {
  auto at_least = [](const char* field, int64_t value, int64_t min) -> Status {
    if (value < min) return InvalidArgument(std::string(field) + ": " + std::to_string(value) + " must be >= " + std::to_string(min));
    return Status::Ok();
  };
  SF_RETURN_IF_ERROR(at_least("slots", r.slots(), 0));
  SF_RETURN_IF_ERROR(at_least("max_batch_tokens", r.max_batch_tokens(), 0));
  SF_RETURN_IF_ERROR(at_least("max_batch_sentences", r.max_batch_sentences(), 0));
  SF_RETURN_IF_ERROR(at_least("max_wait_ms", r.max_wait_ms(), -1));
  SF_RETURN_IF_ERROR(at_least("threads", r.threads(), 0));
  SF_RETURN_IF_ERROR(at_least("max_restarts", r.max_restarts(), 0));
  if (r.priority() != 0 && (r.priority() < 1 || r.priority() > 99)) {
    return InvalidArgument("priority: " + std::to_string(r.priority()) + " must be 1..99");
  }
  const std::string bind = r.bind().empty() ? "127.0.0.1" : r.bind();
  for (char c : bind) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != ':' && c != '-') {
      return InvalidArgument("bind: \"" + bind.substr(0, 80) + "\" is not an address");
    }
  }
  if (bind.size() > 255) return InvalidArgument("bind: longer than 255 characters");

  std::vector<std::string> argv = {"sf-serve",   "--cluster-task",       "--checkpoint", launch.checkpoint_dir,
                                   "--bind",     bind,                   "--port",       "0",
                                   "--model-label", launch.model_name,   "--version-label",
                                   std::to_string(launch.model_version)};
  auto flag = [&](const char* name, int64_t value) {
    argv.push_back(name);
    argv.push_back(std::to_string(value));
  };
  if (r.max_batch_tokens() > 0) flag("--max-batch-tokens", r.max_batch_tokens());
  if (r.max_batch_sentences() > 0) flag("--max-batch-sentences", r.max_batch_sentences());
  if (r.max_wait_ms() != 0) flag("--max-wait-ms", r.max_wait_ms() < 0 ? 0 : r.max_wait_ms());
  if (r.threads() > 0) flag("--threads", r.threads());

  YAML::Emitter out;
  out << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value
      << "serve " + launch.model_name + " v" + std::to_string(launch.model_version);
  out << YAML::Key << "description" << YAML::Value
      << "sf serve start: model " + launch.model_name + " version " + std::to_string(launch.model_version) +
             " (checkpoint " + launch.checkpoint_uuid + ")";
  // Every argument a quoted string ("0" is an argument, not a number).
  out << YAML::Key << "entrypoint" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& a : argv) out << YAML::DoubleQuoted << a;
  out << YAML::EndSeq;
  out << YAML::Key << "searcher" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "name" << YAML::Value << "single";
  out << YAML::Key << "metric" << YAML::Value << "serving";
  out << YAML::Key << "max_length" << YAML::Value << YAML::BeginMap << YAML::Key << "batches" << YAML::Value << 1
      << YAML::EndMap;
  out << YAML::EndMap;
  out << YAML::Key << "resources" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "slots_per_trial" << YAML::Value << (r.slots() > 0 ? r.slots() : 1);
  if (!r.resource_pool().empty()) out << YAML::Key << "resource_pool" << YAML::Value << r.resource_pool();
  if (r.priority() > 0) out << YAML::Key << "priority" << YAML::Value << r.priority();
  out << YAML::EndMap;
  if (r.max_restarts() > 0) out << YAML::Key << "max_restarts" << YAML::Value << r.max_restarts();
  out << YAML::EndMap;
  if (!out.good()) return Internal(std::string("serving config: ") + out.GetLastError());
  return std::string(out.c_str()) + "\n";
}

Status ServingStore::SetEndpoint(int64_t experiment_id, const std::string& url, const std::string& allocation) {
  return db_->Transact("serving endpoint", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "UPDATE servings SET url = $2, url_allocation = $3 WHERE experiment_id = $1 RETURNING experiment_id",
        experiment_id, url, allocation);
    if (r.empty()) {
      return FailedPrecondition("experiment " + std::to_string(experiment_id) +
                                " carries no server (sf serve start): it has no endpoint to report");
    }
    return Status::Ok();
  });
}

namespace {

// The server's state from its experiment's, its trial's and its newest allocation's.
std::string ServingState(const std::string& experiment, const std::string& trial, bool reported_live) {
  if (experiment == "CANCELED" || experiment == "COMPLETED") return "STOPPED";
  if (experiment == "ERROR") return "FAILED";
  if (experiment.rfind("STOPPING", 0) == 0) return "STOPPING";
  if (experiment == "PAUSED") return "PAUSED";
  if (trial == "RUNNING") return reported_live ? "READY" : "STARTING";
  if (trial == "PAUSED") return "PAUSED";
  return "QUEUED";
}

}  // namespace

Result<std::vector<v1::Serving>> ServingStore::Select(const std::string& where, std::optional<int64_t> id,
                                                     const std::string& what) {
  std::vector<v1::Serving> out;
  Status st = db_->Transact(what, [&](pqxx::work& tx) {
    const std::string query =
        "SELECT s.experiment_id, s.model_name, s.model_version, s.checkpoint_uuid, s.url, s.url_allocation, "
        "s.slots, s.resource_pool, e.owner, w.name, EXTRACT(EPOCH FROM s.created_at), "
        "EXTRACT(EPOCH FROM e.end_time), e.state, e.error, t.id, t.state, t.restarts, t.error, "
        "a.id, a.state, a.slots->0->>'agent_id' "
        "FROM servings s JOIN experiments e ON e.id = s.experiment_id "
        "JOIN workspaces w ON w.id = e.workspace_id "
        "LEFT JOIN LATERAL (SELECT id, state, restarts, error FROM trials WHERE experiment_id = e.id "
        "  ORDER BY id LIMIT 1) t ON true "
        "LEFT JOIN LATERAL (SELECT id, state, slots FROM allocations WHERE trial_id = t.id "
        "  ORDER BY start_time DESC, id DESC LIMIT 1) a ON true " +
        where;
    pqxx::result r = id ? tx.exec_params(query, *id) : tx.exec(query);
    for (const auto& row : r) {
      v1::Serving s;
      s.set_id(row[0].as<int64_t>());
      s.set_model_name(row[1].as<std::string>());
      s.set_model_version(row[2].as<int32_t>());
      s.set_checkpoint_uuid(row[3].as<std::string>());
      const std::string url = row[4].as<std::string>(), url_allocation = row[5].as<std::string>();
      s.set_slots(row[6].as<int32_t>());
      s.set_resource_pool(row[7].as<std::string>());
      s.set_owner(row[8].as<std::string>());
      s.set_workspace(row[9].as<std::string>());
      *s.mutable_created_at() = SecondsToTimestamp(row[10].as<double>());
      if (!row[11].is_null()) *s.mutable_ended_at() = SecondsToTimestamp(row[11].as<double>());
      const std::string experiment_state = row[12].as<std::string>();
      std::string error = row[13].as<std::string>();
      std::string trial_state;
      if (!row[14].is_null()) {
        s.set_trial_id(row[14].as<int64_t>());
        trial_state = row[15].as<std::string>();
        s.set_restarts(row[16].as<int32_t>());
        if (error.empty()) error = row[17].as<std::string>();
      }
      const bool allocation_live = !row[18].is_null() && row[19].as<std::string>() != "TERMINATED";
      if (allocation_live && !row[20].is_null()) s.set_agent_id(row[20].as<std::string>());
      const bool reported_live = allocation_live && !url.empty() && url_allocation == row[18].as<std::string>();
      s.set_state(ServingState(experiment_state, trial_state, reported_live));
      if (s.state() == "READY") s.set_url(url);
      if (s.state() == "FAILED" || s.restarts() > 0) s.set_error(error);
      out.push_back(std::move(s));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

Result<std::vector<v1::Serving>> ServingStore::List(bool include_stopped) {
  if (!include_stopped) {
    return Select("WHERE e.state NOT IN ('COMPLETED','CANCELED','ERROR') ORDER BY s.experiment_id",
                  std::nullopt, "list servers");
  }
  // The live ones and the newest 100 that ended.
  return Select(
      "WHERE (e.state NOT IN ('COMPLETED','CANCELED','ERROR') OR s.experiment_id IN ("
      "  SELECT s2.experiment_id FROM servings s2 JOIN experiments e2 ON e2.id = s2.experiment_id "
      "  WHERE e2.state IN ('COMPLETED','CANCELED','ERROR') ORDER BY s2.experiment_id DESC LIMIT 100)) "
      "ORDER BY s.experiment_id",
      std::nullopt, "list servers");
}

Result<v1::Serving> ServingStore::Get(int64_t id) {
  SF_ASSIGN_OR_RETURN(std::vector<v1::Serving> found, Select("WHERE s.experiment_id = $1", id, "get server"));
  if (found.empty()) return NotFound("no server " + std::to_string(id) + " (sf serve list shows them)");
  return std::move(found.front());
}

}  // namespace sf::master
