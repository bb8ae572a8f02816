// The fconv family's beam search (trainer/decoding/fconv_generator.h): its incremental decoding
// (one position per step from each layer's buffered convolution inputs) must score every
// hypothesis exactly as the teacher-forced model scores it from the whole prefix; results must
// not depend on how the sentences are batched (finished sentences leave the working rows
// mid-search); and a model on another backend must search as the CPU does.
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
#include "trainer/models/fconv.h"
#include "trainer/decoding/fconv_generator.h"
#include "trainer/decoding/generator.h"

namespace sf {
namespace {

// Channel changes (projections), kernels of 2, 3 and 4 (a 4-wide causal buffer), an untied fc3;
// or one width, kernel 3 and a tied fc3.
FConvConfig SmallConfig(bool tied) {
  FConvConfig c;
  c.src_vocab = 30;
  c.tgt_vocab = 25;
  c.encoder_embed = 12;
  c.decoder_embed = 12;
  c.decoder_out_embed = tied ? 12 : 10;
  c.encoder_convs = tied ? std::vector<ConvSpec>{{16, 3}, {16, 3}} : std::vector<ConvSpec>{{16, 3}, {20, 2}};
  c.decoder_convs = tied ? std::vector<ConvSpec>{{16, 3}, {16, 3}} : std::vector<ConvSpec>{{16, 2}, {20, 4}, {20, 3}};
  c.share_input_output_embed = tied;
  c.label_smoothing = 0;
  c.max_positions = 40;
  return c;
}

constexpr float kEosPenalty = 1.0f;

// Weights wide enough that the output distributions are peaked (the search has real choices).
std::unique_ptr<FConvModel<float>> Model(Backend<float>& backend, const FConvConfig& c, uint32_t seed) {
  auto m = std::make_unique<FConvModel<float>>(c, &backend, DType::kF32);
  m->InitParameters(seed);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.3f, 0.3f);
  ParamStore<float>& store = m->params();
  for (int64_t i = 0; i < store.total_numel(); ++i) store.host_values()[i] += u(rng);
  // EOS made less likely: random weights would end most hypotheses at once.
  store.host_value(store.Find("decoder.fc3.bias"))[kEosToken] -= kEosPenalty;
  store.PushValues();
  m->WeightsUpdated();
  return m;
}

std::vector<std::vector<int32_t>> Sources() {
  std::mt19937 rng(5);
  std::uniform_int_distribution<int32_t> tok(4, 29);
  std::vector<std::vector<int32_t>> out;
  for (int len : {5, 0, 8, 1, 3, 8, 2, 6, 4}) {
    std::vector<int32_t> s(static_cast<size_t>(len));
    for (auto& t : s) t = tok(rng);
    out.push_back(std::move(s));
  }
  return out;
}

// The hypothesis's score recomputed by the training forward over the whole prefix:
// sum log p(tokens, EOS) / (length + 1) ^ lenpen.
double TeacherForcedScore(FConvModel<float>& model, std::vector<int32_t> src, const std::vector<int32_t>& hyp,
                          float lenpen) {
  src.push_back(kEosToken);
  std::vector<int32_t> tin = {kEosToken}, tout = hyp;
  tin.insert(tin.end(), hyp.begin(), hyp.end());
  tout.push_back(kEosToken);
  const int64_t n = static_cast<int64_t>(tout.size());
  model.context().training = false;
  auto stats = model.Forward(Seq2SeqBatch{src.data(), tin.data(), tout.data(), 1, static_cast<int64_t>(src.size()), n});
  EXPECT_TRUE(stats.ok()) << stats.status().message();
  return -stats->nll / std::pow(static_cast<double>(n), static_cast<double>(lenpen));
}

TEST(FConvGenerator, EveryHypothesisScoresWhatTheTeacherForcedModelGivesIt) {
  for (bool tied : {false, true}) {
    CpuBackend backend;
    auto model = Model(backend, SmallConfig(tied), 11);
    FConvGenerator gen(model.get());
    const auto sources = Sources();
    for (int beam : {1, 4}) {
      BeamOptions o;
      o.beam = beam;
      o.lenpen = beam == 1 ? 1.0f : 0.6f;
      o.max_len_a = 0;
      o.max_len_b = 9;
      auto hyps = gen.Translate(sources, o);
      ASSERT_TRUE(hyps.ok()) << hyps.status().message();
      ASSERT_EQ(hyps->size(), sources.size());
      int64_t generated = 0;
      for (size_t i = 0; i < sources.size(); ++i) {
        const Hypothesis& h = (*hyps)[i];
        if (sources[i].empty()) {
          EXPECT_TRUE(h.tokens.empty()) << "an empty source translates to nothing";
          continue;
        }
        EXPECT_LE(h.tokens.size(), 9u);
        generated += static_cast<int64_t>(h.tokens.size());
        for (int32_t t : h.tokens) {
          EXPECT_NE(t, kEosToken);
          EXPECT_NE(t, 1) << "<pad> is never generated";
          EXPECT_NE(t, kBosToken) << "<bos> is never generated";
        }
        const double want = TeacherForcedScore(*model, sources[i], h.tokens, o.lenpen);
        EXPECT_NEAR(h.score, want, 2e-5 * std::max(1.0, std::abs(want)))
            << "tied " << tied << " beam " << beam << " sentence " << i;
      }
      EXPECT_GT(generated, 20) << "the search produced (almost) nothing: nothing was compared";
      std::printf("tied %d beam %d: %lld tokens generated\n", tied, beam, static_cast<long long>(generated));
    }
  }
}

TEST(FConvGenerator, ResultsDoNotDependOnTheBatching) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(false), 12);
  FConvGenerator gen(model.get());
  const auto sources = Sources();
  BeamOptions o;
  o.beam = 3;
  o.max_len_a = 1.0f;  // limits by source length: sentences finish at different steps
  o.max_len_b = 2;
  auto all = gen.Translate(sources, o);
  ASSERT_TRUE(all.ok()) << all.status().message();
  for (int64_t per : {1, 2, 4}) {
    o.max_sentences = per;
    auto cut = gen.Translate(sources, o);
    ASSERT_TRUE(cut.ok()) << cut.status().message();
    for (size_t i = 0; i < sources.size(); ++i) {
      EXPECT_EQ((*cut)[i].tokens, (*all)[i].tokens) << "max_sentences " << per << " sentence " << i;
      EXPECT_NEAR((*cut)[i].score, (*all)[i].score, 1e-5) << "max_sentences " << per << " sentence " << i;
    }
  }
  // The hypotheses end at different steps: sentences left the working rows mid-search.
  std::set<size_t> lengths;
  for (const auto& h : *all) lengths.insert(h.tokens.size());
  EXPECT_GE(lengths.size(), 3u);
}

TEST(FConvGenerator, MakeGeneratorPicksItAndBadSourcesAreRefused) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(true), 13);
  std::unique_ptr<Generator> gen = MakeGenerator(model.get());
  ASSERT_NE(dynamic_cast<FConvGenerator*>(gen.get()), nullptr);
  auto bad = gen->Translate({{4, 5}, {4, 30}}, BeamOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "source 2: token 30 is outside the vocabulary of 30");
}

class FConvGeneratorBackends : public ::testing::TestWithParam<std::string> {};

// The generator reads the host view of the weights: a model on a device translates exactly as
// the same weights on the CPU do.
TEST_P(FConvGeneratorBackends, SearchesAsTheCpuDoes) {
  std::string why;
  std::unique_ptr<Backend<float>> backend = testing::MakeTestBackend(GetParam(), &why);
  if (!backend) GTEST_SKIP() << why;
  CpuBackend cpu;
  auto on_cpu = Model(cpu, SmallConfig(false), 14);
  auto there = Model(*backend, SmallConfig(false), 14);
  FConvGenerator a(on_cpu.get()), b(there.get());
  BeamOptions o;
  o.beam = 4;
  o.max_len_b = 10;
  const auto sources = Sources();
  auto want = a.Translate(sources, o);
  auto got = b.Translate(sources, o);
  ASSERT_TRUE(want.ok() && got.ok());
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ((*got)[i].tokens, (*want)[i].tokens) << "sentence " << i;
    EXPECT_EQ((*got)[i].score, (*want)[i].score) << "sentence " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, FConvGeneratorBackends, ::testing::Values("guarded", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sf
