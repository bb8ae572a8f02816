// The language model's generation (trainer/decoding/lm_generator.h): incremental decoding (one
// position per step from cached keys and values) must give exactly what recomputing each whole
// sequence gives; every beam hypothesis must score what the teacher-forced model (the training
// forward) gives it; sampling must be reproducible, independent of batching, restricted to the
// top k, and at top_k = 1 the greedy path; and a model on a device generates as the CPU does.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/trainer/test_backends.h"
#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/decoding/lm_generator.h"
#include "trainer/models/transformer_lm.h"

namespace sf {
namespace {

TransformerLmConfig SmallConfig(bool pre, bool tied) {
  TransformerLmConfig c;
  c.d_model = 16;
  c.heads = 4;
  c.layers = 2;
  c.ffn_dim = 24;
  c.vocab = 27;
  c.max_positions = 32;
  c.normalize_before = pre;
  c.share_input_output_embed = tied;
  c.activation = pre ? Activation::kGelu : Activation::kRelu;
  return c;
}

// Weights wide enough that the distributions are peaked (the search has real choices).
std::unique_ptr<TransformerLm<float>> Model(Backend<float>& backend, const TransformerLmConfig& c, uint32_t seed) {
  auto m = std::make_unique<TransformerLm<float>>(c, &backend, DType::kF32);
  m->InitParameters(seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.5f, 0.5f);
  ParamStore<float>& store = m->params();
  for (int64_t i = 0; i < store.total_numel(); ++i) store.host_values()[i] += u(rng);
  // EOS's output row grown a little, so that continuations end at different steps.
  const int out = store.Find(c.share_input_output_embed ? "decoder.embed_tokens.weight" : "decoder.output_projection.weight");
  for (int64_t j = 0; j < c.d_model; ++j) store.host_value(out)[kEosToken * c.d_model + j] *= 1.2f;
  store.PushValues();
  m->WeightsUpdated();
  return m;
}

std::vector<std::vector<int32_t>> Prompts() {
  std::mt19937 rng(7);
  std::uniform_int_distribution<int32_t> tok(3, 26);
  std::vector<std::vector<int32_t>> out;
  for (int len : {4, 0, 7, 1, 3, 0, 2, 6}) {
    std::vector<int32_t> s(static_cast<size_t>(len));
    for (auto& t : s) t = tok(rng);
    out.push_back(std::move(s));
  }
  return out;
}

// Log-probabilities (softmax over the whole vocabulary) of `continuation` (then EOS when `eos`)
// after EOS + prompt, from the training forward over the whole sequence: one per predicted token.
std::vector<double> TeacherForced(TransformerLm<float>& model, const std::vector<int32_t>& prompt,
                                  const std::vector<int32_t>& continuation, bool eos) {
  std::vector<int32_t> seq = {kEosToken};
  seq.insert(seq.end(), prompt.begin(), prompt.end());
  seq.insert(seq.end(), continuation.begin(), continuation.end());
  if (eos) seq.push_back(kEosToken);
  std::vector<int32_t> tin(seq.begin(), seq.end() - 1), tout(seq.begin() + 1, seq.end());
  const int64_t n = static_cast<int64_t>(tin.size());
  model.context().training = false;
  auto stats = model.Forward(Seq2SeqBatch{tin.data(), tin.data(), tout.data(), 1, n, n});
  EXPECT_TRUE(stats.ok()) << stats.status().message();
  const int64_t V = model.config().vocab;
  std::vector<double> out;
  for (int64_t i = static_cast<int64_t>(prompt.size()); i < n; ++i) {
    const float* l = model.logits() + i * V;
    double mx = -1e30, z = 0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(l[v]));
    for (int64_t v = 0; v < V; ++v) z += std::exp(static_cast<double>(l[v]) - mx);
    out.push_back(static_cast<double>(l[tout[i]]) - mx - std::log(z));
  }
  return out;
}

TEST(LmGenerator, EveryBeamHypothesisScoresWhatTheTeacherForcedModelGivesIt) {
  for (int which : {0, 1}) {
    CpuBackend backend;
    auto model = Model(backend, SmallConfig(which == 1, which == 1), 21);
    LmGenerator gen(model.get());
    const auto prompts = Prompts();
    for (int beam : {1, 4}) {
      GenerateOptions o;
      o.beam = beam;
      o.lenpen = beam == 1 ? 1.0f : 0.6f;
      o.max_new_tokens = 9;
      auto hyps = gen.Generate(prompts, o);
      ASSERT_TRUE(hyps.ok()) << hyps.status().message();
      ASSERT_EQ(hyps->size(), prompts.size());
      int64_t generated = 0;
      for (size_t i = 0; i < prompts.size(); ++i) {
        const Hypothesis& h = (*hyps)[i];
        EXPECT_LE(h.tokens.size(), 9u);
        EXPECT_GE(h.tokens.size(), 1u) << "a continuation is never empty";
        generated += static_cast<int64_t>(h.tokens.size());
        for (int32_t t : h.tokens) {
          EXPECT_NE(t, kEosToken);
          EXPECT_NE(t, 1) << "<pad> is never generated";
          EXPECT_NE(t, kBosToken) << "<bos> is never generated";
        }
        const std::vector<double> lp = TeacherForced(*model, prompts[i], h.tokens, true);
        double sum = 0;
        for (double x : lp) sum += x;
        const double want = sum / std::pow(static_cast<double>(lp.size()), static_cast<double>(o.lenpen));
        EXPECT_NEAR(h.score, want, 2e-5 * std::max(1.0, std::abs(want)))
            << "config " << which << " beam " << beam << " prompt " << i;
      }
      EXPECT_GT(generated, 20) << "the search produced (almost) nothing: nothing was compared";
      std::printf("config %d beam %d: %lld tokens generated\n", which, beam, static_cast<long long>(generated));
    }
  }
}

TEST(LmGenerator, CachedDecodingEqualsRecomputingEveryPrefix) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(false, false), 22);
  LmGenerator gen(model.get());
  const auto prompts = Prompts();
  for (bool sample : {false, true}) {
    GenerateOptions o;
    o.beam = 3;
    o.sample = sample;
    o.top_k = 5;
    o.max_new_tokens = 12;
    auto cached = gen.Generate(prompts, o);
    o.cache = false;
    auto full = gen.Generate(prompts, o);
    ASSERT_TRUE(cached.ok() && full.ok());
    for (size_t i = 0; i < prompts.size(); ++i) {
      EXPECT_EQ((*cached)[i].tokens, (*full)[i].tokens) << "sample " << sample << " prompt " << i;
      EXPECT_EQ((*cached)[i].score, (*full)[i].score) << "sample " << sample << " prompt " << i;
    }
  }
}

TEST(LmGenerator, ResultsDoNotDependOnTheBatching) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(true, true), 21);
  LmGenerator gen(model.get());
  const auto prompts = Prompts();
  for (bool sample : {false, true}) {
    GenerateOptions o;
    o.beam = 3;
    o.sample = sample;
    o.temperature = 0.8f;
    o.max_new_tokens = 12;
    auto all = gen.Generate(prompts, o);
    ASSERT_TRUE(all.ok()) << all.status().message();
    std::set<size_t> lengths;
    for (const auto& h : *all) lengths.insert(h.tokens.size());
    EXPECT_GE(lengths.size(), 3u) << "continuations end at different steps (sample " << sample << ")";
    for (int64_t per : {1, 3}) {
      o.max_sentences = per;
      auto cut = gen.Generate(prompts, o);
      ASSERT_TRUE(cut.ok()) << cut.status().message();
      for (size_t i = 0; i < prompts.size(); ++i) {
        EXPECT_EQ((*cut)[i].tokens, (*all)[i].tokens) << "sample " << sample << " per " << per << " prompt " << i;
        EXPECT_EQ((*cut)[i].score, (*all)[i].score) << "sample " << sample << " per " << per << " prompt " << i;
      }
    }
  }
}

TEST(LmGenerator, SamplingIsSeededScoredAndRestrictedToTheTopK) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(false, true), 24);
  LmGenerator gen(model.get());
  const std::vector<std::vector<int32_t>> prompts(12, std::vector<int32_t>{5, 9});
  GenerateOptions o;
  o.sample = true;
  o.max_new_tokens = 10;
  o.temperature = 1.5f;
  auto a = gen.Generate(prompts, o);
  auto b = gen.Generate(prompts, o);
  ASSERT_TRUE(a.ok() && b.ok());
  std::set<std::vector<int32_t>> distinct;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ((*a)[i].tokens, (*b)[i].tokens) << "the same seed draws the same";
    distinct.insert((*a)[i].tokens);
    // The score is the model's mean log-probability of what was drawn (EOS when drawn).
    const bool ended = (*a)[i].tokens.size() < 10;
    const std::vector<double> lp = TeacherForced(*model, prompts[i], (*a)[i].tokens, ended);
    double sum = 0;
    for (double x : lp) sum += x;
    EXPECT_NEAR((*a)[i].score, sum / static_cast<double>(lp.size()), 2e-5) << "prompt " << i;
  }
  EXPECT_GE(distinct.size(), 6u) << "each prompt draws from its own stream";
  o.seed = 2;
  auto c = gen.Generate(prompts, o);
  ASSERT_TRUE(c.ok());
  int differ = 0;
  for (size_t i = 0; i < prompts.size(); ++i) differ += (*c)[i].tokens != (*a)[i].tokens;
  EXPECT_GE(differ, 6) << "another seed draws otherwise";

  // top_k = 3: every drawn token is among the 3 most likely at its step.
  o.top_k = 3;
  o.seed = 3;
  auto k3 = gen.Generate(prompts, o);
  ASSERT_TRUE(k3.ok());
  const int64_t V = model->config().vocab;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& toks = (*k3)[i].tokens;
    const bool ended = toks.size() < 10;
    TeacherForced(*model, prompts[i], toks, ended);
    for (size_t j = 0; j < toks.size(); ++j) {
      const float* l = model->logits() + static_cast<int64_t>(prompts[i].size() + j) * V;
      int above = 0;
      for (int64_t v = 0; v < V; ++v) {
        const bool drawable = v != 1 && v != kBosToken && (j > 0 || v != kEosToken);  // no EOS first
        above += drawable && l[v] > l[toks[j]];
      }
      EXPECT_LT(above, 3) << "prompt " << i << " token " << j;
    }
  }
  // top_k = 1 draws the most likely token at every step: the greedy search's path.
  o.top_k = 1;
  auto k1 = gen.Generate(prompts, o);
  GenerateOptions greedy;
  greedy.beam = 1;
  greedy.max_new_tokens = 10;
  auto g = gen.Generate(prompts, greedy);
  ASSERT_TRUE(k1.ok() && g.ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    const auto& s = (*k1)[i].tokens;
    const auto& t = (*g)[i].tokens;
    EXPECT_EQ(s, std::vector<int32_t>(t.begin(), t.begin() + static_cast<int64_t>(std::min(s.size(), t.size()))));
  }
}

TEST(LmGenerator, BadPromptsAndOptionsAreRefused) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(false, false), 25);
  LmGenerator gen(model.get());
  auto bad = gen.Generate({{4, 5}, {4, 27}}, GenerateOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "source 2: token 27 is outside the vocabulary of 27");
  auto long_prompt = gen.Generate({std::vector<int32_t>(31, 4)}, GenerateOptions{});
  ASSERT_FALSE(long_prompt.ok());
  EXPECT_EQ(long_prompt.status().message(), "source 1 has 31 tokens; the model takes at most 30");
  // The longest prompt gets one token at most: EOS + 30 + 1 fill the 32 positions.
  for (bool sample : {false, true}) {
    GenerateOptions o;
    o.sample = sample;
    auto longest = gen.Generate({std::vector<int32_t>(30, 4), std::vector<int32_t>(29, 4)}, o);
    ASSERT_TRUE(longest.ok()) << longest.status().message();
    EXPECT_LE((*longest)[0].tokens.size(), 1u);
    EXPECT_LE((*longest)[1].tokens.size(), 2u);
  }
  GenerateOptions o;
  o.sample = true;
  o.temperature = 0;
  EXPECT_FALSE(gen.Generate({{4}}, o).ok());
  o.temperature = 1;
  o.top_k = -1;
  EXPECT_FALSE(gen.Generate({{4}}, o).ok());
  GenerateOptions zero;
  zero.beam = 0;
  EXPECT_FALSE(gen.Generate({{4}}, zero).ok());
}

class LmGeneratorBackends : public ::testing::TestWithParam<std::string> {};

// The generator reads the host view of the weights: a model trained on a device continues text
// exactly as the same weights on the CPU do.
TEST_P(LmGeneratorBackends, GeneratesAsTheCpuDoes) {
  std::string why;
  std::unique_ptr<Backend<float>> backend = testing::MakeTestBackend(GetParam(), &why);
  if (!backend) GTEST_SKIP() << why;
  CpuBackend cpu;
  auto on_cpu = Model(cpu, SmallConfig(true, true), 26);
  auto there = Model(*backend, SmallConfig(true, true), 26);
  LmGenerator a(on_cpu.get()), b(there.get());
  GenerateOptions o;
  o.beam = 4;
  o.max_new_tokens = 10;
  const auto prompts = Prompts();
  auto want = a.Generate(prompts, o);
  auto got = b.Generate(prompts, o);
  ASSERT_TRUE(want.ok() && got.ok());
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ((*got)[i].tokens, (*want)[i].tokens) << "prompt " << i;
    EXPECT_EQ((*got)[i].score, (*want)[i].score) << "prompt " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LmGeneratorBackends, ::testing::Values("guarded", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sf
