// Resource pools in the master's config file (docs/slurm.md "What the admin configures"):
//
//   resource_pools:
//     - name: hpc              # the pool experiments name in resources.resource_pool
//       manager: slurm         # or agents (the default for every pool not listed)
//       partition: gpu         # required for slurm
//       account: ml            # optional: sbatch --account (an experiment's slurm.account wins)
//       qos: normal            # optional: sbatch --qos (an experiment's slurm.qos wins)
//       slots_per_node: 4      # ranks per node (a gang of 8 is --nodes 2 --ntasks-per-node 4)
//       cpus_per_slot: 8       # sbatch --cpus-per-task
//       gpus_per_slot: 1       # sbatch --gpus-per-task (0: CPU ranks)
//       master_address: 10.0.0.5:8090   # what ranks dial (default: the master's advertised one)
//       master_ca_file: /shared/steadfast/ca.pem   # the master's CA as the nodes see it (TLS)
//       job_dir: /shared/steadfast/slurm-jobs      # job scripts and rank directories (shared)
//       sf_task: /usr/bin/sf-task                  # programs as the nodes see them
//       sf_trainer: /usr/bin/sf-trainer
//       sf_serve: /usr/bin/sf-serve
//       python_path: /usr/lib/python3/dist-packages   # the `steadfast` package, for user code
//       sbatch_args: ["--exclusive"]              # added to every job's sbatch arguments
//       slurm_conf: /etc/slurm/slurm.conf         # SLURM_CONF for the tools (default: theirs)
//       poll_seconds: 2                           # how often squeue is asked
//       job_dir_keep_hours: 24                    # an ended job's directory is removed after this
//
// Unknown keys, missing required keys and bad values are errors naming the pool and the key.
#pragma once

#include <string>
#include <vector>

#include <yaml-cpp/yaml.h>

#include "common/status.h"

namespace sf::master::rm {

struct SlurmPoolConfig {
  std::string partition, account, qos;
  int slots_per_node = 1;
  int cpus_per_slot = 1;
  int gpus_per_slot = 0;
  std::string master_address, master_ca_file, job_dir;
  std::string sf_task, sf_trainer, sf_serve, python_path;
  std::vector<std::string> sbatch_args;
  std::string slurm_conf;
  double poll_seconds = 2;
  int job_dir_keep_hours = 24;  // 0: removed at the first pass after the job ended
  std::string cluster_name;  // the master's cluster_name: tags its jobs (set by the master)
};

struct PoolConfig {
  std::string name;
  std::string manager = "agents";  // "agents" | "slurm"
  SlurmPoolConfig slurm;
};

// `node` is the value of `resource_pools` in `file`.
Result<std::vector<PoolConfig>> ParsePoolConfigs(const YAML::Node& node, const std::string& file);

}  // namespace sf::master::rm
