// Which allocation each trial of this master runs now, and how far it has trained: what a
// trainer's metric report is checked against, without the coordinator's lock (docs/cluster.md,
// "Ingestion"). The coordinator (master/core/cluster.h) writes it at every change of a trial's
// current allocation; ingestion reads it. A scheduling pass that holds the coordinator's lock for
// long therefore never delays a report, and a flood of reports never delays a scheduling pass.
//
// Contract:
// - Track(trial, total) when a trial becomes known to this master (created, or recovered after
//   a restart, with its stored total); Forget(trial) when it is deleted. A trial stays tracked
//   after it ends: late reports of its last run are still checked, as the coordinator did.
// - SetAllocation(trial, id) whenever the trial's current allocation changes ("" when it has
//   none); SetRunning(trial, running) when its manager says the allocation runs or has exited.
// - Admit(who): the identity check of a TrialLink call. kNotFound for a trial this master does
//   not track; kFailedPrecondition for a task of an allocation that is not the trial's current
//   one (an orphan of an earlier run). Callers without a task id (tests driving TrialLink by
//   hand) are not checked against the allocation. kAskCoordinator when the caller is a rank of
//   the current allocation before its manager reported it running (an external manager's poll
//   lags): only the coordinator may act on that, under its own lock.
// - SetStop(trial, stop) whenever the stop asked of the trial's run changes ("" for none,
//   "pause", "kill", "preempt"). Undisturbed(who): true when the caller is a rank of the
//   trial's current allocation, which its manager said runs, and no stop is asked: ShouldStop
//   answers "continue" from that alone, without the coordinator's lock (hundreds of ranks ask
//   several times a second). Anything else is the coordinator's to answer.
// - RaiseTotal(trial, batches): the trial's total batches becomes max(total, batches); returns
//   it. Total(trial): the current total (0 for an unknown trial).
// Thread-safe: one mutex of its own, held for a map lookup; never calls out while held.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "steadfast/v1/trial_link.pb.h"

namespace sf::master {

class AllocationRegistry {
 public:
  enum class Admission { kAdmitted, kAskCoordinator };

  void Track(int64_t trial_id, int64_t total_batches);
  void Forget(int64_t trial_id);
  void SetAllocation(int64_t trial_id, const std::string& allocation_id);
  void SetRunning(int64_t trial_id, bool running);

  void SetStop(int64_t trial_id, const std::string& stop);

  Result<Admission> Admit(const steadfast::v1::TrialIdentity& who) const;
  bool Undisturbed(const steadfast::v1::TrialIdentity& who) const;
  int64_t RaiseTotal(int64_t trial_id, int64_t batches);
  int64_t Total(int64_t trial_id) const;

 private:
  struct Entry {
    std::string allocation_id;  // current; "" when none
    bool running = false;       // its manager said it runs
    bool stop_asked = false;    // a stop ("pause", "kill", "preempt") is asked of its run
    int64_t total_batches = 0;
  };
  mutable std::mutex mu_;
  std::map<int64_t, Entry> trials_;
};

}  // namespace sf::master
