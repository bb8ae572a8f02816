// Trials as rows of the one task list (`sf task list`, the dashboard's Tasks page; docs/tasks.md
// "One task list"): an experiment's trials are tasks of kind TRIAL beside servers, commands,
// notebooks and shells (master/tasks/task_store.h), so one list answers "what holds the
// cluster's slots, and whose is it".
//
// Contract:
// - TrialTasks(db, include_ended): every trial not yet ended (QUEUED, RUNNING, PAUSED), oldest
//   first, and with `include_ended` also the newest 100 that ended; each a steadfast.v1.Task of
//   kind TRIAL whose `id` is the trial's id and `experiment_id` its experiment's.
// - The trial's state in the tasks' words: QUEUED and RUNNING as stored (a RUNNING trial whose
//   stop was asked for is STOPPING), PAUSED, COMPLETED, CANCELED -> STOPPED, ERROR -> FAILED.
// - Owner, workspace and priority are its experiment's; slots and resource pool its
//   experiment's resources; `entrypoint` its experiment's (a native trial's: sf-trainer); the
//   agent and allocation are its newest allocation's (the agent only while that one runs).
// - The pending reason is not stored: the caller adds the coordinator's (Cluster::PendingReason).
// - One read transaction; each experiment's configuration is parsed once per call.
#pragma once

#include <vector>

#include "common/status.h"
#include "master/db/database.h"
#include "steadfast/v1/tasks.pb.h"

namespace sf::master {

inline constexpr char kTrialTaskKind[] = "TRIAL";

Result<std::vector<steadfast::v1::Task>> TrialTasks(Database* db, bool include_ended);

// The task-list state of a trial stored as `state` ("ERROR" -> "FAILED"; see above).
std::string TrialTaskState(const std::string& state, bool stop_requested);

}  // namespace sf::master
