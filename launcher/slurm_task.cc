#include "launcher/slurm_task.h"

#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>

#include "common/env.h"
#include "task/task_environment.h"
#include "task/user_task.h"
#include "common/read_file.h"
#include "launcher/task_launcher.h"
#include "steadfast/v1/agent_link.pb.h"

namespace sf::launcher {
namespace fs = std::filesystem;

namespace {

int Refuse(const std::string& why) {
  std::cerr << "sf-task: " << why << "\n";
  return 2;
}

bool WholeNumber(const std::string& s, int& out) {
  if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::atoi(s.c_str());
  return true;
}

}  // namespace

std::vector<int> ParseTasksPerNode(const std::string& text) {
  std::vector<int> out;
  std::stringstream in(text);
  std::string part;
  while (std::getline(in, part, ',')) {
    int count = 0, times = 1;
    const size_t paren = part.find("(x");
    if (paren != std::string::npos) {
      if (part.back() != ')' || !WholeNumber(part.substr(paren + 2, part.size() - paren - 3), times)) return {};
      part = part.substr(0, paren);
    }
    if (!WholeNumber(part, count) || times < 1 || times > 100000) return {};
    out.insert(out.end(), times, count);
  }
  return out;
}

int RunSlurmTask(const SlurmTaskOptions& options) {
  int rank = 0, ntasks = 0;
  if (!WholeNumber(Env("SLURM_PROCID"), rank)) return Refuse("SLURM_PROCID is not set: run under srun in a Slurm job");
  if (!WholeNumber(Env("SLURM_NTASKS"), ntasks)) return Refuse("SLURM_NTASKS is not set: run under srun in a Slurm job");
  const fs::path spec_file = fs::path(options.job_dir) / ("rank-" + std::to_string(rank) + ".pb");
  std::ifstream in(spec_file, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  steadfast::v1::StartTask start;
  if (!in || !start.ParseFromString(bytes.str())) return Refuse("cannot read rank " + std::to_string(rank) + "'s task from " + spec_file.string());
  if (start.rank() != rank) return Refuse(spec_file.string() + " is rank " + std::to_string(start.rank()) + "'s, not " + std::to_string(rank) + "'s");
  if (start.world_size() != ntasks) {
    return Refuse("the job has " + std::to_string(ntasks) + " tasks (SLURM_NTASKS) but the gang " +
                  std::to_string(start.world_size()) + " ranks");
  }
  // The rank's token: the rank-th of SF_TASK_TOKENS (absent when the master issues none).
  const std::string tokens = Env("SF_TASK_TOKENS");
  if (!tokens.empty()) {
    std::vector<std::string> list;
    std::stringstream t(tokens);
    std::string one;
    while (std::getline(t, one, ',')) list.push_back(one);
    if (static_cast<int>(list.size()) != ntasks) {
      return Refuse("SF_TASK_TOKENS has " + std::to_string(list.size()) + " tokens for " + std::to_string(ntasks) + " ranks");
    }
    start.set_task_token(list[rank]);
  }
  ::unsetenv("SF_TASK_TOKENS");  // the others' tokens are not this rank's program's business
  // Local rank and size on this node.
  int local_rank = 0, node = 0;
  (void)WholeNumber(Env("SLURM_LOCALID"), local_rank);
  (void)WholeNumber(Env("SLURM_NODEID"), node);
  std::vector<int> per_node = ParseTasksPerNode(Env("SLURM_TASKS_PER_NODE"));
  const int local_size = node < static_cast<int>(per_node.size()) ? per_node[node] : 1;
  start.set_local_rank(local_rank);
  start.set_local_size(local_size);
  start.add_slot_ids("slurm-cpu");  // one CPU slot: OMP_NUM_THREADS from --cpus-per-task

  const fs::path task_dir = fs::path(options.job_dir) / ("rank-" + std::to_string(rank));
  std::error_code ec;
  fs::create_directories(task_dir, ec);
  if (ec) return Refuse("cannot create the task directory " + task_dir.string() + ": " + ec.message());
  const fs::path config_file = task_dir / "experiment.yaml";
  {
    std::ofstream out(config_file, std::ios::binary | std::ios::trunc);
    out << start.config_yaml();
    if (!out) return Refuse("cannot write " + config_file.string());
  }
  std::string ca_pem;
  if (!options.master_ca_file.empty()) {
    ca_pem = ReadFileOrEmpty(options.master_ca_file);
    if (ca_pem.empty()) return Refuse("--master-ca-file: cannot read " + options.master_ca_file);
  }
  std::vector<std::string> argv = {options.trainer, "cluster"};
  fs::path working_dir = task_dir;
  if (!start.entrypoint().empty()) {
    const fs::path code = task_dir / "code";
    if (!start.context_sha256().empty()) {
      task::ContextCache contexts(task_dir.string(), ca_pem);
      Result<std::string> archive = contexts.Get(start, start.master_address());
      Status unpacked = archive.ok() ? task::UnpackTaskContext(*archive, code.string()) : archive.status();
      if (!unpacked.ok()) return Refuse("context: " + unpacked.message());
    } else {
      fs::create_directories(code, ec);
    }
    argv = task::EntrypointArgv(start, {{"sf-trainer", options.trainer}, {"sf-serve", options.serve}});
    working_dir = code;
  }
  int cpus = 0;
  (void)WholeNumber(Env("SLURM_CPUS_PER_TASK"), cpus);
  const std::string node_name = Env("SLURMD_NODENAME");
  steadfast::v1::Slot slot;
  slot.set_id("slurm-cpu");
  slot.set_type(steadfast::v1::SLOT_TYPE_CPU);
  std::map<std::string, std::string> env =
      task::TaskEnvironment(start, config_file.string(), task_dir.string(), "slurm:" + node_name,
                             start.master_address(), cpus, {slot});
  if (!options.master_ca_file.empty()) env["SF_MASTER_CA_FILE"] = options.master_ca_file;
  if (!start.entrypoint().empty()) {
    // The `steadfast` package: given, or beside this sf-task as the agent finds its own
    // (build/python from build/launcher, lib/steadfast/python when installed).
    std::string python_path = options.python_path;
    const fs::path bin = fs::read_symlink("/proc/self/exe", ec).parent_path();
    for (const fs::path& candidate : {bin / ".." / "python", bin / ".." / "lib" / "steadfast" / "python"}) {
      if (!python_path.empty()) break;
      if (fs::exists(candidate / "steadfast" / "__init__.py", ec)) python_path = candidate.lexically_normal().string();
    }
    task::AddUserTaskEnvironment(start, python_path, env);
  }
  // The program must not think srun launched it as an MPI rank: Open MPI sees SLURM_* (and
  // PMI*) and tries Slurm's PMI, which it is not built with, instead of the master's rendezvous.
  // The job id and node stay visible as SF_SLURM_JOB_ID and SF_SLURM_NODE.
  env["SF_SLURM_JOB_ID"] = Env("SLURM_JOB_ID");
  env["SF_SLURM_NODE"] = node_name;
  std::vector<std::string> scrub;
  for (char** e = environ; *e; ++e) {
    const std::string name(*e, std::strchr(*e, '=') ? std::strchr(*e, '=') - *e : std::strlen(*e));
    if (name.rfind("SLURM_", 0) == 0 || name.rfind("SLURMD_", 0) == 0 || name.rfind("PMI_", 0) == 0 ||
        name.rfind("PMIX_", 0) == 0) {
      scrub.push_back(name);
    }
  }
  for (const std::string& name : scrub) ::unsetenv(name.c_str());
  for (const auto& [k, v] : env) ::setenv(k.c_str(), v.c_str(), 1);
  if (::chdir(working_dir.c_str()) != 0) return Refuse("cannot enter " + working_dir.string());
  TaskOptions task;
  task.argv = argv;
  task.drain = options.drain;
  task.stderr_copy = (task_dir / "stderr.log").string();
  task.report_exit = true;  // no agent tells the master why this rank failed
  return RunTask(task);
}

}  // namespace sf::launcher
