// Dynamic batching for a translation server: sentences of concurrent requests share one
// forward pass.
//
// Every submitted request's sentences (token ids) join one FIFO queue. One batcher thread forms
// a batch from the oldest waiting sentence and every later queued sentence with the same search
// options (beam, lenpen, max_len_a, max_len_b), in arrival order, until the batch holds
// `max_batch_sentences` sentences or adding the next would exceed `max_batch_tokens` source
// tokens (each sentence counts its tokens plus EOS; a sentence over the budget goes alone). It
// runs the batch as soon as it is full, or once its oldest sentence has waited `max_wait`, or
// (after the previous batch) as soon as sentences have waited that long — so under load batches
// are full and back to back, and an idle server adds at most `max_wait` to a request. Each batch
// is ONE call of the TranslateFn. Sentences with other options wait for a batch of their own; a
// request with more sentences than a batch takes is split over several batches. A request
// completes (its callback runs, on the batcher thread) once all its sentences are translated,
// with the hypotheses in its own order.
//
// Admission: at most `max_queue` requests may wait (have a sentence not yet in a batch); Submit
// refuses one more with kResourceExhausted, and the caller answers 503. Stop() completes every
// request still waiting with kUnavailable.
//
// Thread-safe: Submit from any thread. Callbacks run on the batcher thread and must not block
// (post the work elsewhere) nor call Submit or Stop.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "common/status.h"
#include "trainer/decoding/beam_search.h"

namespace sf::serve {

struct BatchingOptions {
  int64_t max_batch_tokens = 4096;  // source tokens (EOS included) of one batch
  int64_t max_batch_sentences = 64;
  std::chrono::microseconds max_wait{5000};
  int64_t max_queue = 1024;  // requests waiting for a batch
};

// What the batcher reports after each batch (for metrics).
struct BatchReport {
  int64_t sentences = 0;
  int64_t source_tokens = 0;  // EOS included, padding not
  int64_t requests = 0;       // distinct requests with a sentence in the batch
  int64_t output_tokens = 0;  // tokens of the best hypotheses, EOS not counted
  double seconds = 0;         // the TranslateFn call
  bool ok = true;
};

// Translates one batch (all with `options`); the hypotheses in the sources' order.
using TranslateFn = std::function<Result<std::vector<Hypothesis>>(
    const std::vector<std::vector<int32_t>>& sources, const BeamOptions& options)>;
using RequestDone = std::function<void(Result<std::vector<Hypothesis>>)>;
using BatchListener = std::function<void(const BatchReport&)>;

class DynamicBatcher {
 public:
  // Starts the batcher thread. `listener` (optional) runs on it after each batch.
  DynamicBatcher(TranslateFn translate, BatchingOptions options, BatchListener listener = nullptr);
  ~DynamicBatcher();  // Stop()
  DynamicBatcher(const DynamicBatcher&) = delete;
  DynamicBatcher& operator=(const DynamicBatcher&) = delete;

  // Queues a request's sentences; `done` runs exactly once, unless Submit fails (then never):
  // kResourceExhausted when max_queue requests already wait, kUnavailable after Stop. A request
  // with no sentences completes at once (on the caller's thread).
  Status Submit(std::vector<std::vector<int32_t>> sources, const BeamOptions& options, RequestDone done);

  // Requests waiting for a batch now.
  int64_t queued_requests() const;
  // Stops the thread after the batch in progress; waiting requests get kUnavailable. Idempotent.
  void Stop();

 private:
  struct Request;
  struct Sentence {
    std::shared_ptr<Request> request;
    size_t index = 0;  // within the request
    std::chrono::steady_clock::time_point queued;
  };
  void Loop();
  // Takes the next batch off the queue (lock held): the oldest sentence and those that batch with it.
  std::vector<Sentence> TakeBatch();
  // Whether the oldest sentence's batch may go now (lock held); else when it should.
  bool Ready(std::chrono::steady_clock::time_point now, std::chrono::steady_clock::time_point* wake) const;
  void Run(std::vector<Sentence> batch);

  TranslateFn translate_;
  BatchingOptions options_;
  BatchListener listener_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  std::deque<Sentence> queue_;
  int64_t waiting_requests_ = 0;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace sf::serve
