#include "master/housekeeping/checkpoint_retention.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "common/log.h"
#include "common/storage/checkpoint_storage.h"
#include "master/db/model_store.h"
#include "master/db/pg_array.h"
#include "master/housekeeping/experiment_deletion.h"

namespace sf::master {
namespace {

// More batches first, then the smaller uuid: the order "latest" means.
bool Later(const RetainedCheckpoint* a, const RetainedCheckpoint* b) {
  if (a->batches != b->batches) return a->batches > b->batches;
  return a->uuid < b->uuid;
}

// The best first; among equal metrics, the later. Only checkpoints with a metric.
std::vector<const RetainedCheckpoint*> Best(std::vector<const RetainedCheckpoint*> cks, bool smaller_is_better) {
  std::erase_if(cks, [](const RetainedCheckpoint* c) { return !c->metric.has_value(); });
  std::sort(cks.begin(), cks.end(), [&](const RetainedCheckpoint* a, const RetainedCheckpoint* b) {
    if (*a->metric != *b->metric) return smaller_is_better ? *a->metric < *b->metric : *a->metric > *b->metric;
    return Later(a, b);
  });
  return cks;
}

void KeepFirst(const std::vector<const RetainedCheckpoint*>& ordered, int64_t n, std::set<std::string>& keep) {
  for (size_t i = 0; i < ordered.size() && static_cast<int64_t>(i) < n; ++i) keep.insert(ordered[i]->uuid);
}

}  // namespace

std::vector<std::string> SelectCheckpointsToDelete(const std::vector<RetainedCheckpoint>& checkpoints,
                                                   const RetentionPolicy& policy,
                                                   const std::set<std::string>& pinned) {
  std::map<int64_t, std::vector<const RetainedCheckpoint*>> by_trial;
  std::vector<const RetainedCheckpoint*> all;
  for (const RetainedCheckpoint& c : checkpoints) {
    by_trial[c.trial_id].push_back(&c);
    all.push_back(&c);
  }
  std::set<std::string> keep = pinned;
  for (auto& [trial, cks] : by_trial) {
    std::vector<const RetainedCheckpoint*> latest = cks;
    std::sort(latest.begin(), latest.end(), Later);
    KeepFirst(latest, policy.save_trial_latest, keep);
    KeepFirst(Best(cks, policy.smaller_is_better), policy.save_trial_best, keep);
  }
  KeepFirst(Best(all, policy.smaller_is_better), policy.save_experiment_best, keep);
  std::vector<std::string> drop;
  for (const RetainedCheckpoint& c : checkpoints) {
    if (!keep.count(c.uuid)) drop.push_back(c.uuid);
  }
  std::sort(drop.begin(), drop.end());
  drop.erase(std::unique(drop.begin(), drop.end()), drop.end());
  return drop;
}

Result<std::vector<DeletedCheckpoint>> MarkCheckpointsForRetention(Database* db, int64_t experiment_id,
                                                                   const RetentionPolicy& policy) {
  std::vector<DeletedCheckpoint> out;
  Status st = db->Transact("checkpoint retention", [&](pqxx::work& tx) -> Status {
    out.clear();  // a retried transaction starts over
    std::vector<RetainedCheckpoint> active;
    std::map<std::string, std::string> paths;
    // FOR UPDATE: an explicit delete of one of these waits for this pass (and then finds it
    // DELETED), so each row is marked, and its files removed, once.
    for (const auto& row : tx.exec_params(
             "SELECT c.uuid, c.trial_id, c.batches, c.validation_metric, c.path FROM checkpoints c "
             "JOIN trials t ON t.id = c.trial_id WHERE t.experiment_id = $1 AND c.state = 'ACTIVE' "
             "FOR UPDATE OF c",
             experiment_id)) {
      RetainedCheckpoint c;
      c.uuid = row[0].as<std::string>();
      c.trial_id = row[1].as<int64_t>();
      c.batches = row[2].as<int64_t>();
      if (!row[3].is_null()) c.metric = row[3].as<double>();
      paths[c.uuid] = row[4].as<std::string>();
      active.push_back(std::move(c));
    }
    // What unfinished trials restore from: the latest on record and the newest ACTIVE one (the
    // same checkpoint unless a report is in flight).
    std::set<std::string> pinned;
    for (const auto& row : tx.exec_params(
             "SELECT t.latest_checkpoint_uuid, (SELECT c.uuid FROM checkpoints c WHERE c.trial_id = t.id "
             "AND c.state = 'ACTIVE' ORDER BY c.batches DESC, c.uuid LIMIT 1) FROM trials t "
             "WHERE t.experiment_id = $1 AND t.state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')",
             experiment_id)) {
      for (int i = 0; i < 2; ++i) {
        if (!row[i].is_null() && !row[i].as<std::string>().empty()) pinned.insert(row[i].as<std::string>());
      }
    }
    // A trial of another experiment continued from one of these (sf experiment continue) and
    // not finished yet resumes from it too (asked by uuid: trials_latest_checkpoint_idx).
    if (!active.empty()) {
      std::vector<std::string> uuids;
      for (const RetainedCheckpoint& c : active) uuids.push_back(c.uuid);
      for (const auto& row : tx.exec_params(
               "SELECT u.latest_checkpoint_uuid FROM trials u WHERE u.latest_checkpoint_uuid = ANY($2::text[]) "
               "AND u.latest_checkpoint_uuid <> '' AND u.experiment_id <> $1 "
               "AND u.state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')",
               experiment_id, TextArray(uuids))) {
        pinned.insert(row[0].as<std::string>());
      }
    }
    // A model version's checkpoint is never removed (docs/registry.md).
    pinned.merge(RegisteredCheckpointsOf(tx, experiment_id));
    std::vector<std::string> drop = SelectCheckpointsToDelete(active, policy, pinned);
    if (drop.empty()) return Status::Ok();
    for (const std::string& uuid : drop) {
      tx.exec_params("UPDATE checkpoints SET state = 'DELETED' WHERE uuid = $1 AND state = 'ACTIVE'", uuid);
      out.push_back({uuid, paths[uuid]});
    }
    return Status::Ok();
  });
  if (!st.ok()) return st;
  return out;
}

int RemoveCheckpointDirectories(const std::vector<DeletedCheckpoint>& deleted, const std::string& experiment_dir,
                                const std::optional<config::CheckpointStorageConfig>& storage) {
  int removed = 0;
  for (const DeletedCheckpoint& c : deleted) {
    if (!IsInside(c.path, experiment_dir)) {
      log::Warn("checkpoint", {{"event", "files_left"}, {"uuid", c.uuid}, {"path", c.path},
                               {"why", "outside " + experiment_dir}});
      continue;
    }
    auto store = storage::CheckpointStorage::ForPath(c.path, storage);
    Status st = store.ok() ? (*store)->Remove(c.path) : store.status();
    if (!st.ok()) {
      log::Warn("checkpoint", {{"event", "remove_failed"}, {"uuid", c.uuid}, {"path", c.path}, {"error", st.message()}});
      continue;
    }
    ++removed;
    log::Info("checkpoint", {{"event", "deleted"}, {"uuid", c.uuid}, {"path", c.path}});
  }
  return removed;
}

Status DeleteCheckpoint(Database* db, const std::string& uuid, const std::string& default_root) {
  if (uuid.empty() || uuid.find('\0') != std::string::npos) {
    return InvalidArgument("uuid: \"" + uuid.substr(0, uuid.find('\0')) + "\" is not a checkpoint uuid");
  }
  DeletedCheckpoint deleted{uuid, ""};
  std::string experiment_dir;
  std::optional<config::CheckpointStorageConfig> storage;
  bool already_deleted = false;
  Status st = db->Transact("delete checkpoint", [&](pqxx::work& tx) -> Status {
    pqxx::result r = tx.exec_params(
        "SELECT c.state, c.path, t.id, t.state, e.id, e.config_yaml, "
        "(t.latest_checkpoint_uuid = c.uuid OR c.uuid = (SELECT n.uuid FROM checkpoints n WHERE n.trial_id = t.id "
        "AND n.state = 'ACTIVE' ORDER BY n.batches DESC, n.uuid LIMIT 1)), "
        "(SELECT min(u.id) FROM trials u WHERE u.latest_checkpoint_uuid = c.uuid AND u.id <> t.id "
        "AND u.state NOT IN ('COMPLETED', 'CANCELED', 'ERROR')) "
        "FROM checkpoints c JOIN trials t ON t.id = c.trial_id JOIN experiments e ON e.id = t.experiment_id "
        "WHERE c.uuid = $1 FOR UPDATE OF c",
        uuid);
    if (r.empty()) return NotFound("checkpoint " + uuid + " does not exist");
    already_deleted = r[0][0].as<std::string>() == "DELETED";
    if (already_deleted) return Status::Ok();
    const std::string trial_state = r[0][3].as<std::string>();
    const bool unfinished = trial_state != "COMPLETED" && trial_state != "CANCELED" && trial_state != "ERROR";
    if (unfinished && r[0][6].as<bool>()) {
      return FailedPrecondition("checkpoint " + uuid + " is the latest of trial " + r[0][2].as<std::string>() +
                                ", which is " + trial_state + " and would resume from it");
    }
    if (!r[0][7].is_null()) {
      return FailedPrecondition("checkpoint " + uuid + " is where trial " + r[0][7].as<std::string>() +
                                " (continued from it) would resume");
    }
    if (auto why = CheckpointVersionRefusal(tx, uuid)) return FailedPrecondition(*why);
    deleted.path = r[0][1].as<std::string>();
    config::ParseResult parsed = config::ParseExperimentConfig(r[0][5].as<std::string>());
    experiment_dir = ExperimentCheckpointDir(parsed.ok() ? *parsed.config : config::ExperimentConfig{},
                                             default_root, r[0][4].as<int64_t>());
    if (parsed.ok()) storage = parsed.config->checkpoint_storage;
    tx.exec_params("UPDATE checkpoints SET state = 'DELETED' WHERE uuid = $1", uuid);
    return Status::Ok();
  });
  if (!st.ok() || already_deleted) return st;
  RemoveCheckpointDirectories({deleted}, experiment_dir, storage);
  return Status::Ok();
}

CheckpointRetention::CheckpointRetention(Database* db, std::chrono::milliseconds settle) : db_(db), settle_(settle) {}

CheckpointRetention::~CheckpointRetention() { Stop(); }

void CheckpointRetention::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (worker_.joinable() || stopping_) return;
  worker_ = std::thread([this] { Loop(); });
}

void CheckpointRetention::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
    pending_.clear();
  }
  wake_.notify_all();
  idle_.notify_all();
  if (worker_.joinable()) worker_.join();
}

void CheckpointRetention::Request(int64_t experiment_id, const RetentionPolicy& policy,
                                  const std::string& experiment_dir,
                                  const std::optional<config::CheckpointStorageConfig>& storage) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    auto it = pending_.find(experiment_id);
    if (it == pending_.end()) {
      pending_.emplace(experiment_id,
                       Pending{policy, experiment_dir, storage, std::chrono::steady_clock::now() + settle_});
      queue_.push_back(experiment_id);  // in order of first request, so of `due`
    } else {
      it->second.policy = policy;  // the latest request's, at the queued one's time
      it->second.experiment_dir = experiment_dir;
      it->second.storage = storage;
    }
  }
  wake_.notify_one();
}

void CheckpointRetention::Drain() {
  std::unique_lock<std::mutex> lock(mu_);
  ++drainers_;
  wake_.notify_all();
  idle_.wait(lock, [&] { return stopping_ || (queue_.empty() && !running_pass_); });
  --drainers_;
}

int64_t CheckpointRetention::passes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return passes_;
}

void CheckpointRetention::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (true) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    const auto due = pending_.at(queue_.front()).due;
    if (drainers_ == 0 && std::chrono::steady_clock::now() < due) {
      wake_.wait_until(lock, due, [&] { return stopping_ || drainers_ > 0; });
      continue;
    }
    const int64_t experiment_id = queue_.front();
    queue_.pop_front();
    Pending pending = pending_.at(experiment_id);
    pending_.erase(experiment_id);
    running_pass_ = true;
    lock.unlock();
    auto marked = MarkCheckpointsForRetention(db_, experiment_id, pending.policy);
    if (!marked.ok()) {
      log::Warn("checkpoint", {{"event", "retention_failed"}, {"experiment", std::to_string(experiment_id)},
                               {"error", marked.status().message()}});
    } else if (!marked->empty()) {
      RemoveCheckpointDirectories(*marked, pending.experiment_dir, pending.storage);
    }
    lock.lock();
    running_pass_ = false;
    ++passes_;
    if (queue_.empty()) idle_.notify_all();
  }
}

}  // namespace sf::master
