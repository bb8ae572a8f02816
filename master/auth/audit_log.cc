#include "master/auth/audit_log.h"

#include <algorithm>

namespace sf::master {

Status AuditLog::Record(const AuditEntry& e) {
  return db_->Transact("record audit entry", [&](pqxx::work& tx) {
    tx.exec_params("INSERT INTO audit_log (actor, peer, method, path, status) VALUES ($1, $2, $3, $4, $5)", e.actor,
                   e.peer, e.method, e.path, e.status);
    return Status::Ok();
  });
}

Result<std::vector<AuditEntry>> AuditLog::List(const AuditFilter& f) {
  if (f.limit < 1 || f.limit > 1000) return InvalidArgument("limit: must be 1-1000");
  std::vector<AuditEntry> out;
  Status st = db_->Transact("list audit entries", [&](pqxx::work& tx) {
    pqxx::result r = tx.exec_params(
        "SELECT id, extract(epoch FROM at)::float8, actor, peer, method, path, status FROM audit_log "
        "WHERE (NOT $1 OR at >= to_timestamp($2::float8)) AND ($3 = '' OR actor = $3) "
        "ORDER BY at DESC, id DESC LIMIT $4",
        f.since.has_value(), f.since.value_or(0.0), f.actor, f.limit);
    for (const auto& row : r) {
      AuditEntry e;
      e.id = row[0].as<int64_t>();
      e.at = row[1].as<double>();
      e.actor = row[2].as<std::string>();
      e.peer = row[3].as<std::string>();
      e.method = row[4].as<std::string>();
      e.path = row[5].as<std::string>();
      e.status = row[6].as<int>();
      out.push_back(std::move(e));
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

}  // namespace sf::master
