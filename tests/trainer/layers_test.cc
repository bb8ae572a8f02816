// Every layer's hand-written backward against central finite differences in f64 (the layers
// run on ReferenceBackend<double>), on odd shapes with padding and dropout active (dropout
// masks are a pure function of the key, so they are identical in every perturbed forward).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "trainer/kernels/cpu/reference.h"
#include "trainer/models/lstm_model.h"
#include "trainer/models/fconv.h"
#include "trainer/models/transformer_lm.h"
#include "trainer/models/transformer.h"
#include "trainer/nn/attention.h"
#include "trainer/nn/embedding.h"
#include "trainer/nn/feed_forward.h"
#include "trainer/nn/layer_norm.h"
#include "trainer/nn/lstm.h"
#include "trainer/nn/lstm_decoder.h"
#include "trainer/nn/lstm_encoder.h"
#include "trainer/nn/lstm_stack.h"
#include "trainer/nn/transformer_layer.h"

namespace sf {
namespace {

struct FdTarget {
  std::string name;
  double* value;       // perturbed in place
  const double* grad;  // analytic gradient
  int64_t n;
};

// Compares analytic gradients with (L(v+h) - L(v-h)) / 2h on up to `samples` entries per target.
void CheckGradients(const std::function<double()>& loss, const std::vector<FdTarget>& targets,
                    int samples = 12, double h = 1e-5) {
  std::mt19937 rng(42);
  for (const FdTarget& t : targets) {
    double worst = 0;
    std::vector<int64_t> idx;
    if (t.n <= samples) {
      for (int64_t i = 0; i < t.n; ++i) idx.push_back(i);
    } else {
      std::uniform_int_distribution<int64_t> u(0, t.n - 1);
      for (int i = 0; i < samples; ++i) idx.push_back(u(rng));
    }
    for (int64_t i : idx) {
      const double v = t.value[i];
      t.value[i] = v + h;
      const double lp = loss();
      t.value[i] = v - h;
      const double lm = loss();
      t.value[i] = v;
      const double numeric = (lp - lm) / (2 * h);
      const double err = std::fabs(numeric - t.grad[i]) / std::max(1.0, std::fabs(numeric));
      worst = std::max(worst, err);
      EXPECT_LT(err, 1e-6) << t.name << "[" << i << "] analytic " << t.grad[i] << " numeric "
                           << numeric;
    }
    ::testing::Test::RecordProperty(t.name, std::to_string(worst));
  }
}

std::vector<double> Random(size_t n, uint32_t seed, double lo = -1, double hi = 1) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(lo, hi);
  std::vector<double> v(n);
  for (auto& x : v) x = u(rng);
  return v;
}

void RandomizeParams(ParamStore<double>& store, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> u(-0.5, 0.5);
  for (const ParamInfo& p : store.params()) {
    double* v = store.values() + p.offset;
    const bool gain = p.name.find("norm") != std::string::npos && p.name.ends_with(".weight");
    for (int64_t i = 0; i < p.numel; ++i) v[i] = (gain ? 1.0 : 0.0) + u(rng);
  }
}

std::vector<FdTarget> ParamTargets(ParamStore<double>& store,
                                   const std::vector<std::string>& skip = {}) {
  std::vector<FdTarget> t;
  for (size_t i = 0; i < store.params().size(); ++i) {
    const ParamInfo& p = store.params()[i];
    bool skipped = false;
    for (const auto& s : skip) skipped |= p.name.find(s) != std::string::npos;
    if (!skipped)
      t.push_back({p.name, store.value(static_cast<int>(i)), store.grad(static_cast<int>(i)), p.numel});
  }
  return t;
}

double Dot(const double* a, const std::vector<double>& w) {
  double s = 0;
  for (size_t i = 0; i < w.size(); ++i) s += a[i] * w[i];
  return s;
}

class LayerGradTest : public ::testing::Test {
 public:
  static constexpr int64_t B = 2, T = 5, Ts = 7, C = 12, H = 3, F = 20;

 protected:
  ReferenceBackend<double> ref_;
  Context<double> ctx_{&ref_, DType::kF64};
  ParamStore<double> store_;
  void SetUp() override {
    ctx_.seed = 17;
    ctx_.micro_batch = 3;
  }
};

TEST_F(LayerGradTest, LayerNorm) {
  LayerNorm<double> ln(store_, "ln", C);
  store_.Finalize();
  RandomizeParams(store_, 1);
  auto x = Random(B * T * C, 2, -2, 3), w = Random(B * T * C, 3);
  std::vector<double> y(x.size()), dx(x.size());
  ln.Forward(ctx_, x.data(), y.data(), B * T);
  ln.Backward(ctx_, w.data(), dx.data(), B * T, false);
  auto targets = ParamTargets(store_);
  targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
  CheckGradients([&] { ln.Forward(ctx_, x.data(), y.data(), B * T); return Dot(y.data(), w); },
                 targets);
}

// The LSTM layer over a packed batch of sequences of lengths 5, 4, 2 and 1 (batch sizes 4, 3, 2,
// 2, 1, as PyTorch packs them): every parameter, the input, and the initial state.
TEST_F(LayerGradTest, LstmOverAPackedBatchWithAndWithoutAnInitialState) {
  const std::vector<int64_t> batch_sizes = {4, 3, 2, 2, 1};
  const int64_t N = 12, in = 6, hid = 5;
  for (bool initial : {false, true}) {
    ParamStore<double> store;
    Lstm<double> lstm(store, "encoder.lstm.", "l0", in, hid);
    store.Finalize();
    RandomizeParams(store, 8);
    auto x = Random(N * in, 9), w = Random(N * hid, 10);
    auto h0 = Random(4 * hid, 11), c0 = Random(4 * hid, 12, -2, 2);
    std::vector<double> dx(x.size(), 0.0);
    const double* h0p = initial ? h0.data() : nullptr;
    const double* c0p = initial ? c0.data() : nullptr;
    lstm.Forward(ctx_, x.data(), batch_sizes, h0p, c0p);
    lstm.Backward(ctx_, w.data(), dx.data(), 0.0f);
    std::vector<double> dh0(lstm.dh0(), lstm.dh0() + 4 * hid), dc0(lstm.dc0(), lstm.dc0() + 4 * hid);
    auto targets = ParamTargets(store);
    targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
    if (initial) {
      targets.push_back({"h0", h0.data(), dh0.data(), 4 * hid});
      targets.push_back({"c0", c0.data(), dc0.data(), 4 * hid});
    }
    CheckGradients([&] { return Dot(lstm.Forward(ctx_, x.data(), batch_sizes, h0p, c0p), w); }, targets, 24);
  }
}

TEST(PackedLayout, SortsLongestFirstAndReversesEachSequenceInPlace) {
  auto p = PackLengths({2, 5, 3, 5});
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(p->order, (std::vector<int64_t>{1, 3, 2, 0}));  // ties keep their batch order
  EXPECT_EQ(p->batch_sizes, (std::vector<int64_t>{4, 4, 3, 2, 2}));
  EXPECT_EQ(p->rows(), 15);
  EXPECT_EQ(p->Row(2, 2), 10);
  const std::vector<int32_t> rev = p->Reversal();
  for (int64_t r = 0; r < p->rows(); ++r) EXPECT_EQ(rev[rev[r]], r);
  EXPECT_EQ(rev[p->Row(3, 0)], p->Row(3, 1));  // the sequence of length 2: its steps swap
  EXPECT_EQ(rev[p->Row(2, 1)], p->Row(2, 1));  // the middle of a sequence of length 3 stays
  EXPECT_EQ(p->LastRows(), (std::vector<int32_t>{static_cast<int32_t>(p->Row(0, 4)), static_cast<int32_t>(p->Row(1, 4)),
                                                 static_cast<int32_t>(p->Row(2, 2)), static_cast<int32_t>(p->Row(3, 1))}));
  EXPECT_FALSE(PackLengths({}).ok());
  auto bad = PackLengths({3, 0});
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("sequence 1 has length 0"), std::string::npos) << bad.status().message();
}

// Two bidirectional layers with dropout between them (training): every parameter and the input.
TEST_F(LayerGradTest, LstmStackBidirectionalWithDropout) {
  auto layout = PackLengths({3, 5, 1, 4});
  ASSERT_TRUE(layout.ok());
  const int64_t n = layout->rows(), in = 4, hid = 3;
  ParamStore<double> store;
  LstmStack<double> stack(store, "encoder.lstm.", in, hid, 2, true, 0.3f, 7);
  store.Finalize();
  RandomizeParams(store, 13);
  auto x = Random(n * in, 14), wf = Random(n * hid, 15), wb = Random(n * hid, 16);
  std::vector<double> dx(x.size(), 0.0);
  auto loss = [&] {
    auto top = stack.Forward(ctx_, x.data(), in, *layout);
    return Dot(top[0], wf) + Dot(top[1], wb);
  };
  loss();
  stack.Backward(ctx_, {wf.data(), wb.data()}, dx.data(), 0.0f);
  auto targets = ParamTargets(store);
  targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
  CheckGradients(loss, targets, 16);
}

// GNMT's residual connections: three layers from layer 2 (1-based) up, in one direction and in
// both, with dropout between the layers (the residual adds the undropped input); and GNMT's
// encoder: four layers, the first both ways, the second reading both its directions, residual
// connections from layer 3: every parameter and the input.
TEST_F(LayerGradTest, LstmStackWithResidualConnections) {
  auto layout = PackLengths({3, 5, 1, 4});
  ASSERT_TRUE(layout.ok());
  for (int which : {0, 1, 2}) {
    const bool gnmt = which == 2, bidirectional = which == 1;
    const int64_t n = layout->rows(), in = 4, hid = 3;
    ParamStore<double> store;
    LstmStack<double> stack(store, "encoder.lstm.", in, hid, gnmt ? 4 : 3, which > 0, 0.3f, 7, gnmt ? 3 : 2,
                            gnmt ? 1 : 0);
    if (gnmt) {
      EXPECT_EQ(stack.directions(), 1);
      EXPECT_EQ(stack.directions(0), 2);
      EXPECT_EQ(store.params()[store.Find("encoder.lstm.weight_ih_l1")].shape[1], 2 * hid);
    }
    store.Finalize();
    RandomizeParams(store, 13);
    auto x = Random(n * in, 14), wf = Random(n * hid, 15), wb = Random(n * hid, 16);
    std::vector<double> dx(x.size(), 0.0);
    auto loss = [&] {
      auto top = stack.Forward(ctx_, x.data(), in, *layout);
      return Dot(top[0], wf) + (bidirectional ? Dot(top[1], wb) : 0.0);
    };
    loss();
    std::vector<const double*> dy = {wf.data()};
    if (bidirectional) dy.push_back(wb.data());
    stack.Backward(ctx_, dy, dx.data(), 0.0f);
    auto targets = ParamTargets(store);
    targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
    CheckGradients(loss, targets, 16);
  }
}

// The decoder with GNMT's residual connections from layer 2 (1-based) of three, dropout on.
TEST_F(LayerGradTest, LstmDecoderWithResidualConnections) {
  const int64_t steps = 4, batch = 3, src = 5, embed = 4, hid = 3, units = 5;
  const int layers = 3;
  ParamStore<double> store;
  LstmDecoder<double> dec(store, "decoder.", embed, hid, layers, units, 0.25f, 40, 2);
  store.Finalize();
  RandomizeParams(store, 41);
  auto x = Random(steps * batch * embed, 42), enc = Random(src * batch * units, 43);
  auto w = Random(steps * batch * hid, 44);
  std::vector<uint8_t> padding(batch * src, 0);
  padding[1 * src + 4] = 1;
  auto run = [&] { return dec.Forward(ctx_, x.data(), steps, batch, enc.data(), src, padding.data()); };
  run();
  std::vector<double> dx(x.size(), 0.0), denc(enc.size(), 0.0);
  dec.Backward(ctx_, w.data(), dx.data(), denc.data());
  auto targets = ParamTargets(store);
  targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
  targets.push_back({"enc", enc.data(), denc.data(), static_cast<int64_t>(enc.size())});
  CheckGradients([&] { return Dot(run(), w); }, targets, 16);
}

// fairseq's LSTM decoder: two layers, input feeding, attention over a padded source, dropout
// after every layer and the attention (training), given initial states: every parameter, the
// embedded input, the encoder outputs and the initial states.
TEST_F(LayerGradTest, LstmDecoderWithAttentionInputFeedingAndDropout) {
  const int64_t steps = 4, batch = 3, src = 5, embed = 4, hid = 3, units = 5;
  const int layers = 2;
  ParamStore<double> store;
  LstmDecoder<double> dec(store, "decoder.", embed, hid, layers, units, 0.25f, 40);
  store.Finalize();
  RandomizeParams(store, 21);
  auto x = Random(steps * batch * embed, 22), enc = Random(src * batch * units, 23);
  auto w = Random(steps * batch * hid, 24);
  std::vector<std::vector<double>> h0, c0;
  for (int i = 0; i < layers; ++i) {
    h0.push_back(Random(batch * hid, 25 + i));
    c0.push_back(Random(batch * hid, 27 + i));
  }
  // Sentence 1's last two source positions and sentence 2's last one are padding.
  std::vector<uint8_t> padding(batch * src, 0);
  padding[1 * src + 3] = padding[1 * src + 4] = padding[2 * src + 4] = 1;
  auto run = [&] {
    return dec.Forward(ctx_, x.data(), steps, batch, enc.data(), src, padding.data(), {h0[0].data(), h0[1].data()},
                       {c0[0].data(), c0[1].data()});
  };
  run();
  std::vector<double> dx(x.size(), 0.0), denc(enc.size(), 0.0);
  dec.Backward(ctx_, w.data(), dx.data(), denc.data());
  std::vector<std::vector<double>> dh0, dc0;
  for (int i = 0; i < layers; ++i) {
    dh0.emplace_back(dec.dh0(i), dec.dh0(i) + batch * hid);
    dc0.emplace_back(dec.dc0(i), dec.dc0(i) + batch * hid);
  }
  auto targets = ParamTargets(store);
  targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
  targets.push_back({"enc", enc.data(), denc.data(), static_cast<int64_t>(enc.size())});
  for (int i = 0; i < layers; ++i) {
    targets.push_back({"h0." + std::to_string(i), h0[i].data(), dh0[i].data(), batch * hid});
    targets.push_back({"c0." + std::to_string(i), c0[i].data(), dc0[i].data(), batch * hid});
  }
  CheckGradients([&] { return Dot(run(), w); }, targets, 16);
  // The padded source positions get no gradient (they have no attention weight).
  for (int64_t d = 0; d < units; ++d) EXPECT_EQ(denc[(4 * batch + 2) * units + d], 0.0);
}

// fairseq's LSTM encoder: embeddings, two bidirectional layers, dropout_in, between the layers
// and dropout_out, over right-padded sentences of lengths 4, 2, 5: every parameter, through the
// outputs (their padded positions carry no loss: the decoder masks them) and every layer's final
// h and c.
TEST_F(LayerGradTest, LstmEncoderBidirectionalWithFinalStatesAndDropout) {
  const int64_t batch = 3, src = 5, vocab = 9, embed = 4, hid = 3;
  const int32_t pad = 1;
  ParamStore<double> store;
  LstmEncoder<double> enc(store, "encoder.", vocab, embed, hid, 2, true, 0.2f, 0.3f, pad, 60);
  store.Finalize();
  RandomizeParams(store, 31);
  const std::vector<int32_t> tokens = {4, 5, 6, 2, 1,  //
                                       7, 2, 1, 1, 1,  //
                                       3, 8, 4, 0, 2};
  const int64_t D = 2 * hid;
  auto w = Random(src * batch * D, 32);
  for (int64_t s = 0; s < src; ++s) {
    for (int64_t b = 0; b < batch; ++b) {
      if (tokens[b * src + s] == pad) {
        for (int64_t d = 0; d < D; ++d) w[(s * batch + b) * D + d] = 0;
      }
    }
  }
  std::vector<std::vector<double>> wh, wc;
  for (int l = 0; l < 2; ++l) {
    wh.push_back(Random(batch * D, 33 + l));
    wc.push_back(Random(batch * D, 35 + l));
  }
  auto loss = [&] {
    EXPECT_TRUE(enc.Forward(ctx_, tokens.data(), batch, src).ok());
    double l = Dot(enc.outputs(), w);
    for (int i = 0; i < 2; ++i) l += Dot(enc.final_h(i), wh[i]) + Dot(enc.final_c(i), wc[i]);
    return l;
  };
  loss();
  enc.Backward(ctx_, w.data(), {wh[0].data(), wh[1].data()}, {wc[0].data(), wc[1].data()});
  std::vector<uint8_t> mask(enc.padding(), enc.padding() + batch * src);
  EXPECT_EQ(mask, (std::vector<uint8_t>{0, 0, 0, 0, 1, 0, 0, 1, 1, 1, 0, 0, 0, 0, 0}));
  CheckGradients(loss, ParamTargets(store), 24);
  // Bad input names the sentence.
  std::vector<int32_t> empty = tokens;
  for (int64_t s = 0; s < src; ++s) empty[src + s] = pad;
  Status st = enc.Forward(ctx_, empty.data(), batch, src);
  EXPECT_NE(st.message().find("sequence 1 has length 0"), std::string::npos) << st.message();
  std::vector<int32_t> outside = tokens;
  outside[7] = 9;
  st = enc.Forward(ctx_, outside.data(), batch, src);
  EXPECT_NE(st.message().find("source sentence 1 position 2: token 9"), std::string::npos) << st.message();
}

// fairseq's lstm model, whole: the label-smoothed loss's gradient in every parameter, for a
// bidirectional 2-layer encoder whose output size differs from the decoder's hidden size
// (encoder_hidden_proj / encoder_cell_proj), additional_fc, fc_out and every dropout on; and for
// a unidirectional encoder of the decoder's size with the output projection shared with the
// decoder's embedding; and for GNMT's encoder (three layers, the first both ways, residual
// connections from layer 3; its first layer's backward state starts the decoder's first).
TEST(ModelGradTest, LstmModelWithProjectionsAndWithSharedEmbeddings) {
  for (int which : {0, 1, 2}) {
    const bool shared = which == 1, gnmt = which == 2;
    LstmConfig c;
    c.src_vocab = 11;
    c.tgt_vocab = 10;
    c.pad_id = 1;
    c.encoder_embed = 4;
    c.encoder_hidden = 3;
    c.encoder_layers = 2;
    c.encoder_bidirectional = !shared;
    c.decoder_embed = 5;
    c.decoder_hidden = shared ? 3 : 4;
    c.decoder_out_embed = shared ? 5 : 6;
    c.decoder_layers = shared ? 2 : 1;
    c.share_decoder_input_output_embed = shared;
    c.encoder_dropout_in = c.encoder_dropout_out = c.decoder_dropout_in = c.decoder_dropout_out = 0.2f;
    if (gnmt) {
      c.encoder_layers = 3;
      c.encoder_bidirectional = true;
      c.encoder_bidirectional_layers = 1;
      c.residual_from = 3;
      c.decoder_hidden = 3;
      c.decoder_layers = 2;
    }
    ASSERT_TRUE(c.Validate().ok());
    ReferenceBackend<double> ref;
    LstmModel<double> model(c, &ref, DType::kF64);
    model.context().seed = 5;
    RandomizeParams(model.params(), 41);
    const std::vector<int32_t> src = {4, 5, 6, 2, 1, 7, 2, 1, 1, 1, 3, 8, 9, 10, 2};
    const std::vector<int32_t> tin = {2, 4, 5, 6, 2, 7, 1, 1, 2, 3, 8, 9};
    const std::vector<int32_t> tout = {4, 5, 6, 2, 7, 2, 1, 1, 3, 8, 9, 2};
    Seq2SeqBatch b{src.data(), tin.data(), tout.data(), 3, 5, 4};
    auto loss = [&] {
      auto stats = model.Forward(b);
      EXPECT_TRUE(stats.ok()) << stats.status().message();
      return stats.ok() ? stats->loss : 0.0;
    };
    loss();
    model.Backward(1.0f);
    // The decoder's hidden size (4) differs from the encoder's outputs (6), and from out_embed (6).
    if (gnmt) {
      EXPECT_LT(model.params().Find("decoder.encoder_hidden_proj.weight"), 0);
    } else if (!shared) {
      EXPECT_GE(model.params().Find("decoder.encoder_hidden_proj.weight"), 0);
      EXPECT_GE(model.params().Find("decoder.additional_fc.bias"), 0);
    } else {
      EXPECT_LT(model.params().Find("decoder.fc_out.weight"), 0);
    }
    CheckGradients(loss, ParamTargets(model.params()), 12);
  }
}

TEST_F(LayerGradTest, FeedForwardGeluAndRelu) {
  for (Activation act : {Activation::kGelu, Activation::kRelu}) {
    ParamStore<double> store;
    FeedForward<double> ffn(store, "", C, F, act);
    store.Finalize();
    RandomizeParams(store, 4);
    auto x = Random(B * T * C, 5), w = Random(B * T * C, 6);
    std::vector<double> y(x.size()), dx(x.size(), 0.0);
    ffn.Forward(ctx_, x.data(), y.data(), B * T);
    ffn.Backward(ctx_, w.data(), dx.data(), B * T, 0.0f);
    auto targets = ParamTargets(store, {"fc2.bias"});  // fc2.bias is applied by the caller
    targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
    CheckGradients([&] { ffn.Forward(ctx_, x.data(), y.data(), B * T); return Dot(y.data(), w); },
                   targets);
  }
}

// Activation dropout (fairseq's activation_dropout) between the activation and fc2: the
// backward matches finite differences with the mask of the dropout site; the output differs
// from p = 0 in training, and equals it exactly in evaluation.
TEST_F(LayerGradTest, FeedForwardActivationDropout) {
  for (Activation act : {Activation::kGelu, Activation::kRelu}) {
    ParamStore<double> store, store0;
    FeedForward<double> ffn(store, "", C, F, act, 0.3f, 5);
    FeedForward<double> ffn0(store0, "", C, F, act);
    store.Finalize();
    store0.Finalize();
    RandomizeParams(store, 4);
    RandomizeParams(store0, 4);
    auto x = Random(B * T * C, 5), w = Random(B * T * C, 6);
    std::vector<double> y(x.size()), y0(x.size()), dx(x.size(), 0.0);
    ffn0.Forward(ctx_, x.data(), y0.data(), B * T);
    ffn.Forward(ctx_, x.data(), y.data(), B * T);
    EXPECT_NE(y, y0) << "activation dropout changed nothing in training";
    ffn.Backward(ctx_, w.data(), dx.data(), B * T, 0.0f);
    auto targets = ParamTargets(store, {"fc2.bias"});
    targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
    CheckGradients([&] { ffn.Forward(ctx_, x.data(), y.data(), B * T); return Dot(y.data(), w); },
                   targets);
    ctx_.training = false;
    ffn.Forward(ctx_, x.data(), y.data(), B * T);
    ffn0.Forward(ctx_, x.data(), y0.data(), B * T);
    ctx_.training = true;
    EXPECT_EQ(y, y0) << "activation dropout must be off in evaluation";
  }
}

// Both ways a backend may run attention: fused (blockwise softmax, in place) and per-head GEMMs.
class AttentionGradTest : public LayerGradTest, public ::testing::WithParamInterface<bool> {
 protected:
  AttentionGradTest() : be_(GetParam()) {
    ctx_.seed = 17;
    ctx_.micro_batch = 3;
  }
  ReferenceBackend<double> be_;
  Context<double> ctx_{&be_, DType::kF64};
};

TEST_P(AttentionGradTest, SelfAttentionWithPaddingCausalAndDropout) {
  std::vector<uint8_t> pad(B * T, 0);
  pad[1 * T + 3] = pad[1 * T + 4] = 1;
  for (bool causal : {false, true}) {
    ParamStore<double> store;
    MultiheadAttention<double> attn(store, "self_attn", C, H, AttentionKind::kSelf, causal, 0.3f, 7);
    store.Finalize();
    RandomizeParams(store, 8);
    auto x = Random(B * T * C, 9), w = Random(B * T * C, 10);
    std::vector<double> y(x.size()), dx(x.size(), 0.0);
    attn.Forward(ctx_, x.data(), x.data(), pad.data(), B, T, T, y.data());
    attn.Backward(ctx_, w.data(), dx.data(), 0.0f, nullptr);
    auto targets = ParamTargets(store, {"out_proj.bias"});
    targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
    CheckGradients(
        [&] {
          attn.Forward(ctx_, x.data(), x.data(), pad.data(), B, T, T, y.data());
          return Dot(y.data(), w);
        },
        targets);
  }
}

TEST_P(AttentionGradTest, CrossAttentionAccumulatesEncoderGradient) {
  std::vector<uint8_t> pad(B * Ts, 0);
  pad[0 * Ts + 6] = 1;
  ParamStore<double> store;
  MultiheadAttention<double> attn(store, "encoder_attn", C, H, AttentionKind::kCross, false, 0.2f, 3);
  store.Finalize();
  RandomizeParams(store, 11);
  auto x = Random(B * T * C, 12), enc = Random(B * Ts * C, 13), w = Random(B * T * C, 14);
  std::vector<double> y(x.size()), dx(x.size(), 0.0), denc(enc.size(), 0.0);
  attn.Forward(ctx_, x.data(), enc.data(), pad.data(), B, T, Ts, y.data());
  attn.Backward(ctx_, w.data(), dx.data(), 0.0f, denc.data());
  auto targets = ParamTargets(store, {"out_proj.bias"});
  targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
  targets.push_back({"enc", enc.data(), denc.data(), static_cast<int64_t>(enc.size())});
  CheckGradients(
      [&] {
        attn.Forward(ctx_, x.data(), enc.data(), pad.data(), B, T, Ts, y.data());
        return Dot(y.data(), w);
      },
      targets);
}

INSTANTIATE_TEST_SUITE_P(FusedAndPerHead, AttentionGradTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& i) {
                           return i.param ? "Fused" : "PerHeadGemms";
                         });

LayerOptions Options(bool pre_norm) {
  LayerOptions o;
  o.dim = LayerGradTest::C;
  o.heads = LayerGradTest::H;
  o.ffn_dim = LayerGradTest::F;
  o.dropout = 0.25f;
  o.attention_dropout = 0.15f;
  o.activation_dropout = 0.2f;
  o.activation = Activation::kGelu;
  o.normalize_before = pre_norm;
  return o;
}

TEST_F(LayerGradTest, EncoderLayerPostAndPreNorm) {
  std::vector<uint8_t> pad(B * T, 0);
  pad[1 * T + 4] = 1;
  for (bool pre : {false, true}) {
    ParamStore<double> store;
    EncoderLayer<double> layer(store, "encoder.layers.0.", Options(pre), 1, 9);
    store.Finalize();
    RandomizeParams(store, 15);
    auto x = Random(B * T * C, 16), w = Random(B * T * C, 17);
    std::vector<double> dout = w, dx(x.size()), t1(x.size()), t2(x.size());
    layer.Forward(ctx_, x.data(), pad.data(), B, T);
    layer.Backward(ctx_, dout.data(), dx.data(), t1.data(), t2.data());
    auto targets = ParamTargets(store);
    targets.push_back({"x", x.data(), dx.data(), static_cast<int64_t>(x.size())});
    CheckGradients([&] { return Dot(layer.Forward(ctx_, x.data(), pad.data(), B, T), w); },
                   targets, 8);
  }
}

TEST_F(LayerGradTest, DecoderLayerPostAndPreNorm) {
  std::vector<uint8_t> tpad(B * T, 0), spad(B * Ts, 0);
  tpad[1 * T + 4] = 1;
  spad[0 * Ts + 5] = spad[0 * Ts + 6] = 1;
  for (bool pre : {false, true}) {
    ParamStore<double> store;
    DecoderLayer<double> layer(store, "decoder.layers.0.", Options(pre), 1, 9);
    store.Finalize();
    RandomizeParams(store, 18);
    auto y = Random(B * T * C, 19), enc = Random(B * Ts * C, 20), w = Random(B * T * C, 21);
    std::vector<double> dout = w, dy(y.size()), t1(y.size()), t2(y.size()), denc(enc.size(), 0);
    layer.Forward(ctx_, y.data(), enc.data(), tpad.data(), spad.data(), B, T, Ts);
    layer.Backward(ctx_, dout.data(), dy.data(), t1.data(), t2.data(), denc.data());
    auto targets = ParamTargets(store);
    targets.push_back({"y", y.data(), dy.data(), static_cast<int64_t>(y.size())});
    targets.push_back({"enc", enc.data(), denc.data(), static_cast<int64_t>(enc.size())});
    CheckGradients(
        [&] {
          return Dot(layer.Forward(ctx_, y.data(), enc.data(), tpad.data(), spad.data(), B, T, Ts), w);
        },
        targets, 8);
  }
}

TEST_F(LayerGradTest, EmbeddingScaledWithPositionsAndDropout) {
  const int64_t V = 9;
  const int32_t pad = 1;
  TokenEmbedding<double> emb(store_, "encoder.embed_tokens", V, C, pad, 16, 0.2f, 2);
  store_.Finalize();
  RandomizeParams(store_, 22);
  std::vector<int32_t> tok = {4, 5, 6, 7, 8, 3, 2, 5, pad, pad};
  std::vector<int32_t> pos(tok.size());
  emb.PositionIds(tok.data(), B, T, pos.data());
  EXPECT_EQ(pos, (std::vector<int32_t>{2, 3, 4, 5, 6, 2, 3, 4, pad, pad}));
  auto w = Random(B * T * C, 23);
  std::vector<double> out(B * T * C), dout = w;
  ASSERT_TRUE(emb.Forward(ctx_, tok.data(), pos.data(), B, T, out.data()));
  emb.Backward(ctx_, dout.data());
  for (int64_t c = 0; c < C; ++c) EXPECT_EQ(store_.grad(emb.table())[pad * C + c], 0.0);
  // Padding positions produce scale * E[pad] (+ the zero position row), dropped or scaled.
  // The pad row is looked up but, as with nn.Embedding(padding_idx), gets no gradient: check
  // the rows before and after it.
  double* table_value = store_.value(emb.table());
  const double* table_grad = store_.grad(emb.table());
  CheckGradients([&] { emb.Forward(ctx_, tok.data(), pos.data(), B, T, out.data()); return Dot(out.data(), w); },
                 {{"rows < pad", table_value, table_grad, pad * C},
                  {"rows > pad", table_value + (pad + 1) * C, table_grad + (pad + 1) * C,
                   (V - pad - 1) * C}},
                 40);
  // Sinusoid of position pad + 1 for the first token (dropout off).
  ctx_.training = false;
  std::vector<double> table(store_.value(emb.table()), store_.value(emb.table()) + V * C);
  emb.Forward(ctx_, tok.data(), pos.data(), B, T, out.data());
  const double s = std::sqrt(static_cast<double>(C));
  // The kernel takes the scale as a float: sqrt(12) rounded to fp32 (1e-8 relative).
  EXPECT_NEAR(out[0], s * table[4 * C + 0] + std::sin(2.0), 1e-6);
  EXPECT_NEAR(out[C / 2], s * table[4 * C + C / 2] + std::cos(2.0), 1e-6);
  ctx_.training = true;
}

// The whole model: loss = label-smoothed CE summed over non-pad targets.
void CheckWholeModel(bool pre_norm, bool share, Activation act, float activation_dropout = 0.0f,
                     bool tied_output = true) {
  ReferenceBackend<double> ref;
  TransformerConfig c;
  c.d_model = 8;
  c.heads = 2;
  c.ffn_dim = 10;
  c.encoder_layers = 2;
  c.decoder_layers = 2;
  c.dropout = 0.2f;
  c.attention_dropout = 0.1f;
  c.activation = act;
  c.normalize_before = pre_norm;
  c.share_embeddings = share;
  c.activation_dropout = activation_dropout;
  c.share_decoder_input_output_embed = tied_output;
  c.src_vocab = 11;
  c.tgt_vocab = share ? 11 : 13;
  c.pad_id = 1;
  c.max_positions = 32;
  ASSERT_TRUE(c.Validate().ok());
  Transformer<double> model(c, &ref, DType::kF64);
  if (!tied_output) {
    ASSERT_GE(model.params().Find("decoder.output_projection.weight"), 0);
  }
  model.InitParameters(5);
  model.context().seed = 3;
  const int64_t B = 2, Ts = 5, Tt = 4;
  std::vector<int32_t> src = {4, 5, 6, 7, 8, 9, 3, 2, 1, 1};
  std::vector<int32_t> tin = {2, 4, 5, 6, 2, 7, 8, 1};
  std::vector<int32_t> tout = {4, 5, 6, 10, 7, 8, 3, 1};
  Seq2SeqBatch b{src.data(), tin.data(), tout.data(), B, Ts, Tt};
  model.ZeroGrads();
  auto stats = model.Forward(b);
  ASSERT_TRUE(stats.ok());
  EXPECT_EQ(stats->tokens, 7);
  model.Backward(1.0f);
  std::vector<FdTarget> targets;
  for (size_t i = 0; i < model.params().params().size(); ++i) {
    const ParamInfo& p = model.params().params()[i];
    targets.push_back({p.name, model.params().value(static_cast<int>(i)),
                       model.params().grad(static_cast<int>(i)), p.numel});
  }
  CheckGradients([&] { return model.Forward(b)->loss; }, targets, 3);
}

TEST(ModelGradTest, PostNormSeparateEmbeddingsRelu) { CheckWholeModel(false, false, Activation::kRelu); }
TEST(ModelGradTest, PreNormSharedEmbeddingsGelu) { CheckWholeModel(true, true, Activation::kGelu); }
// The untied output projection ("decoder.output_projection.weight") is checked like every
// other parameter, with activation dropout on in both layer stacks.
TEST(ModelGradTest, PostNormUntiedOutputProjectionActivationDropoutRelu) {
  CheckWholeModel(false, false, Activation::kRelu, 0.25f, false);
}
TEST(ModelGradTest, PreNormUntiedOutputProjectionActivationDropoutGelu) {
  CheckWholeModel(true, false, Activation::kGelu, 0.25f, false);
}

// The decoder-only language model (fairseq's transformer_lm): causal self-attention layers, every
// dropout on, label smoothing; post-norm with a tied output, pre-norm with an untied one.
TEST(ModelGradTest, TransformerLmPostNormTiedAndPreNormUntied) {
  for (bool pre : {false, true}) {
    ReferenceBackend<double> ref;
    TransformerLmConfig c;
    c.d_model = 8;
    c.heads = 2;
    c.ffn_dim = 10;
    c.layers = 2;
    c.dropout = 0.2f;
    c.attention_dropout = 0.1f;
    c.activation_dropout = 0.25f;
    c.activation = pre ? Activation::kGelu : Activation::kRelu;
    c.normalize_before = pre;
    c.share_input_output_embed = !pre;
    c.vocab = 13;
    c.max_positions = 32;
    c.label_smoothing = 0.1f;
    ASSERT_TRUE(c.Validate().ok());
    TransformerLm<double> model(c, &ref, DType::kF64);
    EXPECT_EQ(model.params().Find("decoder.output_projection.weight") >= 0, pre);
    EXPECT_EQ(model.params().Find("decoder.layer_norm.weight") >= 0, pre);
    model.InitParameters(5);
    model.context().seed = 3;
    std::vector<int32_t> tin = {2, 4, 5, 6, 7, 2, 8, 9, 1, 1};
    std::vector<int32_t> tout = {4, 5, 6, 7, 2, 8, 9, 2, 1, 1};
    Seq2SeqBatch b{nullptr, tin.data(), tout.data(), 2, 0, 5};
    model.ZeroGrads();
    auto stats = model.Forward(b);
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    EXPECT_EQ(stats->tokens, 8);
    model.Backward(1.0f);
    std::vector<FdTarget> targets;
    for (size_t i = 0; i < model.params().params().size(); ++i) {
      const ParamInfo& p = model.params().params()[i];
      targets.push_back({p.name, model.params().value(static_cast<int>(i)), model.params().grad(static_cast<int>(i)),
                         p.numel});
    }
    CheckGradients([&] { return model.Forward(b)->loss; }, targets, 3);
  }
}

// fairseq's fconv (ConvS2S): every parameter (weight_v, weight_g, bias of each weight-normalised
// projection and convolution, the token and learned position tables) against central
// differences with dropout on and label smoothing, on a batch with source padding. Two shapes:
// channel changes (projections), an even encoder kernel and an untied fc3; one channel width and
// a tied fc3 (decoder.fc3.bias alone).
TEST(ModelGradTest, FConvUntiedWithProjectionsAndTiedOutput) {
  for (bool tied : {false, true}) {
    SCOPED_TRACE(tied ? "tied" : "untied");
    ReferenceBackend<double> ref;
    FConvConfig c;
    c.encoder_embed = 6;
    c.decoder_embed = 6;
    c.decoder_out_embed = tied ? 6 : 5;
    c.encoder_convs = tied ? std::vector<ConvSpec>{{4, 3}, {4, 3}} : std::vector<ConvSpec>{{4, 3}, {6, 2}};
    c.decoder_convs = tied ? std::vector<ConvSpec>{{4, 3}, {4, 3}} : std::vector<ConvSpec>{{4, 2}, {6, 3}};
    c.share_input_output_embed = tied;
    c.dropout = 0.2f;
    c.src_vocab = 11;
    c.tgt_vocab = 13;
    c.max_positions = 16;
    c.label_smoothing = 0.1f;
    c.scale_encoder_gradient = false;  // the true gradient (fconv_reference.py checks the scaled one)
    ASSERT_TRUE(c.Validate().ok()) << c.Validate().message();
    FConvModel<double> model(c, &ref, DType::kF64);
    EXPECT_EQ(model.params().Find("decoder.fc3.weight_v") >= 0, !tied);
    EXPECT_EQ(model.params().Find("encoder.projections.1.weight_v") >= 0, !tied);
    model.InitParameters(5);
    // Non-zero biases, so their paths are exercised beyond the initial zeros.
    std::mt19937 rng(9);
    std::uniform_real_distribution<double> u(-0.2, 0.2);
    for (const ParamInfo& p : model.params().params()) {
      if (p.name.size() > 5 && p.name.compare(p.name.size() - 5, 5, ".bias") == 0) {
        for (int64_t i = 0; i < p.numel; ++i) model.params().values()[p.offset + i] += u(rng);
      }
    }
    model.WeightsUpdated();
    model.context().seed = 3;
    const int64_t B = 2, Ts = 5, Tt = 4;
    std::vector<int32_t> src = {4, 5, 6, 7, 2, 8, 9, 2, 1, 1};
    std::vector<int32_t> tin = {2, 4, 5, 6, 2, 7, 8, 1};
    std::vector<int32_t> tout = {4, 5, 6, 10, 7, 8, 3, 1};
    Seq2SeqBatch b{src.data(), tin.data(), tout.data(), B, Ts, Tt};
    model.ZeroGrads();
    auto stats = model.Forward(b);
    ASSERT_TRUE(stats.ok()) << stats.status().message();
    EXPECT_EQ(stats->tokens, 7);
    model.Backward(1.0f);
    std::vector<FdTarget> targets;
    for (size_t i = 0; i < model.params().params().size(); ++i) {
      const ParamInfo& p = model.params().params()[i];
      targets.push_back({p.name, model.params().value(static_cast<int>(i)), model.params().grad(static_cast<int>(i)),
                         p.numel});
    }
    // The effective weights are refreshed from v and g before each evaluation.
    CheckGradients(
        [&] {
          model.WeightsUpdated();
          return model.Forward(b)->loss;
        },
        targets, 3);
  }
}

}  // namespace
}  // namespace sf
