// The dynamic batcher and the request body, without a model: a fake search records each batch.
//  - concurrent requests share a batch; their results come back in each request's own order;
//  - the sentence cap and the token budget cut batches, a long request spans several;
//  - different beam options never share a batch;
//  - a batch waits at most max_wait for company;
//  - beyond max_queue waiting requests, Submit refuses; Stop answers those still waiting;
//  - request bodies: every field checked, errors name the field and index.
#include <gtest/gtest.h>

#include <atomic>
#include <future>
#include <mutex>

#include "serve/dynamic_batcher.h"
#include "serve/translate_request.h"

namespace sf::serve {
namespace {

using Sources = std::vector<std::vector<int32_t>>;

// A search that "translates" a source into itself, scored by its first token; records batches.
struct FakeSearch {
  std::mutex mu;
  std::vector<std::pair<Sources, int>> batches;  // sources, beam
  std::promise<void> release;                    // the first batch blocks until set (when hold)
  std::shared_future<void> released = release.get_future().share();
  bool hold = false;

  TranslateFn Fn() {
    return [this](const Sources& sources, const BeamOptions& options) -> Result<std::vector<Hypothesis>> {
      bool first = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        first = batches.empty();
        batches.emplace_back(sources, options.beam);
      }
      if (hold && first) released.wait();
      std::vector<Hypothesis> out;
      for (const auto& s : sources) out.push_back({s, s.empty() ? 0.0f : static_cast<float>(s[0])});
      return out;
    };
  }
};

BeamOptions Beam(int beam) {
  BeamOptions b;
  b.beam = beam;
  return b;
}

// Submits and returns a future of the result.
std::future<Result<std::vector<Hypothesis>>> Submit(DynamicBatcher& b, Sources s, int beam = 5,
                                                    Status* submitted = nullptr) {
  auto p = std::make_shared<std::promise<Result<std::vector<Hypothesis>>>>();
  auto f = p->get_future();
  Status st = b.Submit(std::move(s), Beam(beam), [p](Result<std::vector<Hypothesis>> r) { p->set_value(std::move(r)); });
  if (submitted) *submitted = st;
  return f;
}

TEST(DynamicBatcher, ConcurrentRequestsShareABatchAndKeepTheirOrder) {
  FakeSearch search;
  BatchingOptions o;
  o.max_wait = std::chrono::milliseconds(200);
  std::vector<BatchReport> reports;
  DynamicBatcher b(search.Fn(), o, [&](const BatchReport& r) { reports.push_back(r); });
  auto a = Submit(b, {{10, 11}, {12}});
  auto c = Submit(b, {{20}, {21, 22, 23}, {}});
  auto ra = a.get(), rc = c.get();
  ASSERT_TRUE(ra.ok() && rc.ok());
  ASSERT_EQ(search.batches.size(), 1u);
  EXPECT_EQ(search.batches[0].first.size(), 5u);
  ASSERT_EQ(ra->size(), 2u);
  EXPECT_EQ((*ra)[0].tokens, (std::vector<int32_t>{10, 11}));
  EXPECT_EQ((*ra)[1].tokens, (std::vector<int32_t>{12}));
  ASSERT_EQ(rc->size(), 3u);
  EXPECT_EQ((*rc)[1].tokens, (std::vector<int32_t>{21, 22, 23}));
  EXPECT_TRUE((*rc)[2].tokens.empty());
  b.Stop();
  ASSERT_EQ(reports.size(), 1u);
  EXPECT_EQ(reports[0].requests, 2);
  EXPECT_EQ(reports[0].sentences, 5);
  EXPECT_EQ(reports[0].source_tokens, 7 + 5);  // tokens + one EOS each
  EXPECT_EQ(reports[0].output_tokens, 7);
}

TEST(DynamicBatcher, SentenceCapAndTokenBudgetCutBatches) {
  FakeSearch search;
  BatchingOptions o;
  o.max_batch_sentences = 3;
  o.max_batch_tokens = 8;
  o.max_wait = std::chrono::milliseconds(100);
  DynamicBatcher b(search.Fn(), o);
  // Seven one-token sentences (2 tokens each with EOS): batches of 3, 3, 1.
  auto r = Submit(b, {{1}, {2}, {3}, {4}, {5}, {6}, {7}}).get();
  ASSERT_TRUE(r.ok());
  for (int i = 0; i < 7; ++i) EXPECT_EQ((*r)[static_cast<size_t>(i)].tokens[0], i + 1);
  // A sentence over the budget goes alone; the budget then cuts before it.
  auto big = Submit(b, {{1, 2}, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {3}}).get();
  ASSERT_TRUE(big.ok());
  b.Stop();
  std::vector<size_t> sizes;
  for (const auto& [sources, beam] : search.batches) sizes.push_back(sources.size());
  EXPECT_EQ(sizes, (std::vector<size_t>{3, 3, 1, 1, 1, 1}));
}

TEST(DynamicBatcher, DifferentBeamOptionsNeverShareABatch) {
  FakeSearch search;
  BatchingOptions o;
  o.max_wait = std::chrono::milliseconds(100);
  DynamicBatcher b(search.Fn(), o);
  auto a = Submit(b, {{1}}, 5), c = Submit(b, {{2}}, 2), d = Submit(b, {{3}}, 5);
  ASSERT_TRUE(a.get().ok() && c.get().ok() && d.get().ok());
  b.Stop();
  ASSERT_EQ(search.batches.size(), 2u);
  EXPECT_EQ(search.batches[0].second, 5);
  EXPECT_EQ(search.batches[0].first, (Sources{{1}, {3}}));
  EXPECT_EQ(search.batches[1].second, 2);
}

TEST(DynamicBatcher, ALoneRequestWaitsAtMostMaxWait) {
  FakeSearch search;
  BatchingOptions o;
  o.max_wait = std::chrono::milliseconds(30);
  DynamicBatcher b(search.Fn(), o);
  const auto start = std::chrono::steady_clock::now();
  ASSERT_TRUE(Submit(b, {{1}}).get().ok());
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_GE(waited, std::chrono::milliseconds(25));
  EXPECT_LT(waited, std::chrono::seconds(2));
}

TEST(DynamicBatcher, FullQueueRefusesAndStopAnswersTheWaiting) {
  FakeSearch search;
  search.hold = true;  // the first batch blocks, so later requests wait
  BatchingOptions o;
  o.max_batch_sentences = 1;
  o.max_wait = std::chrono::milliseconds(0);
  o.max_queue = 2;
  DynamicBatcher b(search.Fn(), o);
  auto first = Submit(b, {{1}});
  while (true) {  // until the batcher holds the first request
    std::lock_guard<std::mutex> lock(search.mu);
    if (!search.batches.empty()) break;
  }
  Status s2, s3, s4;
  auto second = Submit(b, {{2}}, 5, &s2);
  auto third = Submit(b, {{3}}, 5, &s3);
  auto fourth = Submit(b, {{4}}, 5, &s4);
  EXPECT_TRUE(s2.ok() && s3.ok());
  EXPECT_EQ(s4.code(), StatusCode::kResourceExhausted) << s4.ToString();
  EXPECT_EQ(b.queued_requests(), 2);
  std::thread stopper([&] { b.Stop(); });
  // Once stopping, Submit says so (before looking at the queue): only then let the first batch end.
  Status probe;
  do {
    Submit(b, {{9}}, 5, &probe);
  } while (probe.code() == StatusCode::kResourceExhausted);
  EXPECT_EQ(probe.code(), StatusCode::kUnavailable);
  search.release.set_value();
  stopper.join();
  EXPECT_TRUE(first.get().ok());
  auto r2 = second.get(), r3 = third.get();
  EXPECT_EQ(r2.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(r3.status().code(), StatusCode::kUnavailable);
}

TEST(TranslateRequest, FieldsAndDefaults) {
  BeamOptions defaults;
  defaults.beam = 4;
  defaults.max_len_b = 10;
  auto r = ParseTranslateRequest(R"({"text": ["a", ""], "beam": 2, "lenpen": 0.5})", defaults, {});
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->texts, (std::vector<std::string>{"a", ""}));
  EXPECT_EQ(r->beam.beam, 2);
  EXPECT_EQ(r->beam.lenpen, 0.5f);
  EXPECT_EQ(r->beam.max_len_b, 10);
}

TEST(TranslateRequest, ErrorsNameTheField) {
  RequestLimits limits;
  limits.max_text_characters = 10;
  limits.max_sentences = 3;
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"({"text": [)", "malformed JSON"},
      {R"([1])", "JSON object"},
      {R"({})", "text: missing"},
      {R"({"text": "a"})", "text: expected a list"},
      {R"({"text": []})", "text: empty list"},
      {R"({"text": ["a", "b", "c", "d"]})", "text: 4 sentences; at most 3"},
      {R"({"text": ["a", 3]})", "text[1]: expected a string"},
      {R"({"text": ["a", "b", "ééééééééééé"]})", "text[2]: 11 characters; at most 10"},
      {R"({"text": ["a\u0000"]})", "text[0]: not UTF-8 text"},
      {R"({"text": ["a"], "beam": 0})", "beam: must be an integer from 1 to 64, not 0"},
      {R"({"text": ["a"], "beam": 65})", "beam: must be an integer from 1 to 64"},
      {R"({"text": ["a"], "beam": 2.5})", "beam: must be an integer"},
      {R"({"text": ["a"], "max_len_b": -1})", "max_len_b: must be an integer from 0"},
      {R"({"text": ["a"], "max_len_a": "x"})", "max_len_a: must be a number"},
      {R"({"text": ["a"], "lenpen": null})", "lenpen: must be a number"},
      {R"({"text": ["a"], "bean": 3})", "unknown field \"bean\""},
  };
  for (const auto& [body, expected] : cases) {
    auto r = ParseTranslateRequest(body, BeamOptions{}, limits);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << body;
    EXPECT_NE(r.status().message().find(expected), std::string::npos) << body << " -> " << r.status().message();
  }
  EXPECT_EQ(SourceTooLong(4, 300, 255).message(), "text[4]: 300 source tokens; this model takes at most 255");
}

TEST(TranslateRequest, ResponseAndErrorBodies) {
  EXPECT_EQ(TranslationsJson({{"a b", -1.5f, 3}, {"", 0.0f, 0}}),
            R"({"translations":[{"score":-1.5,"text":"a b","tokens":3},{"score":0.0,"text":"","tokens":0}]})");
  EXPECT_EQ(ErrorJson(400, "text: missing"), R"({"code":400,"message":"text: missing"})");
}

}  // namespace
}  // namespace sf::serve
