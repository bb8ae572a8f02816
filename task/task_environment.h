// What a process the cluster starts is told: the task environment, one library for every
// launcher (the agent, agent/agent.h; sf-task under Slurm, launcher/slurm_task.h). A task is
// what an allocation runs — a trial's rank, a server — and its StartTask says everything; this
// turns it into the process's environment.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "steadfast/v1/agent_link.pb.h"

namespace sf::task {

// The trainer's environment for a StartTask, on top of StartTask.env (SF_* win):
//   SF_MASTER_ADDRESS  StartTask.master_address (the agent's --master when empty)
//   SF_TASK_ID, SF_TRIAL_ID, SF_EXPERIMENT_ID (these two only for a trial's rank: not for a
//   task of its own, a command or server), SF_RANK, SF_WORLD_SIZE, SF_RESTART
//   SF_CHECKPOINT_DIR, SF_RESTORE_CHECKPOINT (may be empty), SF_LATEST_CHECKPOINT (its uuid)
//   SF_RESTORE_FALLBACKS  when the restore checkpoint fails verification: the trial's other
//                      intact checkpoints, newest first, as a JSON list of {"uuid", "path"}
//                      (only set when there are some)
//   SF_CONFIG_FILE     <task dir>/experiment.yaml
//   SF_HPARAMS         StartTask.hparams as JSON (protobuf JSON mapping)
//   SF_SLOT_IDS        comma-separated slot ids ("cpu0,cpu1")
//   SF_AGENT_ID, SF_TASK_DIR
//   (SF_MASTER_CA_FILE  the agent's --master-ca-file, so the trainer dials TrialLink over TLS
//                      too; added by the Agent, not by TaskEnvironment)
//   CUDA_VISIBLE_DEVICES  the task's cuda slots (only when it has any): their GPU UUIDs, as
//                      `agent_slots` has them ("GPU-5a8f...,GPU-0c1d..."), so NVML's numbering
//                      and CUDA's cannot disagree; when one of them has no UUID, their CUDA
//                      ordinals ("0,1"), and then also CUDA_DEVICE_ORDER=PCI_BUS_ID (the order
//                      NVML's indices and the agent's detection use)
//   OMP_NUM_THREADS    cpu_threads_per_slot x the task's CPU slots, when that is > 0 and the
//                      task has CPU slots, unless StartTask.env sets it (so trainers sharing a
//                      machine don't oversubscribe its cores)
std::map<std::string, std::string> TaskEnvironment(const steadfast::v1::StartTask& task,
                                                   const std::string& config_file,
                                                   const std::string& task_dir,
                                                   const std::string& agent_id,
                                                   const std::string& default_master,
                                                   int cpu_threads_per_slot = 0,
                                                   const std::vector<steadfast::v1::Slot>& agent_slots = {});

// The CUDA ordinal of a slot id ("cuda3" -> 3); -1 for any other slot ("cpu0").
int CudaOrdinalOfSlot(const std::string& slot_id);

}  // namespace sf::task
