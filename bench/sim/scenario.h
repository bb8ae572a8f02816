// A cluster simulator scenario (bench/sim/cluster_sim.cc has the format): the simulated agents,
// the trainers' pace and failure rate, and the kinds of experiment submitted and when.
// LoadScenario reads one from YAML (errors name the file and the field); ExperimentYaml writes
// the experiment config the simulator submits for a kind.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace sf::sim {

struct ExperimentKind {
  int count = 1;
  double every_seconds = 0;
  std::string searcher = "grid";
  int trials = 4;
  int64_t batches = 100;
  int slots_per_trial = 1;
  int priority = 42;
  double weight = 1;
  std::string pool = "default";  // the resource pool its trials ask for
};

// A resource pool of some of the agents, with the scheduler mode the master runs it in.
struct PoolSpec {
  std::string name;
  int agents = 1;
  std::string scheduler = "priority";  // or fair_share
};

struct Scenario {
  std::string name;
  int agents = 4, slots_per_agent = 4;
  double max_seconds = 600, idle_seconds = 5;
  int step_ms = 20, report_every = 10;
  double failure_rate = 0;
  // Pools carved out of `agents`, in order after the "default" pool's (agents - their sum).
  std::vector<PoolSpec> pools;
  std::vector<ExperimentKind> experiments;
  // The pool of agent `index` (0-based).
  std::string PoolOfAgent(int index) const;
  // The master's config for the pools' scheduler modes (`pool_schedulers: {...}`); empty when
  // every pool is a priority pool (the master's default).
  std::string MasterConfigYaml() const;
};

// The scenario in `path`; errors name the field.
Result<Scenario> LoadScenario(const std::string& path);

// The name of the `n`th experiment of `kind` ("sim-grid-7"): unique within a run.
std::string ExperimentName(const ExperimentKind& kind, int n);

// The `n`th experiment of `kind` as YAML: a native config over the data in `data_dir`, a
// `dropout` hyperparameter (grid values or a range) that shapes the simulated loss.
std::string ExperimentYaml(const ExperimentKind& kind, const std::string& data_dir, int n);

}  // namespace sf::sim
