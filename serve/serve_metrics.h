// sf-serve's Prometheus metrics, served at GET /metrics in the text format (docs/serving.md):
//
//   sf_serve_requests_total{route, code}            requests answered, by route and HTTP status
//   sf_serve_request_duration_seconds{route}        request latency (read to response ready)
//   sf_serve_batch_sentences                        sentences per batch (histogram)
//   sf_serve_batch_source_tokens                    source tokens per batch, EOS included
//   sf_serve_batch_requests                         distinct requests per batch
//   sf_serve_shared_batches_total                   batches holding sentences of 2 or more requests
//   sf_serve_batch_duration_seconds                 one batch's search (the Translator call)
//   sf_serve_failed_batches_total                   batches whose search failed (their requests got 500)
//   sf_serve_translated_sentences_total / sf_serve_translated_tokens_total   output (EOS not counted)
//   sf_serve_queue_requests                         requests waiting for a batch (at scrape time)
//   sf_serve_ready                                  1 once the weights are loaded
//   sf_serve_model_info{model, version, checkpoint} 1: what is served (model and version empty
//                                                   with --checkpoint DIR)
//
// Thread-safe.
#pragma once

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

#include <cstdint>
#include <memory>
#include <string>

#include "serve/dynamic_batcher.h"

namespace sf::serve {

class ServeMetrics {
 public:
  ServeMetrics();
  // Sets sf_serve_model_info{model, version, checkpoint} to 1 (once, before serving).
  void SetModelInfo(const std::string& model, const std::string& version, const std::string& checkpoint);
  ServeMetrics(const ServeMetrics&) = delete;
  ServeMetrics& operator=(const ServeMetrics&) = delete;

  void ObserveRequest(const std::string& route, int code, double seconds);
  void ObserveBatch(const BatchReport& batch);
  // Renders everything; `queued_requests` and `ready` are the gauges' values now.
  std::string Render(int64_t queued_requests, bool ready);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& requests_;
  prometheus::Family<prometheus::Histogram>& latency_;
  prometheus::Histogram& batch_sentences_;
  prometheus::Histogram& batch_tokens_;
  prometheus::Histogram& batch_requests_;
  prometheus::Histogram& batch_seconds_;
  prometheus::Counter& shared_batches_;
  prometheus::Counter& failed_batches_;
  prometheus::Counter& sentences_;
  prometheus::Counter& tokens_;
  prometheus::Gauge& queue_;
  prometheus::Gauge& ready_;
  prometheus::Family<prometheus::Gauge>& model_info_;
};

}  // namespace sf::serve
