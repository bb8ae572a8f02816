// sf-task --slurm-job DIR: one rank of a gang the Slurm resource manager submitted
// (master/rm/slurm/slurm_manager.h; docs/slurm.md "On the nodes"). srun starts one per rank.
//
// Contract:
// - The rank is SLURM_PROCID; SLURM_NTASKS must equal the gang's world size. The rank's
//   StartTask is DIR/rank-<rank>.pb (written by the master without its token); its task token
//   is the rank-th of SF_TASK_TOKENS (comma-separated, from the job's environment). A missing
//   or malformed piece is exit 2 with a message naming it.
// - What the agent does for a StartTask, on this node: the task directory DIR/rank-<rank>
//   (experiment.yaml in it), a user trial's context fetched from the master and unpacked into
//   <task dir>/code, the environment of task/task_environment.h (SF_AGENT_ID is
//   "slurm:<node>", one CPU slot whose OMP_NUM_THREADS is SLURM_CPUS_PER_TASK; the GPUs Slurm
//   gave stay in CUDA_VISIBLE_DEVICES) plus user_task.h's (the `steadfast` package from
//   --python-path, else beside sf-task as the agent finds it), SF_LOCAL_RANK/SF_LOCAL_SIZE from
//   SLURM_LOCALID and SLURM_TASKS_PER_NODE; then the trainer (`sf-trainer cluster`) or the
//   entrypoint runs under RunTask (task_launcher.h), which ships its output to the master.
// - The program sees no SLURM_*, SLURMD_*, PMI_* or PMIX_* variable (Open MPI would take them
//   for an srun direct launch and skip the master's rendezvous); SF_SLURM_JOB_ID and
//   SF_SLURM_NODE say where it runs.
// - The exit status is the program's: srun's --kill-on-bad-exit stops the other ranks when one
//   fails, and the job's state tells the master. A rank whose program failed (exit status
//   1-128) first tells the master why (TrialLink ReportExit with task::FailureReason (task/user_task.h) over
//   its stderr, kept in <task dir>/stderr.log): "rank 1 on slurm:node2: ValueError: bad shape".
#pragma once

#include <chrono>
#include <string>
#include <vector>

namespace sf::launcher {

struct SlurmTaskOptions {
  std::string job_dir;
  std::string trainer = "sf-trainer";
  std::string serve = "sf-serve";
  std::string python_path;
  std::string master_ca_file;
  std::chrono::seconds drain{30};
};

int RunSlurmTask(const SlurmTaskOptions& options);

// SLURM_TASKS_PER_NODE ("2(x3),1") expanded, one count per node ({2, 2, 2, 1}); empty when
// malformed.
std::vector<int> ParseTasksPerNode(const std::string& text);

}  // namespace sf::launcher
