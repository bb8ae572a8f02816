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

// An experiment of `kind` as YAML (a native config: the master schedules it like any other).
std::string ExperimentYaml(const ExperimentKind& kind, const std::string& data_dir, int n) {
  std::ostringstream y;
  y << "name: sim-" << kind.searcher << "-" << n << "\n"
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
    << ", weight: " << kind.weight << "}\n"
    << "searcher: {name: " << kind.searcher
    << ", metric: validation_loss, max_length: {batches: " << kind.batches << "}";
  if (kind.searcher != "grid") y << ", max_trials: " << kind.trials << ", seed: " << n;
  y << ", max_concurrent_trials: 0}\n";
  return y.str();
}

}  // namespace sf::sim
