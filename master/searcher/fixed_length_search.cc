#include "master/searcher/fixed_length_search.h"

#include <algorithm>
#include <cmath>

#include "master/searcher/snapshot_fields.h"

namespace sf::master {

FixedLengthSearch::FixedLengthSearch(std::string name, int64_t max_trials,
                                     int64_t max_concurrent_trials, int64_t max_length,
                                     bool replace_invalid)
    : name_(std::move(name)),
      max_trials_(max_trials),
      max_concurrent_trials_(max_concurrent_trials),
      max_length_(max_length),
      replace_invalid_(replace_invalid) {}

const char* FixedLengthSearch::StateName(TrialState s) {
  switch (s) {
    case TrialState::kCreating:
      return "creating";
    case TrialState::kTraining:
      return "training";
    case TrialState::kClosing:
      return "closing";
    case TrialState::kDone:
      return "done";
  }
  return "done";
}

std::vector<SearcherOp> FixedLengthSearch::Advance() {
  std::vector<SearcherOp> ops;
  if (shutdown_sent_) return ops;
  int64_t alive = 0;
  for (const auto& [id, t] : trials_) alive += t.state != TrialState::kDone;
  while (created_ < TotalTrials() &&
         (max_concurrent_trials_ == 0 || alive < max_concurrent_trials_)) {
    const int64_t id = ++created_;
    trials_[id] = Trial{};
    ++alive;
    SearcherOp op;
    op.kind = SearcherOp::Kind::kCreate;
    op.request_id = id;
    op.hparams = NextHyperparameters(id - 1);
    ops.push_back(std::move(op));
  }
  if (created_ >= TotalTrials() && alive == 0) {
    bool any_validated = false;
    for (const auto& [id, t] : trials_) any_validated |= t.validated;
    SearcherOp op;
    op.kind = SearcherOp::Kind::kShutdown;
    op.failure = !any_validated;
    ops.push_back(op);
    shutdown_sent_ = true;
  }
  return ops;
}

std::vector<SearcherOp> FixedLengthSearch::InitialOperations() { return Advance(); }

std::vector<SearcherOp> FixedLengthSearch::TrialCreated(int64_t request_id) {
  auto it = trials_.find(request_id);
  if (it == trials_.end() || it->second.state != TrialState::kCreating) return {};
  it->second.state = TrialState::kTraining;
  SearcherOp op;
  op.kind = SearcherOp::Kind::kTrain;
  op.request_id = request_id;
  op.target_length = max_length_;
  return {op};
}

std::vector<SearcherOp> FixedLengthSearch::ValidationCompleted(int64_t request_id, double metric,
                                                               int64_t length) {
  auto it = trials_.find(request_id);
  if (it == trials_.end() || it->second.state != TrialState::kTraining) return {};
  if (length < max_length_) return {};  // an intermediate validation: keep training
  it->second.state = TrialState::kClosing;
  it->second.validated = true;
  it->second.metric = metric;
  SearcherOp op;
  op.kind = SearcherOp::Kind::kClose;
  op.request_id = request_id;
  return {op};
}

std::vector<SearcherOp> FixedLengthSearch::TrialExitedEarly(int64_t request_id, ExitReason reason) {
  auto it = trials_.find(request_id);
  if (it == trials_.end() || it->second.state == TrialState::kDone) return {};
  it->second.state = TrialState::kDone;
  if (reason == ExitReason::kInvalidHyperparameters) ++invalid_;
  return Advance();
}

std::vector<SearcherOp> FixedLengthSearch::TrialClosed(int64_t request_id) {
  auto it = trials_.find(request_id);
  if (it == trials_.end() || it->second.state == TrialState::kDone) return {};
  it->second.state = TrialState::kDone;
  return Advance();
}

double FixedLengthSearch::Progress() const {
  if (shutdown_sent_) return 1.0;
  if (TotalTrials() <= 0) return 0.0;
  int64_t finished = 0;
  for (const auto& [id, t] : trials_) {
    finished += t.state == TrialState::kDone || t.state == TrialState::kClosing;
  }
  return std::clamp(static_cast<double>(finished) / static_cast<double>(TotalTrials()), 0.0, 1.0);
}

Value FixedLengthSearch::Snapshot() const {
  Value::List trials;
  for (const auto& [id, t] : trials_) {
    trials.push_back(Value(Value::Map{{"request_id", Value(id)},
                                      {"state", Value(StateName(t.state))},
                                      {"validated", Value(t.validated)},
                                      {"metric", snapshot::FromDouble(t.metric)}}));
  }
  return Value(Value::Map{{"searcher", Value(name_)},
                          {"version", Value(1)},
                          {"created", Value(created_)},
                          {"invalid", Value(invalid_)},
                          {"shutdown_sent", Value(shutdown_sent_)},
                          {"trials", Value(std::move(trials))},
                          {"extra", ExtraSnapshot()}});
}

Status FixedLengthSearch::Restore(const Value& snap) {
  std::string name;
  SF_RETURN_IF_ERROR(snapshot::String(snap, "searcher", name));
  if (name != name_) {
    return InvalidArgument("searcher snapshot is of a " + name + " searcher, not " + name_);
  }
  int64_t created = 0, invalid = 0;
  bool shutdown_sent = false;
  SF_RETURN_IF_ERROR(snapshot::Int(snap, "created", created));
  SF_RETURN_IF_ERROR(snapshot::Int(snap, "invalid", invalid));
  SF_RETURN_IF_ERROR(snapshot::Bool(snap, "shutdown_sent", shutdown_sent));
  const int64_t total = max_trials_ + (replace_invalid_ ? invalid : 0);
  if (created < 0 || invalid < 0 || created > total) {
    return InvalidArgument("searcher snapshot: created " + std::to_string(created) +
                           " is outside 0.." + std::to_string(total));
  }
  SF_ASSIGN_OR_RETURN(const Value* list, snapshot::List(snap, "trials"));
  std::map<int64_t, Trial> trials;
  for (const Value& v : list->as_list()) {
    int64_t id = 0;
    std::string state;
    Trial t;
    SF_RETURN_IF_ERROR(snapshot::Int(v, "request_id", id));
    SF_RETURN_IF_ERROR(snapshot::String(v, "state", state));
    SF_RETURN_IF_ERROR(snapshot::Bool(v, "validated", t.validated));
    SF_RETURN_IF_ERROR(snapshot::Double(v, "metric", t.metric));
    bool known = false;
    for (TrialState s :
         {TrialState::kCreating, TrialState::kTraining, TrialState::kClosing, TrialState::kDone}) {
      if (state == StateName(s)) {
        t.state = s;
        known = true;
      }
    }
    if (!known || id < 1 || id > created) {
      return InvalidArgument("searcher snapshot: bad trial entry " + v.ToJson());
    }
    trials[id] = t;
  }
  const Value* extra = snap.Find("extra");
  SF_RETURN_IF_ERROR(RestoreExtra(extra ? *extra : Value()));
  created_ = created;
  invalid_ = invalid;
  shutdown_sent_ = shutdown_sent;
  trials_ = std::move(trials);
  return Status::Ok();
}

Value FixedLengthSearch::Summary() const {
  Value::List trials;
  for (const auto& [id, t] : trials_) {
    Value::Map m{{"request_id", Value(id)}, {"state", Value(StateName(t.state))}};
    if (t.validated) m["metric"] = snapshot::FromDouble(t.metric);
    trials.push_back(Value(std::move(m)));
  }
  return Value(Value::Map{{"trials", Value(std::move(trials))}});
}

}  // namespace sf::master
