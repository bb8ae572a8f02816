// The master's Prometheus metrics (served at /metrics in the text format).
//
// Counters and histograms are updated by the API and database layers as things happen; gauges
// that describe cluster state (experiments and trials by state, slots, agents) are refreshed
// from Cluster::Stats() at scrape time. Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>
#include <prometheus/summary.h>

#include <cstdint>
#include <functional>
#include <map>
#include <utility>
#include <vector>
#include <memory>
#include <mutex>
#include <string>

#include "master/core/cluster.h"

namespace sf::master {

class MasterMetrics {
 public:
  MasterMetrics();
  void ObserveRequest(const std::string& route, double seconds, int code);
  void ObserveQuery(const std::string& what, double seconds);
  // One scheduling pass of a resource manager (the agents' Schedule and Preempt): its duration
  // goes to a summary (p50, p99 over the last minute) and the largest since the start.
  void ObserveSchedulingPass(double seconds);
  // A counter family `name` whose values, by the label `outcome`, are counts kept elsewhere since
  // the start (the read path's, docs/cluster.md "Reads under load"; the webhook senders'): read
  // at scrape time, each counter advanced by what is new. Call before the first Render.
  using Counts = std::vector<std::pair<std::string, uint64_t>>;
  void AddCountSource(const std::string& name, const std::string& help, std::function<Counts()> source);
  // Refreshes the state gauges and renders everything in the Prometheus text format.
  std::string Render(Cluster* cluster);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& request_latency_;
  prometheus::Family<prometheus::Histogram>& db_latency_;
  prometheus::Family<prometheus::Gauge>& experiments_;
  prometheus::Family<prometheus::Gauge>& trials_;
  prometheus::Family<prometheus::Gauge>& slots_;
  prometheus::Family<prometheus::Gauge>& agents_;
  prometheus::Summary& scheduling_pass_;
  prometheus::Gauge& scheduling_pass_max_;
  std::mutex pass_mu_;
  double pass_max_ = 0;  // under pass_mu_
  struct CountSource {
    prometheus::Family<prometheus::Counter>* family;
    std::function<Counts()> read;
    std::map<std::string, uint64_t> seen;  // what the counters hold (under render_mu_)
  };
  std::vector<CountSource> count_sources_;
  std::mutex render_mu_;
};

}  // namespace sf::master
