#include "master/rm/pool_config.h"

#include <cmath>
#include <set>

namespace sf::master::rm {
namespace {

std::string Where(const std::string& file, const YAML::Node& node, const std::string& what) {
  const YAML::Mark mark = node.Mark();
  std::string at = file;
  if (mark.line >= 0) at += ":" + std::to_string(mark.line + 1);
  return at + ": " + what;
}

Result<std::string> Scalar(const std::string& file, const std::string& key, const YAML::Node& v) {
  if (!v.IsScalar()) return InvalidArgument(Where(file, v, key + ": expected a value"));
  return v.Scalar();
}

Result<int> Count(const std::string& file, const std::string& key, const YAML::Node& v, int lo, int hi) {
  SF_ASSIGN_OR_RETURN(std::string text, Scalar(file, key, v));
  try {
    size_t used = 0;
    const long n = std::stol(text, &used);
    if (used == text.size() && n >= lo && n <= hi) return static_cast<int>(n);
  } catch (...) {
  }
  return InvalidArgument(Where(file, v, key + ": \"" + text + "\" must be a whole number from " +
                                            std::to_string(lo) + " to " + std::to_string(hi)));
}

}  // namespace

Result<std::vector<PoolConfig>> ParsePoolConfigs(const YAML::Node& node, const std::string& file) {
  if (!node.IsSequence()) {
    return InvalidArgument(Where(file, node, "resource_pools: expected a list of pools ({name: ..., manager: ...})"));
  }
  std::vector<PoolConfig> out;
  std::set<std::string> names;
  for (const YAML::Node& item : node) {
    if (!item.IsMap()) return InvalidArgument(Where(file, item, "resource_pools: each pool must be a mapping"));
    PoolConfig pool;
    if (!item["name"]) return InvalidArgument(Where(file, item, "resource_pools: a pool has no name"));
    SF_ASSIGN_OR_RETURN(pool.name, Scalar(file, "resource_pools: name", item["name"]));
    const std::string at = "resource_pools: " + pool.name + ": ";
    if (pool.name.empty()) return InvalidArgument(Where(file, item, "resource_pools: a pool's name is empty"));
    if (!names.insert(pool.name).second) {
      return InvalidArgument(Where(file, item, "resource_pools: pool \"" + pool.name + "\" is listed twice"));
    }
    SlurmPoolConfig& s = pool.slurm;
    for (const auto& kv : item) {
      const std::string key = kv.first.Scalar();
      const YAML::Node& v = kv.second;
      if (key == "name") continue;
      if (key == "manager") {
        SF_ASSIGN_OR_RETURN(pool.manager, Scalar(file, at + key, v));
        if (pool.manager != "agents" && pool.manager != "slurm") {
          return InvalidArgument(Where(file, v, at + "manager: \"" + pool.manager + "\" is not agents or slurm"));
        }
      } else if (key == "partition") {
        SF_ASSIGN_OR_RETURN(s.partition, Scalar(file, at + key, v));
      } else if (key == "account") {
        SF_ASSIGN_OR_RETURN(s.account, Scalar(file, at + key, v));
      } else if (key == "qos") {
        SF_ASSIGN_OR_RETURN(s.qos, Scalar(file, at + key, v));
      } else if (key == "slots_per_node") {
        SF_ASSIGN_OR_RETURN(s.slots_per_node, Count(file, at + key, v, 1, 4096));
      } else if (key == "cpus_per_slot") {
        SF_ASSIGN_OR_RETURN(s.cpus_per_slot, Count(file, at + key, v, 1, 4096));
      } else if (key == "gpus_per_slot") {
        SF_ASSIGN_OR_RETURN(s.gpus_per_slot, Count(file, at + key, v, 0, 64));
      } else if (key == "master_address") {
        SF_ASSIGN_OR_RETURN(s.master_address, Scalar(file, at + key, v));
      } else if (key == "master_ca_file") {
        SF_ASSIGN_OR_RETURN(s.master_ca_file, Scalar(file, at + key, v));
      } else if (key == "job_dir") {
        SF_ASSIGN_OR_RETURN(s.job_dir, Scalar(file, at + key, v));
      } else if (key == "sf_task") {
        SF_ASSIGN_OR_RETURN(s.sf_task, Scalar(file, at + key, v));
      } else if (key == "sf_trainer") {
        SF_ASSIGN_OR_RETURN(s.sf_trainer, Scalar(file, at + key, v));
      } else if (key == "sf_serve") {
        SF_ASSIGN_OR_RETURN(s.sf_serve, Scalar(file, at + key, v));
      } else if (key == "python_path") {
        SF_ASSIGN_OR_RETURN(s.python_path, Scalar(file, at + key, v));
      } else if (key == "slurm_conf") {
        SF_ASSIGN_OR_RETURN(s.slurm_conf, Scalar(file, at + key, v));
      } else if (key == "poll_seconds") {
        SF_ASSIGN_OR_RETURN(std::string text, Scalar(file, at + key, v));
        char* end = nullptr;
        s.poll_seconds = std::strtod(text.c_str(), &end);
        if (text.empty() || *end != '\0' || !std::isfinite(s.poll_seconds) || s.poll_seconds < 0.1 ||
            s.poll_seconds > 300) {
          return InvalidArgument(Where(file, v, at + "poll_seconds: \"" + text + "\" must be from 0.1 to 300"));
        }
      } else if (key == "job_dir_keep_hours") {
        SF_ASSIGN_OR_RETURN(s.job_dir_keep_hours, Count(file, at + key, v, 0, 24 * 365));
      } else if (key == "sbatch_args") {
        if (!v.IsSequence()) return InvalidArgument(Where(file, v, at + "sbatch_args: expected a list of strings"));
        for (const YAML::Node& a : v) {
          SF_ASSIGN_OR_RETURN(std::string arg, Scalar(file, at + "sbatch_args", a));
          s.sbatch_args.push_back(arg);
        }
      } else {
        return InvalidArgument(Where(file, kv.first, at + "unknown key \"" + key + "\""));
      }
    }
    if (pool.manager == "slurm" && s.partition.empty()) {
      return InvalidArgument(Where(file, item, at + "a slurm pool needs a partition"));
    }
    out.push_back(std::move(pool));
  }
  return out;
}

}  // namespace sf::master::rm
