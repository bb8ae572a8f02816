// Beam search: the incremental decoder (cached self-attention K/V, encoder K/V once) gives
// exactly what recomputing the whole prefix gives; results do not depend on how sentences are
// batched; and the score of a hypothesis is the log-probability the training model's own
// forward pass assigns to it (so the separate inference code is the same network).
#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <utility>

#include "trainer/kernels/cpu/cpu_backend.h"
#include "trainer/decoding/translator.h"

namespace sf {
namespace {

constexpr int32_t kPad = 1, kEos = 2;

struct Model {
  explicit Model(bool pre_norm, bool shared, uint64_t seed = 7, bool tied_output = true) {
    TransformerConfig c;
    c.d_model = 32;
    c.heads = 4;
    c.encoder_layers = 2;
    c.decoder_layers = 2;
    c.ffn_dim = 48;
    c.dropout = 0.3f;  // must be off at inference
    c.attention_dropout = 0.2f;
    c.normalize_before = pre_norm;
    c.share_embeddings = shared;
    c.share_decoder_input_output_embed = tied_output;
    c.activation_dropout = 0.1f;  // must be off at inference
    c.src_vocab = 40;
    c.tgt_vocab = shared ? 40 : 37;
    c.max_positions = 64;
    c.label_smoothing = 0.0f;
    net = std::make_unique<Transformer<float>>(c, &backend, DType::kF32);
    net->InitParameters(seed);
    // A freshly initialised network tends to put EOS first everywhere, which would leave
    // nothing to compare; shrink EOS's output row so hypotheses run to a few tokens and beams
    // disagree (the arithmetic under test is unchanged).
    auto& store = net->params();
    const int id = store.Find(!tied_output ? "decoder.output_projection.weight"
                              : shared     ? "encoder.embed_tokens.weight"
                                           : "decoder.embed_tokens.weight");
    EXPECT_GE(id, 0);
    if (id >= 0) {
      float* eos_row = store.value(id) + kEos * c.d_model;
      for (int64_t j = 0; j < c.d_model; ++j) eos_row[j] *= 0.35f;
    }
  }
  CpuBackend backend;
  std::unique_ptr<Transformer<float>> net;
};

std::vector<std::vector<int32_t>> RandomSources(int n, int64_t vocab, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<std::vector<int32_t>> out;
  for (int i = 0; i < n; ++i) {
    const int len = static_cast<int>(rng() % 14);  // includes empty sources
    std::vector<int32_t> s;
    for (int t = 0; t < len; ++t) s.push_back(static_cast<int32_t>(4 + rng() % (vocab - 4)));
    out.push_back(std::move(s));
  }
  return out;
}

void ExpectSameHypotheses(const std::vector<Hypothesis>& a, const std::vector<Hypothesis>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].tokens, b[i].tokens) << what << ", sentence " << i;
    EXPECT_EQ(a[i].score, b[i].score) << what << ", sentence " << i;  // bit for bit
  }
}

TEST(Translator, CachedDecoderEqualsFullRecomputation) {
  for (bool pre : {true, false}) {
    for (bool shared : {true, false}) {
      Model m(pre, shared);
      Translator tr(m.net.get());
      const auto sources = RandomSources(11, 40, 3);
      for (int beam : {1, 2, 5}) {
        for (float lenpen : {1.0f, 0.6f}) {
          BeamOptions o;
          o.beam = beam;
          o.lenpen = lenpen;
          o.max_len_a = 1.2f;
          o.max_len_b = 5;
          o.max_sentences = 4;
          const std::string what = std::string(pre ? "pre" : "post") + "-norm, " + (shared ? "shared" : "separate") +
                                   " vocab, beam " + std::to_string(beam) + ", lenpen " + std::to_string(lenpen);
          o.cache = true;
          auto cached = tr.Translate(sources, o);
          ASSERT_TRUE(cached.ok()) << cached.status().ToString();
          o.cache = false;
          auto full = tr.Translate(sources, o);
          ASSERT_TRUE(full.ok()) << full.status().ToString();
          ExpectSameHypotheses(*cached, *full, what);
          // The output has something to compare: not every hypothesis is empty.
          size_t tokens = 0;
          for (const auto& h : *cached) tokens += h.tokens.size();
          EXPECT_GT(tokens, 0u) << what;
        }
      }
    }
  }
}

TEST(Translator, BatchingDoesNotChangeResults) {
  Model m(true, true);
  Translator tr(m.net.get());
  const auto sources = RandomSources(9, 40, 5);
  BeamOptions o;
  o.beam = 4;
  o.max_len_b = 8;
  o.max_sentences = 64;
  auto together = tr.Translate(sources, o);
  ASSERT_TRUE(together.ok());
  o.max_sentences = 1;
  auto one_by_one = tr.Translate(sources, o);
  ASSERT_TRUE(one_by_one.ok());
  ExpectSameHypotheses(*together, *one_by_one, "64 sentences per batch vs 1");
  o.max_sentences = 64;
  o.max_tokens = 20;  // a few sentences per batch, by padded source tokens
  auto by_tokens = tr.Translate(sources, o);
  ASSERT_TRUE(by_tokens.ok());
  ExpectSameHypotheses(*together, *by_tokens, "64 sentences per batch vs 20 tokens");
}

TEST(Translator, RespectsTheLengthLimit) {
  Model m(true, true);
  Translator tr(m.net.get());
  const auto sources = RandomSources(8, 40, 9);
  BeamOptions o;
  o.beam = 3;
  o.max_len_a = 0.5f;
  o.max_len_b = 2;
  auto hyps = tr.Translate(sources, o);
  ASSERT_TRUE(hyps.ok());
  for (size_t i = 0; i < sources.size(); ++i) {
    // fairseq: at most floor(a * (source + EOS) + b) tokens, then EOS.
    const auto limit = static_cast<size_t>(0.5 * static_cast<double>(sources[i].size() + 1) + 2);
    EXPECT_LE((*hyps)[i].tokens.size(), limit) << "sentence " << i;
    for (int32_t t : (*hyps)[i].tokens) {
      EXPECT_NE(t, kPad);
      EXPECT_NE(t, kEos);
      EXPECT_NE(t, 0) << "<bos> generated";
    }
  }
}

// The beam score (lenpen 1: mean log-probability per token, EOS included) of each hypothesis
// equals what Transformer::Forward, the training path, computes for that target teacher-forced;
// with the output projection tied and untied (share_decoder_input_output_embed).
TEST(Translator, ScoresAgreeWithTheTrainingForwardPass) {
  for (auto [pre, tied] : {std::pair{true, true}, {false, true}, {false, false}}) {
    Model m(pre, false, 7, tied);
    m.net->context().training = false;
    Translator tr(m.net.get());
    const auto sources = RandomSources(6, 40, 11);
    BeamOptions o;
    o.beam = 3;
    o.lenpen = 1.0f;
    o.max_len_b = 6;
    auto hyps = tr.Translate(sources, o);
    ASSERT_TRUE(hyps.ok());
    for (size_t i = 0; i < sources.size(); ++i) {
      if (sources[i].empty()) continue;  // an empty source is answered with an empty line, unscored
      std::vector<int32_t> src = sources[i];
      src.push_back(kEos);
      const auto& h = (*hyps)[i].tokens;
      std::vector<int32_t> tin{kEos}, tout = h;
      tin.insert(tin.end(), h.begin(), h.end());
      tout.push_back(kEos);
      Seq2SeqBatch b;
      b.src = src.data();
      b.tgt_in = tin.data();
      b.tgt_out = tout.data();
      b.batch = 1;
      b.src_len = static_cast<int64_t>(src.size());
      b.tgt_len = static_cast<int64_t>(tin.size());
      auto stats = m.net->Forward(b);
      ASSERT_TRUE(stats.ok()) << stats.status().ToString();
      ASSERT_EQ(stats->tokens, static_cast<int64_t>(tout.size()));
      const double forward_score = -stats->nll / static_cast<double>(tout.size());
      EXPECT_NEAR((*hyps)[i].score, forward_score, 1e-4 * std::max(1.0, std::fabs(forward_score)))
          << (pre ? "pre" : "post") << "-norm, " << (tied ? "tied" : "untied") << ", sentence "
          << i;
    }
  }
}

TEST(Translator, RejectsBadSources) {
  Model m(true, true);
  Translator tr(m.net.get());
  BeamOptions o;
  auto bad_token = tr.Translate({{5, 6, 400}}, o);
  ASSERT_FALSE(bad_token.ok());
  EXPECT_NE(bad_token.status().message().find("400"), std::string::npos) << bad_token.status().message();
  auto too_long = tr.Translate({std::vector<int32_t>(200, 5)}, o);
  ASSERT_FALSE(too_long.ok());
  EXPECT_NE(too_long.status().message().find("at most"), std::string::npos) << too_long.status().message();
}

}  // namespace
}  // namespace sf
