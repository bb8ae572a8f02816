#include "bench/sim/scenario.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <filesystem>
#include <sstream>
#include <stdexcept>
#include <type_traits>

namespace sf::sim {
namespace fs = std::filesystem;

sf::Result<Scenario> LoadScenario(const std::string& path) {
  Scenario s;
  try {
    YAML::Node root = YAML::LoadFile(path);
    auto get = [](const YAML::Node& node, const char* key, auto& out, const std::string& where) {
      if (!node[key]) return;
      try {
        out = node[key].as<std::remove_reference_t<decltype(out)>>();
      } catch (const YAML::Exception&) {
        throw std::runtime_error(where + key + ": not a valid value");
      }
    };
    s.name = fs::path(path).stem().string();
    get(root, "name", s.name, "");
    get(root, "agents", s.agents, "");
    get(root, "slots_per_agent", s.slots_per_agent, "");
    get(root, "max_seconds", s.max_seconds, "");
    get(root, "idle_seconds", s.idle_seconds, "");
    if (YAML::Node t = root["trainer"]) {
      get(t, "step_ms", s.step_ms, "trainer.");
      get(t, "report_every", s.report_every, "trainer.");
      get(t, "failure_rate", s.failure_rate, "trainer.");
    }
    if (YAML::Node pools = root["pools"]) {
      if (!pools.IsSequence())
        throw std::runtime_error("pools: a list of {name, agents, scheduler}");
      int carved = 0;
      for (size_t i = 0; i < pools.size(); ++i) {
        const std::string where = "pools[" + std::to_string(i) + "].";
        PoolSpec p;
        get(pools[i], "name", p.name, where);
        get(pools[i], "agents", p.agents, where);
        get(pools[i], "scheduler", p.scheduler, where);
        if (p.name.empty() || p.name == "default") {
          throw std::runtime_error(
              where + "name: a pool other than \"default\" (which has the agents no pool takes)");
        }
        if (p.scheduler != "priority" && p.scheduler != "fair_share") {
          throw std::runtime_error(where + "scheduler: priority or fair_share, not \"" +
                                   p.scheduler + "\"");
        }
        if (p.agents < 1) throw std::runtime_error(where + "agents: at least 1");
        carved += p.agents;
        s.pools.push_back(p);
      }
      if (carved > s.agents) {
        throw std::runtime_error("pools: their agents (" + std::to_string(carved) +
                                 ") exceed agents (" + std::to_string(s.agents) + ")");
      }
    }
    if (!root["experiments"] || !root["experiments"].IsSequence()) {
      return sf::InvalidArgument(path + ": experiments: a list of experiment kinds is required");
    }
    for (size_t i = 0; i < root["experiments"].size(); ++i) {
      const YAML::Node e = root["experiments"][i];
      const std::string where = "experiments[" + std::to_string(i) + "].";
      ExperimentKind k;
      get(e, "count", k.count, where);
      get(e, "every_seconds", k.every_seconds, where);
      get(e, "searcher", k.searcher, where);
      get(e, "trials", k.trials, where);
      get(e, "batches", k.batches, where);
      get(e, "slots_per_trial", k.slots_per_trial, where);
      get(e, "priority", k.priority, where);
      get(e, "weight", k.weight, where);
      get(e, "pool", k.pool, where);
      if (k.pool != "default" &&
          std::none_of(s.pools.begin(), s.pools.end(),
                       [&](const PoolSpec& p) { return p.name == k.pool; })) {
        return sf::InvalidArgument(path + ": " + where + "pool: \"" + k.pool +
                                   "\" is not \"default\" or one of pools");
      }
      if (!(k.weight > 0)) return sf::InvalidArgument(path + ": " + where + "weight: must be > 0");
      if (k.searcher != "grid" && k.searcher != "random" && k.searcher != "adaptive_asha") {
        return sf::InvalidArgument(path + ": " + where +
                                   "searcher: grid, random or adaptive_asha, not \"" + k.searcher +
                                   "\"");
      }
      if (k.count < 1 || k.trials < 1 || k.batches < 1 || k.slots_per_trial < 1) {
        return sf::InvalidArgument(path + ": " + where +
                                   "count, trials, batches and slots_per_trial must be >= 1");
      }
      s.experiments.push_back(k);
    }
  } catch (const std::exception& e) {
    return sf::InvalidArgument(path + ": " + e.what());
  }
  if (s.agents < 1 || s.slots_per_agent < 1 || s.step_ms < 0 || s.report_every < 1 ||
      s.failure_rate < 0 || s.failure_rate > 1) {
    return sf::InvalidArgument(path +
                               ": agents and slots_per_agent >= 1, trainer.step_ms >= 0, "
                               "trainer.report_every >= 1, trainer.failure_rate in [0, 1]");
  }
  return s;
}

std::string Scenario::PoolOfAgent(int index) const {
  int first = agents;
  for (const PoolSpec& p : pools) first -= p.agents;
  if (index < first) return "default";
  for (const PoolSpec& p : pools) {
    first += p.agents;
    if (index < first) return p.name;
  }
  return "default";
}

std::string Scenario::MasterConfigYaml() const {
  std::string modes;
  for (const PoolSpec& p : pools) {
    if (p.scheduler != "priority")
      modes += (modes.empty() ? "" : ", ") + p.name + ": " + p.scheduler;
  }
  return modes.empty() ? "" : "pool_schedulers: {" + modes + "}\n";
}

std::string ExperimentName(const ExperimentKind& kind, int n) {
  return "sim-" + kind.searcher + "-" + std::to_string(n);
}

// An experiment of `kind` as YAML (a native config: the master schedules it like any other).
std::string ExperimentYaml(const ExperimentKind& kind, const std::string& data_dir, int n) {
  std::ostringstream y;
  y << "name: " << ExperimentName(kind, n) << "\n"
    << "data: {train: {src: " << data_dir << "/train.de, tgt: " << data_dir << "/train.en}}\n";
  if (kind.searcher == "grid") {
    y << "hyperparameters: {dropout: {type: categorical, vals: [";
    for (int i = 0; i < kind.trials; ++i)
      y << (i ? ", " : "") << 0.3 * i / std::max(1, kind.trials - 1);
    y << "]}}\n";
  } else {
    y << "hyperparameters: {dropout: {type: double, minval: 0.0, maxval: 0.3}}\n";
  }
  y << "resources: {slots_per_trial: " << kind.slots_per_trial << ", priority: " << kind.priority
    << ", weight: " << kind.weight;
  if (kind.pool != "default") y << ", resource_pool: " << kind.pool;
  y << "}\n"
    << "searcher: {name: " << kind.searcher
    << ", metric: validation_loss, max_length: {batches: " << kind.batches << "}";
  if (kind.searcher != "grid") y << ", max_trials: " << kind.trials << ", seed: " << n;
  y << ", max_concurrent_trials: 0}\n";
  return y.str();
}

}  // namespace sf::sim
