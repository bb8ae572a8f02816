#include "cli/deploy_local_slurm.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>

#include "common/subprocess.h"

namespace sf::cli {
namespace fs = std::filesystem;

std::string DeployScript(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec).parent_path();
  for (fs::path p : {self / ".." / "share" / "steadfast" / name, fs::path(SF_SOURCE_DIR) / "deploy" / name}) {
    if (fs::exists(p, ec)) return fs::weakly_canonical(p).string();
  }
  return "";
}

namespace {

Result<LocalSlurm> ReadEnv(const std::string& dir) {
  std::ifstream in(dir + "/env");
  if (!in) return NotFound(dir + "/env: the Slurm cluster wrote no environment file");
  std::map<std::string, std::string> env;
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find('=');
    if (eq != std::string::npos) env[line.substr(0, eq)] = line.substr(eq + 1);
  }
  LocalSlurm s{dir, env["SLURM_CONF"], env["SF_SLURM_HOST_ADDR"], env["SF_SLURM_PARTITION"], env["SF_SLURM_NODES"]};
  if (s.slurm_conf.empty() || s.host_addr.empty() || s.partition.empty()) {
    return InvalidArgument(dir + "/env: SLURM_CONF, SF_SLURM_HOST_ADDR or SF_SLURM_PARTITION is missing");
  }
  return s;
}

}  // namespace

Result<LocalSlurm> StartLocalSlurm(const std::string& deploy_dir) {
  if (geteuid() != 0) {
    return FailedPrecondition("--slurm needs root: the local Slurm cluster's nodes are network namespaces "
                              "and slurmd runs as root (sudo sf deploy local up --slurm)");
  }
  const std::string script = LocalSlurmScript();
  if (script.empty()) return NotFound("cannot find local-slurm.sh (share/steadfast/ beside sf, or deploy/)");
  const std::string dir = deploy_dir + "/slurm";
  CommandOptions o;
  o.timeout = std::chrono::minutes(3);
  std::error_code ec;
  if (fs::exists(dir + "/cluster.env", ec)) {
    auto status = RunCommand({script, "status", dir}, o);
    if (status.ok() && status->exit_code == 0) return ReadEnv(dir);
    (void)RunCommand({script, "down", dir}, o);  // half up: start clean
  }
  std::cout << "starting a local Slurm cluster in " << dir << "\n" << std::flush;
  auto up = RunCommand({script, "up", dir}, o);
  if (!up.ok()) return up.status();
  if (up->exit_code != 0) {
    return FailedPrecondition("the local Slurm cluster did not start (" + script + " up " + dir + "):\n" + up->output);
  }
  return ReadEnv(dir);
}

void StopLocalSlurm(const std::string& deploy_dir) {
  const std::string dir = deploy_dir + "/slurm";
  std::error_code ec;
  if (!fs::exists(dir + "/cluster.env", ec)) return;
  const std::string script = LocalSlurmScript();
  if (script.empty()) {
    std::cerr << "sf deploy local: cannot find local-slurm.sh to stop the Slurm cluster in " << dir << "\n";
    return;
  }
  CommandOptions o;
  o.timeout = std::chrono::minutes(3);
  auto down = RunCommand({script, "down", dir}, o);
  if (down.ok() && down->exit_code == 0) {
    std::cout << "stopped the local Slurm cluster\n";
  } else {
    std::cerr << "sf deploy local: stopping the Slurm cluster: " << (down.ok() ? down->output : down.status().message())
              << "\n";
  }
}

Result<std::string> WriteSlurmMasterConfig(const std::string& deploy_dir, const LocalSlurm& slurm,
                                           const std::string& sf_task, const std::string& sf_trainer,
                                           const std::string& sf_serve, const std::string& ca_file) {
  const std::string file = deploy_dir + "/master-slurm.yaml";
  std::ofstream out(file, std::ios::trunc);
  out << "# Written by `sf deploy local up --slurm`: every trial of the default pool is a Slurm job\n"
      << "# on the local Slurm cluster in " << slurm.dir << " (docs/slurm.md).\n"
      << "resource_pools:\n"
      << "  - name: default\n"
      << "    manager: slurm\n"
      << "    partition: " << slurm.partition << "\n"
      << "    slots_per_node: 1\n"
      << "    cpus_per_slot: 1\n"
      << "    job_dir: " << deploy_dir << "/slurm-jobs\n"
      << "    sf_task: " << sf_task << "\n"
      << "    sf_trainer: " << sf_trainer << "\n"
      << (sf_serve.empty() ? "" : "    sf_serve: " + sf_serve + "\n")
      << (ca_file.empty() ? "" : "    master_ca_file: " + ca_file + "\n")
      << "    slurm_conf: " << slurm.slurm_conf << "\n"
      << "    poll_seconds: 1\n";
  out.close();
  if (!out) return Internal("cannot write " + file);
  return file;
}

}  // namespace sf::cli
