// A test stand-in for the master's experiment actor: carries out a search method's operations
// (creating trials, training them, closing them), feeding the resulting events back in FIFO order,
// and records everything, so tests can check op streams and invariants without a server.
#pragma once

#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "common/config/experiment_config.h"
#include "master/searcher/search_method.h"

namespace sf::master::testing {

// Parses a YAML experiment document; fails the test (and returns a default config) on errors.
config::ExperimentConfig ParseConfig(const std::string& yaml);
// A valid document around the given `hyperparameters:` and `searcher:` blocks (YAML flow maps).
std::string ConfigYaml(const std::string& hyperparameters, const std::string& searcher);

class SearchDriver {
 public:
  // metric(request_id, hparams, length): the validation metric a trial reports.
  using MetricFn = std::function<double(int64_t, const Value&, int64_t)>;
  explicit SearchDriver(MetricFn metric) : metric_(std::move(metric)) {}

  // Applies InitialOperations().
  void Start(SearchMethod& method);
  // Handles the oldest pending event; false when none is left.
  bool Step(SearchMethod& method);
  // Steps until nothing is pending or `max_steps` steps ran; returns the steps taken.
  int64_t Run(SearchMethod& method, int64_t max_steps = 1000000);
  // The next pending event makes trial `id` exit early instead of whatever it was going to do.
  void ExitNext(int64_t id, ExitReason reason) { exits_[id] = reason; }

  const std::vector<std::string>& log() const { return log_; }
  bool shut_down() const { return shut_down_; }
  bool failure() const { return failure_; }
  const std::map<int64_t, Value>& hparams() const { return hparams_; }
  // Every kTrain target each trial got, in order.
  const std::map<int64_t, std::vector<int64_t>>& trains() const { return trains_; }
  const std::set<int64_t>& closed() const { return closed_; }
  // The most trials alive (created, not yet closed or exited) at once.
  int64_t max_alive() const { return max_alive_; }
  // Protocol violations seen (ops for finished trials, duplicate ids, ops after shutdown).
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  struct Event {
    enum class Kind { kCreated, kTrained, kClosed } kind;
    int64_t id;
    int64_t length;
  };
  void Apply(const std::vector<SearcherOp>& ops);

  MetricFn metric_;
  std::deque<Event> pending_;
  std::vector<std::string> log_;
  std::map<int64_t, Value> hparams_;
  std::map<int64_t, std::vector<int64_t>> trains_;
  std::set<int64_t> alive_, closed_, exited_;
  std::map<int64_t, ExitReason> exits_;
  std::vector<std::string> violations_;
  int64_t max_alive_ = 0;
  bool shut_down_ = false;
  bool failure_ = false;
};

}  // namespace sf::master::testing
