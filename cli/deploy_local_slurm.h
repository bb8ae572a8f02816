// `sf deploy local up --slurm` (docs/slurm.md "The embedded default"): the local cluster's
// trials run as Slurm jobs on a real Slurm cluster on this machine (deploy/local-slurm.sh:
// munged, slurmctld, two slurmd nodes in network and UTS namespaces of their own) instead of on
// agents. Root only (namespaces). Its state lives in DIR/slurm; `down` stops it too.
#pragma once

#include <string>

#include "common/status.h"

namespace sf::cli {

struct LocalSlurm {
  std::string dir;         // DIR/slurm
  std::string slurm_conf;  // DIR/slurm/slurm.conf
  std::string host_addr;   // the host's address on the nodes' bridge: the master listens there
  std::string partition;   // the one partition, every node in it
  std::string nodes;       // "node1,node2"
};

// A deploy/ script (local-slurm.sh, local-s3.sh): beside sf (installed: ../share/steadfast/) or
// in the source tree; "" when neither has it.
std::string DeployScript(const std::string& name);
inline std::string LocalSlurmScript() { return DeployScript("local-slurm.sh"); }

// Starts the Slurm cluster in DIR/slurm, or finds it running; its address and partition.
Result<LocalSlurm> StartLocalSlurm(const std::string& deploy_dir);
// Stops it if DIR/slurm has one; says so on stdout.
void StopLocalSlurm(const std::string& deploy_dir);

// Writes DIR/master-slurm.yaml: the master's default pool is the partition (manager: slurm),
// its ranks run `sf_task` with `sf_trainer`/`sf_serve`, and verify the master with `ca_file`
// (empty without TLS). Returns the file's path.
Result<std::string> WriteSlurmMasterConfig(const std::string& deploy_dir, const LocalSlurm& slurm,
                                           const std::string& sf_task, const std::string& sf_trainer,
                                           const std::string& sf_serve, const std::string& ca_file);

}  // namespace sf::cli
