// The shared machinery of single, grid and random search: a fixed number of trials, each
// trained once to max_length, validated, and closed; at most max_concurrent_trials alive at
// once (0 = no limit), the next one created when one closes or exits. An exited trial is not
// retried (the master already restarted it max_restarts times), except that random search
// samples a replacement for a trial with invalid hyperparameters. The search fails (kShutdown
// with failure) when no trial finished its training.
//
// Subclasses say only which hyperparameters trial number i gets (and what extra state that
// needs in a snapshot). Not thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "master/searcher/search_method.h"

namespace sf::master {

class FixedLengthSearch : public SearchMethod {
 public:
  std::vector<SearcherOp> InitialOperations() override;
  std::vector<SearcherOp> TrialCreated(int64_t request_id) override;
  std::vector<SearcherOp> ValidationCompleted(int64_t request_id, double metric,
                                              int64_t length) override;
  std::vector<SearcherOp> TrialExitedEarly(int64_t request_id, ExitReason reason) override;
  std::vector<SearcherOp> TrialClosed(int64_t request_id) override;
  double Progress() const override;
  Value Snapshot() const override;
  Status Restore(const Value& snapshot) override;
  // {"trials": [{"request_id", "state", "metric"?}]}
  Value Summary() const override;

 protected:
  // `name` is recorded in snapshots (a snapshot of another method is refused).
  // `replace_invalid`: a trial that exits with invalid hyperparameters is replaced by one more
  // trial (random search: a new sample), instead of counting as one of max_trials.
  FixedLengthSearch(std::string name, int64_t max_trials, int64_t max_concurrent_trials,
                    int64_t max_length, bool replace_invalid = false);
  // The hyperparameters of trial number `index` (0-based, called in order, exactly once each).
  virtual Value NextHyperparameters(int64_t index) = 0;
  // Subclass state for snapshots (e.g. the RNG); null when there is none.
  virtual Value ExtraSnapshot() const { return Value(); }
  virtual Status RestoreExtra(const Value& extra) { return Status::Ok(); }

 private:
  enum class TrialState { kCreating, kTraining, kClosing, kDone };
  struct Trial {
    TrialState state = TrialState::kCreating;
    bool validated = false;
    double metric = 0;
  };
  static const char* StateName(TrialState s);

  // Creates trials up to the concurrency limit, then shuts down once everything is done.
  std::vector<SearcherOp> Advance();
  // Trials to create in all: max_trials, plus replacements for invalid hyperparameters.
  int64_t TotalTrials() const { return max_trials_ + (replace_invalid_ ? invalid_ : 0); }

  std::string name_;
  int64_t max_trials_;
  int64_t max_concurrent_trials_;
  int64_t max_length_;
  bool replace_invalid_;
  int64_t created_ = 0;
  int64_t invalid_ = 0;
  bool shutdown_sent_ = false;
  std::map<int64_t, Trial> trials_;
};

}  // namespace sf::master
