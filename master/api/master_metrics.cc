#include "master/api/master_metrics.h"

#include <prometheus/text_serializer.h>

namespace sf::master {
namespace {
const prometheus::Histogram::BucketBoundaries kLatencyBuckets = {
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

MasterMetrics::MasterMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(prometheus::BuildCounter()
                    .Name("steadfast_api_requests_total")
                    .Help("API requests by route and status code")
                    .Register(*registry_)),
      request_latency_(prometheus::BuildHistogram()
                           .Name("steadfast_api_request_duration_seconds")
                           .Help("API request latency by route")
                           .Register(*registry_)),
      db_latency_(prometheus::BuildHistogram()
                      .Name("steadfast_db_query_duration_seconds")
                      .Help("Database transaction latency by operation")
                      .Register(*registry_)),
      experiments_(prometheus::BuildGauge()
                       .Name("steadfast_experiments")
                       .Help("Experiments known to the master, by state")
                       .Register(*registry_)),
      trials_(prometheus::BuildGauge()
                  .Name("steadfast_trials")
                  .Help("Trials of live experiments, by state")
                  .Register(*registry_)),
      slots_(prometheus::BuildGauge()
                 .Name("steadfast_slots")
                 .Help("Slots of connected agents (total) and allocated to trials (used)")
                 .Register(*registry_)),
      agents_(prometheus::BuildGauge()
                  .Name("steadfast_agents_connected")
                  .Help("Agents with a live AgentLink stream")
                  .Register(*registry_)),
      scheduling_pass_(prometheus::BuildSummary()
                           .Name("steadfast_scheduling_pass_seconds")
                           .Help("Scheduling passes of the agents' resource manager (p50, p99 over the last 60 s)")
                           .Register(*registry_)
                           .Add({}, prometheus::Summary::Quantiles{{0.5, 0.01}, {0.99, 0.001}},
                                std::chrono::seconds(60), 6)),
      scheduling_pass_max_(prometheus::BuildGauge()
                               .Name("steadfast_scheduling_pass_max_seconds")
                               .Help("The longest scheduling pass since the master started")
                               .Register(*registry_)
                               .Add({})) {}

void MasterMetrics::ObserveSchedulingPass(double seconds) {
  scheduling_pass_.Observe(seconds);
  std::lock_guard<std::mutex> lock(pass_mu_);
  if (seconds > pass_max_) {
    pass_max_ = seconds;
    scheduling_pass_max_.Set(seconds);
  }
}

void MasterMetrics::AddCountSource(const std::string& name, const std::string& help, std::function<Counts()> source) {
  std::lock_guard<std::mutex> lock(render_mu_);
  auto& family = prometheus::BuildCounter().Name(name).Help(help).Register(*registry_);
  count_sources_.push_back({&family, std::move(source), {}});
}

void MasterMetrics::ObserveRequest(const std::string& route, double seconds, int code) {
  requests_.Add({{"route", route}, {"code", std::to_string(code)}}).Increment();
  request_latency_.Add({{"route", route}}, kLatencyBuckets).Observe(seconds);
}

void MasterMetrics::ObserveQuery(const std::string& what, double seconds) {
  db_latency_.Add({{"operation", what}}, kLatencyBuckets).Observe(seconds);
}

std::string MasterMetrics::Render(Cluster* cluster) {
  {
    // The sources count since the start; the counters advance by what is new.
    std::lock_guard<std::mutex> lock(render_mu_);
    for (CountSource& source : count_sources_) {
      for (const auto& [outcome, now] : source.read()) {
        prometheus::Counter& c = source.family->Add({{"outcome", outcome}});
        uint64_t& seen = source.seen[outcome];
        if (now > seen) c.Increment(static_cast<double>(now - seen));
        seen = now;
      }
    }
  }
  ClusterStats s = cluster->Stats();
  for (const char* state : {"ACTIVE", "PAUSED", "STOPPING_CANCELED", "COMPLETED", "CANCELED", "ERROR"}) {
    experiments_.Add({{"state", state}}).Set(s.experiments_by_state.count(state) ? s.experiments_by_state[state] : 0);
  }
  for (const char* state : {"QUEUED", "RUNNING", "PAUSED", "COMPLETED", "CANCELED", "ERROR"}) {
    trials_.Add({{"state", state}}).Set(s.trials_by_state.count(state) ? s.trials_by_state[state] : 0);
  }
  slots_.Add({{"kind", "total"}}).Set(s.total_slots);
  slots_.Add({{"kind", "used"}}).Set(s.used_slots);
  agents_.Add({}).Set(s.agents);
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

}  // namespace sf::master
