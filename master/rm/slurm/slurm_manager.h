// The Slurm resource manager (master/rm/resource_manager.h; docs/slurm.md): one pool's gangs
// as Slurm jobs, through the Slurm client tools (sbatch, squeue, sacct, scancel, scontrol).
//
// - Submit: on its own thread, writes <job_dir>/<allocation>/ (job.sh, one rank-N.pb StartTask
//   per rank without its token, 0700/0600) and runs `sbatch --parsable --no-requeue` (arguments:
//   slurm_jobs.h SbatchArgv) with an environment of its own making: PATH, HOME, LANG, SLURM_CONF
//   and SF_TASK_TOKENS (the ranks' tokens, comma-separated; `--export=ALL` hands them to the job
//   and srun to each rank, whose sf-task takes its own by SLURM_PROCID). Nothing else of the
//   master's environment reaches a job. sbatch refusing the job is an Exited event with
//   `refused` and sbatch's message.
// - Watch: every poll_seconds, `squeue -h -t all --me -o '%i|%T|%r|%N|%k'` gives each tracked
//   job's state; a job that ended is asked of `sacct` for its exit code (plain sacct; `sacct -c`,
//   the job completion log, where there is no slurmdbd). A tracked job that neither squeue nor
//   sacct knows for 60 s ends the allocation with a reason saying so.
// - Kill: `scancel <job>`; Slurm sends the ranks SIGTERM, then SIGKILL after its KillWait.
// - Start: the first pass cancels the jobs tagged with this master's comment
//   (`steadfast:<cluster_name>:<allocation>`) that no one adopted.
// - Prune: at the first pass and hourly, job_dir's allocation directories that no job being
//   watched or submitted owns and that were last changed job_dir_keep_hours ago are removed.
// Thread-safe; the tools run on the manager's thread only, never under the coordinator's lock.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "master/rm/pool_config.h"
#include "master/rm/resource_manager.h"
#include "master/rm/slurm/slurm_jobs.h"

namespace sf::master::rm::slurm {

class SlurmManager : public ResourceManager {
 public:
  SlurmManager(std::string pool_name, SlurmPoolConfig config);
  ~SlurmManager() override;

  std::string Kind() const override { return "slurm"; }
  // sbatch, squeue, scancel and sacct run; the partition exists (scontrol show partition).
  Status Check() override;
  void SetEventSink(EventSink sink) override;
  void Start() override;
  void Stop() override;
  void Submit(GangLaunch launch) override;
  void Adopt(const GangLaunch& gang, const std::string& external_id) override;
  void Kill(const std::string& allocation_id) override;
  // The partition's responding nodes and their slots (slots_per_node each), from sinfo, polled
  // with the jobs (at most every 30 s).
  PoolSize Size() const override;
  // Its one pool's size, as Size() (known once sinfo answered); unknown for any other pool.
  PoolSize Capacity(const std::string& pool) const override;
  std::vector<std::string> PoolNames() const override { return {pool_}; }
  // Its pool: "slurm" as the scheduler, the partition's nodes and slots, the slots of the jobs
  // Slurm runs, and the jobs it queues (or has yet to submit).
  std::vector<steadfast::v1::ResourcePool> Pools() const override;
  // Slurm's nodes are not Steadfast agents: none.
  std::vector<steadfast::v1::Agent> Agents() const override { return {}; }

 private:
  struct Job {
    std::string allocation_id, job_id;
    int world_size = 1;
    std::string last_reason;
    std::string held_reason;  // while running: why Slurm holds it (SUSPENDED), "" otherwise
    bool running = false;
    bool killed = false;        // Kill asked for it: its CANCELLED is ours
    bool cancel_sent = false;
    std::chrono::steady_clock::time_point last_seen;  // last listed by squeue or sacct
  };
  void Loop();
  // One pass: submissions, cancellations, the orphan sweep (first pass), the poll. Returns the
  // events to deliver (outside mu_).
  std::vector<AllocationEvent> Pass(bool sweep);
  AllocationEvent SubmitNow(const GangLaunch& launch, std::string* job_id);
  Result<std::string> Tool(const std::vector<std::string>& argv, const std::map<std::string, std::string>& extra_env = {});
  std::map<std::string, std::string> ToolEnv() const;
  std::vector<JobStatus> Sacct(const std::vector<std::string>& ids);
  void PruneJobDirs();

  const std::string pool_;
  const SlurmPoolConfig config_;
  EventSink sink_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false, started_ = false;
  std::thread thread_;
  std::deque<GangLaunch> to_submit_;
  std::vector<std::pair<std::string, int>> withdrawn_;  // killed before sbatch: (allocation, ranks)
  std::map<std::string, Job> jobs_;  // by allocation id
  std::set<std::string> killed_in_flight_;  // Kill for an allocation Pass was submitting
  // sacct: plain (slurmdbd) until it says accounting is disabled, then -c (job completion log).
  bool sacct_completion_ = false;
  std::chrono::steady_clock::time_point last_prune_{};
  // Size(): the last sinfo answer, and when it was asked for.
  mutable std::mutex size_mu_;
  PoolSize size_;
  std::chrono::steady_clock::time_point last_sinfo_{};
  void PollSize();
};

}  // namespace sf::master::rm::slurm
