#include "tests/master/searcher/search_driver.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace sf::master::testing {

config::ExperimentConfig ParseConfig(const std::string& yaml) {
  config::ParseResult r = config::ParseExperimentConfig(yaml);
  EXPECT_TRUE(r.ok()) << r.ErrorText() << "\n" << yaml;
  return r.ok() ? *r.config : config::ExperimentConfig{};
}

std::string ConfigYaml(const std::string& hyperparameters, const std::string& searcher) {
  return "name: searcher-test\n"
         "data: {train: {src: a.de, tgt: a.en}}\n"
         "hyperparameters: " +
         hyperparameters + "\n" + "searcher: " + searcher + "\n";
}

void SearchDriver::Start(SearchMethod& method) { Apply(method.InitialOperations()); }

void SearchDriver::Apply(const std::vector<SearcherOp>& ops) {
  for (const SearcherOp& op : ops) {
    log_.push_back(op.ToString());
    if (shut_down_) violations_.push_back("op after shutdown: " + op.ToString());
    const bool finished = closed_.count(op.request_id) || exited_.count(op.request_id);
    switch (op.kind) {
      case SearcherOp::Kind::kCreate:
        if (hparams_.count(op.request_id)) violations_.push_back("duplicate " + op.ToString());
        hparams_[op.request_id] = op.hparams;
        alive_.insert(op.request_id);
        max_alive_ = std::max<int64_t>(max_alive_, static_cast<int64_t>(alive_.size()));
        pending_.push_back({Event::Kind::kCreated, op.request_id, 0});
        break;
      case SearcherOp::Kind::kTrain:
        if (finished) violations_.push_back("train for a finished trial: " + op.ToString());
        trains_[op.request_id].push_back(op.target_length);
        pending_.push_back({Event::Kind::kTrained, op.request_id, op.target_length});
        break;
      case SearcherOp::Kind::kClose:
        if (finished) violations_.push_back("close for a finished trial: " + op.ToString());
        pending_.push_back({Event::Kind::kClosed, op.request_id, 0});
        break;
      case SearcherOp::Kind::kShutdown:
        if (!alive_.empty()) violations_.push_back("shutdown with live trials");
        shut_down_ = true;
        failure_ = op.failure;
        break;
    }
  }
}

bool SearchDriver::Step(SearchMethod& method) {
  if (pending_.empty()) return false;
  Event e = pending_.front();
  pending_.pop_front();
  if (exited_.count(e.id) || closed_.count(e.id)) return true;  // stale event
  auto exit = exits_.find(e.id);
  if (exit != exits_.end()) {
    const ExitReason reason = exit->second;
    exits_.erase(exit);
    exited_.insert(e.id);
    alive_.erase(e.id);
    log_.push_back("event exited(" + std::to_string(e.id) + ", " + ExitReasonName(reason) + ")");
    Apply(method.TrialExitedEarly(e.id, reason));
    return true;
  }
  switch (e.kind) {
    case Event::Kind::kCreated:
      Apply(method.TrialCreated(e.id));
      break;
    case Event::Kind::kTrained:
      Apply(method.ValidationCompleted(e.id, metric_(e.id, hparams_[e.id], e.length), e.length));
      break;
    case Event::Kind::kClosed:
      closed_.insert(e.id);
      alive_.erase(e.id);
      Apply(method.TrialClosed(e.id));
      break;
  }
  return true;
}

int64_t SearchDriver::Run(SearchMethod& method, int64_t max_steps) {
  int64_t steps = 0;
  while (steps < max_steps && Step(method)) ++steps;
  return steps;
}

}  // namespace sf::master::testing
