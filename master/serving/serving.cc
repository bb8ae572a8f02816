// Servers scheduled on the cluster: their task and their rows
// (master/serving/serving.h).
#include "master/serving/serving.h"

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

Result<TaskSpec> ServingTaskSpec(const v1::StartServingRequest& r, const ServingLaunch& launch) {
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

  TaskSpec spec;
  spec.kind = "SERVER";
  spec.entrypoint = {"sf-serve",      "--cluster-task",  "--checkpoint", launch.checkpoint_dir,
                     "--bind",        bind,              "--port",       "0",
                     "--model-label", launch.model_name, "--version-label", std::to_string(launch.model_version)};
  auto flag = [&](const char* name, int64_t value) {
    spec.entrypoint.push_back(name);
    spec.entrypoint.push_back(std::to_string(value));
  };
  if (!launch.location.endpoint_url().empty()) {
    spec.entrypoint.insert(spec.entrypoint.end(), {"--s3-endpoint", launch.location.endpoint_url()});
  }
  if (!launch.location.region().empty()) {
    spec.entrypoint.insert(spec.entrypoint.end(), {"--s3-region", launch.location.region()});
  }
  if (r.max_batch_tokens() > 0) flag("--max-batch-tokens", r.max_batch_tokens());
  if (r.max_batch_sentences() > 0) flag("--max-batch-sentences", r.max_batch_sentences());
  if (r.max_wait_ms() != 0) flag("--max-wait-ms", r.max_wait_ms() < 0 ? 0 : r.max_wait_ms());
  if (r.threads() > 0) flag("--threads", r.threads());
  spec.slots = r.slots() > 0 ? r.slots() : 1;
  spec.resource_pool = r.resource_pool().empty() ? "default" : r.resource_pool();
  spec.priority = r.priority() > 0 ? r.priority() : 42;
  spec.max_restarts = r.max_restarts() > 0 ? r.max_restarts() : 5;
  return spec;
}

void ServingStore::InsertRow(pqxx::work& tx, int64_t task_id, const NewServing& row) {
  tx.exec_params(
      "INSERT INTO servings (task_id, model_id, model_name, model_version, checkpoint_uuid, slots, resource_pool) "
      "VALUES ($1, $2, $3, $4, $5, $6, $7)",
      task_id, row.model_id, row.model_name, row.model_version, row.checkpoint_uuid, row.slots, row.resource_pool);
}

namespace {

// The server's state from its task's and whether its newest allocation reported its URL.
std::string ServingState(const std::string& task, bool reported_live) {
  if (task == "RUNNING") return reported_live ? "READY" : "STARTING";
  if (task == "QUEUED" || task == "STOPPING" || task == "STOPPED" || task == "FAILED") return task;
  return "QUEUED";
}

}  // namespace

Result<std::vector<v1::Serving>> ServingStore::Select(const std::string& where, std::optional<int64_t> id,
                                                     const std::string& what) {
  std::vector<v1::Serving> out;
  Status st = db_->Transact(what, [&](pqxx::work& tx) {
    const std::string query =
        "SELECT s.task_id, s.model_name, s.model_version, s.checkpoint_uuid, t.url, t.url_allocation, "
        "s.slots, s.resource_pool, t.owner, w.name, EXTRACT(EPOCH FROM t.created_at), "
        "EXTRACT(EPOCH FROM t.end_time), t.state, t.error, t.restarts, "
        "a.id, a.state, a.slots->0->>'agent_id' "
        "FROM servings s JOIN tasks t ON t.id = s.task_id "
        "JOIN workspaces w ON w.id = t.workspace_id "
        "LEFT JOIN LATERAL (SELECT id, state, slots FROM allocations WHERE task_id = t.id "
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
      const std::string task_state = row[12].as<std::string>();
      const std::string error = row[13].as<std::string>();
      s.set_restarts(row[14].as<int32_t>());
      const bool allocation_live = !row[15].is_null() && row[16].as<std::string>() != "TERMINATED";
      if (allocation_live && !row[17].is_null()) s.set_agent_id(row[17].as<std::string>());
      const bool reported_live = allocation_live && !url.empty() && url_allocation == row[15].as<std::string>();
      s.set_state(ServingState(task_state, reported_live));
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
    return Select("WHERE t.state NOT IN ('STOPPED','FAILED') ORDER BY s.task_id", std::nullopt, "list servers");
  }
  // The live ones and the newest 100 that ended.
  return Select(
      "WHERE (t.state NOT IN ('STOPPED','FAILED') OR s.task_id IN ("
      "  SELECT s2.task_id FROM servings s2 JOIN tasks t2 ON t2.id = s2.task_id "
      "  WHERE t2.state IN ('STOPPED','FAILED') ORDER BY s2.task_id DESC LIMIT 100)) "
      "ORDER BY s.task_id",
      std::nullopt, "list servers");
}

Result<v1::Serving> ServingStore::Get(int64_t id) {
  SF_ASSIGN_OR_RETURN(std::vector<v1::Serving> found, Select("WHERE s.task_id = $1", id, "get server"));
  if (found.empty()) return NotFound("no server " + std::to_string(id) + " (sf serve list shows them)");
  return std::move(found.front());
}

}  // namespace sf::master
