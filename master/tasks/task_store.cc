// Task rows (master/tasks/task_store.h).
#include "master/tasks/task_store.h"

#include "common/value.h"
#include "master/db/store.h"
#include "master/util/proto_value.h"

namespace sf::master {
namespace v1 = steadfast::v1;

bool IsTerminalTaskState(const std::string& state) {
  return state == "STOPPED" || state == "FAILED" || state == "COMPLETED";
}

Result<int64_t> TaskStore::Create(const TaskSpec& spec, const std::function<void(pqxx::work&, int64_t)>& with) {
  Value::List argv;
  for (const std::string& a : spec.entrypoint) argv.push_back(Value(a));
  int64_t id = 0;
  SF_RETURN_IF_ERROR(db_->Transact("create task", [&](pqxx::work& tx) {
    id = tx.exec_params1(
               "INSERT INTO tasks (kind, state, owner, workspace_id, entrypoint, slots, resource_pool, priority, "
               "max_restarts) VALUES ($1, 'QUEUED', $2, $3, $4::jsonb, $5, $6, $7, $8) RETURNING id",
               spec.kind, spec.owner, spec.workspace_id, Value(std::move(argv)).ToJson(), spec.slots,
               spec.resource_pool, spec.priority, spec.max_restarts)[0]
             .as<int64_t>();
    if (!spec.context.empty()) {
      tx.exec_params("INSERT INTO task_contexts (task_id, archive, sha256) VALUES ($1, $2, $3)", id,
                     pqxx::binarystring(spec.context), spec.context_sha256);
    }
    if (with) with(tx, id);
    return Status::Ok();
  }));
  return id;
}

Status TaskStore::SetState(int64_t id, const std::string& state, const std::string& error) {
  return db_->Transact("set task state", [&](pqxx::work& tx) {
    tx.exec_params(
        "UPDATE tasks SET state = $2, error = CASE WHEN $3 = '' THEN error ELSE $3 END, "
        "end_time = CASE WHEN $2 IN ('STOPPED', 'FAILED', 'COMPLETED') THEN COALESCE(end_time, now()) ELSE NULL END "
        "WHERE id = $1",
        id, state, error);
    return Status::Ok();
  });
}

Status TaskStore::SetExitCode(int64_t id, int exit_code) {
  return db_->Transact("set task exit code", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE tasks SET exit_code = $2 WHERE id = $1", id, exit_code);
    return Status::Ok();
  });
}

Status TaskStore::SetRestarts(int64_t id, int restarts, const std::string& error) {
  return db_->Transact("set task restarts", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE tasks SET restarts = $2, error = $3 WHERE id = $1", id, restarts, error);
    return Status::Ok();
  });
}

Status TaskStore::SetAllocations(int64_t id, int allocations) {
  return db_->Transact("set task allocations", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE tasks SET allocations = $2 WHERE id = $1", id, allocations);
    return Status::Ok();
  });
}

Status TaskStore::SetEndpoint(int64_t id, const std::string& url, const std::string& allocation) {
  return db_->Transact("set task endpoint", [&](pqxx::work& tx) {
    tx.exec_params("UPDATE tasks SET url = $2, url_allocation = $3 WHERE id = $1", id, url, allocation);
    return Status::Ok();
  });
}

Result<std::vector<TaskRow>> TaskStore::Live() {
  std::vector<TaskRow> out;
  SF_RETURN_IF_ERROR(db_->Transact("live tasks", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec(
        "SELECT t.id, t.kind, t.state, t.owner, t.workspace_id, t.entrypoint::text, t.slots, t.resource_pool, "
        "t.priority, t.max_restarts, t.restarts, t.allocations, a.id, a.state, a.external_id, "
        "COALESCE(c.sha256, ''), COALESCE(octet_length(c.archive), 0) "
        "FROM tasks t LEFT JOIN LATERAL (SELECT id, state, external_id FROM allocations WHERE task_id = t.id "
        "  ORDER BY start_time DESC, id DESC LIMIT 1) a ON true "
        "LEFT JOIN task_contexts c ON c.task_id = t.id "
        "WHERE t.state NOT IN ('STOPPED', 'FAILED', 'COMPLETED') ORDER BY t.id");
    for (const auto& row : r) {
      TaskRow t;
      t.id = row[0].as<int64_t>();
      t.spec.kind = row[1].as<std::string>();
      t.state = row[2].as<std::string>();
      t.spec.owner = row[3].as<std::string>();
      t.spec.workspace_id = row[4].as<int64_t>();
      auto argv = Value::FromJson(row[5].as<std::string>());
      if (argv.ok() && argv->is_list()) {
        for (const Value& a : argv->as_list()) {
          if (a.is_string()) t.spec.entrypoint.push_back(a.as_string());
        }
      }
      t.spec.slots = row[6].as<int>();
      t.spec.resource_pool = row[7].as<std::string>();
      t.spec.priority = row[8].as<int>();
      t.spec.max_restarts = row[9].as<int>();
      t.restarts = row[10].as<int>();
      t.allocations = row[11].as<int>();
      if (!row[12].is_null()) {
        t.latest_allocation_id = row[12].as<std::string>();
        t.latest_allocation_state = row[13].as<std::string>();
        t.latest_allocation_external_id = row[14].is_null() ? "" : row[14].as<std::string>();
      }
      t.spec.context_sha256 = row[15].as<std::string>();
      t.spec.context_bytes = row[16].as<int64_t>();
      out.push_back(std::move(t));
    }
    return Status::Ok();
  }));
  return out;
}

Result<std::optional<std::string>> TaskStore::Kind(int64_t id) {
  std::optional<std::string> kind;
  SF_RETURN_IF_ERROR(db_->Transact("task kind", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT kind FROM tasks WHERE id = $1", id);
    if (!r.empty()) kind = r[0][0].as<std::string>();
    return Status::Ok();
  }));
  return kind;
}

Result<std::vector<v1::LogLine>> TaskStore::Logs(int64_t id, int64_t after_id, int limit, const std::string& search) {
  return ReadLogs(db_, LogOwner::kTask, id, after_id, limit, search);
}

namespace {

// The tasks a WHERE clause selects, as the API shows them.
Result<std::vector<v1::Task>> SelectTasks(Database* db, const std::string& where, const std::string& kind,
                                          std::optional<int64_t> id) {
  std::vector<v1::Task> out;
  SF_RETURN_IF_ERROR(db->Transact("read tasks", [&](pqxx::work& tx) {
    const std::string query =
        "SELECT t.id, t.kind, t.state, t.owner, w.name, t.entrypoint::text, t.slots, t.resource_pool, t.priority, "
        "EXTRACT(EPOCH FROM t.created_at), EXTRACT(EPOCH FROM t.end_time), t.error, t.restarts, t.exit_code, "
        "a.id, a.state, a.slots->0->>'agent_id' "
        "FROM tasks t JOIN workspaces w ON w.id = t.workspace_id "
        "LEFT JOIN LATERAL (SELECT id, state, slots FROM allocations WHERE task_id = t.id "
        "  ORDER BY start_time DESC, id DESC LIMIT 1) a ON true "
        "WHERE ($1 = '' OR t.kind = $1) AND ($2::bigint = 0 OR t.id = $2::bigint) AND " +
        where;
    for (const auto& row : tx.exec_params(query, kind, id.value_or(0))) {
      v1::Task t;
      t.set_id(row[0].as<int64_t>());
      t.set_kind(row[1].as<std::string>());
      t.set_state(row[2].as<std::string>());
      t.set_owner(row[3].as<std::string>());
      t.set_workspace(row[4].as<std::string>());
      auto argv = Value::FromJson(row[5].as<std::string>());
      if (argv.ok() && argv->is_list()) {
        for (const Value& a : argv->as_list()) {
          if (a.is_string()) t.add_entrypoint(a.as_string());
        }
      }
      t.set_slots(row[6].as<int32_t>());
      t.set_resource_pool(row[7].as<std::string>());
      t.set_priority(row[8].as<int32_t>());
      *t.mutable_created_at() = SecondsToTimestamp(row[9].as<double>());
      if (!row[10].is_null()) *t.mutable_ended_at() = SecondsToTimestamp(row[10].as<double>());
      t.set_error(row[11].as<std::string>());
      t.set_restarts(row[12].as<int32_t>());
      if (!row[13].is_null()) t.set_exit_code(row[13].as<int32_t>());
      if (!row[14].is_null()) {
        t.set_allocation_id(row[14].as<std::string>());
        if (row[15].as<std::string>() != "TERMINATED" && !row[16].is_null()) t.set_agent_id(row[16].as<std::string>());
      }
      out.push_back(std::move(t));
    }
    return Status::Ok();
  }));
  return out;
}

}  // namespace

Result<std::optional<v1::Task>> TaskStore::Get(int64_t id) {
  SF_ASSIGN_OR_RETURN(std::vector<v1::Task> found, SelectTasks(db_, "true", "", id));
  if (found.empty()) return std::optional<v1::Task>();
  return std::optional<v1::Task>(std::move(found.front()));
}

Result<std::vector<v1::Task>> TaskStore::List(const std::string& kind, bool include_ended) {
  if (!include_ended) {
    return SelectTasks(db_, "t.state NOT IN ('STOPPED', 'FAILED', 'COMPLETED') ORDER BY t.id", kind, std::nullopt);
  }
  return SelectTasks(db_,
                     "(t.state NOT IN ('STOPPED', 'FAILED', 'COMPLETED') OR t.id IN ("
                     "  SELECT t2.id FROM tasks t2 WHERE ($1 = '' OR t2.kind = $1) "
                     "  AND t2.state IN ('STOPPED', 'FAILED', 'COMPLETED') ORDER BY t2.id DESC LIMIT 100)) ORDER BY t.id",
                     kind, std::nullopt);
}

Result<std::string> TaskStore::Context(int64_t id) {
  std::string archive;
  bool found = false;
  SF_RETURN_IF_ERROR(db_->Transact("task context", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params("SELECT archive FROM task_contexts WHERE task_id = $1", id);
    if (r.empty()) return Status::Ok();
    pqxx::binarystring bytes(r[0][0]);
    archive.assign(bytes.get(), bytes.size());
    found = true;
    return Status::Ok();
  }));
  if (!found) return NotFound("task " + std::to_string(id) + " has no context");
  return archive;
}

}  // namespace sf::master
