#include "serve/serve_metrics.h"

#include <prometheus/text_serializer.h>

namespace sf::serve {
namespace {

using Buckets = prometheus::Histogram::BucketBoundaries;
const Buckets kLatency = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30};
const Buckets kSentences = {1, 2, 4, 8, 16, 32, 64, 128, 256};
const Buckets kTokens = {16, 64, 256, 1024, 2048, 4096, 8192, 16384};
const Buckets kRequests = {1, 2, 4, 8, 16, 32, 64};

template <typename Builder>
auto& Family(Builder builder, const char* name, const char* help, prometheus::Registry& registry) {
  return builder.Name(name).Help(help).Register(registry);
}

}  // namespace

ServeMetrics::ServeMetrics()
    : registry_(std::make_shared<prometheus::Registry>()),
      requests_(Family(prometheus::BuildCounter(), "sf_serve_requests_total",
                       "Requests answered, by route and HTTP status code", *registry_)),
      latency_(Family(prometheus::BuildHistogram(), "sf_serve_request_duration_seconds",
                      "Request latency by route, from the whole request read to its response ready", *registry_)),
      batch_sentences_(Family(prometheus::BuildHistogram(), "sf_serve_batch_sentences", "Sentences per batch",
                              *registry_)
                           .Add({}, kSentences)),
      batch_tokens_(Family(prometheus::BuildHistogram(), "sf_serve_batch_source_tokens",
                           "Source tokens per batch (EOS included, padding not)", *registry_)
                        .Add({}, kTokens)),
      batch_requests_(Family(prometheus::BuildHistogram(), "sf_serve_batch_requests",
                             "Distinct requests with a sentence in the batch", *registry_)
                          .Add({}, kRequests)),
      batch_seconds_(Family(prometheus::BuildHistogram(), "sf_serve_batch_duration_seconds",
                            "One batch's beam search (one Translator call)", *registry_)
                         .Add({}, kLatency)),
      shared_batches_(Family(prometheus::BuildCounter(), "sf_serve_shared_batches_total",
                             "Batches holding sentences of two or more requests", *registry_)
                          .Add({})),
      failed_batches_(Family(prometheus::BuildCounter(), "sf_serve_failed_batches_total",
                             "Batches whose search failed (their requests were answered 500)", *registry_)
                          .Add({})),
      sentences_(Family(prometheus::BuildCounter(), "sf_serve_translated_sentences_total",
                        "Sentences translated", *registry_)
                     .Add({})),
      tokens_(Family(prometheus::BuildCounter(), "sf_serve_translated_tokens_total",
                     "Target tokens produced (best hypotheses, EOS not counted)", *registry_)
                  .Add({})),
      queue_(Family(prometheus::BuildGauge(), "sf_serve_queue_requests", "Requests waiting for a batch", *registry_)
                 .Add({})),
      ready_(Family(prometheus::BuildGauge(), "sf_serve_ready", "1 once the model's weights are loaded", *registry_)
                 .Add({})),
      model_info_(Family(prometheus::BuildGauge(), "sf_serve_model_info",
                         "1 for the served registry model, version and checkpoint directory", *registry_)) {}

void ServeMetrics::SetModelInfo(const std::string& model, const std::string& version, const std::string& checkpoint) {
  model_info_.Add({{"model", model}, {"version", version}, {"checkpoint", checkpoint}}).Set(1);
}

void ServeMetrics::ObserveRequest(const std::string& route, int code, double seconds) {
  requests_.Add({{"route", route}, {"code", std::to_string(code)}}).Increment();
  latency_.Add({{"route", route}}, kLatency).Observe(seconds);
}

void ServeMetrics::ObserveBatch(const BatchReport& batch) {
  batch_sentences_.Observe(static_cast<double>(batch.sentences));
  batch_tokens_.Observe(static_cast<double>(batch.source_tokens));
  batch_requests_.Observe(static_cast<double>(batch.requests));
  batch_seconds_.Observe(batch.seconds);
  if (batch.requests > 1) shared_batches_.Increment();
  if (!batch.ok) {
    failed_batches_.Increment();
    return;
  }
  sentences_.Increment(static_cast<double>(batch.sentences));
  tokens_.Increment(static_cast<double>(batch.output_tokens));
}

std::string ServeMetrics::Render(int64_t queued_requests, bool ready) {
  queue_.Set(static_cast<double>(queued_requests));
  ready_.Set(ready ? 1 : 0);
  prometheus::TextSerializer serializer;
  return serializer.Serialize(registry_->Collect());
}

}  // namespace sf::serve
