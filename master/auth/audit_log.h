// The audit log: one row per mutation of the REST API (POST, PUT, PATCH, DELETE under
// /api/v1/), with who, from where, what and when, and the HTTP status it ended with, so refused
// attempts are on record too (docs/security.md, "Audit log").
//
// Contract:
// - Record() is called by the HTTP server after the handler ran and before the response goes
//   out, so a client that got its answer finds its own row. It never fails the request: a
//   database error is returned for the caller to log.
// - "Who" is the caller's user name. Until users and sessions exist (issue 14) that is what the
//   X-SF-User header claims, or "anonymous": it identifies, it does not authenticate.
// - List() reads newest first, at most 1,000 rows per call. Thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

struct AuditEntry {
  int64_t id = 0;
  double at = 0;  // seconds since the epoch
  std::string actor, peer, method, path;
  int status = 0;
};

struct AuditFilter {
  std::optional<double> since;  // seconds since the epoch
  std::string actor;            // exact match when not empty
  int limit = 100;              // 1..1000
};

class AuditLog {
 public:
  explicit AuditLog(Database* db) : db_(db) {}
  Status Record(const AuditEntry& entry);
  Result<std::vector<AuditEntry>> List(const AuditFilter& filter);

 private:
  Database* db_;
};

}  // namespace sf::master
