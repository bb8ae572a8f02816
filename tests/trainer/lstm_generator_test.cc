// The LSTM family's beam search (trainer/decoding/lstm_generator.h): its incremental decoding
// (one step per token from cached h, c and input feed) must score every hypothesis exactly as
// the teacher-forced model scores it from the whole prefix; results must not depend on how the
// sentences are batched (finished sentences leave the working rows mid-search); and every
// backend must search as the CPU does (the guarded device path bit for bit, a GPU where present).
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
#include "trainer/decoding/generator.h"
#include "trainer/decoding/lstm_generator.h"
#include "trainer/models/lstm_model.h"

namespace sf {
namespace {

// Both directions, two layers, a decoder wider than the encoder's output (the initial states are
// projected) and narrower output embeddings (additional_fc): every path of the step.
LstmConfig SmallConfig(bool shared) {
  LstmConfig c;
  c.src_vocab = 30;
  c.tgt_vocab = 25;
  c.encoder_embed = 12;
  c.encoder_hidden = 10;
  c.encoder_layers = 2;
  c.encoder_bidirectional = !shared;
  c.decoder_embed = 14;
  c.decoder_hidden = shared ? 10 : 16;
  c.decoder_out_embed = shared ? 14 : 18;
  c.decoder_layers = 2;
  c.share_decoder_input_output_embed = shared;
  c.label_smoothing = 0;
  c.max_positions = 40;
  return c;
}

// Weights wide enough that the output distributions are peaked (the search has real choices).
std::unique_ptr<LstmModel<float>> Model(Backend<float>& backend, const LstmConfig& c, uint32_t seed) {
  auto m = std::make_unique<LstmModel<float>>(c, &backend, DType::kF32);
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> u(-0.6f, 0.6f);
  ParamStore<float>& store = m->params();
  for (int64_t i = 0; i < store.total_numel(); ++i) store.host_values()[i] = u(rng);
  // EOS's output row shrunk: random weights would end most hypotheses at once.
  const int out = store.Find(c.share_decoder_input_output_embed ? "decoder.embed_tokens.weight" : "decoder.fc_out.weight");
  const int64_t width = store.params()[out].shape[1];
  for (int64_t j = 0; j < width; ++j) store.host_value(out)[kEosToken * width + j] *= 0.6f;
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
double TeacherForcedScore(LstmModel<float>& model, std::vector<int32_t> src, const std::vector<int32_t>& hyp,
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

// GNMT's residual connections from layer 2 of three on both sides.
LstmConfig ResidualConfig() {
  LstmConfig c = SmallConfig(false);
  c.encoder_layers = c.decoder_layers = 3;
  c.residual_from = 2;
  return c;
}

// GNMT's encoder: the first of three layers both ways, the two above one way, residual
// connections from layer 3 (the decoder's initial states: the first layer's backward direction's,
// the others' own).
LstmConfig GnmtConfig() {
  LstmConfig c = ResidualConfig();
  c.encoder_bidirectional_layers = 1;
  c.residual_from = 3;
  c.decoder_hidden = c.encoder_hidden;
  return c;
}

TEST(LstmGenerator, EveryHypothesisScoresWhatTheTeacherForcedModelGivesIt) {
  for (int which : {0, 1, 2, 3}) {
    const bool shared = which == 1;
    CpuBackend backend;
    auto model = Model(backend, which == 2 ? ResidualConfig() : which == 3 ? GnmtConfig() : SmallConfig(shared), 11);
    LstmGenerator gen(model.get());
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
            << "config " << which << " beam " << beam << " sentence " << i;
      }
      EXPECT_GT(generated, 20) << "the search produced (almost) nothing: nothing was compared";
      std::printf("config %d beam %d: %lld tokens generated\n", which, beam, static_cast<long long>(generated));
    }
  }
}

TEST(LstmGenerator, ResultsDoNotDependOnTheBatching) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(false), 12);
  LstmGenerator gen(model.get());
  const auto sources = Sources();
  BeamOptions o;
  o.beam = 3;
  o.max_len_b = 12;
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

TEST(LstmGenerator, BadSourcesAreRefusedByPosition) {
  CpuBackend backend;
  auto model = Model(backend, SmallConfig(true), 13);
  LstmGenerator gen(model.get());
  auto bad = gen.Translate({{4, 5}, {4, 30}}, BeamOptions{});
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "source 2: token 30 is outside the vocabulary of 30");
  auto long_source = gen.Translate({std::vector<int32_t>(39, 4)}, BeamOptions{});
  ASSERT_FALSE(long_source.ok());
  EXPECT_EQ(long_source.status().message(), "source 1 has 39 tokens; the model takes at most 38");
  BeamOptions zero;
  zero.beam = 0;
  EXPECT_FALSE(gen.Translate({{4}}, zero).ok());
}

class LstmGeneratorBackends : public ::testing::TestWithParam<std::string> {
 protected:
  // The guarded path searches bit for bit as the CPU; a GPU's GEMMs round differently.
  std::unique_ptr<Backend<float>> Make(double* tolerance, std::string* why) {
    *tolerance = GetParam() == "guarded" ? 0 : 1e-4;
    return testing::MakeTestBackend(GetParam(), why);
  }
};

TEST_P(LstmGeneratorBackends, SearchesAsTheCpuDoes) {
  double tolerance = 0;
  std::string why;
  std::unique_ptr<Backend<float>> backend = Make(&tolerance, &why);
  if (!backend) GTEST_SKIP() << why;
  CpuBackend cpu;
  auto on_cpu = Model(cpu, SmallConfig(false), 14);
  auto there = Model(*backend, SmallConfig(false), 14);
  LstmGenerator a(on_cpu.get()), b(there.get());
  BeamOptions o;
  o.beam = 4;
  o.max_len_b = 10;
  const auto sources = Sources();
  auto want = a.Translate(sources, o);
  auto got = b.Translate(sources, o);
  ASSERT_TRUE(want.ok()) << want.status().message();
  ASSERT_TRUE(got.ok()) << got.status().message();
  for (size_t i = 0; i < sources.size(); ++i) {
    EXPECT_EQ((*got)[i].tokens, (*want)[i].tokens) << "sentence " << i;
    EXPECT_NEAR((*got)[i].score, (*want)[i].score, tolerance) << "sentence " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, LstmGeneratorBackends, ::testing::Values("guarded", "cuda"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace sf
