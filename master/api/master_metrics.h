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

#include <memory>
#include <string>

#include "master/core/cluster.h"

namespace sf::master {

class MasterMetrics {
 public:
  MasterMetrics();
  void ObserveRequest(const std::string& route, double seconds, int code);
  void ObserveQuery(const std::string& what, double seconds);
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
};

}  // namespace sf::master
