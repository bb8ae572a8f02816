#include "master/rm/slurm/slurm_jobs.h"

#include <algorithm>
#include <cstdlib>
#include <set>
#include <sstream>

namespace sf::master::rm::slurm {
namespace {

std::vector<std::string> Split(const std::string& line, char sep) {
  std::vector<std::string> out;
  std::string part;
  std::istringstream in(line);
  while (std::getline(in, part, sep)) out.push_back(part);
  if (!line.empty() && line.back() == sep) out.emplace_back();
  return out;
}

std::string FirstWord(const std::string& s) {
  size_t end = s.find(' ');
  return end == std::string::npos ? s : s.substr(0, end);
}

bool AllDigits(const std::string& s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// A single-quoted shell word.
std::string Quote(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

// One line of `sinfo -N -o '%N|%t[|%E]'`: the node, its compact state and Slurm's reason,
// trimmed. Lines that are not one are skipped.
struct SinfoNode {
  std::string name, state, reason;
};
std::vector<SinfoNode> SinfoNodes(const std::string& output) {
  std::vector<SinfoNode> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = Split(line, '|');
    if (f.size() < 2 || f[0].empty()) continue;
    for (std::string& field : f) {
      while (!field.empty() && (field.back() == ' ' || field.back() == '\r')) field.pop_back();
    }
    out.push_back({f[0], f[1], f.size() > 2 ? f[2] : ""});
  }
  return out;
}

}  // namespace

std::vector<JobStatus> ParseSqueue(const std::string& output) {
  std::vector<JobStatus> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = Split(line, '|');
    if (f.size() < 5 || !AllDigits(f[0])) continue;
    JobStatus j;
    j.id = f[0];
    j.state = FirstWord(f[1]);
    j.reason = f[2];
    j.nodes = f[3];
    // The comment is last: it may itself contain '|'.
    j.comment = f[4];
    for (size_t i = 5; i < f.size(); ++i) j.comment += "|" + f[i];
    out.push_back(std::move(j));
  }
  return out;
}

std::vector<JobStatus> ParseSacct(const std::string& output) {
  std::vector<JobStatus> out;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::vector<std::string> f = Split(line, '|');
    if (f.size() < 4 || !AllDigits(f[0])) continue;
    JobStatus j;
    j.id = f[0];
    j.state = FirstWord(f[1]);
    j.exit_code = f[2];
    j.nodes = f[3];
    out.push_back(std::move(j));
  }
  return out;
}

Result<std::string> ParseSbatchJobId(const std::string& output) {
  std::istringstream in(output);
  std::string line, id;
  while (std::getline(in, line)) {
    std::string first = line.substr(0, line.find(';'));
    while (!first.empty() && (first.back() == '\r' || first.back() == ' ')) first.pop_back();
    if (AllDigits(first)) id = first;
  }
  if (id.empty()) return InvalidArgument("sbatch printed no job id: " + output);
  return id;
}

std::string JobComment(const std::string& cluster_name, const std::string& allocation_id) {
  return "steadfast:" + cluster_name + ":" + allocation_id;
}

std::optional<std::string> AllocationOfComment(const std::string& cluster_name, const std::string& comment) {
  const std::string prefix = "steadfast:" + cluster_name + ":";
  if (comment.rfind(prefix, 0) != 0 || comment.size() == prefix.size()) return std::nullopt;
  return comment.substr(prefix.size());
}

GangShape ShapeOf(int world_size, int slots_per_node) {
  GangShape s;
  const int per = std::max(1, slots_per_node);
  s.nodes = std::max(1, (world_size + per - 1) / per);
  s.tasks_per_node = std::min(std::max(1, world_size), per);
  return s;
}

std::vector<std::string> SbatchArgv(const SlurmPoolConfig& pool, const GangLaunch& launch,
                                    const std::string& job_dir, const std::string& script) {
  const int world = static_cast<int>(launch.ranks.size());
  const GangShape shape = ShapeOf(world, pool.slots_per_node);
  std::vector<std::string> argv = {"sbatch", "--parsable", "--no-requeue",
                                   "--job-name=sf-" + launch.allocation_id,
                                   "--comment=" + JobComment(pool.cluster_name, launch.allocation_id),
                                   "--partition=" + pool.partition,
                                   "--nodes=" + std::to_string(shape.nodes),
                                   "--ntasks=" + std::to_string(world),
                                   "--ntasks-per-node=" + std::to_string(shape.tasks_per_node),
                                   "--cpus-per-task=" + std::to_string(pool.cpus_per_slot),
                                   "--output=" + job_dir + "/slurm-%j.out",
                                   "--chdir=" + job_dir,
                                   "--export=ALL"};
  if (pool.gpus_per_slot > 0) argv.push_back("--gpus-per-task=" + std::to_string(pool.gpus_per_slot));
  const std::string account = launch.requests.account.empty() ? pool.account : launch.requests.account;
  const std::string qos = launch.requests.qos.empty() ? pool.qos : launch.requests.qos;
  if (!account.empty()) argv.push_back("--account=" + account);
  if (!qos.empty()) argv.push_back("--qos=" + qos);
  if (!launch.requests.time.empty()) argv.push_back("--time=" + launch.requests.time);
  argv.insert(argv.end(), pool.sbatch_args.begin(), pool.sbatch_args.end());
  argv.insert(argv.end(), launch.requests.sbatch_args.begin(), launch.requests.sbatch_args.end());
  argv.push_back(script);
  return argv;
}

std::string JobScript(const SlurmPoolConfig& pool, const GangLaunch& launch, const std::string& job_dir) {
  std::string sf_task = pool.sf_task.empty() ? "sf-task" : pool.sf_task;
  std::string cmd = "exec srun --kill-on-bad-exit=1 " + Quote(sf_task) + " --slurm-job " + Quote(job_dir);
  if (!pool.sf_trainer.empty()) cmd += " --trainer " + Quote(pool.sf_trainer);
  if (!pool.sf_serve.empty()) cmd += " --serve " + Quote(pool.sf_serve);
  if (!pool.python_path.empty()) cmd += " --python-path " + Quote(pool.python_path);
  if (!pool.master_ca_file.empty()) cmd += " --master-ca-file " + Quote(pool.master_ca_file);
  return "#!/bin/sh\n"
         "# Steadfast allocation " + launch.allocation_id + " (trial " + std::to_string(launch.trial_id) +
         ", experiment " + std::to_string(launch.experiment_id) + "): " + std::to_string(launch.ranks.size()) +
         " rank(s), one sf-task each; the task tokens come in SF_TASK_TOKENS.\n" + cmd + "\n";
}

bool IsTerminalState(const std::string& s) {
  return s == "COMPLETED" || s == "FAILED" || s == "CANCELLED" || s == "NODE_FAIL" || s == "TIMEOUT" ||
         s == "OUT_OF_MEMORY" || s == "PREEMPTED" || s == "BOOT_FAIL" || s == "DEADLINE" || s == "SPECIAL_EXIT" ||
         s == "REVOKED";
}

bool IsRunningState(const std::string& s) {
  return s == "RUNNING" || s == "CONFIGURING" || s == "COMPLETING" || s == "SUSPENDED" || s == "STAGE_OUT" ||
         s == "SIGNALING" || s == "STOPPED" || s == "RESIZING";
}

std::string FailedNodes(const std::string& sinfo_output) {
  std::set<std::string> seen;
  std::string out;
  for (const SinfoNode& n : SinfoNodes(sinfo_output)) {
    const bool failed = n.state.find('*') != std::string::npos || n.state.rfind("down", 0) == 0 ||
                        n.state.rfind("fail", 0) == 0 || n.state.rfind("unk", 0) == 0;
    if (!failed || !seen.insert(n.name).second) continue;
    out += (out.empty() ? "" : ", ") + n.name + (n.reason.empty() || n.reason == "none" ? "" : " (" + n.reason + ")");
  }
  return out;
}

AllocationEvent ExitedEvent(const std::string& allocation_id, const JobStatus& job, bool killed, int world_size,
                            const std::string& failed_nodes) {
  AllocationEvent e;
  e.kind = AllocationEvent::Kind::kExited;
  e.allocation_id = allocation_id;
  int code = -1;
  if (!job.exit_code.empty()) {
    const std::string status = job.exit_code.substr(0, job.exit_code.find(':'));
    if (AllDigits(status)) code = std::atoi(status.c_str());
  }
  const std::string job_name = "Slurm job " + job.id;
  const std::string on = job.nodes.empty() || job.nodes == "None assigned" ? "" : " on " + job.nodes;
  int rank_code = -1;
  if (job.state == "COMPLETED") {
    rank_code = 0;
  } else if (job.state == "FAILED") {
    rank_code = code > 0 ? code : 1;
    e.reason = job_name + " FAILED" + on + (job.exit_code.empty() ? "" : " (exit " + job.exit_code + ")") +
               ": a rank exited with an error; its output is in the trial's logs";
  } else if (job.state == "CANCELLED") {
    e.cancelled = true;
    e.reason = killed ? job_name + " cancelled by Steadfast"
                      : job_name + " was cancelled outside Steadfast (scancel or an administrator)";
  } else if (job.state == "NODE_FAIL") {
    e.reason = failed_nodes.empty()
                   ? job_name + " NODE_FAIL: a node it ran on" + (on.empty() ? "" : " (" + job.nodes + ")") + " failed"
                   : job_name + " NODE_FAIL: " + failed_nodes + " failed (the job ran on " + job.nodes + ")";
  } else if (job.state == "TIMEOUT") {
    e.reason = job_name + " reached its time limit (TIMEOUT; the experiment's slurm.time)";
  } else if (job.state == "OUT_OF_MEMORY") {
    e.reason = job_name + " ran out of memory" + on + " (OUT_OF_MEMORY)";
  } else if (job.state == "PREEMPTED") {
    e.preempted = true;
    e.reason = job_name + " was preempted by Slurm";
  } else if (job.state == "BOOT_FAIL") {
    e.reason = job_name + " BOOT_FAIL: its nodes could not be booted";
  } else if (job.state == "DEADLINE") {
    e.reason = job_name + " missed its deadline (DEADLINE)";
  } else {
    e.reason = job_name + " ended " + job.state;
  }
  for (int rank = 0; rank < std::max(1, world_size); ++rank) e.exit_codes[rank] = rank_code;
  return e;
}

std::string HeldReason(const JobStatus& job) {
  if (job.state == "SUSPENDED") {
    return "Slurm: SUSPENDED (job " + job.id + "): Slurm suspended it (scontrol suspend or gang scheduling); "
           "it holds its nodes and continues when Slurm resumes it";
  }
  if (job.state == "STOPPED") {
    return "Slurm: STOPPED (job " + job.id + "): its processes were stopped (SIGSTOP, e.g. scancel "
           "--signal=STOP); it continues when they get SIGCONT";
  }
  return "";
}

PoolSize ParseSinfoNodes(const std::string& output, int slots_per_node) {
  static const std::set<std::string> kUsable = {"idle", "alloc", "allocated", "mix", "mixed", "comp",
                                                "completing", "resv", "reserved", "plnd", "planned"};
  std::set<std::string> up;
  for (const SinfoNode& n : SinfoNodes(output)) {
    // The flags sinfo appends: * not responding, ~ # ! % powered off, powering up or down,
    // $ @ ^ - + reservation and reboot marks (still usable).
    const size_t at = n.state.find_first_of("*~#!%$@^-+");
    if (at != std::string::npos && n.state.find_first_of("*~#!%", at) != std::string::npos) continue;
    if (kUsable.count(n.state.substr(0, at))) up.insert(n.name);
  }
  PoolSize size;
  size.known = true;
  size.nodes = static_cast<int>(up.size());
  size.slots = size.nodes * std::max(1, slots_per_node);
  return size;
}

std::string PendingReason(const JobStatus& job) {
  const std::string reason = job.reason.empty() || job.reason == "None" ? "submitted, not yet scheduled" : job.reason;
  return "Slurm: " + reason + " (job " + job.id + ")";
}

}  // namespace sf::master::rm::slurm
