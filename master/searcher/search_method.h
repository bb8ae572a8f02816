// Hyperparameter search methods: small deterministic state machines, events in, operations out.
//
// One SearchMethod drives one experiment. The experiment actor tells it what happened to the
// trials it asked for (created, validated, exited, closed) and carries out the operations it
// returns, in order. A search method does no I/O, starts no threads and reads no clocks, so the
// same events always give the same operations; Snapshot() captures everything needed to carry on
// after a master restart (RNG state included), and Restore() on a method freshly made from the
// same config continues exactly where the snapshot was taken.
//
// The protocol, for each trial (request ids are searcher-local, 1, 2, 3, ... in creation order):
//   kCreate(id, hparams)  -> the master persists the trial and calls TrialCreated(id)
//   TrialCreated(id)      -> the method answers kTrain(id, target_length)
//   kTrain(id, L)         -> the trial trains until its total length is L, validates, and the
//                            master calls ValidationCompleted(id, metric, L)
//   ValidationCompleted   -> kTrain(id, L') (continue), kClose(id), or nothing for this trial:
//                            the trial is then idle (adaptive_asha only: waiting for a promotion)
//                            and should checkpoint and give its slots back; a later event brings
//                            either kTrain (resume from the latest checkpoint) or kClose.
//                            Validations short of the current target (min_validation_period) may
//                            be reported too: they change nothing, and the kTrain still stands.
//   kClose(id)            -> the master stops the trial (checkpointing) and calls TrialClosed(id)
//   TrialExitedEarly(id)  -> the trial is gone for good (errored past max_restarts, canceled by
//                            the user, invalid hyperparameters); the method sends nothing more for
//                            it, and the master need not call TrialClosed for it.
//   kShutdown             -> the search is over; every trial has been closed or has exited.
// Events for unknown request ids, or out of order, are ignored (they return no operations); so
// is a TrialClosed for a trial already closed or gone (a restarted master replays the closes of
// completed trials the last stored snapshot may not have seen: master/core/cluster_recovery.cc).
//
// Not thread-safe: the experiment actor owns its method and calls it from one thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "common/status.h"
#include "common/value.h"

namespace sf::master {

// One thing the search method wants the master to do.
struct SearcherOp {
  enum class Kind { kCreate, kTrain, kClose, kShutdown };
  Kind kind = Kind::kCreate;
  int64_t request_id = 0;     // searcher-local trial id (1, 2, 3, ...); 0 for kShutdown
  Value hparams;              // kCreate: concrete hyperparameters (nested groups as maps)
  int64_t target_length = 0;  // kTrain: total length to reach, in max_length's unit; then validate
  bool failure = false;       // kShutdown: the search failed (no trial finished any training)

  // "create(3, {...})", "train(3, 500)", "close(3)", "shutdown(ok|failure)": for logs and tests.
  std::string ToString() const;
  friend bool operator==(const SearcherOp& a, const SearcherOp& b) {
    return a.kind == b.kind && a.request_id == b.request_id && a.hparams == b.hparams &&
           a.target_length == b.target_length && a.failure == b.failure;
  }
};

// Why a trial ended before the searcher closed it.
enum class ExitReason {
  kErrored,                 // failed, restarts exhausted
  kUserCanceled,            // killed by a user
  kInvalidHyperparameters,  // the trainer refused its hyperparameters; a replacement is sampled
};
const char* ExitReasonName(ExitReason reason);

class SearchMethod {
 public:
  SearchMethod() = default;
  SearchMethod(const SearchMethod&) = delete;
  SearchMethod& operator=(const SearchMethod&) = delete;
  virtual ~SearchMethod();

  // The operations that start the search (the first kCreate ops). Call once.
  virtual std::vector<SearcherOp> InitialOperations() = 0;
  // The master has persisted trial `request_id`; answers with its first kTrain.
  virtual std::vector<SearcherOp> TrialCreated(int64_t request_id) = 0;
  // A kTrain op finished: the trial reached `length` and validated with `metric` (the searcher
  // metric, as reported; direction from searcher.smaller_is_better; NaN counts as the worst).
  virtual std::vector<SearcherOp> ValidationCompleted(int64_t request_id, double metric,
                                                      int64_t length) = 0;
  virtual std::vector<SearcherOp> TrialExitedEarly(int64_t request_id, ExitReason reason) = 0;
  // A trial the method sent kClose for has stopped (its slots are free).
  virtual std::vector<SearcherOp> TrialClosed(int64_t request_id) = 0;

  // Fraction of the search done, 0..1 (1 once kShutdown has been sent).
  virtual double Progress() const = 0;
  // Everything needed to resume: pass it to Restore() of a method made from the same config.
  virtual Value Snapshot() const = 0;
  // Replaces this method's state with a snapshot's. On error the state is unchanged.
  virtual Status Restore(const Value& snapshot) = 0;
  // For the UI: per-method details (adaptive_asha: brackets and rungs with their metrics).
  virtual Value Summary() const = 0;
};

// Makes the search method named by config.searcher.name (single, grid, random, adaptive_asha).
// Errors (kInvalidArgument, naming the field) for configs no search can run: a grid over a space
// without grid points, search spaces under `single`, a max_length of zero, more adaptive_asha
// brackets than trials.
Result<std::unique_ptr<SearchMethod>> MakeSearchMethod(const config::ExperimentConfig& config);

}  // namespace sf::master
