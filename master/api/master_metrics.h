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

#include <cstdint>
#include <functional>
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
  // The read path's counters (docs/cluster.md "Reads under load"), read at scrape time.
  struct ReadPathFigures {
    uint64_t busy_refusals = 0;  // reads answered 503: no database connection in time
    uint64_t list_cache_hits = 0, list_cache_misses = 0;
  };
  void SetReadPathSource(std::function<ReadPathFigures()> source) { read_path_source_ = std::move(source); }
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
  prometheus::Family<prometheus::Counter>& read_path_;
  std::function<ReadPathFigures()> read_path_source_;
  ReadPathFigures read_path_seen_;  // what the counters hold (under render_mu_)
  std::mutex render_mu_;
};

}  // namespace sf::master
