#include "serve/dynamic_batcher.h"

#include <set>
#include <utility>

#include "common/log.h"

namespace sf::serve {
namespace {

using Clock = std::chrono::steady_clock;

// Sentences batch together only when their searches are the same.
bool SameSearch(const BeamOptions& a, const BeamOptions& b) {
  return a.beam == b.beam && a.lenpen == b.lenpen && a.max_len_a == b.max_len_a && a.max_len_b == b.max_len_b &&
         a.cache == b.cache;
}

}  // namespace

struct DynamicBatcher::Request {
  std::vector<std::vector<int32_t>> sources;
  BeamOptions options;
  RequestDone done;
  std::vector<Hypothesis> results;
  size_t not_batched = 0;    // sentences still in the queue (under mu_)
  size_t untranslated = 0;   // sentences without a result yet (batcher thread)
  bool finished = false;     // `done` has run (batcher thread)

  void Finish(Result<std::vector<Hypothesis>> r) {
    if (finished) return;
    finished = true;
    done(std::move(r));
  }
};

DynamicBatcher::DynamicBatcher(TranslateFn translate, BatchingOptions options, BatchListener listener)
    : translate_(std::move(translate)), options_(options), listener_(std::move(listener)) {
  thread_ = std::thread([this] { Loop(); });
}

DynamicBatcher::~DynamicBatcher() { Stop(); }

Status DynamicBatcher::Submit(std::vector<std::vector<int32_t>> sources, const BeamOptions& options,
                              RequestDone done) {
  if (sources.empty()) {
    done(std::vector<Hypothesis>{});
    return Status::Ok();
  }
  auto request = std::make_shared<Request>();
  request->options = options;
  request->done = std::move(done);
  request->results.resize(sources.size());
  request->not_batched = request->untranslated = sources.size();
  request->sources = std::move(sources);
  const auto now = Clock::now();
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return Unavailable("the server is stopping");
    if (waiting_requests_ >= options_.max_queue) {
      return ResourceExhausted("too many requests waiting (" + std::to_string(options_.max_queue) +
                               "); retry later");
    }
    ++waiting_requests_;
    for (size_t i = 0; i < request->sources.size(); ++i) queue_.push_back(Sentence{request, i, now});
  }
  wake_.notify_one();
  return Status::Ok();
}

int64_t DynamicBatcher::queued_requests() const {
  std::lock_guard<std::mutex> lock(mu_);
  return waiting_requests_;
}

namespace {

// The queue positions of the batch the oldest sentence would head now, and whether it is full
// (no further sentence of its kind fits).
struct Plan {
  std::vector<size_t> positions;
  bool full = false;
};

template <typename Queue>
Plan PlanBatch(const Queue& queue, const BatchingOptions& o) {
  Plan plan;
  const BeamOptions& search = queue.front().request->options;
  int64_t tokens = 0;
  for (size_t i = 0; i < queue.size(); ++i) {
    const auto& s = queue[i];
    if (!SameSearch(s.request->options, search)) continue;
    const int64_t t = static_cast<int64_t>(s.request->sources[s.index].size()) + 1;  // + EOS
    if (!plan.positions.empty() && tokens + t > o.max_batch_tokens) {
      plan.full = true;
      break;
    }
    plan.positions.push_back(i);
    tokens += t;
    if (static_cast<int64_t>(plan.positions.size()) >= o.max_batch_sentences || tokens >= o.max_batch_tokens) {
      plan.full = true;
      break;
    }
  }
  return plan;
}

}  // namespace

void DynamicBatcher::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    if (queue_.empty()) {
      wake_.wait(lock);
      continue;
    }
    Plan plan = PlanBatch(queue_, options_);
    const auto due = queue_.front().queued + options_.max_wait;
    if (!plan.full && Clock::now() < due) {
      wake_.wait_until(lock, due);
      continue;
    }
    // Take the planned sentences off the queue, keeping the others in order.
    std::vector<Sentence> batch;
    batch.reserve(plan.positions.size());
    std::deque<Sentence> rest;
    size_t next = 0;
    for (size_t i = 0; i < queue_.size(); ++i) {
      if (next < plan.positions.size() && plan.positions[next] == i) {
        ++next;
        if (--queue_[i].request->not_batched == 0) --waiting_requests_;
        batch.push_back(std::move(queue_[i]));
      } else {
        rest.push_back(std::move(queue_[i]));
      }
    }
    queue_.swap(rest);
    lock.unlock();
    Run(std::move(batch));
    lock.lock();
  }
}

void DynamicBatcher::Run(std::vector<Sentence> batch) {
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(batch.size());
  BatchReport report;
  std::set<const Request*> requests;
  for (const Sentence& s : batch) {
    sources.push_back(s.request->sources[s.index]);
    report.source_tokens += static_cast<int64_t>(sources.back().size()) + 1;
    requests.insert(s.request.get());
  }
  report.sentences = static_cast<int64_t>(batch.size());
  report.requests = static_cast<int64_t>(requests.size());
  const auto start = Clock::now();
  Result<std::vector<Hypothesis>> hyps = Internal("no translation");
  try {
    hyps = translate_(sources, batch.front().request->options);
  } catch (const std::exception& e) {  // a bug or out of memory: this batch fails, the server goes on
    hyps = Internal(std::string("translation failed: ") + e.what());
  }
  report.seconds = std::chrono::duration<double>(Clock::now() - start).count();
  if (hyps.ok() && hyps->size() != batch.size()) hyps = Internal("translation returned a wrong number of results");
  report.ok = hyps.ok();
  if (!hyps.ok()) {
    log::Error("serve", {{"event", "batch_failed"}, {"sentences", std::to_string(batch.size())},
                         {"error", hyps.status().message()}});
  }
  if (hyps.ok()) {
    for (const Hypothesis& h : *hyps) report.output_tokens += static_cast<int64_t>(h.tokens.size());
  }
  // Counted before any caller is answered: a client that reads /metrics after its reply sees
  // its sentences there.
  if (listener_) listener_(report);
  for (size_t i = 0; i < batch.size(); ++i) {
    Request& r = *batch[i].request;
    if (!hyps.ok()) {
      r.Finish(hyps.status());
      continue;
    }
    r.results[batch[i].index] = std::move((*hyps)[i]);
    if (--r.untranslated == 0) r.Finish(std::move(r.results));
  }
}

void DynamicBatcher::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::deque<Sentence> left;
  {
    std::lock_guard<std::mutex> lock(mu_);
    left.swap(queue_);
    waiting_requests_ = 0;
  }
  for (Sentence& s : left) s.request->Finish(Unavailable("the server is stopping"));
}

}  // namespace sf::serve
