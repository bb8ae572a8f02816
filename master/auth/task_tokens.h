// Per-task TrialLink credentials: a trainer may speak only for the trial, rank, restart and
// task the master started it as (docs/security.md, "Trainers").
//
// Contract:
// - When the master starts a task it issues a token bound to its claims (trial id, rank,
//   restart, task id) and sends it in StartTask.task_token; the agent hands it to the trainer
//   in the environment (SF_TASK_TOKEN, never on a command line), and the trainer sends it with
//   every TrialLink call (metadata `x-sf-task-token`).
// - A token is "sft1_" + hex(HMAC-SHA256(secret, claims)), so the master stores nothing per
//   task, and tokens survive a master restart: the secret is the cluster's (32 random bytes,
//   table cluster_secrets, created once by the first master that loads it).
// - Verify compares in constant time (CRYPTO_memcmp) and answers kUnauthenticated with a
//   one-line reason that never contains a token; a token for other claims is refused exactly
//   like a made-up one.
// - Thread-safe once built (immutable).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "common/status.h"
#include "master/db/database.h"

namespace sf::master {

struct TaskClaims {
  int64_t trial_id = 0;
  int32_t rank = 0;
  int32_t restart = 0;
  std::string task_id;
};

class TaskTokens {
 public:
  static constexpr size_t kSecretBytes = 32;
  // The metadata key trainers send the token under.
  static constexpr const char* kMetadataKey = "x-sf-task-token";

  // The cluster's secret from `db`, created (randomly, once) if there is none yet.
  static Result<TaskTokens> Load(Database* db);
  // From a known secret: exactly kSecretBytes * 2 hex digits (tools that hold the database's
  // secret, e.g. bench/metric_ingest.cc).
  static Result<TaskTokens> FromHexSecret(std::string_view hex);

  std::string Issue(const TaskClaims& claims) const;
  // The bearer token a server the master schedules requires (master/serving/serving.h):
  // "sfs1_" + hex(HMAC-SHA256(secret, "steadfast serving token v1" + id)), the same on every
  // start of that server, never equal to a task token.
  std::string IssueServing(int64_t serving_id) const;
  // OK when `token` was issued for exactly `claims`; kUnauthenticated otherwise.
  Status Verify(std::string_view token, const TaskClaims& claims) const;

 private:
  explicit TaskTokens(std::string secret) : secret_(std::move(secret)) {}
  std::string Mac(const TaskClaims& claims) const;  // 32 raw bytes
  std::string secret_;
};

}  // namespace sf::master
